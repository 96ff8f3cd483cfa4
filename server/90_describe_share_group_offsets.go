package server

// DescribeShareGroupOffsets v0-v1 (KIP-932): the start offsets (SPSO) of
// share groups' partitions, from the group's coordinator (stored share
// state, coordinator/share_state.go). A partition without state answers
// StartOffset -1; Lag (v1) is -1: not computed. Topics omitted (null) means
// every topic with share state. Sent to the group's coordinator (franz-go
// routes it there); elsewhere the group answers NOT_COORDINATOR.
//
// Authorization (KafkaApis.handleDescribeShareGroupOffsetsRequest):
// Describe on the group, else GROUP_AUTHORIZATION_FAILED for it; Describe
// on each named topic, else its partitions answer
// TOPIC_AUTHORIZATION_FAILED; with all topics, those not describable are
// left out.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/internal/acl"
)

func init() {
	registerAPI(kmsg.DescribeShareGroupOffsets.Int16(), 0, 1, handleDescribeShareGroupOffsets)
}

func handleDescribeShareGroupOffsets(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	md := b.controller.Metadata()
	describable := b.checksFor(rc, acl.OpDescribe, acl.ResourceTopic)
	for _, rg := range req.Groups {
		og := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		og.GroupID = rg.GroupID
		if !b.authorize(rc, acl.OpDescribe, acl.ResourceGroup, rg.GroupID) {
			og.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, og)
			continue
		}
		starts, code := b.groups.ShareStartOffsets(rg.GroupID)
		if code != 0 {
			og.ErrorCode = code
			resp.Groups = append(resp.Groups, og)
			continue
		}
		part := func(p int32, code int16, start int64) kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition {
			op := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			op.Partition, op.ErrorCode, op.StartOffset, op.LeaderEpoch, op.Lag = p, code, start, -1, -1
			return op
		}
		if rg.Topics == nil { // every topic with share state
			for name, t := range md.Topics {
				ps, ok := starts[t.ID]
				if !ok || !describable.allowed(name) {
					continue
				}
				ot := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				ot.Topic, ot.TopicID = name, t.ID
				for p, start := range ps {
					op := part(p, 0, start)
					if int(p) < len(t.Partitions) {
						op.LeaderEpoch = t.Partitions[p].LeaderEpoch
					}
					ot.Partitions = append(ot.Partitions, op)
				}
				sort.Slice(ot.Partitions, func(i, j int) bool { return ot.Partitions[i].Partition < ot.Partitions[j].Partition })
				og.Topics = append(og.Topics, ot)
			}
			sort.Slice(og.Topics, func(i, j int) bool { return og.Topics[i].Topic < og.Topics[j].Topic })
			resp.Groups = append(resp.Groups, og)
			continue
		}
		for _, rt := range rg.Topics {
			ot := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			ot.Topic = rt.Topic
			t, known := md.Topics[rt.Topic]
			if known {
				ot.TopicID = t.ID
			}
			for _, p := range rt.Partitions {
				switch {
				case !describable.allowed(rt.Topic):
					ot.Partitions = append(ot.Partitions, part(p, kerr.TopicAuthorizationFailed.Code, -1))
				case !known || p < 0 || int(p) >= len(t.Partitions):
					ot.Partitions = append(ot.Partitions, part(p, kerr.UnknownTopicOrPartition.Code, -1))
				default:
					start, ok := starts[t.ID][p]
					if !ok {
						start = -1
					}
					op := part(p, 0, start)
					op.LeaderEpoch = t.Partitions[p].LeaderEpoch
					ot.Partitions = append(ot.Partitions, op)
				}
			}
			og.Topics = append(og.Topics, ot)
		}
		resp.Groups = append(resp.Groups, og)
	}
	return resp, nil
}
