package server

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnOffsetCommit: v0-4
//
// Behaviour (KafkaApis.handleTxnOffsetCommitRequest):
// * Partitions of topics that do not exist, or beyond a topic's partition
//   count, answer UNKNOWN_TOPIC_OR_PARTITION; the others go to the group
//   coordinator. When none is left, the coordinator is not asked (no group
//   is created).
// * The coordinator (coordinator.TxnOffsetCommit) appends the offsets as one
//   transactional batch of the producer to the group's __consumer_offsets
//   partition and keeps them pending until the transaction's marker lands
//   there (WriteTxnMarkers calls CompleteTxn); OffsetFetch does not see
//   them before, and answers UNSTABLE_OFFSET_COMMIT with require_stable.
// * KIP-890 part 1: before the coordinator appends, the transaction
//   coordinator confirms that the group's __consumer_offsets partition is
//   in the producer's ongoing transaction (AddOffsetsToTxn added it), as
//   Kafka 3.9's GroupCoordinator; a marker that overtakes the check voids
//   it. Failures answer every partition: INVALID_TXN_STATE when the
//   partition is not in the transaction, COORDINATOR_NOT_AVAILABLE while
//   the transaction coordinator cannot answer.
// * Authorization (KafkaApis.handleTxnOffsetCommitRequest): Write on the
//   transactional id, else every partition gets
//   TRANSACTIONAL_ID_AUTHORIZATION_FAILED; Read on the group, else
//   GROUP_AUTHORIZATION_FAILED; Read on each topic, else its partitions
//   get TOPIC_AUTHORIZATION_FAILED (before the existence check) and only
//   the others are committed.
//
// Version notes:
// * v0-1: COORDINATOR_LOAD_IN_PROGRESS is answered as
//   COORDINATOR_NOT_AVAILABLE (clients before 2.0 fail on it, KAFKA-7296)
// * v2: committed leader epoch
// * v3: flexible; member id, generation and group.instance.id are checked;
//   before v3 PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH
// * v4: TRANSACTION_ABORTABLE may be returned (KIP-890)
// * v5: transactions v2 (KIP-890 part 2): the group's __consumer_offsets
//   partition is added to the transaction here instead of verified (the
//   client sends no AddOffsetsToTxn)

func init() { registerAPI(kmsg.TxnOffsetCommit.Int16(), 0, 5, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	md := b.controller.Metadata()
	var refused int16
	switch {
	case !b.authorize(rc, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
		refused = kerr.TransactionalIDAuthorizationFailed.Code
	case !b.authorize(rc, acl.OpRead, acl.ResourceGroup, req.Group):
		refused = kerr.GroupAuthorizationFailed.Code
	}
	readable := b.checksFor(rc, acl.OpRead, acl.ResourceTopic)

	// codes[i][j] answers req.Topics[i].Partitions[j]; -1 means "ask the
	// coordinator".
	codes := make([][]int16, len(req.Topics))
	known := *req
	known.Topics = nil
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
		mt := md.Topics[t.Topic]
		kt := t
		kt.Partitions = nil
		for j, p := range t.Partitions {
			if refused != 0 {
				codes[i][j] = refused
				continue
			}
			if !readable.allowed(t.Topic) {
				codes[i][j] = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if mt == nil || p.Partition < 0 || int(p.Partition) >= len(mt.Partitions) {
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
				continue
			}
			codes[i][j] = -1
			kt.Partitions = append(kt.Partitions, p)
		}
		if len(kt.Partitions) > 0 {
			known.Topics = append(known.Topics, kt)
		}
	}

	var verifyErr error
	if len(known.Topics) > 0 {
		ctx, verifyErr = b.verifyTxnOffsetCommit(ctx, req)
	}
	if verifyErr != nil {
		for i := range codes {
			for j := range codes[i] {
				if codes[i][j] == -1 {
					codes[i][j] = txnOffsetCommitCode(protocol.ErrorCode(verifyErr), req.Version)
				}
			}
		}
	} else if len(known.Topics) > 0 {
		answered := map[string]map[int32]int16{}
		for _, rt := range b.groups.TxnOffsetCommit(ctx, &known).Topics {
			if answered[rt.Topic] == nil {
				answered[rt.Topic] = map[int32]int16{}
			}
			for _, rp := range rt.Partitions {
				answered[rt.Topic][rp.Partition] = rp.ErrorCode
			}
		}
		for i, t := range req.Topics {
			for j, p := range t.Partitions {
				if codes[i][j] == -1 {
					codes[i][j] = txnOffsetCommitCode(answered[t.Topic][p.Partition], req.Version)
				}
			}
		}
	}

	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for i, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// txnOffsetCommitCode adapts a coordinator answer to the request's version.
func txnOffsetCommitCode(code, version int16) int16 {
	switch {
	case version < 2 && code == kerr.CoordinatorLoadInProgress.Code:
		return kerr.CoordinatorNotAvailable.Code
	case version < 3 && code == kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
