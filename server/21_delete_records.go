package server

import (
	"context"
	"fmt"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteRecords: v0-2
//
// Behaviour:
// * Raises each partition's log start offset to Offset (-1: the high
//   watermark); records below it can no longer be read and whole segments
//   below it are deleted. The answer's LowWatermark is the new log start
//   offset. Asking for less than the current start changes nothing.
// * An offset above the high watermark: OFFSET_OUT_OF_RANGE.
// * A topic whose cleanup.policy lacks "delete": POLICY_VIOLATION; the
//   internal __consumer_offsets: INVALID_TOPIC_EXCEPTION, as Kafka.
// * Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; not the leader
//   here: NOT_LEADER_OR_FOLLOWER. Each partition succeeds or fails alone;
//   failures answer LowWatermark -1.
// * The new start offset is in place on this leader when the response is
//   sent; TimeoutMillis is not used.
// * Authorization: Delete on each topic, else its partitions get
//   TOPIC_AUTHORIZATION_FAILED (LowWatermark -1) whether or not it exists.
//
// Version notes:
// * v1: same as v0 (throttle after the response)
// * v2: flexible versions

func init() { registerAPI(kmsg.DeleteRecords.Int16(), 0, 2, handleDeleteRecords) }

func handleDeleteRecords(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	deletable := b.checksFor(rc, acl.OpDelete, acl.ResourceTopic)

	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			low, err := int64(-1), error(kerr.TopicAuthorizationFailed)
			if deletable.allowed(rt.Topic) {
				low, err = b.deleteRecords(rt.Topic, rp.Partition, rp.Offset)
			}
			if err != nil {
				sp.ErrorCode = protocol.ErrorCode(err)
				low = -1
			}
			sp.LowWatermark = low
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func (b *Broker) deleteRecords(topic string, partition int32, offset int64) (int64, error) {
	p, err := b.localPartition(topic, partition)
	if err != nil {
		return -1, err
	}
	if topic == offsetsTopic {
		return -1, fmt.Errorf("%w: records of the internal topic %s cannot be deleted", kerr.InvalidTopicException, topic)
	}
	if t, ok := b.controller.Metadata().Topics[topic]; ok {
		policy := b.cfg.EffectiveTopicConfig(t.Configs)["cleanup.policy"]
		if !config.CleanupPolicyDeletes(policy) {
			return -1, fmt.Errorf("%w: records of %s-%d cannot be deleted: cleanup.policy is %q", kerr.PolicyViolation, topic, partition, policy)
		}
	}
	return p.DeleteRecordsBefore(offset)
}
