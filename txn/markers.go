// Package txn is Kafka's transaction coordinator: transactional ids, their
// producer ids and epochs, and the two-phase commit of each transaction,
// stored as records in __transaction_state.
package txn

import "context"

// TopicPartition names one partition that takes part in a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Markers is one transaction outcome to be written, as control batches, to
// every partition the transaction wrote to (Kafka's WriteTxnMarkers entry).
type Markers struct {
	ProducerID    int64
	ProducerEpoch int16
	Commit        bool
	// CoordinatorEpoch is the leader epoch of the coordinator's
	// __transaction_state partition: partition leaders refuse markers from
	// a coordinator older than one they already heard from.
	CoordinatorEpoch int32
	Partitions       []TopicPartition
	// TxnV2: the transaction ran under transactions v2, so its markers
	// carry the epoch above its batches; a leader refuses one that would
	// end a transaction opened at that epoch (a stale copy, KIP-1228).
	// Sent as WriteTxnMarkers v2 TransactionVersion 2.
	TxnV2 bool
}

// MarkerWriter delivers transaction markers to partition leaders. The
// server implements it with WriteTxnMarkers requests (handled locally when
// this broker leads the partition).
type MarkerWriter interface {
	// WriteMarkers returns once every partition has the marker, or its
	// topic no longer exists (Kafka drops those), retrying across leader
	// changes with a backoff. It returns an error only when ctx ends or the
	// coordinator was fenced (TRANSACTION_COORDINATOR_FENCED from a leader:
	// a newer coordinator owns the transaction).
	WriteMarkers(ctx context.Context, m Markers) error
}
