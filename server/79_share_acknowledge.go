package server

// ShareAcknowledge v0-v2 (KIP-932; v2 adds KIP-1222's renew): a share
// group member acknowledges records it acquired through ShareFetch
// (ACCEPT, RELEASE, REJECT, GAP; RENEW from v2), without fetching. The
// share session must exist and the epoch be its next one (epoch 0 cannot
// open a session: INVALID_SHARE_SESSION_EPOCH); epoch -1 acknowledges and
// closes the session, releasing what the member still holds here.
// Acknowledgements for records the member does not hold answer
// INVALID_RECORD_STATE for their partition and change nothing there.
//
// Authorization (KafkaApis.handleShareAcknowledgeRequest): Read on the
// group, else GROUP_AUTHORIZATION_FAILED; Read on each topic, else its
// partitions answer TOPIC_AUTHORIZATION_FAILED.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/internal/share"
	"github.com/kbroker/kbroker/protocol"
)

func init() {
	registerAPI(kmsg.ShareAcknowledge.Int16(), 0, 2, handleShareAcknowledge)
}

func handleShareAcknowledge(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	resp.AcquisitionLockTimeoutMillis = int32(b.cfg.GroupShareRecordLockDuration.Milliseconds())
	group, member := derefString(req.GroupID), derefString(req.MemberID)
	if !b.authorize(rc, acl.OpRead, acl.ResourceGroup, group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if group == "" || member == "" || len(member) > 36 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	maxType := share.AckReject
	if req.Version >= 2 && req.IsRenewAck {
		maxType = share.AckRenew
	}
	sl := b.shareLeader()
	session, _, err := sl.mgr.OpenSession(share.SessionRequest{Group: group, Member: member, Epoch: req.ShareSessionEpoch, Ack: true})
	if err != nil {
		resp.ErrorCode = shareSessionCode(err)
		return resp, nil
	}
	md := b.controller.Metadata()
	readable := b.checksFor(rc, acl.OpRead, acl.ResourceTopic)
	now := time.Now()
	for _, rt := range req.Topics {
		ot := kmsg.NewShareAcknowledgeResponseTopic()
		ot.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			op := kmsg.NewShareAcknowledgeResponseTopicPartition()
			op.Partition = rp.Partition
			op.CurrentLeader.LeaderID, op.CurrentLeader.LeaderEpoch = -1, -1
			tp := share.TP{TopicID: rt.TopicID, Partition: rp.Partition}
			batches := toAckBatches(rp.AcknowledgementBatches, func(ab kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
				return ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes
			})
			t, ok := md.TopicByID(rt.TopicID)
			switch {
			case !ok:
				op.ErrorCode = kerr.UnknownTopicID.Code
			case !readable.allowed(t.Name):
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
			default:
				part, err := b.localPartitionOf(t.Name, rt.TopicID, rp.Partition)
				var ps *share.PartitionState
				if err == nil {
					ps, err = sl.sharePartition(ctx, group, tp, part, false)
				}
				if err != nil {
					op.ErrorCode = protocol.ErrorCode(err)
					if errors.Is(err, kerr.NotLeaderForPartition) && int(rp.Partition) < len(t.Partitions) {
						op.CurrentLeader.LeaderID = t.Partitions[rp.Partition].Leader
						op.CurrentLeader.LeaderEpoch = t.Partitions[rp.Partition].LeaderEpoch
					}
					break
				}
				op.ErrorCode = sl.acknowledge(ctx, ps, member, batches, maxType, now)
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	if req.ShareSessionEpoch == -1 {
		sl.releaseMember(group, member, session.Parts())
	}
	return resp, nil
}
