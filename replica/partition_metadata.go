package replica

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kbroker/kbroker/internal/atomicfile"
)

// partitionMetadataFile is Kafka's per-partition file naming the topic id
// the log belongs to (KIP-516), so a log left from a deleted topic is never
// taken for a new topic of the same name.
const partitionMetadataFile = "partition.metadata"

// readPartitionTopicID returns the topic id recorded in dir, and whether
// one was.
func readPartitionTopicID(dir string) ([16]byte, bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, partitionMetadataFile))
	if os.IsNotExist(err) {
		return [16]byte{}, false, nil
	}
	if err != nil {
		return [16]byte{}, false, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		v, ok := strings.CutPrefix(line, "topic_id: ")
		if !ok {
			continue
		}
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(v))
		if err != nil || len(raw) != 16 {
			return [16]byte{}, false, fmt.Errorf("%s: bad topic_id %q", filepath.Join(dir, partitionMetadataFile), v)
		}
		return [16]byte(raw), true, nil
	}
	return [16]byte{}, false, fmt.Errorf("%s: no topic_id", filepath.Join(dir, partitionMetadataFile))
}

// writePartitionTopicID records the topic id in dir (atomically). A file
// that already says so is left alone, as Kafka writes partition.metadata
// once: rewriting it cost every partition two fsyncs at every start.
func writePartitionTopicID(dir string, id [16]byte) error {
	body := "version: 0\ntopic_id: " + topicIDString(id) + "\n"
	path := filepath.Join(dir, partitionMetadataFile)
	if old, err := os.ReadFile(path); err == nil && string(old) == body {
		return nil
	}
	return atomicfile.Write(path, []byte(body))
}

// topicIDString prints a topic id as Kafka does (base64url, no padding).
func topicIDString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }
