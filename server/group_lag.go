package server

import (
	"context"
	"slices"
	"strings"

	"github.com/kbroker/kbroker/replica"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupSummary is one consumer group this broker coordinates, as the
// metrics (lag, the figure Burrow is installed for) and the console show
// it.
type groupSummary struct {
	Group        string
	State        string
	ProtocolType string
	Protocol     string
	Members      []groupMemberSummary
	Offsets      []groupOffset // sorted by topic, partition
}

type groupMemberSummary struct {
	MemberID, ClientID, ClientHost string
	// Assigned is the member's assignment when the group uses the
	// consumer protocol: topic -> partitions.
	Assigned map[string][]int32
}

// groupOffset is a committed offset and the lag behind the partition's
// end (the high watermark: what a consumer can read).
type groupOffset struct {
	Topic     string
	Partition int32
	Committed int64
	// End is the partition's high watermark as this broker knows it
	// (its leader's, or a follower's slightly older one), -1 when no
	// replica of the partition is here; Lag is End - Committed (never
	// below 0), -1 with End.
	End, Lag int64
}

// groupSummaries describes the groups this broker coordinates, through the
// coordinator's own request handlers (nothing is kept twice).
func (b *Broker) groupSummaries(ctx context.Context) []groupSummary {
	if b.groups == nil {
		return nil
	}
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.Version = 4
	list := b.groups.ListGroups(ctx, lreq)
	names := make([]string, 0, len(list.Groups))
	for _, g := range list.Groups {
		names = append(names, g.Group)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return nil
	}
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Version = 5
	dreq.Groups = names
	described := map[string]kmsg.DescribeGroupsResponseGroup{}
	for _, g := range b.groups.DescribeGroups(ctx, dreq).Groups {
		described[g.Group] = g
	}
	out := make([]groupSummary, 0, len(names))
	for _, name := range names {
		d := described[name]
		gs := groupSummary{Group: name, State: d.State, ProtocolType: d.ProtocolType, Protocol: d.Protocol}
		for _, m := range d.Members {
			ms := groupMemberSummary{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
			if d.ProtocolType == "consumer" && len(m.MemberAssignment) > 0 {
				var a kmsg.ConsumerMemberAssignment
				if a.ReadFrom(m.MemberAssignment) == nil {
					ms.Assigned = map[string][]int32{}
					for _, t := range a.Topics {
						ms.Assigned[t.Topic] = append(ms.Assigned[t.Topic], t.Partitions...)
					}
				}
			}
			gs.Members = append(gs.Members, ms)
		}
		freq := kmsg.NewPtrOffsetFetchRequest()
		freq.Version = 7
		freq.Group = name
		freq.Topics = nil // all committed offsets
		for _, t := range b.groups.OffsetFetch(ctx, freq).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 || p.Offset < 0 {
					continue
				}
				gs.Offsets = append(gs.Offsets, b.groupOffset(t.Topic, p.Partition, p.Offset))
			}
		}
		slices.SortFunc(gs.Offsets, func(x, y groupOffset) int {
			if c := strings.Compare(x.Topic, y.Topic); c != 0 {
				return c
			}
			return int(x.Partition - y.Partition)
		})
		out = append(out, gs)
	}
	return out
}

func (b *Broker) groupOffset(topic string, partition int32, committed int64) groupOffset {
	o := groupOffset{Topic: topic, Partition: partition, Committed: committed, End: -1, Lag: -1}
	if p, ok := b.replicas.Get(replica.TopicPartition{Topic: topic, Partition: partition}); ok {
		o.End = p.State().HighWatermark
		o.Lag = max(o.End-committed, 0)
	}
	return o
}
