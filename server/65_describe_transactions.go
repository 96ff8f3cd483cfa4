package server

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/kbroker/kbroker/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions: v0
//
// Behaviour:
// * Each transactional id this broker coordinates: its state, producer id
//   and epoch, timeout, start time and partitions. An id coordinated
//   elsewhere gets NOT_COORDINATOR (admin clients ask its coordinator), an
//   unknown or expiring one TRANSACTIONAL_ID_NOT_FOUND, one whose partition
//   is loading COORDINATOR_LOAD_IN_PROGRESS.
// * Authorization: Describe on the transactional id, else
//   TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing of it; the
//   transaction's partitions list only topics the principal may Describe.
//
// Version notes:
// * v0: flexible

func init() { registerAPI(kmsg.DescribeTransactions.Int16(), 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	describable := b.checksFor(rc, acl.OpDescribe, acl.ResourceTopic)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		if !b.authorize(rc, acl.OpDescribe, acl.ResourceTransactionalID, id) {
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		m, err := b.txns.Describe(id)
		if err != nil {
			st.ErrorCode = protocol.ErrorCode(err)
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State = m.State.String()
		st.TimeoutMillis = m.TimeoutMs
		st.StartTimestamp = m.StartMs
		st.ProducerID, st.ProducerEpoch = m.ProducerID, m.ProducerEpoch
		txn.ByTopic(m.Partitions, func(topic string, partitions []int32) {
			if !describable.allowed(topic) {
				return // not this principal's to see
			}
			t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			t.Topic, t.Partitions = topic, partitions
			st.Topics = append(st.Topics, t)
		})
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
