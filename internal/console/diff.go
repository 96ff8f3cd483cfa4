package console

import (
	"fmt"
	"slices"
	"time"
)

// Diff returns the timeline entries that take the cluster from old to
// next (Seq unset), at time now: brokers joining and dying, controller
// changes, topics created and deleted, leader elections (clean, unclean:
// the new leader was not in the ISR, preferred: back to the first replica
// while the previous leader lives), partitions going offline, ISR shrinks
// and expansions. A nil old gives nothing: a console just started knows
// no history.
func Diff(old, next *Snapshot) []Event {
	if old == nil || next == nil {
		return nil
	}
	now := next.Time
	var out []Event
	add := func(e Event) {
		e.Time = now
		out = append(out, e)
	}
	oldAlive := aliveSet(old)
	newAlive := aliveSet(next)
	for _, b := range next.Brokers {
		if b.Alive && !oldAlive[b.ID] {
			add(Event{Kind: EventBrokerJoined, Broker: b.ID, Partition: -1, Text: fmt.Sprintf("broker %d joined", b.ID)})
		}
	}
	for _, b := range old.Brokers {
		if b.Alive && !newAlive[b.ID] {
			add(Event{Kind: EventBrokerDied, Broker: b.ID, Partition: -1, Text: fmt.Sprintf("broker %d left the cluster (died or shut down)", b.ID)})
		}
	}
	if old.ControllerID != next.ControllerID {
		add(Event{Kind: EventControllerChanged, Broker: next.ControllerID, Partition: -1,
			Text: fmt.Sprintf("controller changed from %s to %s", brokerName(old.ControllerID), brokerName(next.ControllerID))})
	}
	oldTopics := map[string]*Topic{}
	for i := range old.Topics {
		oldTopics[old.Topics[i].Name] = &old.Topics[i]
	}
	seen := map[string]bool{}
	for _, t := range next.Topics {
		seen[t.Name] = true
		ot := oldTopics[t.Name]
		if ot == nil {
			add(Event{Kind: EventTopicCreated, Topic: t.Name, Partition: -1, Text: fmt.Sprintf("topic %s created with %d partitions", t.Name, len(t.Partitions))})
			continue
		}
		for _, p := range t.Partitions {
			if int(p.Partition) >= len(ot.Partitions) {
				continue // a new partition: no history
			}
			out = append(out, diffPartition(t.Name, ot.Partitions[p.Partition], p, oldAlive, now)...)
		}
	}
	for _, t := range old.Topics {
		if !seen[t.Name] {
			add(Event{Kind: EventTopicDeleted, Topic: t.Name, Partition: -1, Text: fmt.Sprintf("topic %s deleted", t.Name)})
		}
	}
	return out
}

// diffPartition is Diff for one partition.
func diffPartition(topic string, old, next Partition, oldAlive map[int32]bool, now time.Time) []Event {
	var out []Event
	add := func(kind string, broker int32, text string) {
		out = append(out, Event{Time: now, Kind: kind, Topic: topic, Partition: next.Partition, Broker: broker, Text: text})
	}
	name := fmt.Sprintf("%s-%d", topic, next.Partition)
	if next.Leader != old.Leader {
		switch {
		case next.Leader < 0:
			add(EventOffline, old.Leader, fmt.Sprintf("%s offline: leader %d gone, no replica in the ISR %v to elect", name, old.Leader, old.ISR))
		case !slices.Contains(old.ISR, next.Leader):
			add(EventUncleanElection, next.Leader, fmt.Sprintf("%s: UNCLEAN election of broker %d (not in the ISR %v), leader epoch %d; records it lacked are lost", name, next.Leader, old.ISR, next.LeaderEpoch))
		case old.Leader >= 0 && oldAlive[old.Leader] && len(next.Replicas) > 0 && next.Replicas[0] == next.Leader:
			add(EventPreferredElection, next.Leader, fmt.Sprintf("%s: preferred leader %d elected (was %d), leader epoch %d", name, next.Leader, old.Leader, next.LeaderEpoch))
		default:
			add(EventElection, next.Leader, fmt.Sprintf("%s: leader %s -> %d (clean, from the ISR), leader epoch %d", name, brokerName(old.Leader), next.Leader, next.LeaderEpoch))
		}
	}
	var removed, added []int32
	for _, id := range old.ISR {
		if !slices.Contains(next.ISR, id) {
			removed = append(removed, id)
		}
	}
	for _, id := range next.ISR {
		if !slices.Contains(old.ISR, id) {
			added = append(added, id)
		}
	}
	if len(removed) > 0 {
		add(EventISRShrink, removed[0], fmt.Sprintf("%s ISR shrank %v -> %v (out of sync: %v)", name, old.ISR, next.ISR, removed))
	}
	if len(added) > 0 {
		add(EventISRExpand, added[0], fmt.Sprintf("%s ISR expanded %v -> %v (caught up: %v)", name, old.ISR, next.ISR, added))
	}
	return out
}

func aliveSet(s *Snapshot) map[int32]bool {
	m := make(map[int32]bool, len(s.Brokers))
	for _, b := range s.Brokers {
		if b.Alive {
			m[b.ID] = true
		}
	}
	return m
}

func brokerName(id int32) string {
	if id < 0 {
		return "none"
	}
	return fmt.Sprintf("%d", id)
}
