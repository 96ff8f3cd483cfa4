package server

import (
	"context"
	"fmt"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartitionReassignments: v0-1
//
// Behaviour:
//   - Starts, replaces or cancels (null replicas) partition reassignments
//     as Kafka's controller (controller/reassign.go): new replicas catch up
//     as followers, then the old ones are removed and delete their data.
//   - Per partition: INVALID_REPLICA_ASSIGNMENT for an empty list,
//     duplicates, negative ids or added brokers that are not live;
//     UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist;
//     NO_REASSIGNMENT_IN_PROGRESS for cancelling where there is none.
//   - Only the controller reassigns: NOT_CONTROLLER at the top elsewhere
//     (clients send it to the controller).
//   - Authorization: Alter on the cluster, else CLUSTER_AUTHORIZATION_FAILED
//     at the top level.
//
// Version notes:
//   - v1: allow_replication_factor_change (KIP-860): when false, a target
//     of another size is INVALID_REPLICATION_FACTOR.
func init() {
	registerAPI(kmsg.AlterPartitionAssignments.Int16(), 0, 1, handleAlterPartitionReassignments)
}

func handleAlterPartitionReassignments(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	if !b.authorizeCluster(rc, acl.OpAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	allowRFChange := req.Version < 1 || req.AllowReplicationFactorChange
	var reqs []controller.ReassignRequest
	early := map[int]error{} // refused here, by index into reqs
	md := b.controller.Metadata()
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			r := controller.ReassignRequest{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas}
			if !allowRFChange && p.Replicas != nil {
				if rf, ok := replicationFactorOf(md, t.Topic, p.Partition); ok && rf != len(p.Replicas) {
					early[len(reqs)] = fmt.Errorf("%w: the replication factor is changed from %d to %d but allowReplicationFactorChange is false",
						kerr.InvalidReplicationFactor, rf, len(p.Replicas))
				}
			}
			reqs = append(reqs, r)
		}
	}
	var send []controller.ReassignRequest
	var sentIndex []int
	for i, r := range reqs {
		if early[i] == nil {
			send = append(send, r)
			sentIndex = append(sentIndex, i)
		}
	}
	results := make([]error, len(reqs))
	for i, err := range early {
		results[i] = err
	}
	if len(send) > 0 {
		res, err := b.controller.AlterReassignments(send)
		if err != nil {
			resp.ErrorCode = protocol.ErrorCode(err)
			msg := err.Error()
			resp.ErrorMessage = &msg
			return resp, nil
		}
		for j, i := range sentIndex {
			results[i] = res[j]
		}
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			if err := results[i]; err != nil {
				rp.ErrorCode = protocol.ErrorCode(err)
				msg := err.Error()
				rp.ErrorMessage = &msg
			}
			rt.Partitions = append(rt.Partitions, rp)
			i++
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// replicationFactorOf is the partition's replication factor: the size of
// its target assignment when it is being reassigned.
func replicationFactorOf(md *controller.Metadata, topic string, partition int32) (int, bool) {
	t := md.Topics[topic]
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return 0, false
	}
	ps := t.Partitions[partition]
	return len(ps.Replicas) - len(ps.RemovingReplicas), true
}
