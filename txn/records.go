package txn

// __transaction_state records, as Kafka's TransactionLog writes them: key
// TransactionLogKey v0 {transactional_id}, value TransactionLogValue v0
// {producer_id, producer_epoch, timeout, status, partitions, last update,
// start}; a null value (tombstone) deletes the id. One uncompressed v2
// batch per write, producer id -1, base offset 0 (the replica layer assigns
// offsets), like the group coordinator's __consumer_offsets batches.

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/recordbatch"
)

// Kafka 3.9 writes version 0 of both. Kafka 4 writes value version 1
// (flexible, with the tagged PreviousProducerId, NextProducerId and
// ClientTransactionVersion) under transactions v2; so does this, for the
// states of v2 transactions only, so that an id that never used v2 keeps
// records Kafka 3.9 reads.
const (
	keyVersion     = 0
	valueVersion   = 0
	valueVersionV2 = 1
)

func recordKey(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: keyVersion, TransactionalID: id}
	return k.AppendTo(nil)
}

func recordValue(m Metadata) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	if m.TxnVersion >= txnV2 {
		v.Version = valueVersionV2
		v.PreviousProducerID = m.LastProducerID
		v.NextProducerID = m.NextProducerID
		v.ClientTransactionVersion = m.TxnVersion
	}
	v.ProducerID = m.ProducerID
	v.ProducerEpoch = m.ProducerEpoch
	v.TimeoutMillis = m.TimeoutMs
	v.State = kmsg.TransactionState(m.State)
	v.LastUpdateTimestamp = m.UpdateMs
	v.StartTimestamp = m.StartMs
	v.Topics = []kmsg.TxnMetadataValueTopic{}
	ByTopic(m.Partitions, func(topic string, partitions []int32) {
		t := kmsg.NewTxnMetadataValueTopic()
		t.Topic, t.Partitions = topic, partitions
		v.Topics = append(v.Topics, t)
	})
	return v.AppendTo(nil)
}

// buildBatch encodes one record per metadata; a metadata in state Dead is
// written as a tombstone.
func buildBatch(ms []Metadata, nowMs int64) []byte {
	recs := make([]recordbatch.Record, len(ms))
	for i, m := range ms {
		recs[i].Key = recordKey(m.TransactionalID)
		if m.State != Dead {
			recs[i].Value = recordValue(m)
		}
	}
	spec := recordbatch.NoProducer()
	spec.FirstTimestamp = nowMs
	return recordbatch.Build(spec, recs)
}

// logRecord is one decoded __transaction_state record; meta nil is a
// tombstone.
type logRecord struct {
	id   string
	meta *Metadata
}

// decodeBatch returns the records of one batch. Control batches and keys of
// versions other than 0 (not written by Kafka 3.9) are skipped.
func decodeBatch(batch []byte) ([]logRecord, error) {
	h, err := recordbatch.Validate(batch)
	if err != nil {
		return nil, err
	}
	if h.IsControl() {
		return nil, nil
	}
	var out []logRecord
	err = recordbatch.ForEachRecord(batch[:h.Size()], func(r kmsg.Record) error {
		rec, ok, err := decodeRecord(r.Key, r.Value)
		if err != nil {
			return err
		}
		if ok {
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decode __transaction_state batch at %d: %w", h.BaseOffset, err)
	}
	return out, nil
}

func decodeRecord(key, value []byte) (logRecord, bool, error) {
	if len(key) < 2 {
		return logRecord{}, false, fmt.Errorf("short __transaction_state key (%d bytes)", len(key))
	}
	if binary.BigEndian.Uint16(key) != keyVersion {
		return logRecord{}, false, nil
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return logRecord{}, false, fmt.Errorf("transaction key: %w", err)
	}
	rec := logRecord{id: k.TransactionalID}
	if value == nil {
		return rec, true, nil
	}
	v := kmsg.NewTxnMetadataValue() // the tagged fields' defaults (-1) when absent
	if err := v.ReadFrom(value); err != nil {
		return logRecord{}, false, fmt.Errorf("transaction value of %q: %w", k.TransactionalID, err)
	}
	m := Metadata{
		TransactionalID:   k.TransactionalID,
		ProducerID:        v.ProducerID,
		LastProducerID:    v.PreviousProducerID,
		ProducerEpoch:     v.ProducerEpoch,
		LastProducerEpoch: noProducerEpoch,
		NextProducerID:    v.NextProducerID,
		TxnVersion:        v.ClientTransactionVersion,
		TimeoutMs:         v.TimeoutMillis,
		State:             State(v.State),
		StartMs:           v.StartTimestamp,
		UpdateMs:          v.LastUpdateTimestamp,
	}
	if m.State < Empty || m.State > PrepareEpochFence {
		return logRecord{}, false, fmt.Errorf("transaction value of %q: unknown state %d", k.TransactionalID, v.State)
	}
	var parts []TopicPartition
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	m.Partitions = union(nil, parts)
	if len(m.Partitions) == 0 {
		m.Partitions = nil
	}
	rec.meta = &m
	return rec, true, nil
}
