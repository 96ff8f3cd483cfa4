package server

import (
	"context"
	"fmt"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets: v0-8
//
// Behaviour:
// * -2 earliest (log start offset), -1 latest (high watermark, or the last
//   stable offset for read_committed), -3 the
//   batch with the largest timestamp (v7+), -4 earliest local (v8+, the log
//   start offset: there is no tiered storage), and a timestamp.
// * Offsets at or above the high watermark (read_committed: the last stable
//   offset) are never returned.
// * A timestamp is answered at record precision: the first record, in
//   offset order, whose timestamp is at or after it, and that record's
//   timestamp (the batch is found with the .timeindex, then read).
// * Authorization: Describe on each topic, else its partitions get
//   TOPIC_AUTHORIZATION_FAILED, for consumers and brokers alike
//   (KafkaApis.handleListOffsetRequest asks nothing else).
//
// Version notes:
// * v0: MaxNumOffsets and a list of offsets
// * v1: one offset per partition, timestamps
// * v2: isolation level
// * v4: current leader epoch (fencing) and leader epoch in the response
// * v6: flexible
// * v7: max timestamp
// * v8: earliest local

func init() { registerAPI(kmsg.ListOffsets.Int16(), 0, 8, handleListOffsets) }

func handleListOffsets(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	describable := b.checksFor(rc, acl.OpDescribe, acl.ResourceTopic)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			if !describable.allowed(rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			offset, ts, epoch, err := b.listOffset(rt.Topic, rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch, req.IsolationLevel == 1)
			if err != nil {
				sp.ErrorCode = protocol.ErrorCode(err)
			} else {
				sp.Offset, sp.Timestamp, sp.LeaderEpoch = offset, ts, epoch
				if req.Version == 0 && offset >= 0 && rp.MaxNumOffsets > 0 {
					sp.OldStyleOffsets = []int64{offset}
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func (b *Broker) listOffset(topic string, partition int32, timestamp int64, clientEpoch int32, readCommitted bool) (offset, ts int64, epoch int32, err error) {
	part, err := b.localPartition(topic, partition)
	if err != nil {
		return -1, -1, -1, err
	}
	if err := part.CheckLeaderEpoch(clientEpoch); err != nil {
		return -1, -1, -1, err
	}
	st := part.State()
	// Kafka's fetchOffsetForTimestamp: read_committed clients see offsets
	// below the last stable offset only.
	bound := st.HighWatermark
	if readCommitted {
		bound = st.LastStableOffset
	}
	switch timestamp {
	case -2, -4:
		return st.LogStartOffset, -1, st.LeaderEpoch, nil
	case -1:
		return bound, -1, st.LeaderEpoch, nil
	case -3:
		mts, moff := part.Log().MaxTimestamp()
		if moff < 0 || moff >= bound {
			return -1, -1, -1, nil
		}
		// The record carrying it, not the end of its batch (KAFKA-16310).
		roff, rts, found, err := b.recordAtTimestamp(part, topic, partition, moff, mts, st.LogStartOffset, bound)
		if err != nil {
			return -1, -1, -1, err
		}
		if found {
			moff, mts = roff, rts
		}
		return moff, mts, st.LeaderEpoch, nil
	}
	if timestamp < 0 {
		return -1, -1, -1, kerr.InvalidRequest
	}
	off, fts, found, err := b.offsetForTimestamp(part, timestamp, bound)
	if err != nil || !found {
		return -1, -1, -1, err
	}
	return off, fts, st.LeaderEpoch, nil
}

// offsetForTimestamp is the offset and timestamp of the first record below
// bound whose timestamp is at least timestamp (found false: none), as
// ListOffsets answers a timestamp.
func (b *Broker) offsetForTimestamp(part *replica.Partition, timestamp, bound int64) (offset, ts int64, found bool, err error) {
	off, fts, ok := part.Log().OffsetForTimestamp(timestamp)
	if !ok || off >= bound {
		return -1, -1, false, nil
	}
	tp := part.TopicPartition()
	roff, rts, found, err := b.recordAtTimestamp(part, tp.Topic, tp.Partition, off, timestamp, off, bound)
	if err != nil {
		return -1, -1, false, err
	}
	if found {
		off, fts = roff, rts
	}
	return off, fts, true, nil
}

// recordAtTimestamp refines an answer found at batch precision (the batch
// holding offset): the first record of that batch at or after minOffset
// whose timestamp is at least ts, as Kafka answers (the batch's max
// timestamp qualifies, so one does). found is false when the batch does
// not yield one below bound: the batch-precision answer then stands.
func (b *Broker) recordAtTimestamp(part *replica.Partition, topic string, partition int32, offset, ts, minOffset, bound int64) (int64, int64, bool, error) {
	batch, err := part.Log().Read(offset, 1, bound, true)
	if err != nil {
		return -1, -1, false, fmt.Errorf("%w: reading %s-%d at %d: %v", kerr.UnknownServerError, topic, partition, offset, err)
	}
	roff, rts, found, err := recordbatch.RecordAtTimestamp(batch, ts, minOffset)
	if err != nil || !found || roff >= bound {
		return -1, -1, false, nil
	}
	return roff, rts, true, nil
}
