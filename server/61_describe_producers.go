package server

import (
	"context"

	"github.com/kbroker/kbroker/protocol"
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

func init() { registerAPI(kmsg.DescribeProducers.Int16(), 0, 0, handleDescribeProducers) }

func handleDescribeProducers(_ context.Context, b *Broker, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = p
			part, err := b.localPartition(rt.Topic, p)
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
