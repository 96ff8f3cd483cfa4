package server

import (
	"errors"

	"github.com/kbroker/kbroker/protocol"
	"github.com/kbroker/kbroker/txn"
	"github.com/twmb/franz-go/pkg/kerr"
)

// newTxnCoordinator builds the transaction coordinator: its records go to
// __transaction_state through the replica layer, its markers through the
// marker sender (txn_markers.go), its producer ids from the controller.
func (b *Broker) newTxnCoordinator() *txn.Coordinator {
	b.txnMarkers = newTxnMarkerSender(b)
	return txn.New(txn.Config{
		NumPartitions:  b.cfg.TransactionStateLogNumPartitions,
		MaxTimeout:     b.cfg.TransactionMaxTimeout,
		IDExpiration:   b.cfg.TransactionalIDExpiration,
		AbortInterval:  b.cfg.TransactionAbortTimedOutInterval,
		ExpireInterval: b.cfg.TransactionRemoveExpiredIDsInterval,
		SnapshotBytes:  coordinatorSnapshotBytes(b.cfg.LogCleanerEnable),
	}, &internalLog{b: b, topic: txn.TopicName}, b.txnMarkers, b.controller.AllocateProducerID,
		b.logger.With("component", "transactions"))
}

// closeTxnCoordinator stops the coordinator (its marker writes end with
// it), then the marker sender's connections.
func (b *Broker) closeTxnCoordinator() {
	b.txns.Close()
	b.txnMarkers.Close()
}

// txnErrorCode is the code of a transaction coordinator error, with
// PRODUCER_FENCED answered as INVALID_PRODUCER_EPOCH to request versions
// below fencedSince, which predate it (KIP-588).
func txnErrorCode(err error, version, fencedSince int16) int16 {
	if version < fencedSince && errors.Is(err, kerr.ProducerFenced) {
		return kerr.InvalidProducerEpoch.Code
	}
	return protocol.ErrorCode(err)
}

// coordinatorSnapshotBytes is the coordinators' snapshot threshold for
// __consumer_offsets and __transaction_state (coordinator.Config and
// txn.Config SnapshotBytes). Both topics are cleanup.policy=compact, so
// with the log cleaner on they are ordinary compacted topics, as in Kafka:
// the cleaner keeps each key's newest record and nothing rewrites them
// (-1: no snapshots). With log.cleaner.enable=false nothing would bound
// them, so the coordinators fall back to rewriting their live state and
// moving the log start past the older records (0: the default threshold).
func coordinatorSnapshotBytes(cleanerEnabled bool) int64 {
	if cleanerEnabled {
		return -1
	}
	return 0
}
