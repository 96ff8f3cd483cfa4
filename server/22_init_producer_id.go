package server

import (
	"context"

	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId: v0-4
//
// Behaviour:
// * Idempotent producers get a producer id never handed out before (ids
//   come from blocks persisted by the controller) and epoch 0. A producer
//   that asks to bump its epoch (v3+, KIP-360) gets a fresh id instead,
//   which Kafka also does for non-transactional producers.
// * Transactions are not implemented: a transactional id gets
//   INVALID_REQUEST (the transaction APIs are not advertised, so clients do
//   not try them unless configured for transactions).
//
// Version notes:
// * v2: flexible
// * v3: producer id and epoch for bumping

func init() { registerAPI(kmsg.InitProducerID.Int16(), 0, 4, handleInitProducerID) }

func handleInitProducerID(_ context.Context, b *Broker, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		b.logger.Warn("transactional producer refused: transactions are not implemented", "transactional_id", *req.TransactionalID)
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	id, err := b.controller.AllocateProducerID()
	if err != nil {
		b.logger.Error("allocating a producer id failed", "err", err)
		resp.ErrorCode = protocol.ErrorCode(err)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}
