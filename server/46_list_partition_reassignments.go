package server

import (
	"context"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListPartitionReassignments: v0
//
// Behaviour:
//   - Lists the ongoing reassignments (null topics: all) with each
//     partition's whole replica set and the replicas being added and
//     removed; partitions not being reassigned, or that do not exist, are
//     left out, as Kafka does.
//   - Only the controller answers: NOT_CONTROLLER at the top elsewhere.
//   - Authorization: Describe on the cluster, else
//     CLUSTER_AUTHORIZATION_FAILED at the top level.
func init() {
	registerAPI(kmsg.ListPartitionReassignments.Int16(), 0, 0, handleListPartitionReassignments)
}

func handleListPartitionReassignments(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !b.authorizeCluster(rc, acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	var partitions []controller.TopicPartition
	if req.Topics != nil {
		partitions = []controller.TopicPartition{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				partitions = append(partitions, controller.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	list, err := b.controller.ListReassignments(partitions)
	if err != nil {
		resp.ErrorCode = protocol.ErrorCode(err)
		msg := err.Error()
		resp.ErrorMessage = &msg
		return resp, nil
	}
	byTopic := map[string]int{}
	for _, r := range list {
		i, ok := byTopic[r.Topic]
		if !ok {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = r.Topic
			resp.Topics = append(resp.Topics, rt)
			i = len(resp.Topics) - 1
			byTopic[r.Topic] = i
		}
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition = r.Partition
		rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = r.Replicas, nonNil(r.AddingReplicas), nonNil(r.RemovingReplicas)
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp, nil
}

// nonNil returns s, or an empty slice for nil: the arrays are not
// nullable on the wire.
func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
