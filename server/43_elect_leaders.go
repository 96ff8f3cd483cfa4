package server

import (
	"context"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ElectLeaders: v0-2
//
// Behaviour:
// * Preferred election moves leadership to each partition's first replica
//   when it is alive and in the ISR (ELECTION_NOT_NEEDED when it already
//   leads, PREFERRED_LEADER_NOT_AVAILABLE when it cannot); unclean
//   election gives an offline partition any live replica.
// * Only the controller runs elections: NOT_CONTROLLER elsewhere. On the
//   embedded single node every partition has one replica, which leads.
// * Authorization: Alter on the cluster, else CLUSTER_AUTHORIZATION_FAILED
//   at the top level and for every partition named, before anything is
//   forwarded or elected.
//
// Version notes:
// * v1: election type, top-level error code
// * v2: flexible

func init() { registerAPI(kmsg.ElectLeaders.Int16(), 0, 2, handleElectLeaders) }

func handleElectLeaders(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if !b.authorizeCluster(rc, acl.OpAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		for _, t := range req.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	preferred := req.Version == 0 || req.ElectionType == 0
	var partitions []controller.TopicPartition
	if req.Topics != nil {
		partitions = []controller.TopicPartition{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				partitions = append(partitions, controller.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	res, err := b.controller.ElectLeaders(preferred, partitions)
	if err != nil {
		resp.ErrorCode = protocol.ErrorCode(err)
		return resp, nil
	}
	var results []electionOutcome
	for _, r := range res {
		results = append(results, electionOutcome{r.Topic, r.Partition, r.Err})
	}
	byTopic := map[string]int{}
	for _, r := range results {
		i, ok := byTopic[r.topic]
		if !ok {
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = r.topic
			resp.Topics = append(resp.Topics, t)
			i = len(resp.Topics) - 1
			byTopic[r.topic] = i
		}
		p := kmsg.NewElectLeadersResponseTopicPartition()
		p.Partition = r.partition
		if r.err != nil {
			p.ErrorCode = protocol.ErrorCode(r.err)
			msg := r.err.Error()
			p.ErrorMessage = &msg
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
	}
	return resp, nil
}

type electionOutcome struct {
	topic     string
	partition int32
	err       error
}
