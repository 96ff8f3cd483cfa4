package server

import (
	"context"

	"github.com/kbroker/kbroker/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddOffsetsToTxn: v0-4
//
// Behaviour:
// * The group's __consumer_offsets partition (the group coordinator's hash)
//   joins the transaction, as AddPartitionsToTxn does, so that EndTxn's
//   markers reach the offsets the producer commits with TxnOffsetCommit.
//
// Version notes:
// * v2: PRODUCER_FENCED; older versions get INVALID_PRODUCER_EPOCH instead
// * v3: flexible
// * v4: TRANSACTION_ABORTABLE may be returned (KIP-890; not here)

func init() { registerAPI(kmsg.AddOffsetsToTxn.Int16(), 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(ctx context.Context, b *Broker, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	tp := txn.TopicPartition{Topic: offsetsTopic, Partition: b.groups.PartitionFor(req.Group)}
	err := b.txns.AddPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, []txn.TopicPartition{tp})
	if err != nil {
		b.logger.Debug("AddOffsetsToTxn refused", "transactional_id", req.TransactionalID, "group", req.Group, "err", err)
	}
	resp.ErrorCode = txnErrorCode(err, req.Version, 2)
	return resp, nil
}
