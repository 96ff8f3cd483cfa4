package segment

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/kbroker/kbroker/internal/atomicfile"
)

// Checkpoint files use Kafka's CheckpointFile text format:
//
//	<version>\n
//	<number of entries>\n
//	<entry>\n   (fields separated by one space)
//	...
//
// They are written atomically: temp file, fsync, rename, fsync of the dir.
const (
	// EpochCheckpointFile is Kafka's leader epoch checkpoint; entries are
	// "epoch startOffset".
	EpochCheckpointFile = "leader-epoch-checkpoint"
	// StartOffsetCheckpointFile holds the log start offset raised by
	// DeleteRecords (one entry: "offset"). Kafka keeps this per log dir;
	// kbroker keeps it per partition dir.
	StartOffsetCheckpointFile = "log-start-offset-checkpoint"
	// RecoveryPointCheckpointFile holds the recovery point: every offset
	// below it is known to be fsynced (one entry: "offset").
	RecoveryPointCheckpointFile = "recovery-point-offset-checkpoint"

	checkpointVersion = 0
)

var errCheckpointMissing = errors.New("checkpoint file missing")

// writeCheckpoint atomically replaces path with the given entries.
func writeCheckpoint(path string, entries [][]int64) error {
	return atomicfile.Write(path, encodeCheckpoint(entries))
}

// writeCheckpointNoSync is writeCheckpoint without fsyncs (writeUnsynced:
// after a crash the old file, the new or an unreadable one).
func writeCheckpointNoSync(path string, entries [][]int64) error {
	return writeUnsynced(path, encodeCheckpoint(entries))
}

func encodeCheckpoint(entries [][]int64) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(entries))
	for _, e := range entries {
		for i, v := range e {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.FormatInt(v, 10))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// readCheckpoint parses a checkpoint whose entries have `fields` integers.
// A missing file gives errCheckpointMissing.
func readCheckpoint(path string, fields int) ([][]int64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errCheckpointMissing
	}
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return sc.Text(), true
	}
	v, ok := line()
	if !ok || strings.TrimSpace(v) != strconv.Itoa(checkpointVersion) {
		return nil, fmt.Errorf("checkpoint %s: bad version line %q", path, v)
	}
	c, ok := line()
	n, err := strconv.Atoi(strings.TrimSpace(c))
	if !ok || err != nil || n < 0 {
		return nil, fmt.Errorf("checkpoint %s: bad count line %q", path, c)
	}
	entries := make([][]int64, 0, n)
	for i := 0; i < n; i++ {
		l, ok := line()
		if !ok {
			return nil, fmt.Errorf("checkpoint %s: %d entries expected, %d found", path, n, i)
		}
		parts := strings.Fields(l)
		if len(parts) != fields {
			return nil, fmt.Errorf("checkpoint %s: bad entry %q", path, l)
		}
		e := make([]int64, fields)
		for j, p := range parts {
			if e[j], err = strconv.ParseInt(p, 10, 64); err != nil {
				return nil, fmt.Errorf("checkpoint %s: bad entry %q: %w", path, l, err)
			}
		}
		entries = append(entries, e)
	}
	if l, ok := line(); ok && strings.TrimSpace(l) != "" {
		return nil, fmt.Errorf("checkpoint %s: trailing data %q", path, l)
	}
	return entries, nil
}

// readOffsetCheckpoint reads a single-offset checkpoint.
func readOffsetCheckpoint(path string) (int64, error) {
	e, err := readCheckpoint(path, 1)
	if err != nil {
		return 0, err
	}
	if len(e) != 1 {
		return 0, fmt.Errorf("checkpoint %s: %d entries, want 1", path, len(e))
	}
	return e[0][0], nil
}

func writeOffsetCheckpoint(path string, offset int64) error {
	return writeCheckpoint(path, [][]int64{{offset}})
}
