package controller

import "slices"

// assignReplicas spreads partitions' replicas over brokers as Kafka's
// AdminUtils.assignReplicasToBrokersRackUnaware: the first replica of
// partition p goes to broker (p+start) mod n, and the followers follow with a
// shift that grows every n partitions, so leaders and followers both spread
// evenly. startIndex and shift are Kafka's random start values, passed in so
// the rule is a pure function.
func assignReplicas(brokers []int32, numPartitions int32, replicationFactor int16, firstPartition int32, startIndex, shift int) [][]int32 {
	n := len(brokers)
	out := make([][]int32, 0, numPartitions)
	for p := firstPartition; p < firstPartition+numPartitions; p++ {
		if p > 0 && int(p)%n == 0 {
			shift++
		}
		first := (int(p) + startIndex) % n
		replicas := []int32{brokers[first]}
		for j := 0; j < int(replicationFactor)-1; j++ {
			replicas = append(replicas, brokers[replicaIndex(first, shift, j, n)])
		}
		out = append(out, replicas)
	}
	return out
}

func replicaIndex(first, shift, replica, n int) int {
	s := 1 + (shift+replica)%(n-1)
	return (first + s) % n
}

// assignReplicasRackAware is Kafka's assignReplicasToBrokersRackAware: the
// brokers are ordered alternating between racks, leaders go round robin
// over that order, and each follower goes to the next broker (with a shift
// that grows every pass) whose rack holds no replica yet, unless every
// rack already holds one.
func assignReplicasRackAware(racks map[int32]string, numPartitions int32, replicationFactor int16, firstPartition int32, startIndex, shift int) [][]int32 {
	arranged := rackAlternatedBrokers(racks)
	n := len(arranged)
	numRacks := len(distinctRacks(racks))
	out := make([][]int32, 0, numPartitions)
	for p := firstPartition; p < firstPartition+numPartitions; p++ {
		if p > 0 && int(p)%n == 0 {
			shift++
		}
		first := (int(p) + startIndex) % n
		leader := arranged[first]
		replicas := []int32{leader}
		racksWith := map[string]bool{racks[leader]: true}
		brokersWith := map[int32]bool{leader: true}
		for k := 0; len(replicas) < int(replicationFactor); k++ {
			b := arranged[replicaIndex(first, shift*numRacks, k, n)]
			rack := racks[b]
			if (!racksWith[rack] || len(racksWith) == numRacks) && (!brokersWith[b] || len(brokersWith) == n) {
				replicas = append(replicas, b)
				racksWith[rack] = true
				brokersWith[b] = true
			}
		}
		out = append(out, replicas)
	}
	return out
}

// rackAlternatedBrokers orders brokers taking one from each rack in turn
// (racks and brokers sorted), as Kafka's getRackAlternatedBrokerList.
func rackAlternatedBrokers(racks map[int32]string) []int32 {
	byRack := map[string][]int32{}
	for b, r := range racks {
		byRack[r] = append(byRack[r], b)
	}
	names := distinctRacks(racks)
	for _, r := range names {
		slices.Sort(byRack[r])
	}
	out := make([]int32, 0, len(racks))
	for i := 0; len(out) < len(racks); i = (i + 1) % len(names) {
		if l := byRack[names[i]]; len(l) > 0 {
			out = append(out, l[0])
			byRack[names[i]] = l[1:]
		}
	}
	return out
}

func distinctRacks(racks map[int32]string) []string {
	set := map[string]bool{}
	for _, r := range racks {
		set[r] = true
	}
	out := make([]string, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}
