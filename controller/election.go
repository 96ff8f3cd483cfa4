package controller

import "slices"

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
	next = PartitionState{Replicas: ps.Replicas, Leader: ps.Leader, LeaderEpoch: ps.LeaderEpoch, ISR: ps.ISR, PartitionEpoch: ps.PartitionEpoch}
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
