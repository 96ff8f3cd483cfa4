package recordbatch

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BuildRetained re-encodes the records a filter kept from the batch whose
// header is orig, as Kafka's MemoryRecords.buildRetainedRecordsInto: the
// base offset and the last offset delta stay the original ones (so the
// next batch still follows, and the producer's sequence range is the
// original one), each record keeps its offset delta, the producer id,
// epoch, base sequence, partition leader epoch and the transactional,
// control and timestamp-type bits are kept. The base timestamp becomes
// the first kept record's timestamp and the max timestamp the largest kept
// one (LogAppendTime batches keep the original max timestamp, as Kafka
// passes it as logAppendTime). With deleteHorizon >= 0 the batch carries
// it instead as its base timestamp with DeleteHorizonBit set (KIP-534:
// when the cleaner may drop its tombstones), the records' timestamp
// deltas taken from it. The records are compressed with the original
// batch's codec, as Kafka's filterTo builds the retained batch with it
// (so cleaning a compressed topic never inflates it); should that fail,
// they are written uncompressed. records must not be empty.
func BuildRetained(orig Header, records []kmsg.Record, deleteHorizon int64) []byte {
	// A record's timestamp is the base timestamp plus its delta, whether
	// the base is a timestamp or a delete horizon.
	origBase := orig.BaseTimestamp
	baseTs := origBase + records[0].TimestampDelta64
	if deleteHorizon >= 0 {
		baseTs = deleteHorizon
	}
	maxTs := int64(-1)
	b := make([]byte, HeaderSize, HeaderSize+len(records)*32)
	for _, r := range records {
		ts := origBase + r.TimestampDelta64
		maxTs = max(maxTs, ts)
		var rec []byte
		rec = append(rec, byte(r.Attributes))
		rec = binary.AppendVarint(rec, ts-baseTs)
		rec = binary.AppendVarint(rec, int64(r.OffsetDelta))
		rec = appendVarBytes(rec, r.Key)
		rec = appendVarBytes(rec, r.Value)
		rec = binary.AppendVarint(rec, int64(len(r.Headers)))
		for _, h := range r.Headers {
			rec = appendVarBytes(rec, []byte(h.Key))
			rec = appendVarBytes(rec, h.Value)
		}
		b = binary.AppendVarint(b, int64(len(rec)))
		b = append(b, rec...)
	}
	if orig.Attributes&TimestampTypeBit != 0 {
		maxTs = orig.MaxTimestamp
	}
	attrs := orig.Attributes &^ DeleteHorizonBit
	if deleteHorizon >= 0 {
		attrs |= DeleteHorizonBit
	}
	codec := orig.Compression()
	if codec != CompressionNone {
		if packed, err := compress(codec, b[HeaderSize:]); err == nil {
			b = append(b[:HeaderSize:HeaderSize], packed...)
		} else {
			codec = CompressionNone
		}
	}
	orig.Attributes = attrs
	putHeader(b, orig, baseTs, maxTs, int32(len(records)))
	if codec != CompressionNone {
		binary.BigEndian.PutUint16(b[offAttributes:], uint16(attrs&^CompressionMask|int16(codec)))
		SetCRC(b)
	}
	return b
}

// DeleteHorizon is the batch's delete horizon (KIP-534: the time after
// which the cleaner removes its tombstones), or -1 when it has none.
func (h Header) DeleteHorizon() int64 {
	if h.Attributes&DeleteHorizonBit == 0 {
		return -1
	}
	return h.BaseTimestamp
}

// BuildEmpty is Kafka's DefaultRecordBatch.writeEmptyHeader for a batch
// the cleaner emptied but must keep (BatchRetention.RETAIN_EMPTY: the last
// batch of a producer, so its id, epoch and last sequence survive): the
// original offsets, producer fields and attributes (codec none), no
// records, both timestamps the original max timestamp.
func BuildEmpty(orig Header) []byte {
	b := make([]byte, HeaderSize)
	putHeader(b, orig, orig.MaxTimestamp, orig.MaxTimestamp, 0)
	return b
}

func putHeader(b []byte, orig Header, baseTs, maxTs int64, count int32) {
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], uint64(orig.BaseOffset))
	be.PutUint32(b[offLength:], uint32(len(b)-LogOverhead))
	be.PutUint32(b[offLeaderEpoch:], uint32(orig.PartitionLeaderEpoch))
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], uint16(orig.Attributes&^CompressionMask))
	be.PutUint32(b[offLastOffsetDelta:], uint32(orig.LastOffsetDelta))
	be.PutUint64(b[offBaseTimestamp:], uint64(baseTs))
	be.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	be.PutUint64(b[offProducerID:], uint64(orig.ProducerID))
	be.PutUint16(b[offProducerEpoch:], uint16(orig.ProducerEpoch))
	be.PutUint32(b[offBaseSequence:], uint32(orig.BaseSequence))
	be.PutUint32(b[offRecordCount:], uint32(count))
	SetCRC(b)
}
