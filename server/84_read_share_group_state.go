package server

// ReadShareGroupState v0 (KIP-932, inter-broker): a partition leader reads
// a share partition's stored state from the group's coordinator
// (coordinator/share_state.go: kbroker keeps it with the group in
// __consumer_offsets rather than in Kafka's __share_group_state). Answers
// NOT_COORDINATOR when this broker does not own the group, as Kafka's
// share coordinator; a partition never written answers StartOffset -1.
//
// Authorization (KafkaApis.handleReadShareGroupStateRequest): ClusterAction
// on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every partition.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/internal/acl"
)

func init() {
	registerAPI(kmsg.ReadShareGroupState.Int16(), 0, 0, handleReadShareGroupState)
}

func handleReadShareGroupState(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ReadShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	allowed := b.authorizeCluster(rc, acl.OpClusterAction)
	for _, rt := range req.Topics {
		ot := kmsg.NewReadShareGroupStateResponseTopic()
		ot.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			op := kmsg.NewReadShareGroupStateResponseTopicPartition()
			op.Partition, op.StartOffset, op.StateEpoch = rp.Partition, -1, -1
			if !allowed {
				op.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				ot.Partitions = append(ot.Partitions, op)
				continue
			}
			st, found, code := b.groups.ReadShareState(ctx, req.GroupID, rt.TopicID, rp.Partition, rp.LeaderEpoch)
			op.ErrorCode = code
			if code == 0 && found {
				op.StateEpoch, op.StartOffset = st.StateEpoch, st.StartOffset
				for _, sb := range st.Batches {
					ob := kmsg.NewReadShareGroupStateResponseTopicPartitionStateBatch()
					ob.FirstOffset, ob.LastOffset, ob.DeliveryState, ob.DeliveryCount = sb.First, sb.Last, sb.DeliveryState, sb.DeliveryCount
					op.StateBatches = append(op.StateBatches, ob)
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}
