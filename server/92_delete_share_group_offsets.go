package server

// DeleteShareGroupOffsets v0 (KIP-932): an operator removes a share
// group's state for whole topics on the group's coordinator
// (coordinator/share_state.go); the next share session on a partition
// starts it afresh by share.auto.offset.reset. The group must exist
// (GROUP_ID_NOT_FOUND) and have no members (NON_EMPTY_GROUP).
//
// Authorization (KafkaApis.handleDeleteShareGroupOffsetsRequest): Delete
// on the group, else GROUP_AUTHORIZATION_FAILED; Read on each topic, else
// TOPIC_AUTHORIZATION_FAILED for it.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/internal/acl"
)

func init() {
	registerAPI(kmsg.DeleteShareGroupOffsets.Int16(), 0, 0, handleDeleteShareGroupOffsets)
}

func handleDeleteShareGroupOffsets(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if !b.authorize(rc, acl.OpDelete, acl.ResourceGroup, req.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	md := b.controller.Metadata()
	readable := b.checksFor(rc, acl.OpRead, acl.ResourceTopic)
	var ids [][16]byte
	var accepted []int
	for _, rt := range req.Topics {
		ot := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t, known := md.Topics[rt.Topic]
		switch {
		case !readable.allowed(rt.Topic):
			ot.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case !known:
			ot.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			ot.TopicID = t.ID
			ids = append(ids, t.ID)
			accepted = append(accepted, len(resp.Topics))
		}
		resp.Topics = append(resp.Topics, ot)
	}
	if len(ids) > 0 {
		if code := b.groups.DeleteShareOffsets(ctx, req.GroupID, ids); code != 0 {
			resp.ErrorCode = code
			for _, i := range accepted {
				resp.Topics[i].ErrorCode = code
			}
		}
	}
	return resp, nil
}
