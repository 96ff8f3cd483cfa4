package server

import (
	"fmt"

	"github.com/kbroker/kbroker/replica"
	"github.com/twmb/franz-go/pkg/kerr"
)

// localPartition returns the partition topic/partition that this broker
// leads. It fails with UNKNOWN_TOPIC_OR_PARTITION (wrapped) when the cluster
// metadata has no such partition, and with NOT_LEADER_OR_FOLLOWER when the
// partition exists but is not led here: it is led elsewhere, or this broker
// has not yet applied the snapshot that made it leader. Both are Kafka's
// retriable answers, so a client refreshes its metadata and tries again.
//
// The leadership test here is a fast path only: every Partition method that
// needs leadership checks it again under the partition's lock.
func (b *Broker) localPartition(topic string, partition int32) (*replica.Partition, error) {
	md := b.controller.Metadata()
	t, ok := md.Topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, fmt.Errorf("%w: %s-%d", kerr.UnknownTopicOrPartition, topic, partition)
	}
	tp := replica.TopicPartition{Topic: topic, Partition: partition}
	p, ok := b.replicas.Get(tp)
	if !ok {
		if err := b.replicas.OfflineError(tp); err != nil {
			// Its log dir failed: Kafka's answer for an offline replica.
			return nil, err
		}
	}
	if !ok || !p.State().IsLeader {
		return nil, fmt.Errorf("%w: broker %d does not lead %s-%d (leader %d)",
			kerr.NotLeaderForPartition, b.self.ID, topic, partition, t.Partitions[partition].Leader)
	}
	return p, nil
}

// localPartitionOf is localPartition for a request that names the topic id
// too (zero: not named). A partition of another incarnation of the topic
// (deleted, its name reused) answers INCONSISTENT_TOPIC_ID, as Kafka's
// checkTopicId: never its records.
func (b *Broker) localPartitionOf(topic string, topicID [16]byte, partition int32) (*replica.Partition, error) {
	p, err := b.localPartition(topic, partition)
	if err != nil {
		return nil, err
	}
	if have := p.TopicID(); topicID != ([16]byte{}) && have != ([16]byte{}) && have != topicID {
		return nil, fmt.Errorf("%w: %s-%d here belongs to topic id %x, not %x", kerr.InconsistentTopicID, topic, partition, have, topicID)
	}
	return p, nil
}
