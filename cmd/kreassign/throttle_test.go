package main

import (
	"maps"
	"slices"
	"testing"

	"github.com/kbroker/kbroker/internal/rebalance"
)

func TestThrottledReplicas(t *testing.T) {
	before := rebalance.Assignment{
		"a": {0: {1, 2}, 1: {2, 3}, 2: {3, 1}},
		"b": {0: {1}},
	}
	targets := []target{
		{Topic: "a", Partition: 1, Replicas: []int32{2, 4}}, // 3 -> 4
		{Topic: "a", Partition: 0, Replicas: []int32{1, 2}}, // unchanged: not throttled
		{Topic: "b", Partition: 0, Replicas: []int32{1, 2, 3}},
	}
	leader, follower, brokers := throttledReplicas(before, targets)
	if want := map[string]string{"a": "1:2,1:3", "b": "0:1"}; !maps.Equal(leader, want) {
		t.Errorf("leader = %v, want %v", leader, want)
	}
	if want := map[string]string{"a": "1:4", "b": "0:2,0:3"}; !maps.Equal(follower, want) {
		t.Errorf("follower = %v, want %v", follower, want)
	}
	if want := []int32{1, 2, 3, 4}; !slices.Equal(brokers, want) {
		t.Errorf("brokers = %v, want %v", brokers, want)
	}
}
