package coordinator

// Incremental reconciliation of one member towards its target assignment:
// Kafka 4.0's CurrentAssignmentBuilder, as a pure function (table-tested in
// consumer_reconcile_test.go).
//
// A partition moves in two steps. Its owner first gets an assignment
// without it and stays in its epoch in UNREVOKED_PARTITIONS until a
// heartbeat no longer lists it among the owned partitions; only then is the
// partition free, and the member it moves to, which waited in
// UNRELEASED_PARTITIONS (at the new epoch, with the rest of its target),
// gets it on its next heartbeat. So no partition is ever owned by two
// members at once.

import "errors"

// errReconcileFenced: a member in an UNKNOWN state that still reports
// partitions must abandon them and rejoin (FENCED_MEMBER_EPOCH).
var errReconcileFenced = errors.New("member in an unknown state must rejoin without partitions")

// reconcileInput is what CurrentAssignmentBuilder looks at.
type reconcileInput struct {
	member      *cgMember // not modified
	targetEpoch int32
	target      tpSet
	// owners: every partition owned (assigned or pending revocation) by
	// another member, with that member's epoch (partitionOwners).
	owners map[[16]byte]map[int32]int32
	// owned: the partitions the member reported in this heartbeat; nil when
	// the heartbeat did not carry them.
	owned tpSet
	// ownedKnown distinguishes "reported nothing" (nil) from "reported an
	// empty list".
	ownedKnown bool
}

// reconcile returns the member's next assignment state: in is unchanged,
// and the result is in.member itself when nothing changes.
func reconcile(in reconcileInput) (*cgMember, error) {
	m := in.member
	switch m.state {
	case memberStable:
		if m.epoch != in.targetEpoch {
			return computeNextAssignment(in, m.epoch), nil
		}
		return m, nil
	case memberUnrevokedPartitions:
		if ownsRevoked(in, m.revoking) {
			return m, nil
		}
		return computeNextAssignment(in, m.epoch), nil
	case memberUnreleasedPartitions:
		return computeNextAssignment(in, m.epoch), nil
	default:
		if !in.ownedKnown || len(in.owned) > 0 {
			return nil, errReconcileFenced
		}
		return computeNextAssignment(in, in.targetEpoch), nil
	}
}

// ownsRevoked reports whether the member still reports one of revoking
// (CurrentAssignmentBuilder.ownsRevokedPartitions); a heartbeat without the
// owned partitions counts as still owning them.
func ownsRevoked(in reconcileInput, revoking tpSet) bool {
	if !in.ownedKnown {
		return true
	}
	for id, ps := range in.owned {
		for _, p := range ps {
			if revoking.has(id, p) {
				return true
			}
		}
	}
	return false
}

// computeNextAssignment is CurrentAssignmentBuilder.computeNextAssignment.
func computeNextAssignment(in reconcileInput, memberEpoch int32) *cgMember {
	m := in.member
	assigned, revoking, pending := tpSet{}, tpSet{}, tpSet{}
	unreleased := false
	ids := map[[16]byte]struct{}{}
	for id := range in.target {
		ids[id] = struct{}{}
	}
	for id := range m.assigned {
		ids[id] = struct{}{}
	}
	for id := range ids {
		target := in.target[id]
		for _, p := range m.assigned[id] {
			// Kept = current ∩ target; revoked = current - kept.
			if in.target.has(id, p) {
				assigned.add(id, p)
			} else {
				revoking.add(id, p)
			}
		}
		for _, p := range target {
			if m.assigned.has(id, p) {
				continue
			}
			// Pending assignment = target - kept - unreleased (owned by
			// another member).
			if _, owned := in.owners[id][p]; owned {
				unreleased = true
				continue
			}
			pending.add(id, p)
		}
	}
	next := m.clone()
	switch {
	case len(revoking) > 0 && ownsRevoked(in, revoking):
		next.state = memberUnrevokedPartitions
		next.prevEpoch, next.epoch = m.epoch, memberEpoch
		next.assigned = assigned
		next.revoking = revoking
	case len(pending) > 0:
		for id, ps := range pending {
			for _, p := range ps {
				assigned.add(id, p)
			}
		}
		next.state = memberStable
		if unreleased {
			next.state = memberUnreleasedPartitions
		}
		next.prevEpoch, next.epoch = m.epoch, in.targetEpoch
		next.assigned = assigned
		next.revoking = tpSet{}
	case unreleased:
		next.state = memberUnreleasedPartitions
		next.prevEpoch, next.epoch = m.epoch, in.targetEpoch
		next.assigned = assigned
		next.revoking = tpSet{}
	default:
		next.state = memberStable
		next.prevEpoch, next.epoch = m.epoch, in.targetEpoch
		next.assigned = assigned
		next.revoking = tpSet{}
	}
	return next
}
