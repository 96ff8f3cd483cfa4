package server

// OffsetFetch v0-v9 (batched groups from v8; require_stable treated as false). v10 (topic ids) is not served.
//
// Authorization (KafkaApis.handleOffsetFetchRequest): Describe on the
// group, else GROUP_AUTHORIZATION_FAILED (top level v2-v7, per group v8+,
// per partition v0-v1 as Kafka's v0). A named topic without Describe gets
// TOPIC_AUTHORIZATION_FAILED (offset -1) for its partitions; a fetch of
// all the group's offsets leaves such topics out, so their names are not
// seen.

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.OffsetFetch.Int16(), 0, 9, handleOffsetFetch) }

func handleOffsetFetch(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	if b.authorizer() == nil {
		return b.groups.OffsetFetch(ctx, req), nil
	}
	describable := b.checksFor(rc, acl.OpDescribe, acl.ResourceTopic)
	if req.Version >= 8 {
		return b.offsetFetchGroups(ctx, rc, req, describable), nil
	}
	if !b.authorize(rc, acl.OpDescribe, acl.ResourceGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		if req.Version >= 2 {
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			return resp, nil
		}
		// v0-v1 carry errors only per partition.
		for _, t := range req.Topics {
			resp.Topics = append(resp.Topics, offsetFetchRefusedTopic(t.Topic, t.Partitions, kerr.GroupAuthorizationFailed.Code))
		}
		return resp, nil
	}
	topicName := func(t kmsg.OffsetFetchRequestTopic) string { return t.Topic }
	if req.Topics == nil && req.Version >= 2 {
		resp := b.groups.OffsetFetch(ctx, req)
		resp.Topics, _ = splitByName(resp.Topics, func(t kmsg.OffsetFetchResponseTopic) string { return t.Topic }, describable.allowed)
		return resp, nil
	}
	allowed, denied := splitByName(req.Topics, topicName, describable.allowed)
	if len(denied) == 0 {
		return b.groups.OffsetFetch(ctx, req), nil
	}
	sub := *req
	sub.Topics = append([]kmsg.OffsetFetchRequestTopic{}, allowed...) // not nil: nil means every topic
	resp := b.groups.OffsetFetch(ctx, &sub)
	if resp.ErrorCode != 0 {
		return resp, nil // a group error answers alone, as Kafka
	}
	for _, t := range denied {
		resp.Topics = append(resp.Topics, offsetFetchRefusedTopic(t.Topic, t.Partitions, kerr.TopicAuthorizationFailed.Code))
	}
	return resp, nil
}

// offsetFetchGroups serves v8+, one answer per group in request order.
func (b *Broker) offsetFetchGroups(ctx context.Context, rc *requestContext, req *kmsg.OffsetFetchRequest, describable *nameChecks) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	sub := *req
	sub.Groups = nil
	type slot struct {
		refused bool
		denied  []kmsg.OffsetFetchRequestGroupTopic
	}
	slots := make([]slot, len(req.Groups))
	for i, g := range req.Groups {
		if !b.authorize(rc, acl.OpDescribe, acl.ResourceGroup, g.Group) {
			slots[i].refused = true
			continue
		}
		if g.Topics != nil {
			allowed, denied := splitByName(g.Topics, func(t kmsg.OffsetFetchRequestGroupTopic) string { return t.Topic }, describable.allowed)
			g.Topics = append([]kmsg.OffsetFetchRequestGroupTopic{}, allowed...) // not nil: nil means every topic
			slots[i].denied = denied
		}
		sub.Groups = append(sub.Groups, g)
	}
	var answered []kmsg.OffsetFetchResponseGroup
	if len(sub.Groups) > 0 {
		answered = b.groups.OffsetFetch(ctx, &sub).Groups
	}
	for i, g := range req.Groups {
		if slots[i].refused || len(answered) == 0 {
			code := kerr.GroupAuthorizationFailed.Code
			if !slots[i].refused {
				code = kerr.UnknownServerError.Code // the coordinator answered fewer groups than asked
			}
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg := answered[0]
		answered = answered[1:]
		if rg.ErrorCode == 0 {
			if g.Topics == nil {
				rg.Topics, _ = splitByName(rg.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) string { return t.Topic }, describable.allowed)
			}
			for _, t := range slots[i].denied {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, -1, -1, kmsg.StringPtr("")
					rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// offsetFetchRefusedTopic answers a topic's partitions (v0-v7) with code.
func offsetFetchRefusedTopic(topic string, partitions []int32, code int16) kmsg.OffsetFetchResponseTopic {
	st := kmsg.NewOffsetFetchResponseTopic()
	st.Topic = topic
	for _, p := range partitions {
		sp := kmsg.NewOffsetFetchResponseTopicPartition()
		sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata = p, -1, -1, kmsg.StringPtr("")
		sp.ErrorCode = code
		st.Partitions = append(st.Partitions, sp)
	}
	return st
}
