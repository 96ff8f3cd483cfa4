package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Partition reassignment as Kafka 3.x's controller does it (KIP-455):
// a reassignment of a partition from its original replicas (ORS) to target
// replicas (TRS) first makes the assignment the union, target first
// (Replicas), with the replicas being added and removed named beside it;
// the added replicas then fetch from the leader as followers until the
// leader takes them into the ISR; once every target replica is in the ISR
// the controller completes it in one state change: Replicas becomes TRS,
// the removed replicas leave the ISR (and delete their data on their next
// view), and the leader moves when it is not a target replica. The
// assignment znode carries adding_replicas and removing_replicas as Kafka
// writes them, so a new controller resumes a reassignment where the old
// one left it.

// ReassignRequest asks to move one partition's replicas to Replicas; nil
// Replicas cancels the partition's ongoing reassignment
// (AlterPartitionReassignments).
type ReassignRequest struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// Reassignment is one partition's ongoing reassignment, as
// ListPartitionReassignments reports it: Replicas is the whole current
// set, target and original together.
type Reassignment struct {
	Topic            string
	Partition        int32
	Replicas         []int32
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// without returns the members of from not in drop, in from's order.
func without(from, drop []int32) []int32 {
	var out []int32
	for _, r := range from {
		if !slices.Contains(drop, r) {
			out = append(out, r)
		}
	}
	return out
}

// originReplicas are the replicas the partition had before its ongoing
// reassignment (all of them when there is none).
func originReplicas(ps PartitionState) []int32 { return without(ps.Replicas, ps.AddingReplicas) }

// targetReplicas are the replicas the partition's ongoing reassignment
// moves it to (all of them when there is none).
func targetReplicas(ps PartitionState) []int32 { return without(ps.Replicas, ps.RemovingReplicas) }

// reassignTo is the partition's assignment once a reassignment to target
// starts (Kafka's ReplicaAssignment.reassignTo): the target and the
// original replicas, target first, the difference named as adding and
// removing. A reassignment over an ongoing one keeps the first one's
// original replicas; a reassignment to the original replicas (a
// cancellation) leaves no reassignment. Leadership and ISR are not
// touched (see dropUnneeded).
func reassignTo(ps PartitionState, target []int32) PartitionState {
	origin := originReplicas(ps)
	full := slices.Clone(target)
	for _, r := range origin {
		if !slices.Contains(full, r) {
			full = append(full, r)
		}
	}
	next := ps
	next.Replicas = full
	next.AddingReplicas = without(full, origin)
	next.RemovingReplicas = without(full, target)
	return next
}

// validateReassignment checks a target replica list as Kafka's controller
// does (validateReplicas), against the partition's current assignment cur
// (zero for a partition that does not exist): not empty, no duplicates,
// no negative ids, and every replica it adds on a live broker not
// shutting down.
func validateReassignment(cur PartitionState, target []int32, eligible func(int32) bool) error {
	if len(target) == 0 {
		return fmt.Errorf("%w: empty replica list specified in partition reassignment", kerr.InvalidReplicaAssignment)
	}
	for i, r := range target {
		if slices.Contains(target[:i], r) {
			return fmt.Errorf("%w: duplicate replica ids in partition reassignment replica list: %v", kerr.InvalidReplicaAssignment, target)
		}
		if r < 0 {
			return fmt.Errorf("%w: invalid broker id in replica list: %v", kerr.InvalidReplicaAssignment, target)
		}
	}
	for _, r := range reassignTo(cur, target).AddingReplicas {
		if !eligible(r) {
			return fmt.Errorf("%w: replica assignment has brokers that are not alive: adding %v, broker %d is not live",
				kerr.InvalidReplicaAssignment, reassignTo(cur, target).AddingReplicas, r)
		}
	}
	return nil
}

// dropUnneeded takes the replicas of cur that next no longer assigns (the
// added replicas of a reassignment that was cancelled or replaced) out of
// the ISR, as Kafka's updateCurrentReassignment stops them; a leader among
// them hands leadership to the first of next's replicas in the ISR that
// may lead. The leader epoch rises when the leader changes or the ISR
// loses a member, so the dropped replicas are fenced. It fails, changing
// nothing, when no ISR member would remain: the dropped replicas hold the
// only copies of the partition's acknowledged records.
func dropUnneeded(cur, next PartitionState, eligible func(int32) bool) (PartitionState, error) {
	unneeded := without(cur.Replicas, next.Replicas)
	if len(unneeded) == 0 {
		return next, nil
	}
	isr := without(cur.ISR, unneeded)
	if len(isr) == 0 {
		return cur, fmt.Errorf("%w: replicas %v hold the only in-sync copies (ISR %v); the change would lose acknowledged records",
			kerr.InvalidReplicaAssignment, unneeded, cur.ISR)
	}
	leader := cur.Leader
	if slices.Contains(unneeded, leader) {
		leader = -1
		for _, r := range next.Replicas {
			if slices.Contains(isr, r) && eligible(r) {
				leader = r
				break
			}
		}
	}
	next.ISR = isr
	if leader != cur.Leader || len(isr) != len(cur.ISR) {
		next.Leader = leader
		next.LeaderEpoch = cur.LeaderEpoch + 1
	}
	return next, nil
}

// reassignmentComplete reports whether the partition's ongoing
// reassignment can complete: every target replica is in the ISR (Kafka's
// isReassignmentComplete).
func reassignmentComplete(ps PartitionState) bool {
	if !ps.Reassigning() {
		return false
	}
	for _, r := range targetReplicas(ps) {
		if !slices.Contains(ps.ISR, r) {
			return false
		}
	}
	return true
}

// completeReassignment is the partition's state once its reassignment
// completes (Kafka's onPartitionReassignment B2-B5): the assignment is the
// target, the removed replicas leave the ISR, and the leader stays when it
// is a live target replica, else the first target replica in the ISR that
// may lead takes over (ReassignPartitionLeaderElection). The leader epoch
// rises when the leader changes or replicas were removed, fencing them.
// ok is false when no target replica can lead yet: the reassignment then
// waits for the next broker change.
func completeReassignment(ps PartitionState, live, eligible func(int32) bool) (next PartitionState, ok bool) {
	target := targetReplicas(ps)
	next = ps
	next.Replicas = target
	next.AddingReplicas, next.RemovingReplicas = nil, nil
	next.ISR = without(ps.ISR, ps.RemovingReplicas)
	if !slices.Contains(target, ps.Leader) || !live(ps.Leader) {
		next.Leader = -1
		for _, r := range target {
			if slices.Contains(next.ISR, r) && eligible(r) {
				next.Leader = r
				break
			}
		}
		if next.Leader < 0 {
			return ps, false
		}
	}
	if next.Leader != ps.Leader || len(ps.RemovingReplicas) > 0 {
		next.LeaderEpoch = ps.LeaderEpoch + 1
	}
	return next, true
}

// assignmentOf is the topic's /brokers/topics/<t> content.
func assignmentOf(t *Topic) zk.TopicAssignment {
	a := zk.TopicAssignment{ID: zk.TopicID(t.ID), Partitions: map[int32][]int32{}, AddingReplicas: map[int32][]int32{}, RemovingReplicas: map[int32][]int32{}}
	for p, ps := range t.Partitions {
		a.Partitions[int32(p)] = slices.Clone(ps.Replicas)
		if len(ps.AddingReplicas) > 0 {
			a.AddingReplicas[int32(p)] = slices.Clone(ps.AddingReplicas)
		}
		if len(ps.RemovingReplicas) > 0 {
			a.RemovingReplicas[int32(p)] = slices.Clone(ps.RemovingReplicas)
		}
	}
	return a
}

// alterReassignments starts, replaces or cancels reassignments, one
// result per request (nil: accepted). Accepted reassignments are written
// to the assignment znodes and published; those already complete (a
// lowered replication factor, a cancellation) complete at once.
func (a *active) alterReassignments(reqs []ReassignRequest) ([]error, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, eligible := a.liveAndEligibleLocked()
	next := a.md.clone()
	results := make([]error, len(reqs))
	byTopic := map[string][]int{} // accepted requests per topic
	var stateUpdates []zk.PartitionUpdate
	for i, r := range reqs {
		t := next.Topics[r.Topic]
		exists := t != nil && r.Partition >= 0 && int(r.Partition) < len(t.Partitions)
		var cur PartitionState
		if exists {
			cur = t.Partitions[r.Partition]
		}
		target := r.Replicas
		if target != nil {
			if err := validateReassignment(cur, target, eligible); err != nil {
				results[i] = err
				continue
			}
		}
		if !exists {
			results[i] = fmt.Errorf("%w: the partition %s-%d does not exist", kerr.UnknownTopicOrPartition, r.Topic, r.Partition)
			continue
		}
		if target == nil {
			if !cur.Reassigning() {
				results[i] = fmt.Errorf("%w: %s-%d", kerr.NoReassignmentInProgress, r.Topic, r.Partition)
				continue
			}
			target = originReplicas(cur)
		}
		moved, err := dropUnneeded(cur, reassignTo(cur, target), eligible)
		if err != nil {
			results[i] = err
			continue
		}
		t.Partitions[r.Partition] = moved
		byTopic[r.Topic] = append(byTopic[r.Topic], i)
		if moved.Leader != cur.Leader || moved.LeaderEpoch != cur.LeaderEpoch || !slices.Equal(moved.ISR, cur.ISR) {
			stateUpdates = append(stateUpdates, a.stateUpdateLocked(zk.TopicPartition{Topic: r.Topic, Partition: r.Partition}, moved))
		}
	}
	if len(byTopic) == 0 {
		return results, nil
	}
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	// The assignment first (Kafka's U1), then the states of replicas
	// dropped from it: a new controller finds either the old assignment,
	// or the new one, whose dropped replicas it takes out of the ISR
	// when it completes the reassignment.
	for _, name := range sortedKeys(byTopic) {
		if err := a.c.store.SetTopicAssignment(ctx, a.epochZkVersion, name, assignmentOf(next.Topics[name])); err != nil {
			err = a.storeErr(err)
			if errors.Is(err, kerr.NotController) {
				return nil, err
			}
			for _, i := range byTopic[name] {
				results[i] = fmt.Errorf("writing the assignment of %s: %w", name, err)
			}
			next.Topics[name] = a.md.clone().Topics[name]
			stateUpdates = slices.DeleteFunc(stateUpdates, func(u zk.PartitionUpdate) bool { return u.Topic == name })
		}
	}
	if err := a.writeStatesLocked(ctx, next, stateUpdates); err != nil {
		return nil, err
	}
	a.publishLocked(next)
	for name, idx := range byTopic {
		for _, i := range idx {
			if results[i] == nil {
				a.c.logger.Info("partition reassignment", "partition", fmt.Sprintf("%s-%d", name, reqs[i].Partition),
					"target", reqs[i].Replicas, "replicas", next.Topics[name].Partitions[reqs[i].Partition].Replicas)
			}
		}
	}
	if err := a.completeReassignmentsLocked(ctx); err != nil {
		return nil, err
	}
	return results, nil
}

// sortedKeys returns m's keys in order, so writes happen in a stable order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// completeReassignmentsLocked completes every ongoing reassignment whose
// target replicas are all in the ISR: the states first (new leader, ISR
// without the removed replicas), then the assignment znodes (Kafka's B3-B6
// order), then the view.
func (a *active) completeReassignmentsLocked(ctx context.Context) error {
	live, eligible := a.liveAndEligibleLocked()
	var next *Metadata
	var updates []zk.PartitionUpdate
	var completed []zk.TopicPartition
	topics := map[string]bool{}
	for name, t := range a.md.Topics {
		for p, ps := range t.Partitions {
			if !reassignmentComplete(ps) {
				continue
			}
			done, ok := completeReassignment(ps, live, eligible)
			if !ok {
				continue
			}
			if next == nil {
				next = a.md.clone()
			}
			next.Topics[name].Partitions[p] = done
			topics[name] = true
			completed = append(completed, zk.TopicPartition{Topic: name, Partition: int32(p)})
			if done.Leader != ps.Leader || done.LeaderEpoch != ps.LeaderEpoch || !slices.Equal(done.ISR, ps.ISR) {
				// A reassignment that only added replicas leaves the
				// state as it is: only the assignment changes.
				updates = append(updates, a.stateUpdateLocked(zk.TopicPartition{Topic: name, Partition: int32(p)}, done))
			}
		}
	}
	if next == nil {
		return nil
	}
	if err := a.writeStatesLocked(ctx, next, updates); err != nil {
		return err
	}
	for _, name := range sortedKeys(topics) {
		if err := a.c.store.SetTopicAssignment(ctx, a.epochZkVersion, name, assignmentOf(next.Topics[name])); err != nil {
			// The states are written: publish them, and a later
			// pass (or a new controller) writes the assignment.
			a.c.logger.Error("writing a completed reassignment failed", "topic", name, "err", err)
			a.publishLocked(next)
			return a.storeErr(err)
		}
	}
	a.publishLocked(next)
	for _, tp := range completed {
		ps := next.Topics[tp.Topic].Partitions[tp.Partition]
		a.c.logger.Info("partition reassignment completed", "partition", tp.String(), "replicas", ps.Replicas,
			"leader", ps.Leader, "leader_epoch", ps.LeaderEpoch, "isr", ps.ISR)
	}
	return nil
}

// listReassignments lists the ongoing reassignments, of every partition
// (partitions nil) or of those named (others, and partitions that do not
// exist, are left out, as Kafka does).
func (a *active) listReassignments(partitions []TopicPartition) []Reassignment {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Reassignment
	add := func(name string, p int32, ps PartitionState) {
		if ps.Reassigning() {
			out = append(out, Reassignment{Topic: name, Partition: p, Replicas: slices.Clone(ps.Replicas),
				AddingReplicas: slices.Clone(ps.AddingReplicas), RemovingReplicas: slices.Clone(ps.RemovingReplicas)})
		}
	}
	if partitions == nil {
		for _, name := range sortedKeys(a.md.Topics) {
			for p, ps := range a.md.Topics[name].Partitions {
				add(name, int32(p), ps)
			}
		}
		return out
	}
	for _, tp := range partitions {
		if t := a.md.Topics[tp.Topic]; t != nil && tp.Partition >= 0 && int(tp.Partition) < len(t.Partitions) {
			add(tp.Topic, tp.Partition, t.Partitions[tp.Partition])
		}
	}
	return out
}

// AlterReassignments starts, replaces or cancels partition reassignments;
// only the controller can. It returns one result per request.
func (c *Cluster) AlterReassignments(reqs []ReassignRequest) ([]error, error) {
	var res []error
	err := c.withActive(func(a *active) error {
		var err error
		res, err = a.alterReassignments(reqs)
		return err
	})
	return res, err
}

// ListReassignments lists ongoing reassignments (of the partitions named,
// or all when nil); only the controller can.
func (c *Cluster) ListReassignments(partitions []TopicPartition) ([]Reassignment, error) {
	var res []Reassignment
	err := c.withActive(func(a *active) error {
		res = a.listReassignments(partitions)
		return nil
	})
	return res, err
}
