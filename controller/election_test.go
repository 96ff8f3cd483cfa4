package controller

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func mk(replicas []int32, leader, epoch int32, isr []int32) PartitionState {
	return PartitionState{Replicas: replicas, Leader: leader, LeaderEpoch: epoch, ISR: isr}
}

func TestElectLeader(t *testing.T) {
	liveSet := func(ids ...int32) func(int32) bool {
		return func(id int32) bool { return slices.Contains(ids, id) }
	}
	cases := []struct {
		name    string
		ps      PartitionState
		live    []int32
		unclean bool
		want    PartitionState
		changed bool
	}{
		{"leader alive, all fine", mk([]int32{1, 2, 3}, 1, 4, []int32{1, 2, 3}), []int32{1, 2, 3}, false,
			mk([]int32{1, 2, 3}, 1, 4, []int32{1, 2, 3}), false},
		{"dead follower leaves the ISR, epoch stays", mk([]int32{1, 2, 3}, 1, 4, []int32{1, 2, 3}), []int32{1, 3}, false,
			mk([]int32{1, 2, 3}, 1, 4, []int32{1, 3}), true},
		{"leader dies: next ISR member in assignment order", mk([]int32{1, 2, 3}, 1, 4, []int32{3, 1, 2}), []int32{2, 3}, false,
			mk([]int32{1, 2, 3}, 2, 5, []int32{3, 2}), true},
		{"only out-of-sync replica alive, clean: offline, ISR kept", mk([]int32{1, 2}, 1, 4, []int32{1}), []int32{2}, false,
			mk([]int32{1, 2}, -1, 5, []int32{1}), true},
		{"already offline stays offline without change", mk([]int32{1, 2}, -1, 5, []int32{1}), []int32{2}, false,
			mk([]int32{1, 2}, -1, 5, []int32{1}), false},
		{"only out-of-sync replica alive, unclean: it leads alone", mk([]int32{1, 2}, 1, 4, []int32{1}), []int32{2}, true,
			mk([]int32{1, 2}, 2, 5, []int32{2}), true},
		{"ISR member returns to an offline partition", mk([]int32{1, 2}, -1, 5, []int32{1}), []int32{1, 2}, false,
			mk([]int32{1, 2}, 1, 6, []int32{1}), true},
		{"RF 1, broker dies", mk([]int32{7}, 7, 0, []int32{7}), nil, false,
			mk([]int32{7}, -1, 1, []int32{7}), true},
	}
	for _, c := range cases {
		got, changed := electLeader(c.ps, liveSet(c.live...), liveSet(c.live...), c.unclean)
		if changed != c.changed || got.Leader != c.want.Leader || got.LeaderEpoch != c.want.LeaderEpoch || !slices.Equal(got.ISR, c.want.ISR) {
			t.Errorf("%s: got %+v changed=%v, want %+v changed=%v", c.name, got, changed, c.want, c.changed)
		}
		if len(got.ISR) == 0 {
			t.Errorf("%s: the ISR must never be empty", c.name)
		}
	}
	// A leader in controlled shutdown (live, not eligible) keeps a
	// partition no other ISR member can take.
	ps := mk([]int32{1, 2}, 1, 3, []int32{1})
	got, changed := electLeader(ps, liveSet(1, 2), liveSet(2), false)
	if changed || got.Leader != 1 {
		t.Errorf("shutting-down sole ISR leader was demoted: %+v", got)
	}
}

func TestCheckISRChange(t *testing.T) {
	cur := mk([]int32{1, 2, 3}, 1, 5, []int32{1, 2})
	eligible := func(id int32) bool { return id != 4 && id != 3 } // 3 shutting down
	for _, c := range []struct {
		name           string
		leader, le, pe int32
		isr            []int32
		want           error
	}{
		{"shrink by the leader", 1, 5, 7, []int32{1}, nil},
		{"not the leader", 2, 5, 7, []int32{2}, kerr.NotLeaderForPartition},
		{"older leader epoch", 1, 4, 7, []int32{1}, kerr.FencedLeaderEpoch},
		{"newer leader epoch", 1, 6, 7, []int32{1}, kerr.UnknownLeaderEpoch},
		{"stale partition epoch", 1, 5, 6, []int32{1}, kerr.InvalidUpdateVersion},
		{"leader left out", 1, 5, 7, []int32{2}, kerr.InvalidRequest},
		{"not assigned", 1, 5, 7, []int32{1, 4}, kerr.IneligibleReplica},
		{"joining while shutting down", 1, 5, 7, []int32{1, 2, 3}, kerr.IneligibleReplica},
	} {
		err := checkISRChange(cur, 7, c.leader, c.le, c.pe, c.isr, eligible)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestShutdownMove(t *testing.T) {
	none := func(int32) bool { return false }
	for _, c := range []struct {
		name         string
		ps           PartitionState
		shuttingDown func(int32) bool
		want         PartitionState
		changed      bool
	}{
		{"leader moves to the next ISR member", mk([]int32{3, 1, 2}, 3, 4, []int32{3, 2, 1}), none, mk([]int32{3, 1, 2}, 1, 5, []int32{2, 1}), true},
		{"a follower leaves the ISR", mk([]int32{1, 3}, 1, 4, []int32{1, 3}), none, mk([]int32{1, 3}, 1, 4, []int32{1}), true},
		{"the only ISR member stays", mk([]int32{3, 1}, 3, 4, []int32{3}), none, mk([]int32{3, 1}, 3, 4, []int32{3}), false},
		{"nobody else may lead", mk([]int32{3, 1}, 3, 4, []int32{3, 1}), func(id int32) bool { return id == 1 }, mk([]int32{3, 1}, 3, 4, []int32{3, 1}), false},
		{"not a replica in the ISR", mk([]int32{1, 2}, 1, 4, []int32{1, 2}), none, mk([]int32{1, 2}, 1, 4, []int32{1, 2}), false},
	} {
		got, changed := shutdownMove(c.ps, 3, c.shuttingDown)
		if changed != c.changed || got.Leader != c.want.Leader || got.LeaderEpoch != c.want.LeaderEpoch || !slices.Equal(got.ISR, c.want.ISR) {
			t.Errorf("%s: %+v %v, want %+v %v", c.name, got, changed, c.want, c.changed)
		}
	}
}

func TestPreferredElection(t *testing.T) {
	all := func(int32) bool { return true }
	for _, c := range []struct {
		name     string
		ps       PartitionState
		eligible func(int32) bool
		leader   int32
		epoch    int32
		want     error
	}{
		{"moves back", mk([]int32{1, 2}, 2, 3, []int32{2, 1}), all, 1, 4, nil},
		{"already there", mk([]int32{1, 2}, 1, 3, []int32{1, 2}), all, 1, 3, kerr.ElectionNotNeeded},
		{"preferred out of the ISR", mk([]int32{1, 2}, 2, 3, []int32{2}), all, 2, 3, kerr.PreferredLeaderNotAvailable},
		{"preferred shutting down", mk([]int32{1, 2}, 2, 3, []int32{2, 1}), func(id int32) bool { return id != 1 }, 2, 3, kerr.PreferredLeaderNotAvailable},
	} {
		got, err := preferredElection(c.ps, c.eligible)
		if got.Leader != c.leader || got.LeaderEpoch != c.epoch || (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: leader %d epoch %d err %v; want %d %d %v", c.name, got.Leader, got.LeaderEpoch, err, c.leader, c.epoch, c.want)
		}
	}
}
