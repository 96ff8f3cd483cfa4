package coordinator

import (
	"fmt"
	"testing"
)

func set(id byte, ps ...int32) tpSet {
	s := tpSet{}
	for _, p := range ps {
		s.add(tid(id), p)
	}
	return s
}

func (s tpSet) String() string {
	out := ""
	for _, id := range s.topicIDs() {
		out += fmt.Sprintf("t%d%v", id[0], s[id])
	}
	return out
}

func memberAt(id string, epoch, prev int32, state memberState, assigned, revoking tpSet) *cgMember {
	return &cgMember{id: id, epoch: epoch, prevEpoch: prev, state: state, assigned: assigned, revoking: revoking}
}

// TestReconcileTable covers CurrentAssignmentBuilder's transitions one by one.
func TestReconcileTable(t *testing.T) {
	owners := func(ps ...int32) map[[16]byte]map[int32]int32 {
		m := map[[16]byte]map[int32]int32{tid(1): {}}
		for _, p := range ps {
			m[tid(1)][p] = 9
		}
		return m
	}
	cases := []struct {
		name       string
		member     *cgMember
		target     tpSet
		owners     map[[16]byte]map[int32]int32
		owned      tpSet
		ownedKnown bool
		want       string // state epoch prev assigned revoking
		fenced     bool
	}{
		{"stable, same epoch: unchanged", memberAt("m", 5, 4, memberStable, set(1, 0), tpSet{}), set(1, 0, 1), nil, set(1, 0), true,
			"STABLE 5 4 t1[0] ", false},
		{"stable, new epoch, only gains free partitions", memberAt("m", 5, 4, memberStable, set(1, 0), tpSet{}), set(1, 0, 1), nil, set(1, 0), true,
			"STABLE 6 5 t1[0 1] ", false},
		{"stable, new epoch, gains an owned partition: unreleased", memberAt("m", 5, 4, memberStable, set(1, 0), tpSet{}), set(1, 0, 1), owners(1), set(1, 0), true,
			"UNRELEASED_PARTITIONS 6 5 t1[0] ", false},
		{"stable, new epoch, loses a partition it reports: unrevoked at its epoch", memberAt("m", 5, 4, memberStable, set(1, 0, 1), tpSet{}), set(1, 0), nil, set(1, 0, 1), true,
			"UNREVOKED_PARTITIONS 5 5 t1[0] t1[1]", false},
		{"stable, new epoch, loses a partition it no longer reports: straight to the target", memberAt("m", 5, 4, memberStable, set(1, 0, 1), tpSet{}), set(1, 0), nil, set(1, 0), true,
			"STABLE 6 5 t1[0] ", false},
		{"unrevoked, still reports the partition: unchanged", memberAt("m", 5, 5, memberUnrevokedPartitions, set(1, 0), set(1, 1)), set(1, 0), nil, set(1, 0, 1), true,
			"UNREVOKED_PARTITIONS 5 5 t1[0] t1[1]", false},
		{"unrevoked, keepalive without owned partitions: unchanged", memberAt("m", 5, 5, memberUnrevokedPartitions, set(1, 0), set(1, 1)), set(1, 0), nil, nil, false,
			"UNREVOKED_PARTITIONS 5 5 t1[0] t1[1]", false},
		{"unrevoked, acknowledged: stable at the target epoch", memberAt("m", 5, 5, memberUnrevokedPartitions, set(1, 0), set(1, 1)), set(1, 0), nil, set(1, 0), true,
			"STABLE 6 5 t1[0] ", false},
		{"unreleased, partition freed: stable", memberAt("m", 6, 5, memberUnreleasedPartitions, set(1, 0), tpSet{}), set(1, 0, 1), nil, set(1, 0), true,
			"STABLE 6 6 t1[0 1] ", false},
		{"unreleased, still owned elsewhere: unchanged", memberAt("m", 6, 5, memberUnreleasedPartitions, set(1, 0), tpSet{}), set(1, 0, 1), owners(1), set(1, 0), true,
			"UNRELEASED_PARTITIONS 6 6 t1[0] ", false},
		{"unknown state with partitions: fenced", memberAt("m", 6, 5, memberUnknown, set(1, 0), tpSet{}), set(1, 0), nil, set(1, 0), true, "", true},
		{"unknown state without partitions: reconciled from scratch", memberAt("m", 6, 5, memberUnknown, tpSet{}, tpSet{}), set(1, 0), nil, tpSet{}, true,
			"STABLE 6 6 t1[0] ", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			targetEpoch := int32(6)
			if tc.name == "stable, same epoch: unchanged" {
				targetEpoch = 5
			}
			before := tc.member.clone()
			got, err := reconcile(reconcileInput{member: tc.member, targetEpoch: targetEpoch, target: tc.target, owners: tc.owners, owned: tc.owned, ownedKnown: tc.ownedKnown})
			if tc.fenced {
				if err == nil {
					t.Fatal("want fenced")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := fmt.Sprintf("%s %d %d %s %s", got.state, got.epoch, got.prevEpoch, got.assigned, got.revoking)
			if s != tc.want {
				t.Fatalf("got  %q\nwant %q", s, tc.want)
			}
			if !tc.member.sameAssignmentState(before) {
				t.Fatal("input member modified")
			}
		})
	}
}

// TestReconcileHandoffTranscript moves partition 1 from A to B through the
// steps a real group takes; at no step do both own it.
func TestReconcileHandoffTranscript(t *testing.T) {
	a := memberAt("A", 1, 0, memberStable, set(1, 0, 1), tpSet{})
	b := memberAt("B", 0, 0, memberStable, tpSet{}, tpSet{})
	members := map[string]*cgMember{"A": a, "B": b}
	target := map[string]tpSet{"A": set(1, 0), "B": set(1, 1)}
	step := func(id string, owned tpSet) *cgMember {
		m, err := reconcile(reconcileInput{member: members[id], targetEpoch: 2, target: target[id],
			owners: partitionOwners(members, id), owned: owned, ownedKnown: owned != nil})
		if err != nil {
			t.Fatal(err)
		}
		members[id] = m
		for p := int32(0); p < 2; p++ {
			n := 0
			for _, mm := range members {
				if mm.assigned.has(tid(1), p) {
					n++
				}
			}
			if n > 1 {
				t.Fatalf("partition %d assigned to %d members", p, n)
			}
		}
		return m
	}
	var transcript []string
	log := func(who string, m *cgMember) {
		transcript = append(transcript, fmt.Sprintf("%s:%s@%d %s", who, m.state, m.epoch, m.assigned))
	}
	log("B joins", step("B", tpSet{}))
	log("A heartbeats owning 0,1", step("A", set(1, 0, 1)))
	log("B heartbeats", step("B", tpSet{}))
	log("A acks the revocation", step("A", set(1, 0)))
	log("B heartbeats", step("B", tpSet{}))
	want := []string{
		"B joins:UNRELEASED_PARTITIONS@2 ",
		"A heartbeats owning 0,1:UNREVOKED_PARTITIONS@1 t1[0]",
		"B heartbeats:UNRELEASED_PARTITIONS@2 ",
		"A acks the revocation:STABLE@2 t1[0]",
		"B heartbeats:STABLE@2 t1[1]",
	}
	if fmt.Sprint(transcript) != fmt.Sprint(want) {
		t.Fatalf("transcript:\n%v\nwant:\n%v", transcript, want)
	}
}
