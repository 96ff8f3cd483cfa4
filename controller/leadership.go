package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ISRChange is one partition's ISR change a leader asks for (Kafka's
// AlterPartition item): the topic by id (v2+; Topic may then be empty) or,
// from older requests, by name alone (TopicID zero).
type ISRChange struct {
	Topic          string
	TopicID        [16]byte
	Partition      int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// ISRResult is the outcome of one ISRChange: the partition's state as
// stored (the current one when the change was refused) and why it was
// refused.
type ISRResult struct {
	State PartitionState
	Err   error
}

// alterISRs changes partitions' ISRs at their leader's request (Kafka's
// AlterPartition), all in one step: one write of the changed states, one
// view. For each change only the current leader, at the current leader
// epoch and partition epoch, may change the ISR; the leader stays in it; a
// replica joins only if it is assigned and eligible. A change naming a
// topic id (every kbroker leader's does) applies only to that incarnation
// of the topic: the leader of a deleted topic cannot change the ISR of a
// new topic of the same name, whose epochs start over. Batching is what
// keeps a broker's return cheap: its thousands of partitions rejoin their
// ISRs in a few views, not one view each.
func (a *active) alterISRs(leader int32, changes []ISRChange) ([]ISRResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	isLive, isEligible := a.liveAndEligibleLocked()
	next := a.md.clone()
	results := make([]ISRResult, len(changes))
	var updates []zk.PartitionUpdate
	changed := map[zk.TopicPartition]int{} // partition -> index of its change
	for i, ch := range changes {
		topic, t := ch.Topic, next.Topics[ch.Topic]
		if ch.TopicID != ([16]byte{}) {
			byID, ok := next.TopicByID(ch.TopicID)
			if !ok || (topic != "" && byID.Name != topic) {
				results[i].Err = fmt.Errorf("%w: no topic with id %x", kerr.UnknownTopicID, ch.TopicID)
				continue
			}
			t, topic = byID, byID.Name
		}
		if t == nil || ch.Partition < 0 || int(ch.Partition) >= len(t.Partitions) {
			results[i].Err = kerr.UnknownTopicOrPartition
			continue
		}
		tp := zk.TopicPartition{Topic: topic, Partition: ch.Partition}
		cur := t.Partitions[ch.Partition]
		if _, dup := changed[tp]; dup {
			results[i] = ISRResult{State: cur, Err: fmt.Errorf("%s: %w: the partition is named twice in one request", tp, kerr.InvalidRequest)}
			continue
		}
		// A replica on a failed log dir is not eligible either
		// (logdirs.go).
		_, eligible := a.replicaPredicatesLocked(topic, ch.Partition, isLive, isEligible)
		if err := checkISRChange(cur, a.zkVersions[tp], leader, ch.LeaderEpoch, ch.PartitionEpoch, ch.ISR, eligible); err != nil {
			results[i] = ISRResult{State: cur, Err: fmt.Errorf("%s: %w", tp, err)}
			continue
		}
		np := &t.Partitions[ch.Partition]
		np.ISR = slices.Clone(ch.ISR)
		updates = append(updates, a.stateUpdateLocked(tp, *np))
		changed[tp] = i
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
	reassigned := false
	for tp, i := range changed {
		ps := next.Topics[tp.Topic].Partitions[tp.Partition]
		results[i].State = ps
		a.c.logger.Info("ISR changed", "partition", tp.String(), "new_isr", ps.ISR, "partition_epoch", ps.PartitionEpoch)
		reassigned = reassigned || reassignmentComplete(ps)
	}
	if reassigned {
		// A leader took the last target replica into the ISR: the
		// reassignment completes now. Leaders are answered with the
		// ISR they asked for; the completion reaches them as a view.
		if err := a.completeReassignmentsLocked(ctx); err != nil {
			a.c.logger.Error("completing a reassignment failed", "err", err)
		}
	}
	return results, nil
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
