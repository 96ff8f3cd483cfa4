package controller

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// electLeader decides a partition's leadership after the set of live
// brokers changed, as Kafka's controller does on broker failure and
// startup (PartitionStateMachine with OfflinePartitionLeaderElection, and
// removeReplicasFromIsr for dead followers):
//   - a live leader stays; dead followers leave the ISR;
//   - otherwise the first live replica (in assignment order) that is in the
//     ISR leads, and the ISR becomes the live ISR members;
//   - otherwise, with unclean election, the first live replica leads with
//     an ISR of itself (its missing suffix is lost);
//   - otherwise the partition is offline: leader -1, and the ISR keeps its
//     members, so it is never empty and the first of them to return leads.
//
// The leader epoch rises whenever the leader changes. changed reports
// whether anything differs from ps.
//
// live says a broker is registered; eligible, that it may become leader
// (live and not in controlled shutdown): a shutting-down leader keeps the
// partitions nobody else can take, so they stay available until it exits.
func electLeader(ps PartitionState, live, eligible func(int32) bool, unclean bool) (next PartitionState, changed bool) {
	next = ps // keeps an ongoing reassignment's adding and removing replicas
	if ps.Leader >= 0 && live(ps.Leader) {
		isr := slices.DeleteFunc(slices.Clone(ps.ISR), func(id int32) bool { return !live(id) })
		if !slices.Contains(isr, ps.Leader) {
			isr = append([]int32{ps.Leader}, isr...)
		}
		next.ISR = isr
		return next, !slices.Equal(isr, ps.ISR)
	}
	newLeader := int32(-1)
	var newISR []int32
	for _, r := range ps.Replicas {
		if eligible(r) && slices.Contains(ps.ISR, r) {
			newLeader = r
			break
		}
	}
	if newLeader >= 0 {
		for _, r := range ps.ISR {
			if live(r) {
				newISR = append(newISR, r)
			}
		}
	} else if unclean {
		for _, r := range ps.Replicas {
			if eligible(r) {
				newLeader, newISR = r, []int32{r}
				break
			}
		}
	}
	if newLeader < 0 {
		// Offline: keep the ISR as it is, so it is never empty and the
		// first of its members to come back is elected.
		if ps.Leader == -1 {
			return next, false
		}
		next.Leader = -1
		next.LeaderEpoch++
		return next, true
	}
	next.Leader, next.ISR = newLeader, newISR
	next.LeaderEpoch++
	return next, true
}

// checkISRChange decides whether a leader's ISR change (Kafka's
// AlterPartition) may be applied to cur, stored at version: only the
// current leader, at the current leader epoch and partition epoch, may
// change it; the leader stays in it; a replica joins only if it is assigned
// and eligible (live and not in controlled shutdown, KIP-841: its followers
// still fetch until it exits, and leaders must not take it back into the
// ISR the shutdown just took it out of).
func checkISRChange(cur PartitionState, version, leader, leaderEpoch, partitionEpoch int32, isr []int32, eligible func(int32) bool) error {
	switch {
	case cur.Leader != leader:
		return fmt.Errorf("%w: broker %d does not lead (leader %d)", kerr.NotLeaderForPartition, leader, cur.Leader)
	case leaderEpoch < cur.LeaderEpoch:
		return fmt.Errorf("%w: at leader epoch %d, request at %d", kerr.FencedLeaderEpoch, cur.LeaderEpoch, leaderEpoch)
	case leaderEpoch > cur.LeaderEpoch:
		return fmt.Errorf("%w: at leader epoch %d, request at %d", kerr.UnknownLeaderEpoch, cur.LeaderEpoch, leaderEpoch)
	case partitionEpoch != version:
		return fmt.Errorf("%w: at partition epoch %d, request at %d", kerr.InvalidUpdateVersion, version, partitionEpoch)
	case !slices.Contains(isr, leader):
		return fmt.Errorf("%w: the new ISR leaves out its leader", kerr.InvalidRequest)
	}
	for _, id := range isr {
		if !slices.Contains(cur.Replicas, id) || (!slices.Contains(cur.ISR, id) && !eligible(id)) {
			return fmt.Errorf("%w: replica %d may not join the ISR", kerr.IneligibleReplica, id)
		}
	}
	return nil
}

// shutdownMove is a partition's state after broker id asked for a
// controlled shutdown: it leaves the ISR, and if it led, the first other
// ISR member (in assignment order) not shutting down leads. A partition id
// is the only ISR member of, or whose leadership nobody can take, stays
// as it is (changed false), so it remains available until id exits.
func shutdownMove(ps PartitionState, id int32, shuttingDown func(int32) bool) (next PartitionState, changed bool) {
	if !slices.Contains(ps.ISR, id) || len(ps.ISR) == 1 {
		return ps, false
	}
	next = ps
	if ps.Leader == id {
		next.Leader = -1
		for _, r := range ps.Replicas {
			if r != id && slices.Contains(ps.ISR, r) && !shuttingDown(r) {
				next.Leader = r
				break
			}
		}
		if next.Leader < 0 {
			return ps, false
		}
		next.LeaderEpoch++
	}
	next.ISR = slices.DeleteFunc(slices.Clone(ps.ISR), func(r int32) bool { return r == id })
	return next, true
}

// preferredElection moves leadership to the partition's preferred replica
// (the first assigned) when it is eligible and in the ISR, as Kafka's
// PreferredReplicaPartitionLeaderElection.
func preferredElection(ps PartitionState, eligible func(int32) bool) (PartitionState, error) {
	want := ps.Replicas[0]
	switch {
	case ps.Leader == want:
		return ps, kerr.ElectionNotNeeded
	case !eligible(want) || !slices.Contains(ps.ISR, want):
		return ps, kerr.PreferredLeaderNotAvailable
	}
	ps.Leader = want
	ps.LeaderEpoch++
	return ps, nil
}
