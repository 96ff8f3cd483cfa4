package server

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch: v0-4
//
// Behaviour:
// * For each partition, the end offset of the requested leader epoch on
//   this leader: the start offset of the first epoch after it, or the log
//   end offset for the current epoch, with the largest epoch <= the
//   requested one (KIP-101/KIP-279). An epoch the log does not know gives
//   leader epoch -1 and end offset -1.
// * CurrentLeaderEpoch (v2+) fences (KIP-320): older than the leader's is
//   FENCED_LEADER_EPOCH, newer is UNKNOWN_LEADER_EPOCH; -1 skips the check.
// * Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; not the leader
//   here: NOT_LEADER_OR_FOLLOWER. Errors answer leader epoch -1 and end
//   offset -1.
// * A kbroker follower names the topic id in a tagged field of the topic
//   (protocol.TagTopicID); a partition of another incarnation of the topic
//   answers INCONSISTENT_TOPIC_ID, so a follower never truncates to a
//   deleted topic's log.
// * Consumers (ReplicaID -1) and followers are answered alike, by the
//   leader: kbroker never serves this from a follower replica.
// * Authorization (KafkaApis.handleOffsetForLeaderEpochRequest):
//   ClusterAction on the cluster (brokers) or else Describe on each topic
//   (KIP-320 consumers); a topic with neither gets
//   TOPIC_AUTHORIZATION_FAILED, leader epoch -1 and end offset -1.
//
// Version notes:
// * v1: LeaderEpoch in the response
// * v2: CurrentLeaderEpoch
// * v3: ReplicaID
// * v4: flexible versions

func init() {
	registerAPI(kmsg.OffsetForLeaderEpoch.Int16(), 0, 4, handleOffsetForLeaderEpoch)
}

func handleOffsetForLeaderEpoch(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	clusterAction := b.authorizeCluster(rc, acl.OpClusterAction)
	describable := b.checksFor(rc, acl.OpDescribe, acl.ResourceTopic)

	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			currentEpoch := int32(-1)
			if req.Version >= 2 {
				currentEpoch = rp.CurrentLeaderEpoch
			}
			var epoch int32
			var end int64
			var err error
			if clusterAction || describable.allowed(rt.Topic) {
				epoch, end, err = b.endOffsetForEpoch(rt.Topic, protocol.TopicIDTag(rt.UnknownTags), rp.Partition, currentEpoch, rp.LeaderEpoch)
			} else {
				err = kerr.TopicAuthorizationFailed
			}
			if err != nil {
				sp.ErrorCode = protocol.ErrorCode(err)
				epoch, end = -1, -1
			}
			sp.LeaderEpoch = epoch
			sp.EndOffset = end
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func (b *Broker) endOffsetForEpoch(topic string, topicID [16]byte, partition, currentEpoch, epoch int32) (int32, int64, error) {
	p, err := b.localPartitionOf(topic, topicID, partition)
	if err != nil {
		return -1, -1, err
	}
	return p.EndOffsetForEpoch(currentEpoch, epoch)
}
