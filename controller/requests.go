package controller

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// CreateTopicRequest asks for one topic.
type CreateTopicRequest struct {
	Name              string
	NumPartitions     int32 // -1: num.partitions
	ReplicationFactor int16 // -1: default.replication.factor
	Assignment        [][]int32
	Configs           map[string]string
}

// assignmentFor checks an explicit assignment or makes one over the live
// brokers: rack-aware when every broker has a broker.rack, as Kafka.
// newPartitionsFor checks a CreatePartitions request (topic name to total
// partitions, with an optional explicit assignment of the new ones)
// against md and assigns the new partitions over live, the same rack-aware
// way as a new topic's, with the topic's replication factor.
func newPartitionsFor(md *Metadata, live []BrokerInfo, name string, total int32, assignment [][]int32) (*Topic, [][]int32, error) {
	t, ok := md.Topics[name]
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", kerr.UnknownTopicOrPartition, name)
	}
	for p, ps := range t.Partitions {
		if ps.Reassigning() {
			// The replication factor is unsettled (Kafka refuses too).
			return nil, nil, fmt.Errorf("%w: partition %d of %q is being reassigned", kerr.ReassignmentInProgress, p, name)
		}
	}
	have := int32(len(t.Partitions))
	if total <= have {
		return nil, nil, fmt.Errorf("%w: topic %q has %d partitions, cannot change to %d", kerr.InvalidPartitions, name, have, total)
	}
	if len(assignment) > 0 && int32(len(assignment)) != total-have {
		return nil, nil, fmt.Errorf("%w: %d assignments for %d new partitions", kerr.InvalidReplicaAssignment, len(assignment), total-have)
	}
	added, err := assignmentFor(live, assignment, total-have, int16(len(t.Partitions[0].Replicas)), have)
	if err != nil {
		return nil, nil, err
	}
	return t, added, nil
}

func assignmentFor(live []BrokerInfo, explicit [][]int32, numPartitions int32, rf int16, firstPartition int32) ([][]int32, error) {
	brokers := make([]int32, 0, len(live))
	racks := make(map[int32]string, len(live))
	for _, b := range live {
		brokers = append(brokers, b.ID)
		if b.Rack != "" {
			racks[b.ID] = b.Rack
		}
	}
	if len(explicit) > 0 {
		for i, replicas := range explicit {
			if len(replicas) == 0 {
				return nil, fmt.Errorf("%w: partition %d has no replicas", kerr.InvalidReplicaAssignment, i)
			}
			seen := map[int32]bool{}
			for _, r := range replicas {
				if seen[r] || !slices.Contains(brokers, r) {
					return nil, fmt.Errorf("%w: partition %d names broker %d twice or a broker that is not live", kerr.InvalidReplicaAssignment, i, r)
				}
				seen[r] = true
			}
		}
		return explicit, nil
	}
	if numPartitions <= 0 {
		return nil, fmt.Errorf("%w: number of partitions must be positive, got %d", kerr.InvalidPartitions, numPartitions)
	}
	if rf <= 0 || int(rf) > len(brokers) {
		return nil, fmt.Errorf("%w: replication factor %d is larger than the %d available brokers", kerr.InvalidReplicationFactor, rf, len(brokers))
	}
	slices.Sort(brokers)
	start, shift := rand.IntN(len(brokers)), rand.IntN(len(brokers))
	if len(racks) == len(brokers) {
		return assignReplicasRackAware(racks, numPartitions, rf, firstPartition, start, shift), nil
	}
	return assignReplicas(brokers, numPartitions, rf, firstPartition, start, shift), nil
}
