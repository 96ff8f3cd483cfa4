package server

import (
	"context"
	"errors"
	"fmt"
	"time"

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
// it (produceVerifyError).
func (b *Broker) verifyTxnPartitions(ctx context.Context, txnID string, producerID int64, epoch int16, parts []txn.TopicPartition) map[txn.TopicPartition]error {
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
		return b.verifyRemotely(ctx, leader, txnID, producerID, epoch, parts)
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

func (b *Broker) verifyRemotely(ctx context.Context, coordinator int32, txnID string, producerID int64, epoch int16, parts []txn.TopicPartition) map[txn.TopicPartition]error {
	out := make(map[txn.TopicPartition]error, len(parts))
	fail := func(err error) map[txn.TopicPartition]error {
		for _, tp := range parts {
			out[tp] = produceVerifyError(err)
		}
		return out
	}
	conn, err := b.txnMarkers.verifyPeers.get(coordinator)
	if err != nil {
		return fail(err)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = txnID, producerID, epoch, true
	byTopic := map[string]int{}
	for _, tp := range parts {
		i, ok := byTopic[tp.Topic]
		if !ok {
			tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			tt.Topic = tp.Topic
			rt.Topics = append(rt.Topics, tt)
			i = len(rt.Topics) - 1
			byTopic[tp.Topic] = i
		}
		rt.Topics[i].Partitions = append(rt.Topics[i].Partitions, tp.Partition)
	}
	req.Transactions = append(req.Transactions, rt)
	rctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	kresp, err := conn.Request(rctx, req)
	if err != nil {
		return fail(fmt.Errorf("%w: verifying with coordinator %d: %v", kerr.NetworkException, coordinator, err))
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fail(err)
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
