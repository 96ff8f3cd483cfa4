package replica

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/kbroker/kbroker/protocol"
)

// Replica is one partition log this broker keeps: open (served under a
// view) or only stored in the log dir (left from an earlier run, not yet
// named by any view since the start).
type Replica struct {
	TopicPartition
	// TopicID is the topic id the log belongs to (partition.metadata);
	// zero if it records none.
	TopicID [16]byte
	Open    bool
}

// parsePartitionDir splits a log directory name, Kafka's <topic>-<partition>,
// reporting false for anything else (files, Kafka's "-delete" and "-future"
// directories, names no topic can have).
func parsePartitionDir(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return TopicPartition{}, false
	}
	topic, num := name[:i], name[i+1:]
	p, err := strconv.ParseInt(num, 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != num {
		return TopicPartition{}, false
	}
	if protocol.ValidTopicName(topic) != nil {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: topic, Partition: int32(p)}, true
}

// scanStored lists the partition logs in dir with the topic ids they
// record. An unreadable partition.metadata counts as no id (the log is
// kept; a view naming the partition decides).
func scanStored(dir string) (map[TopicPartition][16]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list log dir %s: %w", dir, err)
	}
	out := map[TopicPartition][16]byte{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		tp, ok := parsePartitionDir(e.Name())
		if !ok {
			continue
		}
		id, _, _ := readPartitionTopicID(dir + string(os.PathSeparator) + e.Name())
		out[tp] = id
	}
	return out, nil
}
