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
// write, base offset 0 (the replica layer assigns offsets), producer id -1.
//
// COMPACTION: the segment layer does not compact. Instead the coordinator
// bounds each partition with snapshots of its live state followed by a
// log-start move (snapshot.go), so load replays at most about twice the live
// state plus Config.SnapshotBytes.

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

// record is one key/value pair of a __consumer_offsets batch; value nil is a
// tombstone.
type record struct {
	key   []byte
	value []byte
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
	recs := make([]recordbatch.Record, len(records))
	for i, r := range records {
		recs[i] = recordbatch.Record{Key: r.key, Value: r.value}
	}
	spec := recordbatch.NoProducer()
	spec.FirstTimestamp = nowMillis
	return recordbatch.Build(spec, recs)
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
	var out []record
	err = recordbatch.ForEachRecord(batch[:h.Size()], func(r kmsg.Record) error {
		out = append(out, record{key: r.Key, value: r.Value})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decode __consumer_offsets batch: %w", err)
	}
	return out, nil
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
