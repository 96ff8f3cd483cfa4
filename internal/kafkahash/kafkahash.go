// Package kafkahash holds the hash Kafka uses to place a coordinator key (a
// group id, a transactional id) on a partition of its internal topic. The
// group and the transaction coordinators must agree with Kafka (and with
// each other's clients) byte for byte, so both use this one copy.
package kafkahash

import "unicode/utf16"

// JavaStringHashCode is Java's String.hashCode: s[0]*31^(n-1) + ... over
// UTF-16 code units, with int32 overflow. Invalid UTF-8 becomes U+FFFD, as a
// Java client decoding the same bytes would see it.
func JavaStringHashCode(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// Abs is org.apache.kafka.common.utils.Utils.abs: Math.abs, except that
// MinInt32 maps to 0.
func Abs(n int32) int32 {
	switch {
	case n == -1<<31:
		return 0
	case n < 0:
		return -n
	default:
		return n
	}
}

// PartitionFor is Kafka's Utils.abs(key.hashCode()) % numPartitions (the
// group coordinator's and the transaction coordinator's partitionFor); 0
// when numPartitions is not positive.
func PartitionFor(key string, numPartitions int32) int32 {
	if numPartitions <= 0 {
		return 0
	}
	return Abs(JavaStringHashCode(key)) % numPartitions
}
