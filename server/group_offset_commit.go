package server

// OffsetCommit v0-v9: durable (acks=all to __consumer_offsets) before acknowledged. v10 (topic ids) is not served.
//
// Authorization (KafkaApis.handleOffsetCommitRequest): Read on the group,
// else every partition gets GROUP_AUTHORIZATION_FAILED; then Read on each
// topic, else its partitions get TOPIC_AUTHORIZATION_FAILED and only the
// other topics are committed.

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.OffsetCommit.Int16(), 0, 9, handleOffsetCommit) }

func handleOffsetCommit(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	if !b.authorize(rc, acl.OpRead, acl.ResourceGroup, req.Group) {
		return offsetCommitRefusal(req, req.Topics, kerr.GroupAuthorizationFailed.Code), nil
	}
	readable := b.checksFor(rc, acl.OpRead, acl.ResourceTopic)
	allowed, denied := splitByName(req.Topics, func(t kmsg.OffsetCommitRequestTopic) string { return t.Topic }, readable.allowed)
	if len(denied) == 0 {
		return b.groups.OffsetCommit(ctx, req), nil
	}
	refused := offsetCommitRefusal(req, denied, kerr.TopicAuthorizationFailed.Code)
	if len(allowed) == 0 {
		return refused, nil // nothing to commit: as Kafka, the group is not asked
	}
	sub := *req
	sub.Topics = allowed
	resp := b.groups.OffsetCommit(ctx, &sub)
	resp.Topics = append(resp.Topics, refused.Topics...)
	return resp, nil
}

// offsetCommitRefusal answers every partition of topics with code.
func offsetCommitRefusal(req *kmsg.OffsetCommitRequest, topics []kmsg.OffsetCommitRequestTopic, code int16) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
