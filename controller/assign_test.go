package controller

import (
	"slices"
	"testing"
)

func TestAssignReplicasMatchesKafka(t *testing.T) {
	// Kafka's AdminRackAwareTest/AssignmentTest: 5 brokers, 10 partitions,
	// RF 3, start index 0, shift 0.
	got := assignReplicas([]int32{0, 1, 2, 3, 4}, 10, 3, 0, 0, 0)
	want := [][]int32{
		{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 0}, {4, 0, 1},
		{0, 2, 3}, {1, 3, 4}, {2, 4, 0}, {3, 0, 1}, {4, 1, 2},
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("partition %d: got %v want %v", i, got[i], want[i])
		}
	}
}

func TestAssignReplicasSpreadsLeaders(t *testing.T) {
	got := assignReplicas([]int32{1, 2, 3}, 12, 1, 0, 2, 1)
	count := map[int32]int{}
	for _, r := range got {
		count[r[0]]++
	}
	for _, b := range []int32{1, 2, 3} {
		if count[b] != 4 {
			t.Fatalf("leaders not spread evenly: %v", count)
		}
	}
}

// Kafka's AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
func TestRackAlternatedBrokers(t *testing.T) {
	racks := map[int32]string{0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
	if got := rackAlternatedBrokers(racks); !slices.Equal(got, []int32{0, 3, 1, 5, 4, 2}) {
		t.Fatalf("alternated %v", got)
	}
	got := assignReplicasRackAware(racks, 7, 3, 0, 0, 0)
	want := [][]int32{{0, 3, 1}, {3, 1, 5}, {1, 5, 4}, {5, 4, 2}, {4, 2, 0}, {2, 0, 3}, {0, 4, 2}}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("partition %d: got %v want %v", i, got[i], want[i])
		}
	}
}

func TestRackAwareSpreadsRacks(t *testing.T) {
	racks := map[int32]string{1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
	for i, r := range assignReplicasRackAware(racks, 12, 3, 0, 2, 1) {
		seen := map[string]bool{}
		for _, b := range r {
			seen[racks[b]] = true
		}
		if len(seen) != 3 {
			t.Fatalf("partition %d replicas %v share a rack", i, r)
		}
	}
}
