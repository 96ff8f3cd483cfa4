package controller

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
