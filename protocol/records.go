package protocol

import (
	"errors"
	"fmt"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ValidateProduceRecords checks the records field of one partition of a
// produce request the way Kafka does for a client append, and returns the
// batch and its header. The returned slices alias records.
//
// Kafka's rules, in Kafka's order (ProduceRequest.validateRecords, then
// UnifiedLog.analyzeAndValidateRecords, then LogValidator.validateBatch),
// with the error each one wraps:
//
//   - no batch at all: INVALID_RECORD;
//   - magic 0 or 1: INVALID_RECORD (Kafka answers this to produce v3+ and
//     kbroker stores only magic 2); any other magic but 2: CORRUPT_MESSAGE;
//   - a batch cut short, or a header with impossible lengths: CORRUPT_MESSAGE;
//   - more than one batch: INVALID_RECORD (since magic 2, Kafka allows
//     exactly one batch per partition per request);
//   - the whole batch, log overhead included, above maxBatchBytes
//     (max.message.bytes): MESSAGE_TOO_LARGE;
//   - a base offset other than 0: INVALID_RECORD;
//   - a CRC mismatch or an unknown codec: CORRUPT_MESSAGE;
//   - a record count <= 0, or lastOffsetDelta != recordCount-1:
//     INVALID_RECORD;
//   - a control batch (only the coordinator writes those): INVALID_RECORD;
//   - a producer id without a base sequence: INVALID_RECORD.
//
// Checks that need the request version (zstd needs produce v7+), the topic
// (timestamp type, compaction keys) or the producer state are left to the
// caller.
func ValidateProduceRecords(records []byte, maxBatchBytes int32) ([][]byte, []recordbatch.Header, error) {
	h, err := ValidateProduceBatch(records, maxBatchBytes)
	if err != nil {
		return nil, nil, err
	}
	return [][]byte{records}, []recordbatch.Header{h}, nil
}

// ValidateProduceBatch is ValidateProduceRecords for a caller that keeps
// the batch (all of records, when valid) and its header where it likes:
// it returns only the header, and allocates nothing for a valid batch.
func ValidateProduceBatch(records []byte, maxBatchBytes int32) (recordbatch.Header, error) {
	if len(records) == 0 {
		return recordbatch.Header{}, fmt.Errorf("%w: produce records hold no record batch", kerr.InvalidRecord)
	}
	h, err := recordbatch.ParseHeader(records)
	if err != nil {
		if errors.Is(err, recordbatch.ErrMagic) && (h.Magic == 0 || h.Magic == 1) {
			return recordbatch.Header{}, fmt.Errorf("%w: %w", kerr.InvalidRecord, err)
		}
		return recordbatch.Header{}, fmt.Errorf("%w: %w", kerr.CorruptMessage, err)
	}
	size := h.Size()
	switch {
	case size > len(records):
		return recordbatch.Header{}, fmt.Errorf("%w: %w: batch of %d bytes, %d present", kerr.CorruptMessage, recordbatch.ErrShort, size, len(records))
	case size < len(records):
		return recordbatch.Header{}, fmt.Errorf("%w: %d bytes after the first batch: exactly one record batch per partition is allowed", kerr.InvalidRecord, len(records)-size)
	case int64(size) > int64(maxBatchBytes):
		return recordbatch.Header{}, fmt.Errorf("%w: batch of %d bytes, max.message.bytes %d", kerr.MessageTooLarge, size, maxBatchBytes)
	case h.BaseOffset != 0:
		return recordbatch.Header{}, fmt.Errorf("%w: base offset %d, want 0", kerr.InvalidRecord, h.BaseOffset)
	}
	// The header is parsed: check the codec and the CRC (the one pass
	// over the batch's bytes) without parsing it again.
	if err := recordbatch.ValidateParsed(records, h); err != nil {
		return recordbatch.Header{}, fmt.Errorf("%w: %w", kerr.CorruptMessage, err)
	}
	switch {
	case h.RecordCount <= 0:
		return recordbatch.Header{}, fmt.Errorf("%w: record count %d", kerr.InvalidRecord, h.RecordCount)
	case int64(h.LastOffsetDelta)+1 != int64(h.RecordCount):
		return recordbatch.Header{}, fmt.Errorf("%w: lastOffsetDelta %d inconsistent with record count %d", kerr.InvalidRecord, h.LastOffsetDelta, h.RecordCount)
	case h.IsControl():
		return recordbatch.Header{}, fmt.Errorf("%w: clients may not write control batches", kerr.InvalidRecord)
	case h.ProducerID >= 0 && h.BaseSequence < 0:
		return recordbatch.Header{}, fmt.Errorf("%w: producer id %d with base sequence %d", kerr.InvalidRecord, h.ProducerID, h.BaseSequence)
	}
	return h, nil
}
