//lint:file-ignore ST1005 error messages are kafka-reassign-partitions.sh's, word for word

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kbroker/kbroker/internal/rebalance"
)

// anyLogDir is the log_dirs entry meaning "wherever the broker puts it".
const anyLogDir = "any"

// target is one partition of a reassignment JSON file.
type target struct {
	Topic     string
	Partition int32
	Replicas  []int32
	LogDirs   []string // one per replica; "any" when the file had none
}

func (t target) name() string { return tpName(t.Topic, t.Partition) }

// tpName is a partition as Kafka's TopicPartition.toString writes it.
func tpName(topic string, partition int32) string {
	return topic + "-" + strconv.Itoa(int(partition))
}

// reassignmentFile is Kafka's reassignment JSON, version 1, field for
// field in the order kafka-reassign-partitions.sh writes it.
type reassignmentFile struct {
	Version    int                 `json:"version"`
	Partitions []reassignmentEntry `json:"partitions"`
}

type reassignmentEntry struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs"`
}

// formatReassignment writes a as Kafka's formatAsReassignmentJson does:
// compact JSON, partitions sorted by topic then partition, log_dirs "any".
func formatReassignment(a rebalance.Assignment) string {
	f := reassignmentFile{Version: 1, Partitions: []reassignmentEntry{}}
	for _, topic := range slices.Sorted(maps.Keys(a)) {
		for _, p := range slices.Sorted(maps.Keys(a[topic])) {
			rs := a[topic][p]
			f.Partitions = append(f.Partitions, reassignmentEntry{
				Topic: topic, Partition: p, Replicas: slices.Clone(rs),
				LogDirs: slices.Repeat([]string{anyLogDir}, len(rs)),
			})
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // Jackson writes <, > and & as they are
	if err := enc.Encode(f); err != nil {
		panic(err) // strings and ints only: cannot fail
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// parseReassignment reads a reassignment JSON file as Kafka's
// parsePartitionReassignmentData does: version 1 (the default when absent),
// partitions with topic, partition and replicas required and log_dirs
// optional (as many as replicas). Entries are returned in file order,
// duplicates included, for validateForExecute to judge.
func parseReassignment(data []byte) ([]target, error) {
	var raw struct {
		Version    *int `json:"version"`
		Partitions []struct {
			Topic     *string   `json:"topic"`
			Partition *int32    `json:"partition"`
			Replicas  *[]int32  `json:"replicas"`
			LogDirs   *[]string `json:"log_dirs"`
		} `json:"partitions"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("the reassignment JSON is not valid: %w", err)
	}
	if dec.More() {
		return nil, errors.New("the reassignment JSON is not valid: data after the top-level object")
	}
	if raw.Version != nil && *raw.Version != 1 {
		return nil, fmt.Errorf("Not supported version field value %d", *raw.Version)
	}
	var out []target
	for i, p := range raw.Partitions {
		switch {
		case p.Topic == nil:
			return nil, fmt.Errorf("partition entry %d: no \"topic\"", i)
		case p.Partition == nil:
			return nil, fmt.Errorf("partition entry %d: no \"partition\"", i)
		case p.Replicas == nil:
			return nil, fmt.Errorf("partition entry %d: no \"replicas\"", i)
		}
		t := target{Topic: *p.Topic, Partition: *p.Partition, Replicas: *p.Replicas}
		if p.LogDirs != nil {
			t.LogDirs = *p.LogDirs
		} else {
			t.LogDirs = slices.Repeat([]string{anyLogDir}, len(t.Replicas))
		}
		if len(t.LogDirs) != len(t.Replicas) {
			return nil, fmt.Errorf("Size of replicas list %s is different from size of log dirs list %s for partition %s",
				javaList(t.Replicas), javaList(t.LogDirs), t.name())
		}
		out = append(out, t)
	}
	return out, nil
}

// javaList formats a list as Java's List.toString: [1, 2, 3].
func javaList[T any](xs []T) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprint(x))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// validateForExecute applies Kafka's parseExecuteAssignmentArgs checks: a
// non-empty list, no empty replica list, no partition twice, no broker
// twice in a partition.
func validateForExecute(ts []target) error {
	if len(ts) == 0 {
		return errors.New("Partition reassignment list cannot be empty")
	}
	seen := map[string]int{}
	var dupParts []string
	var dupReplicas []string
	for _, t := range ts {
		if len(t.Replicas) == 0 {
			return errors.New("Partition replica list cannot be empty")
		}
		if seen[t.name()]++; seen[t.name()] == 2 {
			dupParts = append(dupParts, t.name())
		}
		count := map[int32]int{}
		var dups []string
		for _, b := range t.Replicas {
			if count[b]++; count[b] == 2 {
				dups = append(dups, strconv.Itoa(int(b)))
			}
		}
		if len(dups) > 0 {
			dupReplicas = append(dupReplicas, fmt.Sprintf("%s contains multiple entries for %s", t.name(), strings.Join(dups, ",")))
		}
	}
	if len(dupParts) > 0 {
		return fmt.Errorf("Partition reassignment contains duplicate topic partitions: %s", strings.Join(dupParts, ","))
	}
	if len(dupReplicas) > 0 {
		return fmt.Errorf("Partition replica lists may not contain duplicate entries: %s", strings.Join(dupReplicas, ". "))
	}
	for _, t := range ts {
		for i, d := range t.LogDirs {
			if d != anyLogDir {
				// Kafka would follow with AlterReplicaLogDirs; kreassign
				// does not do that yet, and moving the partition while
				// ignoring the directory asked for would be a silent lie.
				return fmt.Errorf("%s: log dir %q for broker %d: only \"any\" is supported (kreassign does not send AlterReplicaLogDirs)", t.name(), d, t.Replicas[i])
			}
		}
	}
	return nil
}

// parseTopicsToMove reads Kafka's --topics-to-move-json-file format:
// {"version":1,"topics":[{"topic":"foo"}]}.
func parseTopicsToMove(data []byte) ([]string, error) {
	var raw struct {
		Version *int `json:"version"`
		Topics  []struct {
			Topic *string `json:"topic"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("The input string is not a valid JSON: %w", err)
	}
	if raw.Version != nil && *raw.Version != 1 {
		return nil, fmt.Errorf("Not supported version field value %d", *raw.Version)
	}
	var out []string
	seen := map[string]bool{}
	for i, t := range raw.Topics {
		if t.Topic == nil {
			return nil, fmt.Errorf("topic entry %d: no \"topic\"", i)
		}
		if seen[*t.Topic] {
			return nil, fmt.Errorf("List of topics to reassign contains duplicate entries: %s", *t.Topic)
		}
		seen[*t.Topic] = true
		out = append(out, *t.Topic)
	}
	return out, nil
}
