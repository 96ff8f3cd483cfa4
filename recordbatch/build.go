package recordbatch

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one record to encode into a batch.
type Record struct {
	Key, Value     []byte // nil encodes as null
	TimestampDelta int64  // from the batch's first timestamp
	Headers        []RecordHeader
}

// RecordHeader is one record header.
type RecordHeader struct {
	Key   string
	Value []byte
}

// BatchSpec holds the header fields of a batch to build. Its zero value is a
// plain (non-idempotent) batch at offset 0; use NoProducer for the -1 ids.
type BatchSpec struct {
	BaseOffset     int64
	LeaderEpoch    int32
	FirstTimestamp int64
	ProducerID     int64
	ProducerEpoch  int16
	BaseSequence   int32
	// Attributes are the batch attribute bits to set (TransactionalBit,
	// ControlBit); the codec bits must be 0: Build does not compress.
	Attributes int16
}

// NoProducer is a spec with Kafka's "none" values for producer id, epoch
// and sequence, as a non-idempotent producer sends.
func NoProducer() BatchSpec {
	return BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LeaderEpoch: -1}
}

// Build encodes records as one uncompressed v2 batch with a valid CRC. The
// broker uses it for the records it writes itself (group coordinator) and
// tests use it to make input.
func Build(spec BatchSpec, records []Record) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(records)*32)
	maxDelta := int64(0)
	for i, r := range records {
		var rec []byte
		rec = append(rec, 0) // record attributes
		rec = binary.AppendVarint(rec, r.TimestampDelta)
		rec = binary.AppendVarint(rec, int64(i))
		rec = appendVarBytes(rec, r.Key)
		rec = appendVarBytes(rec, r.Value)
		rec = binary.AppendVarint(rec, int64(len(r.Headers)))
		for _, h := range r.Headers {
			rec = appendVarBytes(rec, []byte(h.Key))
			rec = appendVarBytes(rec, h.Value)
		}
		b = binary.AppendVarint(b, int64(len(rec)))
		b = append(b, rec...)
		maxDelta = max(maxDelta, r.TimestampDelta)
	}
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], uint64(spec.BaseOffset))
	be.PutUint32(b[offLength:], uint32(len(b)-LogOverhead))
	be.PutUint32(b[offLeaderEpoch:], uint32(spec.LeaderEpoch))
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], uint16(spec.Attributes&^CompressionMask))
	be.PutUint32(b[offLastOffsetDelta:], uint32(max(len(records)-1, 0)))
	be.PutUint64(b[offBaseTimestamp:], uint64(spec.FirstTimestamp))
	be.PutUint64(b[offMaxTimestamp:], uint64(spec.FirstTimestamp+maxDelta))
	be.PutUint64(b[offProducerID:], uint64(spec.ProducerID))
	be.PutUint16(b[offProducerEpoch:], uint16(spec.ProducerEpoch))
	be.PutUint32(b[offBaseSequence:], uint32(spec.BaseSequence))
	be.PutUint32(b[offRecordCount:], uint32(len(records)))
	SetCRC(b)
	return b
}

func appendVarBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// Control record types (the key's second int16), as Kafka's ControlRecordType.
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// BuildTxnMarker encodes the control batch that ends a transaction of
// producerID/epoch on a partition: one record whose key is version 0 and
// the control type, and whose value is Kafka's EndTransactionMarker
// (version 0 and the coordinator epoch).
func BuildTxnMarker(producerID int64, epoch int16, commit bool, coordinatorEpoch int32, timestamp int64) []byte {
	typ := ControlAbort
	if commit {
		typ = ControlCommit
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
	value := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(coordinatorEpoch))
	return Build(BatchSpec{
		LeaderEpoch:    -1,
		FirstTimestamp: timestamp,
		ProducerID:     producerID,
		ProducerEpoch:  epoch,
		BaseSequence:   -1,
		Attributes:     TransactionalBit | ControlBit,
	}, []Record{{Key: key, Value: value}})
}

// Control is the record of a control batch: its type (ControlAbort,
// ControlCommit, or a type Kafka may add) and, for transaction markers, the
// coordinator epoch from the value.
type Control struct {
	Type             int16
	CoordinatorEpoch int32
}

// ParseControl decodes the record of a control batch.
func ParseControl(batch []byte) (Control, error) {
	h, err := ParseHeader(batch)
	if err != nil {
		return Control{}, err
	}
	if !h.IsControl() {
		return Control{}, fmt.Errorf("%w: not a control batch", ErrCorrupt)
	}
	c := Control{Type: -1, CoordinatorEpoch: -1}
	err = ForEachRecord(batch, func(r kmsg.Record) error {
		if c.Type >= 0 {
			return nil
		}
		if len(r.Key) < 4 {
			return fmt.Errorf("%w: control record key of %d bytes", ErrCorrupt, len(r.Key))
		}
		c.Type = int16(binary.BigEndian.Uint16(r.Key[2:]))
		if (c.Type == ControlAbort || c.Type == ControlCommit) && len(r.Value) >= 6 {
			c.CoordinatorEpoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
		}
		return nil
	})
	if err != nil {
		return Control{}, err
	}
	if c.Type < 0 {
		return Control{}, fmt.Errorf("%w: control batch without a record", ErrCorrupt)
	}
	return c, nil
}
