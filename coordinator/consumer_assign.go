package coordinator

// Server-side assignors of consumer groups (group.consumer.assignors):
// "uniform" (the default, Kafka's UniformAssignor) and "range" (Kafka's
// RangeAssignor). Both are pure functions of the members' subscriptions,
// the subscribed topics and the previous target assignment; they are
// table-tested in consumer_assign_test.go.
//
// uniform: every subscribed partition goes to one of its subscribers;
// members keep the partitions they had while they stay subscribed and under
// the balanced share, the rest go to the least loaded subscriber, and a
// final pass moves partitions until no subscriber of a partition has two
// fewer partitions than its owner. With identical subscriptions the counts
// differ by at most one (Kafka's OptimizedUniformAssignmentBuilder); with
// different ones the result is balanced as far as subscriptions allow
// (UniformHeterogeneousAssignmentBuilder). Kafka's exact choice among equal
// candidates is not reproduced: ties go to the smallest member id.
//
// range: per topic, the subscribers sorted by member id get contiguous
// ranges, the first numPartitions % subscribers one partition more, so
// topics with equal partition counts are co-partitioned. Unlike Kafka's
// sticky variant the ranges are recomputed each time.

import "sort"

// Assignor names (ConsumerGroupHeartbeat's ServerAssignor).
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// assignFunc computes a target assignment: subs is member id -> subscribed
// topic names, topics the subscribed topics that exist, current the
// previous target. Every member of subs is in the result.
type assignFunc func(subs map[string]map[string]struct{}, topics map[string]topicMeta, current map[string]tpSet) map[string]tpSet

func assignorByName(name string) assignFunc {
	switch name {
	case AssignorUniform:
		return assignUniform
	case AssignorRange:
		return assignRange
	}
	return nil
}

type assignTP struct {
	topic string
	id    [16]byte
	p     int32
}

// subscribedPartitions lists, in topic name then partition order, every
// partition of topics with at least one subscriber, and each topic's
// subscribers (sorted member ids).
func subscribedPartitions(subs map[string]map[string]struct{}, topics map[string]topicMeta) ([]assignTP, map[string][]string) {
	subscribers := map[string][]string{}
	for _, id := range sortedKeys(subs) {
		for t := range subs[id] {
			if _, ok := topics[t]; ok {
				subscribers[t] = append(subscribers[t], id)
			}
		}
	}
	var tps []assignTP
	for _, t := range sortedKeys(subscribers) {
		sort.Strings(subscribers[t])
		tm := topics[t]
		for p := int32(0); p < tm.partitions; p++ {
			tps = append(tps, assignTP{topic: t, id: tm.id, p: p})
		}
	}
	return tps, subscribers
}

func assignUniform(subs map[string]map[string]struct{}, topics map[string]topicMeta, current map[string]tpSet) map[string]tpSet {
	out := make(map[string]tpSet, len(subs))
	for id := range subs {
		out[id] = tpSet{}
	}
	tps, subscribers := subscribedPartitions(subs, topics)
	if len(subs) == 0 || len(tps) == 0 {
		return out
	}
	type key struct {
		id [16]byte
		p  int32
	}
	valid := make(map[key]string, len(tps)) // partition -> topic name
	for _, tp := range tps {
		valid[key{tp.id, tp.p}] = tp.topic
	}
	owner := make(map[key]string, len(tps))
	count := map[string]int{}
	maxQuota := (len(tps) + len(subs) - 1) / len(subs)

	// 1. Stickiness: members keep what they had, while still subscribed
	// and up to the balanced share.
	for _, mid := range sortedKeys(subs) {
		cur := current[mid]
		for _, tid := range cur.topicIDs() {
			for _, p := range cur[tid] {
				k := key{tid, p}
				t, ok := valid[k]
				if !ok || owner[k] != "" || count[mid] >= maxQuota {
					continue
				}
				if _, sub := subs[mid][t]; !sub {
					continue
				}
				owner[k] = mid
				count[mid]++
			}
		}
	}
	// 2. The rest to the least loaded subscriber.
	for _, tp := range tps {
		k := key{tp.id, tp.p}
		if owner[k] != "" {
			continue
		}
		best := ""
		for _, mid := range subscribers[tp.topic] {
			if best == "" || count[mid] < count[best] {
				best = mid
			}
		}
		owner[k] = best
		count[best]++
	}
	// 3. Balance: move a partition to a subscriber that has at least two
	// fewer, until none can move. Each move lowers the sum of squared
	// counts, so this ends.
	for moved := true; moved; {
		moved = false
		for _, tp := range tps {
			k := key{tp.id, tp.p}
			from := owner[k]
			best := ""
			for _, mid := range subscribers[tp.topic] {
				if count[mid]+1 < count[from] && (best == "" || count[mid] < count[best]) {
					best = mid
				}
			}
			if best != "" {
				owner[k] = best
				count[from]--
				count[best]++
				moved = true
			}
		}
	}
	for k, mid := range owner {
		out[mid].add(k.id, k.p)
	}
	return out
}

func assignRange(subs map[string]map[string]struct{}, topics map[string]topicMeta, _ map[string]tpSet) map[string]tpSet {
	out := make(map[string]tpSet, len(subs))
	for id := range subs {
		out[id] = tpSet{}
	}
	_, subscribers := subscribedPartitions(subs, topics)
	for t, members := range subscribers {
		tm := topics[t]
		n, k := int(tm.partitions), len(members)
		minQuota, extra := n/k, n%k
		start := 0
		for i, mid := range members {
			q := minQuota
			if i < extra {
				q++
			}
			for p := start; p < start+q; p++ {
				out[mid].add(tm.id, int32(p))
			}
			start += q
		}
	}
	return out
}
