package server

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/kbroker/kbroker/txn"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListTransactions: v0-1
//
// Behaviour:
// * The transactions this broker coordinates (admin clients ask every
//   broker), filtered by state names (unknown names are returned in
//   UnknownStateFilters and match nothing) and producer ids; expiring ids
//   are left out. COORDINATOR_LOAD_IN_PROGRESS while a partition loads.
// * Authorization: only transactional ids the principal may Describe are
//   listed; the others are left out, never refused.
//
// Version notes:
// * v0: flexible
// * v1: duration filter (KIP-994): only transactions running longer than it
// * v2 (Kafka 4.0, transactional id pattern) is not served.

func init() { registerAPI(kmsg.ListTransactions.Int16(), 0, 1, handleListTransactions) }

func handleListTransactions(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := txn.ListFilter{States: req.StateFilters, ProducerIDs: req.ProducerIDFilters, MinDurationMs: -1}
	if req.Version >= 1 {
		f.MinDurationMs = req.DurationFilterMillis
	}
	txns, unknown, err := b.txns.List(f)
	if err != nil {
		resp.ErrorCode = protocol.ErrorCode(err)
		return resp, nil
	}
	resp.UnknownStateFilters = unknown
	describable := b.checksFor(rc, acl.OpDescribe, acl.ResourceTransactionalID)
	for _, m := range txns {
		if !describable.allowed(m.TransactionalID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID = m.TransactionalID
		st.ProducerID = m.ProducerID
		st.TransactionState = m.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
