package controller

import (
	"slices"
	"testing"
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
