package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

func TestPendingByLeader(t *testing.T) {
	leaders := map[int32]int32{0: 1, 1: 2, 2: 1, 3: -1}
	got := pendingByLeader(leaders, map[int32]bool{2: true}, 5)
	if len(got) != 2 || fmt.Sprint(got[1]) != "[0]" || fmt.Sprint(got[2]) != "[1]" {
		t.Fatalf("pendingByLeader = %v: want broker 1 [0], broker 2 [1] (2 served, 3 leaderless, 4 unknown)", got)
	}
	if got := pendingByLeader(nil, nil, 3); len(got) != 0 {
		t.Fatalf("without leaders: %v", got)
	}
}

func TestCountUnled(t *testing.T) {
	parts := kadm.PartitionDetails{
		0: {Partition: 0, Leader: 1},
		1: {Partition: 1, Leader: 2},
		2: {Partition: 2, Leader: -1},
		3: {Partition: 3, Leader: 3, Err: errors.New("leader not available")},
	}
	for _, tc := range []struct {
		name      string
		live      []int32
		n         int
		notLeader int32
		miss      int
	}{
		{"two led", []int32{1, 2, 3}, 2, -1, 0},
		{"leaderless and errored", []int32{1, 2, 3}, 4, -1, 2},
		{"killed broker still named", []int32{1, 2, 3}, 2, 2, 1},
		{"leader not among live brokers", []int32{1, 3}, 2, -1, 1},
		{"partition absent", []int32{1, 2}, 5, -1, 3},
	} {
		if got := countUnled(parts, tc.live, tc.n, tc.notLeader); got != tc.miss {
			t.Errorf("%s: countUnled = %d, want %d", tc.name, got, tc.miss)
		}
	}
}

func TestCountUnderReplicated(t *testing.T) {
	parts := kadm.PartitionDetails{
		0: {Leader: 1, ISR: []int32{1, 2, 3}},
		1: {Leader: 2, ISR: []int32{2, 3}},
		2: {Leader: -1, ISR: []int32{1, 2, 3}},
	}
	for _, tc := range []struct {
		n, rf, miss int
	}{
		{1, 3, 0}, {2, 3, 1}, {2, 2, 0}, {3, 2, 1}, {4, 1, 2},
	} {
		if got := countUnderReplicated(parts, tc.n, tc.rf); got != tc.miss {
			t.Errorf("n=%d rf=%d: countUnderReplicated = %d, want %d", tc.n, tc.rf, got, tc.miss)
		}
	}
}

func TestCountInISR(t *testing.T) {
	parts := kadm.PartitionDetails{
		0: {Leader: 1, ISR: []int32{1, 2}},
		1: {Leader: 2, ISR: []int32{2, 3}},
	}
	for _, tc := range []struct {
		n    int
		id   int32
		miss int
	}{
		{2, 3, 1}, {2, 2, 2}, {2, 4, 0}, {3, 4, 1},
	} {
		if got := countInISR(parts, tc.n, tc.id); got != tc.miss {
			t.Errorf("n=%d id=%d: countInISR = %d, want %d", tc.n, tc.id, got, tc.miss)
		}
	}
}
