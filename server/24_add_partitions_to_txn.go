package server

import (
	"context"
	"slices"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddPartitionsToTxn: v0-5
//
// Behaviour:
// * v0-3 (clients): the partitions join the transactional id's ongoing
//   transaction (it becomes Ongoing), written to __transaction_state
//   before the answer. Every partition gets the coordinator's answer. A
//   partition of a topic that does not exist gets UNKNOWN_TOPIC_OR_PARTITION
//   and every other one OPERATION_NOT_ATTEMPTED: nothing is added.
// * v4+ (brokers, batched per transaction): the same per transaction; with
//   VerifyOnly (KIP-890 part 1) nothing is added and each partition is
//   answered NONE when it is in the ongoing transaction, INVALID_TXN_STATE
//   when not.
// * Authorization (KafkaApis.handleAddPartitionsToTxnRequest): v0-3 need
//   Write on the transactional id, else every partition gets
//   TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then Write on each topic, else
//   TOPIC_AUTHORIZATION_FAILED (always for the internal topics, which
//   clients add with AddOffsetsToTxn), and then nothing is added, the
//   other partitions OPERATION_NOT_ATTEMPTED. v4+ come from brokers and
//   need ClusterAction on the cluster, else CLUSTER_AUTHORIZATION_FAILED at
//   the top level.
//
// Version notes:
// * v2: PRODUCER_FENCED; older versions get INVALID_PRODUCER_EPOCH instead
// * v3: flexible
// * v4: several transactions per request, VerifyOnly, top-level error code
// * v5: TRANSACTION_ABORTABLE may be returned (KIP-890; not here)

func init() { registerAPI(kmsg.AddPartitionsToTxn.Int16(), 0, 5, handleAddPartitionsToTxn) }

// txnTopic is one topic's partitions of an AddPartitionsToTxn transaction,
// and their answers.
type txnTopic struct {
	topic      string
	partitions []int32
	codes      []int16
}

func handleAddPartitionsToTxn(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		topics := make([]txnTopic, len(req.Topics))
		for i, t := range req.Topics {
			topics[i] = txnTopic{topic: t.Topic, partitions: t.Partitions}
		}
		if b.authorize(rc, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
			writable := b.checksFor(rc, acl.OpWrite, acl.ResourceTopic)
			b.addPartitionsToTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, false, req.Version, topics, func(topic string) bool {
				return !isInternalTopic(topic) && writable.allowed(topic)
			})
		} else {
			for i := range topics {
				topics[i].codes = slices.Repeat([]int16{kerr.TransactionalIDAuthorizationFailed.Code}, len(topics[i].partitions))
			}
		}
		for _, t := range topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.topic
			for i, p := range t.partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, t.codes[i]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	if !b.authorizeCluster(rc, acl.OpClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	for _, tr := range req.Transactions {
		topics := make([]txnTopic, len(tr.Topics))
		for i, t := range tr.Topics {
			topics[i] = txnTopic{topic: t.Topic, partitions: t.Partitions}
		}
		b.addPartitionsToTxn(ctx, tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly, true, req.Version, topics, nil)
		rtr := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtr.TransactionalID = tr.TransactionalID
		for _, t := range topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = t.topic
			for i, p := range t.partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, t.codes[i]
				rt.Partitions = append(rt.Partitions, rp)
			}
			rtr.Topics = append(rtr.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, rtr)
	}
	return resp, nil
}

// addPartitionsToTxn adds (or verifies) one transaction's partitions and
// fills in each partition's answer. fromBroker is the broker form (v4+):
// a broker adds (not VerifyOnly) only for a transactions v2 Produce or
// TxnOffsetCommit, and is answered CONCURRENT_TRANSACTIONS at once while
// the previous transaction completes, as Kafka does, so that its
// connection is not held (it retries; verifyRemotely). writable, when not
// nil, says which topics the client may add.
func (b *Broker) addPartitionsToTxn(ctx context.Context, id string, producerID int64, epoch int16, verifyOnly, fromBroker bool, version int16, topics []txnTopic, writable func(string) bool) {
	var parts []txn.TopicPartition
	unknown := false
	md := b.controller.Metadata()
	for i := range topics {
		t := &topics[i]
		t.codes = make([]int16, len(t.partitions))
		mt := md.Topics[t.topic]
		for j, p := range t.partitions {
			if writable != nil && !writable(t.topic) {
				t.codes[j] = kerr.TopicAuthorizationFailed.Code
				unknown = true
				continue
			}
			if mt == nil || p < 0 || int(p) >= len(mt.Partitions) {
				t.codes[j] = kerr.UnknownTopicOrPartition.Code
				unknown = true
				continue
			}
			parts = append(parts, txn.TopicPartition{Topic: t.topic, Partition: p})
		}
	}
	if unknown {
		// As Kafka: nothing is added when any partition is unknown or
		// not writable.
		for i := range topics {
			for j, c := range topics[i].codes {
				if c == 0 {
					topics[i].codes[j] = kerr.OperationNotAttempted.Code
				}
			}
		}
		return
	}
	if verifyOnly {
		errs, err := b.txns.VerifyPartitions(id, producerID, epoch, parts)
		k := 0
		for i := range topics {
			for j := range topics[i].codes {
				if err != nil {
					topics[i].codes[j] = txnErrorCode(err, version, 2)
				} else {
					topics[i].codes[j] = txnErrorCode(errs[k], version, 2)
				}
				k++
			}
		}
		return
	}
	err := b.txns.AddPartitions(ctx, id, producerID, epoch, parts, fromBroker, !fromBroker)
	if err != nil {
		b.logger.Debug("AddPartitionsToTxn refused", "transactional_id", id, "err", err)
	}
	code := txnErrorCode(err, version, 2)
	for i := range topics {
		for j := range topics[i].codes {
			topics[i].codes[j] = code
		}
	}
}
