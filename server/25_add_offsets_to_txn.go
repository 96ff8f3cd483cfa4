package server

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
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
// * Authorization: Write on the transactional id, else
//   TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then Read on the group, else
//   GROUP_AUTHORIZATION_FAILED.
//
// Version notes:
// * v2: PRODUCER_FENCED; older versions get INVALID_PRODUCER_EPOCH instead
// * v3: flexible
// * v4: TRANSACTION_ABORTABLE may be returned (KIP-890; not here)

func init() { registerAPI(kmsg.AddOffsetsToTxn.Int16(), 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !b.authorize(rc, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	case !b.authorize(rc, acl.OpRead, acl.ResourceGroup, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	tp := txn.TopicPartition{Topic: offsetsTopic, Partition: b.groups.PartitionFor(req.Group)}
	err := b.txns.AddPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, []txn.TopicPartition{tp}, false, true)
	if err != nil {
		b.logger.Debug("AddOffsetsToTxn refused", "transactional_id", req.TransactionalID, "group", req.Group, "err", err)
	}
	resp.ErrorCode = txnErrorCode(err, req.Version, 2)
	return resp, nil
}
