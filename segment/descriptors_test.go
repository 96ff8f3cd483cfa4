package segment

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openFilesUnder counts this process's descriptors on files in dir, by
// suffix.
func openFilesUnder(t *testing.T, dir string) map[string]int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	out := map[string]int{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err != nil || !strings.HasPrefix(target, dir+string(filepath.Separator)) {
			continue
		}
		out[filepath.Ext(target)]++
	}
	return out
}

// As Kafka's indexes, the mapped .index and .timeindex files hold no
// descriptor: a partition keeps one per segment (.log), not three, while
// appends, rolls, lookups, flushes and a reopen after a crash go on.
func TestIndexFilesHoldNoDescriptor(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 300
	dir := t.TempDir()
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	for range 30 {
		a.add(2, 150)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log, when string) {
		t.Helper()
		open := openFilesUnder(t, dir)
		if open[".index"]+open[".timeindex"] != 0 || open[".log"] != l.NumSegments() {
			t.Fatalf("%s: open descriptors by kind %v, want only the %d .log files", when, open, l.NumSegments())
		}
		got, err := l.Read(0, 1<<20, l.EndOffset(), false)
		if err != nil || string(got) != string(a.from(0)) {
			t.Fatalf("%s: read differs: %v", when, err)
		}
		if off, _, ok := l.OffsetForTimestamp(a.headers[20].MaxTimestamp); !ok || off > a.headers[20].LastOffset() {
			t.Fatalf("%s: time index lookup: %d %v", when, off, ok)
		}
	}
	check(l, "after appends")
	crash(l)
	l = openLog(t, dir, cfg, false, nil)
	a.l = l
	check(l, "after an unclean open")
	a.add(2, 150)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if open := openFilesUnder(t, dir); len(open) != 0 {
		t.Fatalf("descriptors left open after Close: %v", open)
	}
}

// Out of descriptors, resizing an index (a roll trims it) fails before its
// mapping goes: the entries stay readable, and the resize succeeds later.
func TestIndexResizeOutOfDescriptorsKeepsTheMapping(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 100
	dir := t.TempDir()
	l := openLog(t, dir, cfg, true, nil)
	defer l.Close()
	a := newAppender(t, l)
	for range 20 {
		a.add(1, 100)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.activeLocked()
	entries := s.offIdx.entries
	if entries < 10 {
		t.Fatalf("%d index entries", entries)
	}
	var saved unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &saved); err != nil {
		t.Fatal(err)
	}
	// A new descriptor takes the lowest free number; below a limit of
	// that number, none can be opened.
	probe, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	lowestFree := probe.Fd()
	probe.Close()
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: uint64(lowestFree), Max: saved.Max}); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	err = s.resizeIndexes(0)
	if rerr := unix.Setrlimit(unix.RLIMIT_NOFILE, &saved); rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, unix.EMFILE) {
		t.Fatalf("resize out of descriptors: %v, want EMFILE", err)
	}
	if s.offIdx.entries != entries || s.offIdx.maxEntries() < entries {
		t.Fatalf("after the failed resize: %d entries in a mapping of %d, want %d", s.offIdx.entries, s.offIdx.maxEntries(), entries)
	}
	for i := range entries {
		off, pos := s.offIdx.at(i)
		if p, _, ok, _ := s.find(off); !ok || int64(pos) != p {
			t.Fatalf("entry %d (%d -> %d) wrong after the failed resize", i, off, pos)
		}
	}
	if err := s.resizeIndexes(0); err != nil {
		t.Fatal(err)
	}
	if size, _ := allocated(t, s.offIdx.path); size != int64(entries*offsetIndexEntrySize) {
		t.Fatalf("index of %d bytes after trimming %d entries", size, entries)
	}
}
