package server

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn: v0-4
//
// Behaviour:
// * Commit or abort the transactional id's ongoing transaction:
//   PrepareCommit / PrepareAbort is written to __transaction_state
//   (acks=all) before the answer; the markers and CompleteCommit /
//   CompleteAbort follow in the background. A retry of an EndTxn that
//   already completed the same way succeeds; the other outcome, or no
//   transaction, is INVALID_TXN_STATE; while the previous end is still
//   writing its markers, CONCURRENT_TRANSACTIONS.
// * Authorization: Write on the transactional id, else
//   TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
//
// Version notes:
// * v2: PRODUCER_FENCED; older versions get INVALID_PRODUCER_EPOCH instead
// * v3: flexible
// * v4: TRANSACTION_ABORTABLE may be returned (KIP-890; not here)
// * v5: transactions v2 (KIP-890 part 2): every EndTxn bumps the producer
//   epoch (the markers carry the bumped one), and the answer has the
//   producer id and epoch the producer continues with (a new producer id
//   at epoch 0 once the epochs run out); an abort with no transaction
//   succeeds and bumps the epoch; a retry whose answer was lost (one epoch
//   back) gets the same answer.

func init() { registerAPI(kmsg.EndTxn.Int16(), 0, 5, handleEndTxn) }

func handleEndTxn(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !b.authorize(rc, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	next, err := b.txns.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, txnV2(req.Version, 5))
	if err != nil {
		b.logger.Debug("EndTxn refused", "transactional_id", req.TransactionalID, "commit", req.Commit, "err", err)
	}
	resp.ErrorCode = txnErrorCode(err, req.Version, 2)
	resp.ProducerID, resp.ProducerEpoch = next.ID, next.Epoch
	return resp, nil
}
