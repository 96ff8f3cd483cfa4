package recordbatch

import "encoding/binary"

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
	be.PutUint16(b[offAttributes:], 0)
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
