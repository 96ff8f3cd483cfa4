package replica

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kbroker/kbroker/internal/atomicfile"
	"github.com/kbroker/kbroker/internal/tick"
)

// hwCheckpointFile is Kafka's per-log-dir replication-offset-checkpoint:
// the high watermark of every partition, so a restarted broker serves
// consumers from where it left off instead of waiting for followers.
const (
	hwCheckpointFile  = "replication-offset-checkpoint"
	hwCheckpointEvery = 5 * time.Second // replica.high.watermark.checkpoint.interval.ms
)

// readHWCheckpoint reads dir's checkpoint; a missing file is empty.
func readHWCheckpoint(dir string) (map[TopicPartition]int64, error) {
	return readPartitionOffsets(filepath.Join(dir, hwCheckpointFile))
}

// readPartitionOffsets reads a file in Kafka's OffsetCheckpointFile format
// (version 0, a count, then "topic partition offset" lines), as
// replication-offset-checkpoint and cleaner-offset-checkpoint are; a
// missing file is empty.
func readPartitionOffsets(path string) (map[TopicPartition]int64, error) {
	name := filepath.Base(path)
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return map[TopicPartition]int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[TopicPartition]int64{}
	sc := bufio.NewScanner(f)
	for line := 0; sc.Scan(); line++ {
		if line < 2 { // version, count
			continue
		}
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s line %d: want \"topic partition offset\"", name, line+1)
		}
		p, err1 := strconv.ParseInt(fields[1], 10, 32)
		off, err2 := strconv.ParseInt(fields[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s line %d: bad number", name, line+1)
		}
		out[TopicPartition{fields[0], int32(p)}] = off
	}
	return out, sc.Err()
}

// writePartitionOffsets writes offsets in Kafka's OffsetCheckpointFile
// format (atomically: temp file, fsync, rename), sorted for stable files.
func writePartitionOffsets(path string, offsets map[TopicPartition]int64) error {
	tps := slices.SortedFunc(maps.Keys(offsets), func(a, b TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	var b strings.Builder
	fmt.Fprintf(&b, "0\n%d\n", len(tps))
	for _, tp := range tps {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, offsets[tp])
	}
	return atomicfile.Write(path, []byte(b.String()))
}

// writeHWCheckpoint writes every hosted partition's high watermark to the
// checkpoint of the log dir its log is in (atomically: temp file, fsync,
// rename).
func (m *Manager) writeHWCheckpoint() error {
	parts := m.All()
	hws := make(map[TopicPartition]int64, len(parts))
	for _, p := range parts {
		hws[p.tp] = p.State().HighWatermark
	}
	return m.writeDirCheckpoints(hwCheckpointFile, hws)
}

// RunHWCheckpoints writes the high watermark checkpoint periodically until
// ctx ends.
func (m *Manager) RunHWCheckpoints(ctx context.Context) {
	tick.Every(ctx, hwCheckpointEvery, func(time.Time) {
		if err := m.writeHWCheckpoint(); err != nil {
			m.logger.Warn("writing the high watermark checkpoint failed", "err", err)
		}
	})
}
