package segment

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
)

func TestDurableLengths(t *testing.T) {
	const a, b = "/d/00000000000000000000.log", "/d/00000000000000000100.log"
	cr := func(p string) SyncEvent { return SyncEvent{Op: "create", Path: p} }
	tr := func(p string, n int64) SyncEvent { return SyncEvent{Op: "trunc", Path: p, Size: n} }
	sy := func(p string, n int64, since uint64) SyncEvent {
		return SyncEvent{Op: "sync", Path: p, Size: n, Since: since}
	}
	mv := func(from, to string) SyncEvent { return SyncEvent{Op: "rename", Path: from, To: to} }
	rm := func(p string) SyncEvent { return SyncEvent{Op: "delete", Path: p} }
	tests := []struct {
		name   string
		events []SyncEvent
		want   map[string]int64
	}{
		{"nothing", nil, map[string]int64{}},
		{"created, never synced", []SyncEvent{cr(a)}, map[string]int64{a: 0}},
		{"synced", []SyncEvent{cr(a), sy(a, 500, 1)}, map[string]int64{a: 500}},
		{"a later smaller sync does not lower it", []SyncEvent{cr(a), sy(a, 500, 1), sy(a, 300, 1)}, map[string]int64{a: 500}},
		{"truncated below the synced size", []SyncEvent{cr(a), sy(a, 500, 1), tr(a, 200)}, map[string]int64{a: 200}},
		{"truncated above the synced size", []SyncEvent{cr(a), sy(a, 500, 1), tr(a, 800)}, map[string]int64{a: 500}},
		{"truncated, rewritten, synced", []SyncEvent{cr(a), sy(a, 500, 1), tr(a, 200), sy(a, 700, 3)}, map[string]int64{a: 700}},
		// The sync began (line 2 written) before the truncation on line
		// 3: its 500 bytes are the old ones, only 200 of which remain.
		{"sync racing a truncation", []SyncEvent{cr(a), sy(a, 100, 1), tr(a, 200), sy(a, 500, 2)}, map[string]int64{a: 200}},
		{"sync racing a re-creation", []SyncEvent{cr(a), sy(a, 500, 1), rm(a), cr(a), sy(a, 500, 2)}, map[string]int64{a: 0}},
		{"re-created after a delete", []SyncEvent{cr(a), sy(a, 500, 1), rm(a), cr(a)}, map[string]int64{a: 0}},
		{"deleted", []SyncEvent{cr(a), sy(a, 500, 1), rm(a)}, map[string]int64{}},
		{"two files", []SyncEvent{cr(a), sy(a, 500, 1), cr(b), sy(a, 900, 3), sy(b, 40, 4)}, map[string]int64{a: 900, b: 40}},
		{"rename moves the length", []SyncEvent{cr(a + ".cleaned"), sy(a+".cleaned", 300, 1), mv(a, a+".deleted"), mv(a+".cleaned", a)},
			map[string]int64{a: 300}},
		{"rename of an unknown file makes the target unknown", []SyncEvent{cr(a), sy(a, 500, 1), mv(b, a)}, map[string]int64{}},
		// A sync of the old file at the target's name, begun before the
		// rename, says nothing of the renamed file.
		{"sync of the old target racing a rename", []SyncEvent{cr(b), mv(b, a), sy(a, 500, 0)}, map[string]int64{a: 0}},
		{"sync of a file from before the journal", []SyncEvent{sy(a, 64, 0)}, map[string]int64{a: 64}},
		{"truncation of an unknown file keeps it unknown", []SyncEvent{tr(a, 10)}, map[string]int64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := DurableLengths(tc.events); !maps.Equal(got, tc.want) {
				t.Errorf("DurableLengths = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseSyncEvent(t *testing.T) {
	good := map[string]SyncEvent{
		`create "/a b/0.log"`:          {Op: "create", Path: "/a b/0.log"},
		`trunc "/x/0.log" 12`:          {Op: "trunc", Path: "/x/0.log", Size: 12},
		`sync "/x/0.log" 4096 7`:       {Op: "sync", Path: "/x/0.log", Size: 4096, Since: 7},
		`rename "/x/1.log" "/x/2.log"`: {Op: "rename", Path: "/x/1.log", To: "/x/2.log"},
		`delete "/x/\"q\".log"`:        {Op: "delete", Path: `/x/"q".log`},
	}
	for line, want := range good {
		if got, err := parseSyncEvent(line); err != nil || got != want {
			t.Errorf("parseSyncEvent(%q) = %+v, %v; want %+v", line, got, err, want)
		}
	}
	for _, line := range []string{``, `create`, `sync "/x" 1`, `trunc "/x" -1`, `sync "/x" a 1`, `move "/x" "/y"`, `create "/x`, `create "/x" "/y"`} {
		if got, err := parseSyncEvent(line); err == nil {
			t.Errorf("parseSyncEvent(%q) = %+v, want an error", line, got)
		}
	}
}

// TestSyncJournalOfLog drives a real Log with a journal through appends,
// flushes, a roll, a truncation and a reopen, and checks that the replay
// claims exactly what was fsynced: the .log sizes at the last flush.
func TestSyncJournalOfLog(t *testing.T) {
	dir := t.TempDir()
	jpath := filepath.Join(t.TempDir(), "journal")
	j, err := OpenSyncJournal(jpath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.SegmentBytes = 4 << 10
	l, err := Open(dir, cfg, false, testLogger(nil), WithSyncJournal(j))
	if err != nil {
		t.Fatal(err)
	}
	a := newAppender(t, l)
	first := segmentPath(dir, 0, logSuffix)
	durable := func() map[string]int64 {
		t.Helper()
		events, err := ReadSyncJournal(jpath)
		if err != nil {
			t.Fatal(err)
		}
		return DurableLengths(events)
	}
	if got := durable(); !maps.Equal(got, map[string]int64{first: 0}) {
		t.Fatalf("after Open: %v, want the first segment at 0", got)
	}
	a.add(3, 100)
	if got := durable(); got[first] != 0 {
		t.Fatalf("an append without fsync is durable: %v", got)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	flushed := l.Size()
	if got := durable(); got[first] != flushed {
		t.Fatalf("after Flush: %v, want %s at %d", got, first, flushed)
	}
	h := a.add(2, 100)
	if got := durable(); got[first] != flushed {
		t.Fatalf("an unsynced append moved the durable length: %v", got)
	}
	if err := l.TruncateTo(h.BaseOffset); err != nil {
		t.Fatal(err)
	}
	// Grow past a roll: the roll fsyncs the old segment in the background.
	for l.NumSegments() < 3 {
		a.add(5, 200)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for _, s := range l.SegmentStats() {
		want[segmentPath(dir, s.Base, logSuffix)] = s.Size
	}
	if got := durable(); !maps.Equal(got, want) {
		t.Fatalf("after a roll and Flush: %v, want %v", got, want)
	}
	crash(l)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// A baseline, then a second journal run continuing its line count.
	if err := WriteSyncJournalBaseline(jpath, want); err != nil {
		t.Fatal(err)
	}
	if j, err = OpenSyncJournal(jpath); err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if j.lines != uint64(len(want)) {
		t.Fatalf("reopened journal counts %d lines, want %d", j.lines, len(want))
	}
	l2, err := Open(dir, cfg, false, testLogger(nil), WithSyncJournal(j))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got := durable(); !maps.Equal(got, want) {
		t.Fatalf("after reopening: %v, want %v", got, want)
	}
	last := l2.SegmentStats()[2]
	if err := l2.TruncateTo(last.Base); err != nil {
		t.Fatal(err)
	}
	want[segmentPath(dir, last.Base, logSuffix)] = 0
	if got := durable(); !maps.Equal(got, want) {
		t.Fatalf("after truncating the last segment to empty: %v, want %v", got, want)
	}
}

func TestSyncJournalSkipsReplacedFile(t *testing.T) {
	dir := t.TempDir()
	jpath := filepath.Join(dir, "journal")
	j, err := OpenSyncJournal(jpath)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	p := filepath.Join(dir, "0.log")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("old bytes"); err != nil {
		t.Fatal(err)
	}
	// The path names another file by the time the sync ends.
	err = j.syncFile(f, func(f *os.File) error {
		if err := os.Remove(p); err != nil {
			return err
		}
		return os.WriteFile(p, []byte("new"), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if events, err := ReadSyncJournal(jpath); err != nil || len(events) != 0 {
		t.Fatalf("journal = %+v, %v; want no line for a sync of a replaced file", events, err)
	}
}
