package server

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/kbroker/kbroker/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeProducers: v0
//
// Behaviour:
// * For each partition this broker leads, the producers it keeps state
//   for (idempotent and transactional): epoch, last sequence, last
//   timestamp, the coordinator epoch of the last marker and the first
//   offset of the open transaction (-1 without one); as Kafka's
//   ReplicaManager.activeProducerState.
// * A partition led elsewhere answers NOT_LEADER_OR_FOLLOWER, an unknown one
//   UNKNOWN_TOPIC_OR_PARTITION.
// * Authorization: Read on the topic, else TOPIC_AUTHORIZATION_FAILED for
//   its partitions whether or not it exists (an invalid topic name is
//   answered INVALID_TOPIC_EXCEPTION first, as Kafka).

func init() { registerAPI(kmsg.DescribeProducers.Int16(), 0, 0, handleDescribeProducers) }

func handleDescribeProducers(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	readable := b.checksFor(rc, acl.OpRead, acl.ResourceTopic)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		var refused error
		if protocol.ValidTopicName(rt.Topic) == nil && !readable.allowed(rt.Topic) {
			refused = &refusal{kerr.TopicAuthorizationFailed, "Topic authorization failed."}
		}
		for _, p := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = p
			var part *replica.Partition
			err := refused
			if err == nil {
				part, err = b.localPartition(rt.Topic, p)
			}
			if err != nil {
				sp.ErrorCode = protocol.ErrorCode(err)
				msg := err.Error()
				sp.ErrorMessage = &msg
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, pi := range part.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = pi.ProducerID, int32(pi.ProducerEpoch)
				ap.LastSequence, ap.LastTimestamp = pi.LastSequence, pi.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.TxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
