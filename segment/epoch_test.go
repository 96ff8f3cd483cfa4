package segment

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestEndOffsetForEpoch(t *testing.T) {
	// Kafka LeaderEpochFileCacheTest cases, LEO 100.
	cache := []EpochEntry{{2, 10}, {4, 30}, {5, 50}}
	for _, tc := range []struct {
		name      string
		entries   []EpochEntry
		epoch     int32
		wantEpoch int32
		wantEnd   int64
	}{
		{"empty cache", nil, 0, -1, -1},
		{"empty cache, undefined epoch", nil, -1, -1, -1},
		{"undefined epoch", cache, -1, -1, -1},
		{"latest epoch -> LEO", cache, 5, 5, 100},
		{"above latest", cache, 6, -1, -1},
		{"exact older epoch", cache, 2, 2, 30},
		{"gap between epochs", cache, 3, 2, 30},
		{"exact middle epoch", cache, 4, 4, 50},
		{"below first epoch", cache, 1, 1, 10},
		{"epoch 0 below first", cache, 0, 0, 10},
		{"single entry latest", []EpochEntry{{0, 0}}, 0, 0, 100},
		{"single entry below", []EpochEntry{{3, 7}}, 1, 1, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := epochCache{entries: tc.entries}
			e, end := c.endOffsetFor(tc.epoch, 100)
			if e != tc.wantEpoch || end != tc.wantEnd {
				t.Fatalf("endOffsetFor(%d) = (%d, %d), want (%d, %d)", tc.epoch, e, end, tc.wantEpoch, tc.wantEnd)
			}
		})
	}
}

func TestEpochAssign(t *testing.T) {
	for _, tc := range []struct {
		name    string
		start   []EpochEntry
		epoch   int32
		offset  int64
		want    string
		changed bool
	}{
		{"first", nil, 1, 5, "[{1 5}]", true},
		{"newer", []EpochEntry{{1, 5}}, 2, 10, "[{1 5} {2 10}]", true},
		{"same epoch later offset", []EpochEntry{{1, 5}}, 1, 10, "[{1 5}]", false},
		{"same epoch same offset", []EpochEntry{{1, 5}}, 1, 5, "[{1 5}]", false},
		{"same epoch earlier offset", []EpochEntry{{1, 5}}, 1, 3, "[{1 3}]", true},
		{"newer epoch same offset replaces", []EpochEntry{{1, 5}}, 2, 5, "[{2 5}]", true},
		{"older epoch truncates", []EpochEntry{{1, 5}, {3, 10}, {4, 20}}, 2, 15, "[{1 5} {2 15}]", true},
		{"newer epoch lower offset truncates", []EpochEntry{{1, 5}, {3, 10}}, 4, 8, "[{1 5} {4 8}]", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := epochCache{entries: append([]EpochEntry(nil), tc.start...)}
			changed, err := c.assign(tc.epoch, tc.offset)
			if err != nil || changed != tc.changed || fmt.Sprint(c.entries) != tc.want {
				t.Fatalf("assign(%d, %d) = %v, %v, %v; want %s, %v", tc.epoch, tc.offset, changed, err, c.entries, tc.want, tc.changed)
			}
		})
	}
	var c epochCache
	if _, err := c.assign(-1, 0); err == nil {
		t.Fatal("negative epoch accepted")
	}
}

func TestEpochTruncation(t *testing.T) {
	base := []EpochEntry{{2, 10}, {4, 30}, {5, 50}}
	for _, tc := range []struct {
		name string
		fn   func(*epochCache) bool
		want string
	}{
		{"end above all", func(c *epochCache) bool { return c.truncateFromEnd(60) }, "[{2 10} {4 30} {5 50}]"},
		{"end at start of last", func(c *epochCache) bool { return c.truncateFromEnd(50) }, "[{2 10} {4 30}]"},
		{"end in middle", func(c *epochCache) bool { return c.truncateFromEnd(31) }, "[{2 10} {4 30}]"},
		{"end below all", func(c *epochCache) bool { return c.truncateFromEnd(5) }, "[]"},
		{"start below all", func(c *epochCache) bool { return c.truncateFromStart(5) }, "[{2 10} {4 30} {5 50}]"},
		{"start at first", func(c *epochCache) bool { return c.truncateFromStart(10) }, "[{2 10} {4 30} {5 50}]"},
		{"start in first epoch", func(c *epochCache) bool { return c.truncateFromStart(20) }, "[{2 20} {4 30} {5 50}]"},
		{"start at second", func(c *epochCache) bool { return c.truncateFromStart(30) }, "[{4 30} {5 50}]"},
		{"start past last", func(c *epochCache) bool { return c.truncateFromStart(70) }, "[{5 70}]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := epochCache{entries: append([]EpochEntry(nil), base...)}
			tc.fn(&c)
			if got := fmt.Sprint(c.entries); got != tc.want {
				t.Fatalf("got %s want %s", got, tc.want)
			}
		})
	}
}

func TestEpochCacheInLog(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	for i := 0; i < 30; i++ {
		a.epoch = int32(i/10) * 2 // epochs 0, 2, 4 starting at 0, 10, 20
		a.add(1, 50)
	}
	if got := fmt.Sprint(l.EpochEntries()); got != "[{0 0} {2 10} {4 20}]" {
		t.Fatalf("entries %s", got)
	}
	if e, ok := l.LatestEpoch(); !ok || e != 4 {
		t.Fatalf("latest %d %v", e, ok)
	}
	for _, tc := range []struct {
		epoch int32
		e     int32
		end   int64
	}{{0, 0, 10}, {1, 0, 10}, {2, 2, 20}, {3, 2, 20}, {4, 4, 30}, {5, -1, -1}} {
		if e, end := l.EndOffsetForEpoch(tc.epoch); e != tc.e || end != tc.end {
			t.Errorf("EndOffsetForEpoch(%d) = %d, %d; want %d, %d", tc.epoch, e, end, tc.e, tc.end)
		}
	}
	// The checkpoint file has Kafka's format.
	data, _ := os.ReadFile(filepath.Join(dir, EpochCheckpointFile))
	if string(data) != "0\n3\n0 0\n2 10\n4 20\n" {
		t.Fatalf("checkpoint:\n%s", data)
	}
	// A new leader epoch assigned at the LEO without data is dropped by
	// TruncateTo(LEO), as Kafka's truncateTo does.
	if err := l.AssignEpoch(6, 30); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(30); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.EpochEntries()); got != "[{0 0} {2 10} {4 20}]" {
		t.Fatalf("after TruncateTo(LEO): %s", got)
	}
	if err := l.TruncateTo(15); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.EpochEntries()); got != "[{0 0} {2 10}]" {
		t.Fatalf("after TruncateTo(15): %s", got)
	}
	if err := l.SetStartOffset(12); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.EpochEntries()); got != "[{2 12}]" {
		t.Fatalf("after SetStartOffset(12): %s", got)
	}
	l.Close()

	// A missing checkpoint is rebuilt from the batches.
	os.Remove(filepath.Join(dir, EpochCheckpointFile))
	l = openLog(t, dir, cfg, true, nil)
	if got := fmt.Sprint(l.EpochEntries()); got != "[{2 12}]" {
		t.Fatalf("rebuilt: %s", got)
	}
	l.Close()
	if data, _ := os.ReadFile(filepath.Join(dir, EpochCheckpointFile)); string(data) != "0\n1\n2 12\n" {
		t.Fatalf("rebuilt checkpoint:\n%s", data)
	}
	// A damaged checkpoint too.
	os.WriteFile(filepath.Join(dir, EpochCheckpointFile), []byte("0\n5\n1 2\n"), 0o644)
	l = openLog(t, dir, cfg, true, nil)
	defer l.Close()
	if got := fmt.Sprint(l.EpochEntries()); got != "[{2 12}]" {
		t.Fatalf("rebuilt from damaged: %s", got)
	}
}

// An epoch assignment rewrites the checkpoint without fsync; a flush
// fsyncs it before the recovery point moves, a roll's background flush
// too; after a crash that lost the unsynced rewrite (the file emptied),
// Open rebuilds the same cache from the batches.
func TestEpochAssignmentSyncedByFlush(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig(), true, nil)
	a := newAppender(t, l)
	a.epoch = 3
	a.add(2, 10)
	if err := l.AssignEpoch(5, l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	l.mu.RLock()
	unsynced := l.epochsUnsynced
	l.mu.RUnlock()
	if !unsynced {
		t.Fatal("an epoch assignment did not mark the checkpoint unsynced")
	}
	a.epoch = 5
	a.add(3, 10)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.mu.RLock()
	unsynced = l.epochsUnsynced
	l.mu.RUnlock()
	if unsynced {
		t.Fatal("Flush left the epoch checkpoint unsynced")
	}
	want := l.EpochEntries()
	crash(l)
	if err := os.WriteFile(filepath.Join(dir, EpochCheckpointFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, testConfig(), false, nil)
	defer l.Close()
	if got := l.EpochEntries(); !slices.Equal(got, want) {
		t.Fatalf("rebuilt epochs %v, want %v", got, want)
	}
}
