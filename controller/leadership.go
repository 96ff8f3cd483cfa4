package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/twmb/franz-go/pkg/kerr"
)

// alterISR changes a partition's ISR at its leader's request (Kafka's
// AlterPartition): only the current leader, at the current leader epoch and
// partition epoch, may change it; the leader stays in it; a replica joins
// only if it is assigned and alive. A request naming a topic id (every
// kbroker leader's does) applies only to that incarnation of the topic: the
// leader of a deleted topic cannot change the ISR of a new topic of the
// same name, whose epochs start over.
func (a *active) alterISR(leader int32, topic string, topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, isr []int32) (PartitionState, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.md.Topics[topic]
	if topicID != ([16]byte{}) {
		byID, ok := a.md.TopicByID(topicID)
		if !ok || (topic != "" && byID.Name != topic) {
			return PartitionState{}, fmt.Errorf("%w: no topic with id %x", kerr.UnknownTopicID, topicID)
		}
		t, topic = byID, byID.Name
	}
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return PartitionState{}, kerr.UnknownTopicOrPartition
	}
	cur := t.Partitions[partition]
	tp := zk.TopicPartition{Topic: topic, Partition: partition}
	_, eligible := a.replicaPredicatesLocked(topic, partition, nil, nil)
	if err := checkISRChange(cur, a.zkVersions[tp], leader, leaderEpoch, partitionEpoch, isr, eligible); err != nil {
		return cur, fmt.Errorf("%s: %w", tp, err)
	}
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	next := a.md.clone()
	np := &next.Topics[topic].Partitions[partition]
	np.ISR = slices.Clone(isr)
	if err := a.writeStatesLocked(ctx, next, []zk.PartitionUpdate{a.stateUpdateLocked(tp, *np)}); err != nil {
		return cur, err
	}
	a.publishLocked(next)
	a.c.logger.Info("ISR changed", "partition", tp.String(), "isr", cur.ISR, "new_isr", np.ISR)
	changed := next.Topics[topic].Partitions[partition]
	if reassignmentComplete(changed) {
		// The leader took the last target replica into the ISR: the
		// reassignment completes now. The leader is answered with the
		// ISR it asked for; the completion reaches it as a new view.
		if err := a.completeReassignmentsLocked(ctx); err != nil {
			a.c.logger.Error("completing a reassignment failed", "partition", tp.String(), "err", err)
		}
	}
	return changed, nil
}

// controlledShutdown moves leadership off a broker that is stopping (Kafka's
// ControlledShutdown): every partition it leads gets a new leader from the
// rest of its ISR, and it leaves the ISR of partitions it follows, so
// clients see NOT_LEADER_OR_FOLLOWER and move on instead of timing out. It
// returns how many partitions it still leads (no other ISR member).
func (a *active) controlledShutdown(id int32) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.shuttingDown[id] = true
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	next := a.md.clone()
	var updates []zk.PartitionUpdate
	for _, t := range next.Topics {
		for p := range t.Partitions {
			moved, changed := shutdownMove(t.Partitions[p], id, func(r int32) bool { return a.shuttingDown[r] })
			if !changed {
				continue
			}
			t.Partitions[p] = moved
			tp := zk.TopicPartition{Topic: t.Name, Partition: int32(p)}
			updates = append(updates, a.stateUpdateLocked(tp, moved))
		}
	}
	if err := a.writeStatesLocked(ctx, next, updates); err != nil {
		return -1, err
	}
	a.publishLocked(next)
	remaining := next.partitionsLedBy(id)
	a.c.logger.Info("controlled shutdown", "broker", id, "moved", len(updates), "still_leading", remaining)
	return remaining, nil
}

// ElectionResult is the outcome of a leader election for one partition.
type ElectionResult struct {
	Topic     string
	Partition int32
	Err       error // nil when elected
}

// electLeaders runs preferred (or, for offline partitions, unclean)
// elections, as Kafka's ElectLeaders: preferred moves leadership to the
// first assigned replica when it is alive and in the ISR. partitions nil
// means every partition; then partitions needing no change are left out of
// the results.
func (a *active) electLeaders(preferred bool, partitions []zk.TopicPartition) ([]ElectionResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	all := partitions == nil
	if all {
		for _, t := range a.md.Topics {
			for p := range t.Partitions {
				partitions = append(partitions, zk.TopicPartition{Topic: t.Name, Partition: int32(p)})
			}
		}
	}
	isLive, isEligible := a.liveAndEligibleLocked()
	next := a.md.clone()
	var results []ElectionResult
	var updates []zk.PartitionUpdate
	for _, tp := range partitions {
		res := ElectionResult{Topic: tp.Topic, Partition: tp.Partition}
		t := next.Topics[tp.Topic]
		if t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			res.Err = kerr.UnknownTopicOrPartition
			results = append(results, res)
			continue
		}
		ps := &t.Partitions[tp.Partition]
		_, eligible := a.replicaPredicatesLocked(tp.Topic, tp.Partition, isLive, isEligible)
		if preferred {
			var elected PartitionState
			if elected, res.Err = preferredElection(*ps, eligible); res.Err == nil {
				*ps = elected
			}
		} else {
			if ps.Leader >= 0 && eligible(ps.Leader) {
				res.Err = kerr.ElectionNotNeeded
			} else if elected, changed := electLeader(*ps, eligible, eligible, true); changed && elected.Leader >= 0 {
				if !slices.Contains(ps.ISR, elected.Leader) {
					a.c.UncleanElections.Add(1)
					a.c.logger.Warn("unclean leader election: records the new leader lacks are lost",
						"topic", tp.Topic, "partition", tp.Partition, "new_leader", elected.Leader, "old_isr", ps.ISR)
				}
				*ps = elected
			} else {
				res.Err = kerr.EligibleLeadersNotAvailable
			}
		}
		if res.Err == nil {
			updates = append(updates, a.stateUpdateLocked(tp, *ps))
		}
		if !all || res.Err == nil {
			results = append(results, res)
		}
	}
	if len(updates) == 0 {
		return results, nil
	}
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	if err := a.writeStatesLocked(ctx, next, updates); err != nil {
		return nil, err
	}
	a.publishLocked(next)
	a.c.logger.Info("leader election", "preferred", preferred, "moved", len(updates))
	return results, nil
}

// rebalanceLeaders periodically moves leadership back to preferred
// replicas (auto.leader.rebalance.enable).
func (a *active) rebalanceLeaders(every time.Duration) {
	defer a.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
			if _, err := a.electLeaders(true, nil); err != nil && a.ctx.Err() == nil {
				a.c.logger.Warn("preferred leader election failed", "err", err)
			}
		}
	}
}
