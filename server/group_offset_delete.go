package server

// OffsetDelete v0.
//
// Authorization: Delete on the group, else GROUP_AUTHORIZATION_FAILED at
// the top level; then Read on each topic, else its partitions get
// TOPIC_AUTHORIZATION_FAILED and keep their offsets.

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.OffsetDelete.Int16(), 0, 0, handleOffsetDelete) }

func handleOffsetDelete(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	if !b.authorize(rc, acl.OpDelete, acl.ResourceGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	readable := b.checksFor(rc, acl.OpRead, acl.ResourceTopic)
	allowed, denied := splitByName(req.Topics, func(t kmsg.OffsetDeleteRequestTopic) string { return t.Topic }, readable.allowed)
	if len(denied) == 0 {
		return b.groups.OffsetDelete(ctx, req), nil
	}
	// The group is asked even with no topic left, as Kafka: its own
	// errors (not found, not empty) still apply.
	sub := *req
	sub.Topics = allowed
	resp := b.groups.OffsetDelete(ctx, &sub)
	if resp.ErrorCode != 0 {
		return resp, nil
	}
	for _, t := range denied {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
