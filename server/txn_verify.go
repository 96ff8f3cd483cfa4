package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kbroker/kbroker/replica"
	"github.com/kbroker/kbroker/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// verifyTimeout bounds one verification round trip to a transaction
// coordinator on another broker.
const verifyTimeout = 10 * time.Second

// verifyTxnPartitions asks the coordinator of txnID whether each of parts
// is in producerID's ongoing transaction, before a transactional produce
// opens a transaction on them (KIP-890 part 1: a late produce of an ended
// transaction would otherwise open one nobody ever ends). The coordinator
// is asked directly when it is this broker, else with AddPartitionsToTxn
// v4+ VerifyOnly. The result is each partition's error as Produce answers
// it (produceVerifyError). With add (transactions v2: the client sent no
// AddPartitionsToTxn) the partitions are added to the transaction instead
// (AddPartitionsToTxn v4+ without VerifyOnly), as Kafka 4's
// AddPartitionsToTxnManager does for Produce v12+.
func (b *Broker) verifyTxnPartitions(ctx context.Context, txnID string, producerID int64, epoch int16, parts []txn.TopicPartition, add bool) map[txn.TopicPartition]error {
	out := make(map[txn.TopicPartition]error, len(parts))
	fail := func(err error) map[txn.TopicPartition]error {
		for _, tp := range parts {
			out[tp] = produceVerifyError(err)
		}
		return out
	}
	md := b.controller.Metadata()
	t := md.Topics[txn.TopicName]
	p := b.txns.PartitionFor(txnID)
	if t == nil || int(p) >= len(t.Partitions) || t.Partitions[p].Leader < 0 {
		return fail(kerr.CoordinatorNotAvailable)
	}
	if leader := t.Partitions[p].Leader; leader != b.self.ID {
		return b.verifyRemotely(ctx, leader, txnID, producerID, epoch, parts, add)
	}
	if add {
		return fail(b.txns.AddPartitions(ctx, txnID, producerID, epoch, parts, true, true))
	}
	errs, err := b.txns.VerifyPartitions(txnID, producerID, epoch, parts)
	if err != nil {
		return fail(err)
	}
	for i, tp := range parts {
		out[tp] = produceVerifyError(errs[i])
	}
	return out
}

func (b *Broker) verifyRemotely(ctx context.Context, coordinator int32, txnID string, producerID int64, epoch int16, parts []txn.TopicPartition, add bool) map[txn.TopicPartition]error {
	out := make(map[txn.TopicPartition]error, len(parts))
	fail := func(err error) map[txn.TopicPartition]error {
		for _, tp := range parts {
			out[tp] = produceVerifyError(err)
		}
		return out
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = txnID, producerID, epoch, !add
	txn.ByTopic(parts, func(topic string, partitions []int32) {
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = topic, partitions
		rt.Topics = append(rt.Topics, tt)
	})
	req.Transactions = append(req.Transactions, rt)
	rctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	var resp *kmsg.AddPartitionsToTxnResponse
	retryUntil := time.Now().Add(addRetryWindow)
	for backoff := addMinBackoff; ; backoff = min(2*backoff, addMaxBackoff) {
		// VerifyOnly asks and changes nothing, and adding partitions
		// already added changes nothing: safe to send again on a fresh
		// connection when the coordinator's broker restarted since the
		// last.
		kresp, err := b.txnMarkers.verifyPeers.request(rctx, coordinator, req, true)
		if err != nil {
			// Kafka's AddPartitionsToTxnManager: an unknown or
			// unreachable coordinator is COORDINATOR_NOT_AVAILABLE
			// (NOT_ENOUGH_REPLICAS to the producer), not a partition
			// leadership change.
			return fail(fmt.Errorf("%w: verifying with coordinator %d: %v", kerr.CoordinatorNotAvailable, coordinator, err))
		}
		resp = kresp.(*kmsg.AddPartitionsToTxnResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fail(err)
		}
		// An add that found the producer's previous transaction still
		// completing (its markers on their way) is asked again shortly,
		// without holding the connection meanwhile, as the coordinator
		// would wait for a local one (txn waitCompletion).
		if !add || !allConcurrentTransactions(resp) || time.Now().Add(backoff).After(retryUntil) {
			break
		}
		select {
		case <-rctx.Done():
			return fail(fmt.Errorf("%w: adding with coordinator %d: %v", kerr.CoordinatorNotAvailable, coordinator, rctx.Err()))
		case <-time.After(backoff):
		}
	}
	for _, tr := range resp.Transactions {
		for _, tt := range tr.Topics {
			for _, tp := range tt.Partitions {
				out[txn.TopicPartition{Topic: tt.Topic, Partition: tp.Partition}] = produceVerifyError(kerr.ErrorForCode(tp.ErrorCode))
			}
		}
	}
	for _, tp := range parts {
		if _, ok := out[tp]; !ok {
			out[tp] = produceVerifyError(kerr.UnknownServerError)
		}
	}
	return out
}

// The retries of an add (transactions v2) that the coordinator answered
// CONCURRENT_TRANSACTIONS: from addMinBackoff, doubling up to
// addMaxBackoff, for addRetryWindow at the most (the coordinator's own
// wait for a completion, txn.Config.CompletionWait, is 1 s too).
const (
	addMinBackoff  = time.Millisecond
	addMaxBackoff  = 50 * time.Millisecond
	addRetryWindow = time.Second
)

// allConcurrentTransactions: every partition of the answer is
// CONCURRENT_TRANSACTIONS.
func allConcurrentTransactions(resp *kmsg.AddPartitionsToTxnResponse) bool {
	seen := false
	for _, tr := range resp.Transactions {
		for _, tt := range tr.Topics {
			for _, tp := range tt.Partitions {
				if tp.ErrorCode != kerr.ConcurrentTransactions.Code {
					return false
				}
				seen = true
			}
		}
	}
	return seen
}

// produceVerifyError is how Produce answers a verification error, as
// Kafka's AddPartitionsToTxnManager: a coordinator that is moving, loading
// or unreachable is NOT_ENOUGH_REPLICAS (retriable for every client
// version), PRODUCER_FENCED is INVALID_PRODUCER_EPOCH, and the rest (a
// partition outside the transaction: INVALID_TXN_STATE; an unknown
// producer: INVALID_PRODUCER_ID_MAPPING) as the coordinator said.
func produceVerifyError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorNotAvailable),
		errors.Is(err, kerr.CoordinatorLoadInProgress), errors.Is(err, kerr.ConcurrentTransactions),
		errors.Is(err, kerr.NetworkException), errors.Is(err, kerr.RequestTimedOut),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: transaction verification: %v", kerr.NotEnoughReplicas, err)
	case errors.Is(err, kerr.ProducerFenced):
		return fmt.Errorf("%w: %v", kerr.InvalidProducerEpoch, err)
	default:
		return err
	}
}

// txnVerificationKey carries a verified transaction's guard from the
// TxnOffsetCommit handler, through the group coordinator, to the append
// into __consumer_offsets (internalLog.Append).
type txnVerificationKey struct{}

func withTxnVerification(ctx context.Context, g *replica.TxnVerification) context.Context {
	if g == nil {
		return ctx
	}
	return context.WithValue(ctx, txnVerificationKey{}, g)
}

func txnVerificationFrom(ctx context.Context) *replica.TxnVerification {
	g, _ := ctx.Value(txnVerificationKey{}).(*replica.TxnVerification)
	return g
}

// verifyTxnOffsetCommit verifies, as Kafka's GroupCoordinator does before
// a TxnOffsetCommit, that the group's __consumer_offsets partition is in the
// producer's ongoing transaction (AddOffsetsToTxn added it), or under
// transactions v2 adds it. It returns the
// context the commit must run under (carrying the guard) or the error every
// partition of the request gets. When the partition is not led here there
// is nothing to verify: the group coordinator answers NOT_COORDINATOR.
func (b *Broker) verifyTxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (context.Context, error) {
	tp := txn.TopicPartition{Topic: offsetsTopic, Partition: b.groups.PartitionFor(req.Group)}
	part, ok := b.replicas.Get(replica.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	if !ok || !part.State().IsLeader {
		return ctx, nil
	}
	// TxnOffsetCommit v5+ under transactions v2 adds the partition itself
	// (the client sent no AddOffsetsToTxn).
	v2 := txnV2(req.Version, 5)
	guard := part.StartTxnVerification(req.ProducerID, req.ProducerEpoch, v2)
	if guard == nil {
		return ctx, nil // the transaction is open on the partition already
	}
	if err := b.verifyTxnPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, []txn.TopicPartition{tp}, v2)[tp]; err != nil {
		part.DropTxnVerification(guard)
		return ctx, offsetCommitVerifyError(err)
	}
	return withTxnVerification(ctx, guard), nil
}

// offsetCommitVerifyError is Kafka's GroupMetadataManager
// maybeConvertOffsetCommitError for a verification error: what Produce
// answers NOT_ENOUGH_REPLICAS is COORDINATOR_NOT_AVAILABLE here (both
// retriable), the rest as is.
func offsetCommitVerifyError(err error) error {
	if errors.Is(err, kerr.NotEnoughReplicas) {
		return fmt.Errorf("%w: %v", kerr.CoordinatorNotAvailable, err)
	}
	return err
}
