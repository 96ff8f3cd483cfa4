package coordinator

// __consumer_offsets record encoding, as Kafka's GroupMetadataManager writes
// it (see kafka/coordinator/group/GroupMetadataManager.scala and the
// OffsetCommitKey / GroupMetadataKey message schemas):
//
//	key version 0, 1: OffsetCommitKey   {group, topic, partition}
//	key version 2:    GroupMetadataKey  {group}
//
// We write offset keys at version 1 with OffsetCommitValue version 3 (leader
// epoch, no expire timestamp), and group keys at version 2 with
// GroupMetadataValue version 3 (static instance ids, state timestamp). A nil
// value is a tombstone. Records travel in one uncompressed v2 batch per
// write, base offset 0 (the replica layer assigns offsets), producer id -1;
// TxnOffsetCommit's batches are transactional instead (attribute 0x10, the
// client's producer id and epoch, base sequence -1), and the transaction's
// end is a control batch (commit or abort marker) written by the partition
// leader on the transaction coordinator's request.
//
// A snapshot (snapshot.go) rewrites each committed offset with a record
// header appendOffsetHeader holding the offset of the batch that first
// stored it, so a replay compares transactional offsets against the
// original position, not the rewrite's (see load.go). Kafka ignores
// record headers in this topic.
//
// COMPACTION: every record's key names what its value replaces (the
// newest record per key is the state; a nil value deletes), so the log
// cleaner bounds each partition as Kafka's does, and a load of a cleaned
// partition rebuilds what a load of the whole log would
// (TestCompactedOffsetsLoadAsUncleaned). With the cleaner off the
// coordinator bounds it itself with snapshots of its live state followed by
// a log-start move (snapshot.go), so load replays at most about twice the
// live state plus Config.SnapshotBytes.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/recordbatch"
)

const (
	offsetKeyVersion   = 1
	offsetValueVersion = 3
	groupKeyVersion    = 2
	groupValueVersion  = 3
)

// appendOffsetHeader is the record header with which a snapshot keeps an
// offset's original append offset (8 bytes, big endian).
const appendOffsetHeader = "kbroker.append_offset"

// record is one key/value pair of a __consumer_offsets batch; value nil is a
// tombstone.
type record struct {
	key   []byte
	value []byte
	// origin, when hasOrigin, is the append offset of the batch that first
	// stored this offset (a snapshot's rewrite).
	origin    int64
	hasOrigin bool
}

func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

func offsetRecord(group string, tp topicPartition, o offsetEntry) record {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	v.Offset = o.offset
	v.LeaderEpoch = o.leaderEpoch
	v.Metadata = o.metadata
	v.CommitTimestamp = o.commitTime.UnixMilli()
	if !o.expireTime.IsZero() {
		// Only loaded from old (v1) values; a snapshot keeps it as it was.
		v.Version = 1
		v.ExpireTimestamp = o.expireTime.UnixMilli()
	}
	return record{key: offsetKey(group, tp.topic, tp.partition), value: v.AppendTo(nil)}
}

func offsetTombstone(group string, tp topicPartition) record {
	return record{key: offsetKey(group, tp.topic, tp.partition)}
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

func groupTombstone(group string) record { return record{key: groupKey(group)} }

func groupRecord(group string, v *kmsg.GroupMetadataValue) record {
	v.Version = groupValueVersion
	return record{key: groupKey(group), value: v.AppendTo(nil)}
}

// buildBatch encodes records as one uncompressed v2 record batch with base
// offset 0 and a valid CRC.
func buildBatch(records []record, nowMillis int64) []byte {
	spec := recordbatch.NoProducer()
	spec.FirstTimestamp = nowMillis
	return recordbatch.Build(spec, batchRecords(records))
}

// buildTxnBatch encodes records as one transactional batch of producerID at
// epoch, as Kafka's GroupMetadataManager writes a TxnOffsetCommit. The base
// sequence is -1: coordinator writes skip the partition's sequence checks.
func buildTxnBatch(records []record, producerID int64, epoch int16, nowMillis int64) []byte {
	spec := recordbatch.NoProducer()
	spec.FirstTimestamp = nowMillis
	spec.ProducerID = producerID
	spec.ProducerEpoch = epoch
	spec.Attributes = recordbatch.TransactionalBit
	return recordbatch.Build(spec, batchRecords(records))
}

func batchRecords(records []record) []recordbatch.Record {
	recs := make([]recordbatch.Record, len(records))
	for i, r := range records {
		recs[i] = recordbatch.Record{Key: r.key, Value: r.value}
		if r.hasOrigin {
			recs[i].Headers = []recordbatch.RecordHeader{{
				Key:   appendOffsetHeader,
				Value: binary.BigEndian.AppendUint64(nil, uint64(r.origin)),
			}}
		}
	}
	return recs
}

// decodeBatch returns the records of one v2 batch. Control batches
// (transaction markers) carry no group records and are skipped.
func decodeBatch(batch []byte) ([]record, error) {
	h, err := recordbatch.Validate(batch)
	if err != nil {
		return nil, err
	}
	if h.IsControl() {
		return nil, nil
	}
	return decodeRecords(batch[:h.Size()])
}

// decodeRecords returns the records of one validated, non-control batch.
func decodeRecords(batch []byte) ([]record, error) {
	var out []record
	err := recordbatch.ForEachRecord(batch, func(r kmsg.Record) error {
		rec := record{key: r.Key, value: r.Value}
		for _, h := range r.Headers {
			if h.Key == appendOffsetHeader && len(h.Value) == 8 {
				rec.origin, rec.hasOrigin = int64(binary.BigEndian.Uint64(h.Value)), true
			}
		}
		out = append(out, rec)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decode __consumer_offsets batch: %w", err)
	}
	return out, nil
}

// controlType returns the type of a validated control batch's record
// (Kafka's ControlRecordType: 0 abort, 1 commit, others ignored here).
func controlType(batch []byte) (kmsg.ControlRecordKeyType, error) {
	typ := kmsg.ControlRecordKeyType(-1)
	err := recordbatch.ForEachRecord(batch, func(r kmsg.Record) error {
		if typ >= 0 {
			return nil
		}
		var k kmsg.ControlRecordKey
		if err := k.ReadFrom(r.Key); err != nil {
			return fmt.Errorf("control record key: %w", err)
		}
		typ = k.Type
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("decode __consumer_offsets control batch: %w", err)
	}
	if typ < 0 {
		return 0, errors.New("decode __consumer_offsets control batch: no record")
	}
	return typ, nil
}

// parsedRecord is one decoded __consumer_offsets record.
type parsedRecord struct {
	group     string
	isOffset  bool // else group metadata
	tp        topicPartition
	offset    *kmsg.OffsetCommitValue  // nil: tombstone
	groupMeta *kmsg.GroupMetadataValue // nil: tombstone
}

// parseRecord decodes a key/value pair. ok is false for key versions this
// coordinator does not know (Kafka's transaction or newer coordinator
// records), which are skipped.
func parseRecord(r record) (p parsedRecord, ok bool, err error) {
	if len(r.key) < 2 {
		return p, false, errors.New("short __consumer_offsets key")
	}
	switch version := int16(binary.BigEndian.Uint16(r.key)); version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.key); err != nil {
			return p, false, fmt.Errorf("offset key: %w", err)
		}
		p = parsedRecord{group: k.Group, isOffset: true, tp: topicPartition{k.Topic, k.Partition}}
		if r.value != nil {
			v := new(kmsg.OffsetCommitValue)
			if err := v.ReadFrom(r.value); err != nil {
				return p, false, fmt.Errorf("offset value: %w", err)
			}
			p.offset = v
		}
		return p, true, nil
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(r.key); err != nil {
			return p, false, fmt.Errorf("group key: %w", err)
		}
		p = parsedRecord{group: k.Group}
		if r.value != nil {
			v := new(kmsg.GroupMetadataValue)
			if err := v.ReadFrom(r.value); err != nil {
				return p, false, fmt.Errorf("group value: %w", err)
			}
			p.groupMeta = v
		}
		return p, true, nil
	default:
		return p, false, nil
	}
}
