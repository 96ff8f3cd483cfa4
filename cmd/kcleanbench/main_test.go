package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The broker's "log cleaned" line as replica's cleaner writes it (with the
// fields it has now, and one more) is parsed; other partitions' are not.
func TestCleanings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broker.log")
	lines := `time=2026-12-02T04:40:01.123Z level=INFO msg="log cleaned" partition=` + topic + `-0 first_dirty=0 end_offset=520632 dirty_ratio=1 bytes_read=278000000 bytes_written=1200000 markers_removed=0 took=4.5s
time=2026-12-02T04:40:02.123Z level=INFO msg="log cleaned" partition=other-0 first_dirty=0 end_offset=9 dirty_ratio=1 bytes_read=9 bytes_written=9 markers_removed=0 took=1s
time=2026-12-02T04:40:03.5Z level=INFO msg="log cleaned" partition=` + topic + `-0 first_dirty=520632 end_offset=520700 dirty_ratio=0.5 bytes_read=100 bytes_written=50 markers_removed=2 future_field=x took=12ms
`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	cs, err := cleanings(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].endOffset != 520632 || cs[0].read != 278000000 || cs[0].written != 1200000 || cs[0].took != 4500*time.Millisecond ||
		cs[1].endOffset != 520700 || cs[1].took != 12*time.Millisecond {
		t.Fatalf("parsed %+v", cs)
	}
}
