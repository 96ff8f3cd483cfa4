package server

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/kbroker/kbroker/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId: v0-5
//
// Behaviour:
// * A null transactional id (idempotent producer) gets a producer id never
//   handed out before (ids come from blocks persisted by the controller)
//   and epoch 0, from any broker. A producer that asks to bump its epoch
//   (v3+, KIP-360) gets a fresh id instead, which Kafka also does for
//   non-transactional producers.
// * A transactional id goes to its transaction coordinator (txn): a new id
//   gets a producer id at epoch 0, a known one its epoch bumped (the old
//   producer is fenced); an ongoing transaction is aborted first and the
//   answer is CONCURRENT_TRANSACTIONS (the client retries); NOT_COORDINATOR
//   or COORDINATOR_LOAD_IN_PROGRESS when this broker does not (yet) own
//   the id; INVALID_TRANSACTION_TIMEOUT above transaction.max.timeout.ms;
//   INVALID_REQUEST for an empty id or a producer id without an epoch (or
//   the reverse).
// * Authorization (KafkaApis.handleInitProducerIdRequest): a transactional
//   id needs Write on it, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; an
//   idempotent producer needs IdempotentWrite on the cluster or Write on
//   at least one topic (any ACL that could let it write), else
//   CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// * v2: flexible
// * v3: producer id and epoch for bumping (KIP-360)
// * v4: PRODUCER_FENCED; older versions get INVALID_PRODUCER_EPOCH instead
// * v5: TRANSACTION_ABORTABLE may be returned (KIP-890; not here)

func init() { registerAPI(kmsg.InitProducerID.Int16(), 0, 5, handleInitProducerID) }

func handleInitProducerID(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case req.TransactionalID != nil && !b.authorize(rc, acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	case req.TransactionalID == nil && !b.authorizeCluster(rc, acl.OpIdempotentWrite) &&
		!b.authorizeAnyResource(rc, acl.OpWrite, acl.ResourceTopic):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if req.TransactionalID == nil {
		id, err := b.controller.AllocateProducerID()
		if err != nil {
			b.logger.Error("allocating a producer id failed", "err", err)
			resp.ErrorCode = protocol.ErrorCode(err)
			return resp, nil
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
		return resp, nil
	}
	var expected *txn.ProducerIDAndEpoch
	switch {
	case req.ProducerID == -1 && req.ProducerEpoch == -1:
	case req.ProducerID == -1 || req.ProducerEpoch == -1:
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	default:
		expected = &txn.ProducerIDAndEpoch{ID: req.ProducerID, Epoch: req.ProducerEpoch}
	}
	pe, err := b.txns.InitProducerID(ctx, *req.TransactionalID, req.TransactionTimeoutMillis, expected)
	if err != nil {
		b.logger.Debug("InitProducerId refused", "transactional_id", *req.TransactionalID, "err", err)
		resp.ErrorCode = txnErrorCode(err, req.Version, 4)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = pe.ID, pe.Epoch
	return resp, nil
}
