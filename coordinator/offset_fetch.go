package coordinator

// OffsetFetch, versions 0-9 (GroupCoordinator.handleFetchOffsets).
//
//   - Unknown groups and partitions without a commit answer offset -1,
//     leader epoch -1, metadata "" and no error.
//   - v2+: topics null means every committed partition of the group.
//   - Errors: v0-v1 per partition, v2-v7 top level (no partitions), v8+ per
//     group.
//   - v7+ require_stable: a partition with offsets of an open transaction,
//     or a commit being written, answers offset -1 and
//     UNSTABLE_OFFSET_COMMIT (Kafka's getOffsets); without it those are
//     invisible and the last committed offset is answered.
//   - v8+ batches groups; v9 member id / epoch are checked for consumer
//     (KIP-848) groups (consumer_offsets.go), ignored for classic ones.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchMember is the member id and epoch of an OffsetFetch v9+ group.
type fetchMember struct {
	id    *string
	epoch int32
}

// fetchedTopic is one topic of an OffsetFetch answer, version neutral.
type fetchedTopic struct {
	topic      string
	partitions []fetchedPartition
}

type fetchedPartition struct {
	partition int32
	o         offsetEntry
	found     bool
	unstable  bool // require_stable and a pending commit: UNSTABLE_OFFSET_COMMIT
}

// OffsetFetch serves an OffsetFetchRequest.
func (c *Coordinator) OffsetFetch(_ context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			var topics map[string][]int32
			var order []string
			if rg.Topics != nil {
				topics = map[string][]int32{}
				for _, t := range rg.Topics {
					if _, ok := topics[t.Topic]; !ok {
						order = append(order, t.Topic)
					}
					topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
				}
			}
			var member *fetchMember
			if req.Version >= 9 {
				member = &fetchMember{id: rg.MemberID, epoch: rg.MemberEpoch}
			}
			fetched, code := c.fetchOffsets(rg.Group, order, topics, req.RequireStable, member)
			sg := kmsg.OffsetFetchResponseGroup{Group: rg.Group, ErrorCode: code}
			for _, ft := range fetched {
				st := kmsg.OffsetFetchResponseGroupTopic{Topic: ft.topic}
				for _, fp := range ft.partitions {
					sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					sp.Partition = fp.partition
					sp.ErrorCode = fillFetched(&sp.Offset, &sp.LeaderEpoch, &sp.Metadata, fp)
					st.Partitions = append(st.Partitions, sp)
				}
				sg.Topics = append(sg.Topics, st)
			}
			resp.Groups = append(resp.Groups, sg)
		}
		return resp
	}

	var topics map[string][]int32
	var order []string
	if req.Topics != nil || req.Version < 2 {
		topics = map[string][]int32{}
		for _, t := range req.Topics {
			if _, ok := topics[t.Topic]; !ok {
				order = append(order, t.Topic)
			}
			topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
		}
	}
	fetched, code := c.fetchOffsets(req.Group, order, topics, req.Version >= 7 && req.RequireStable, nil)
	if code != 0 {
		if req.Version >= 2 {
			resp.ErrorCode = code
			return resp
		}
		// v0-v1 carry errors only per partition.
		for _, t := range req.Topics {
			st := kmsg.OffsetFetchResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetFetchResponseTopicPartition()
				sp.Partition = p
				sp.Offset = -1
				sp.Metadata = kmsg.StringPtr("")
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	for _, ft := range fetched {
		st := kmsg.OffsetFetchResponseTopic{Topic: ft.topic}
		for _, fp := range ft.partitions {
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition = fp.partition
			sp.ErrorCode = fillFetched(&sp.Offset, &sp.LeaderEpoch, &sp.Metadata, fp)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// fillFetched sets one partition's answer and returns its error code.
func fillFetched(offset *int64, epoch *int32, metadata **string, fp fetchedPartition) int16 {
	switch {
	case fp.unstable:
		*offset, *epoch, *metadata = -1, -1, kmsg.StringPtr("")
		return errUnstableOffsetCommit
	case !fp.found:
		*offset, *epoch, *metadata = -1, -1, kmsg.StringPtr("")
	default:
		*offset, *epoch, *metadata = fp.o.offset, fp.o.leaderEpoch, kmsg.StringPtr(fp.o.metadata)
	}
	return 0
}

// fetchOffsets reads group's committed offsets: of the requested partitions
// (topics in order), or of every committed partition when topics is nil.
// With requireStable, partitions with a pending commit are marked unstable.
// member (v9+) is checked against a consumer (KIP-848) group's members.
func (c *Coordinator) fetchOffsets(groupID string, order []string, topics map[string][]int32, requireStable bool, member *fetchMember) ([]fetchedTopic, int16) {
	g, code := c.lookup(groupID, false)
	if code != 0 {
		return nil, code
	}
	var offsets map[topicPartition]offsetEntry
	unstable := func(topicPartition) bool { return false }
	if g != nil {
		g.mu.Lock()
		defer g.mu.Unlock()
		if code := g.unloadCode; code != 0 {
			return nil, code
		}
		if g.cg != nil && member != nil {
			if code := validateConsumerFetch(g.cg, member.id, member.epoch); code != 0 {
				return nil, code
			}
		}
		if g.state != stateDead {
			offsets = g.offsets
			if requireStable {
				unstable = g.unstableLocked
			}
		}
	}
	if topics == nil {
		var out []fetchedTopic
		for _, tp := range sortedPartitions(offsets) {
			if len(out) == 0 || out[len(out)-1].topic != tp.topic {
				out = append(out, fetchedTopic{topic: tp.topic})
			}
			ft := &out[len(out)-1]
			ft.partitions = append(ft.partitions, fetchedPartition{partition: tp.partition, o: offsets[tp], found: true, unstable: unstable(tp)})
		}
		return out, 0
	}
	out := make([]fetchedTopic, 0, len(order))
	for _, t := range order {
		ft := fetchedTopic{topic: t}
		for _, p := range topics[t] {
			tp := topicPartition{t, p}
			o, ok := offsets[tp]
			ft.partitions = append(ft.partitions, fetchedPartition{partition: p, o: o, found: ok, unstable: unstable(tp)})
		}
		out = append(out, ft)
	}
	return out, 0
}
