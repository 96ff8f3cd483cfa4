package main

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

func TestCountUnserved(t *testing.T) {
	for _, tc := range []struct {
		name string
		ends map[int32]int64
		n    int
		want int64
		miss int
	}{
		{"all served", map[int32]int64{0: 2, 1: 3}, 2, 2, 0},
		{"one short", map[int32]int64{0: 2, 1: 1}, 2, 2, 1},
		{"one absent", map[int32]int64{0: 2}, 2, 2, 1},
		{"none wanted, absent still missing", map[int32]int64{}, 3, 0, 3},
		{"extra partitions ignored", map[int32]int64{0: 1, 7: 0}, 1, 1, 0},
	} {
		if got := countUnserved(tc.ends, tc.n, tc.want); got != tc.miss {
			t.Errorf("%s: countUnserved = %d, want %d", tc.name, got, tc.miss)
		}
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
