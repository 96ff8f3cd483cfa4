package protocol

import (
	"bytes"
	"errors"
	"testing"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestValidateProduceRecords(t *testing.T) {
	good := makeBatch(3, nil)
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 0xff
	// Bytes outside the CRC: base offset.
	nonZeroBase := bytes.Clone(good)
	recordbatch.SetBaseOffset(nonZeroBase, 7)
	magic1 := bytes.Clone(good)
	magic1[16] = 1
	magic3 := bytes.Clone(good)
	magic3[16] = 3

	for _, tc := range []struct {
		name    string
		records []byte
		max     int32
		want    *kerr.Error // nil: valid
	}{
		{"good", good, 1 << 20, nil},
		{"good, exactly max", good, int32(len(good)), nil},
		{"one record", makeBatch(1, nil), 1 << 20, nil},
		{"idempotent", makeBatch(2, func(b *kmsg.RecordBatch) { b.ProducerID, b.ProducerEpoch, b.FirstSequence = 5, 0, 10 }), 1 << 20, nil},
		{"nil", nil, 1 << 20, kerr.InvalidRecord},
		{"empty", []byte{}, 1 << 20, kerr.InvalidRecord},
		{"bad crc", badCRC, 1 << 20, kerr.CorruptMessage},
		{"too large", good, int32(len(good)) - 1, kerr.MessageTooLarge},
		{"magic 1", magic1, 1 << 20, kerr.InvalidRecord},
		{"magic 0", func() []byte { b := bytes.Clone(good); b[16] = 0; return b }(), 1 << 20, kerr.InvalidRecord},
		{"magic 3", magic3, 1 << 20, kerr.CorruptMessage},
		{"truncated header", good[:20], 1 << 20, kerr.CorruptMessage},
		{"truncated before magic", good[:10], 1 << 20, kerr.CorruptMessage},
		{"truncated records", good[:len(good)-1], 1 << 20, kerr.CorruptMessage},
		{"two batches", append(bytes.Clone(good), good...), 1 << 20, kerr.InvalidRecord},
		{"trailing byte", append(bytes.Clone(good), 0), 1 << 20, kerr.InvalidRecord},
		{"base offset", nonZeroBase, 1 << 20, kerr.InvalidRecord},
		{"count above delta", makeBatch(3, func(b *kmsg.RecordBatch) { b.LastOffsetDelta = 1 }), 1 << 20, kerr.InvalidRecord},
		{"count below delta", makeBatch(3, func(b *kmsg.RecordBatch) { b.LastOffsetDelta = 5 }), 1 << 20, kerr.InvalidRecord},
		{"zero count", makeBatch(0, func(b *kmsg.RecordBatch) { b.LastOffsetDelta = 0 }), 1 << 20, kerr.InvalidRecord},
		{"control batch", makeBatch(1, func(b *kmsg.RecordBatch) { b.Attributes |= recordbatch.ControlBit }), 1 << 20, kerr.InvalidRecord},
		{"producer id without sequence", makeBatch(1, func(b *kmsg.RecordBatch) { b.ProducerID = 5 }), 1 << 20, kerr.InvalidRecord},
		{"unknown codec", makeBatch(1, func(b *kmsg.RecordBatch) { b.Attributes |= 6 }), 1 << 20, kerr.CorruptMessage},
		{"negative length", func() []byte { b := bytes.Clone(good); b[8] = 0xff; return b }(), 1 << 20, kerr.CorruptMessage},
	} {
		batches, headers, err := ValidateProduceRecords(tc.records, tc.max)
		// ValidateProduceBatch decides alike and returns the same header.
		if h, berr := ValidateProduceBatch(tc.records, tc.max); (berr == nil) != (err == nil) ||
			(err != nil && ErrorCode(berr) != ErrorCode(err)) || (err == nil && h != headers[0]) {
			t.Errorf("%s: ValidateProduceBatch: %+v, %v; ValidateProduceRecords: %v", tc.name, h, berr, err)
		}
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			if len(batches) != 1 || len(headers) != 1 || !bytes.Equal(batches[0], tc.records) || headers[0].Size() != len(tc.records) {
				t.Errorf("%s: %d batches, %d headers", tc.name, len(batches), len(headers))
			}
			continue
		}
		var ke *kerr.Error
		if !errors.As(err, &ke) || ke != tc.want {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
		if ErrorCode(err) != tc.want.Code {
			t.Errorf("%s: ErrorCode %d, want %d", tc.name, ErrorCode(err), tc.want.Code)
		}
		if batches != nil || headers != nil {
			t.Errorf("%s: batches returned with an error", tc.name)
		}
	}
}
