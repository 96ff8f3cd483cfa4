package server

// AlterShareGroupOffsets v0 (KIP-932): an operator sets share partitions'
// start offsets (SPSO), dropping their in-flight state, on the group's
// coordinator (coordinator/share_state.go). The group must be a share
// group without members (NON_EMPTY_GROUP) and becomes one if it does not
// exist; a leader holding the old state reloads it (its next write is
// fenced, and a new share session checks the stored epoch).
//
// Authorization (KafkaApis.handleAlterShareGroupOffsetsRequest): Read on
// the group, else GROUP_AUTHORIZATION_FAILED; Read on each topic, else its
// partitions answer TOPIC_AUTHORIZATION_FAILED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/coordinator"
	"github.com/kbroker/kbroker/internal/acl"
)

func init() {
	registerAPI(kmsg.AlterShareGroupOffsets.Int16(), 0, 0, handleAlterShareGroupOffsets)
}

func handleAlterShareGroupOffsets(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if !b.authorize(rc, acl.OpRead, acl.ResourceGroup, req.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	md := b.controller.Metadata()
	readable := b.checksFor(rc, acl.OpRead, acl.ResourceTopic)
	var offsets []coordinator.ShareStartOffset
	type slot struct{ t, p int }
	var accepted []slot
	for _, rt := range req.Topics {
		ot := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t, known := md.Topics[rt.Topic]
		if known {
			ot.TopicID = t.ID
		}
		for _, rp := range rt.Partitions {
			op := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			switch {
			case !readable.allowed(rt.Topic):
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !known || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.StartOffset < 0:
				op.ErrorCode = kerr.InvalidRequest.Code
			default:
				offsets = append(offsets, coordinator.ShareStartOffset{TopicID: t.ID, Partition: rp.Partition, StartOffset: rp.StartOffset})
				accepted = append(accepted, slot{len(resp.Topics), len(ot.Partitions)})
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	if len(offsets) > 0 {
		if code := b.groups.AlterShareOffsets(ctx, req.GroupID, offsets); code != 0 {
			resp.ErrorCode = code
			for _, s := range accepted {
				resp.Topics[s.t].Partitions[s.p].ErrorCode = code
			}
		}
	}
	return resp, nil
}
