package segment

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// damagedLog writes 30 batches over several segments, crashes, applies
// damage to the active segment's .log file, and returns the dir and the
// appender (batches remembered).
func damagedLog(t *testing.T, cfg Config, damage func(path string, a *appender)) (string, *appender) {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	for i := 0; i < 30; i++ {
		a.epoch = int32(i / 10)
		a.add(2, 150)
	}
	l.mu.RLock()
	active := l.activeLocked().name()
	l.mu.RUnlock()
	crash(l)
	damage(active, a)
	return dir, a
}

func TestTornTailRecovery(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 300
	last := func(a *appender) int { return len(a.batches) - 1 }
	for _, tc := range []struct {
		name    string
		damage  func(path string, a *appender)
		keep    func(a *appender) int // batches that survive
		dropped bool
	}{
		{"garbage appended", func(p string, a *appender) {
			f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			f.Write(bytes.Repeat([]byte{0xAB}, 100))
			f.Close()
		}, func(a *appender) int { return len(a.batches) }, true},
		{"zeros appended", func(p string, a *appender) {
			f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			f.Write(make([]byte, 5000))
			f.Close()
		}, func(a *appender) int { return len(a.batches) }, true},
		{"last batch cut in half", func(p string, a *appender) {
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-int64(len(a.batches[last(a)])/2))
		}, last, true},
		{"only header of last batch", func(p string, a *appender) {
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-int64(len(a.batches[last(a)]))+30)
		}, last, true},
		{"crc byte flipped in last batch", func(p string, a *appender) {
			st, _ := os.Stat(p)
			f, _ := os.OpenFile(p, os.O_RDWR, 0)
			pos := st.Size() - int64(len(a.batches[last(a)])) + 17
			b := make([]byte, 1)
			f.ReadAt(b, pos)
			b[0] ^= 0xFF
			f.WriteAt(b, pos)
			f.Close()
		}, last, true},
		{"record byte flipped in second to last batch", func(p string, a *appender) {
			st, _ := os.Stat(p)
			f, _ := os.OpenFile(p, os.O_RDWR, 0)
			pos := st.Size() - int64(len(a.batches[last(a)])) - 20
			b := make([]byte, 1)
			f.ReadAt(b, pos)
			b[0] ^= 0x01
			f.WriteAt(b, pos)
			f.Close()
		}, func(a *appender) int { return len(a.batches) - 2 }, true},
		{"no damage", func(string, *appender) {}, func(a *appender) int { return len(a.batches) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, a := damagedLog(t, cfg, tc.damage)
			var buf logBuf
			l := openLog(t, dir, cfg, false, &buf)
			defer l.Close()
			keep := tc.keep(a)
			wantEnd := a.headers[keep-1].NextOffset()
			if l.EndOffset() != wantEnd {
				t.Fatalf("LEO %d, want %d", l.EndOffset(), wantEnd)
			}
			got, err := l.Read(0, 1<<20, l.EndOffset(), false)
			if err != nil || !bytes.Equal(got, a.from(0)[:len(a.from(0))-len(a.from(keep))]) {
				t.Fatalf("data differs after recovery: %v", err)
			}
			logged := strings.Contains(buf.String(), "truncated damaged log tail")
			if logged != tc.dropped {
				t.Fatalf("truncation logged %v, want %v:\n%s", logged, tc.dropped, buf.String())
			}
			if tc.dropped && !strings.Contains(buf.String(), "bytes_dropped=") {
				t.Fatalf("log line lacks bytes dropped: %s", buf.String())
			}
			// Appending continues at the recovered end.
			a.batches, a.headers = a.batches[:keep], a.headers[:keep]
			a.l = l
			a.add(1, 10)
			got, _ = l.Read(0, 1<<20, l.EndOffset(), false)
			if !bytes.Equal(got, a.from(0)) {
				t.Fatal("data differs after appending")
			}
			// Index was rebuilt: lookups match.
			l.mu.RLock()
			s := l.activeLocked()
			for i := 0; i < s.offIdx.entries; i++ {
				off, pos := s.offIdx.at(i)
				p, _, ok, _ := s.find(off)
				if !ok || int64(pos) != p {
					t.Fatalf("index entry %d (%d -> %d) wrong", i, off, pos)
				}
			}
			l.mu.RUnlock()
		})
	}
}

func TestRecoveryWithoutRecoveryPointScansAll(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	dir := t.TempDir()
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	for i := 0; i < 30; i++ {
		a.add(2, 150)
	}
	crash(l)
	os.Remove(filepath.Join(dir, RecoveryPointCheckpointFile))
	// Damage the second segment: it and every later one must go.
	segs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(segs) < 4 {
		t.Fatalf("%d segments", len(segs))
	}
	f, _ := os.OpenFile(segs[1], os.O_RDWR, 0)
	f.WriteAt([]byte{0xFF}, 100)
	f.Close()
	var buf logBuf
	l = openLog(t, dir, cfg, false, &buf)
	defer l.Close()
	if l.NumSegments() != 2 {
		t.Fatalf("%d segments, want 2:\n%s", l.NumSegments(), buf.String())
	}
	b1 := strings.TrimSuffix(filepath.Base(segs[1]), ".log")
	if l.EndOffset() != mustAtoi(t, b1) {
		t.Fatalf("LEO %d, want %s (damaged first batch of segment)", l.EndOffset(), b1)
	}
	if !strings.Contains(buf.String(), "deleting segment after a damaged one") {
		t.Fatalf("no deletion logged:\n%s", buf.String())
	}
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	v, ok := parseBase(s+".log", ".log")
	if !ok {
		t.Fatalf("bad base %q", s)
	}
	return v
}

func TestRecoveryPointLimitsRecovery(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	dir := t.TempDir()
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	for i := 0; i < 30; i++ {
		a.add(2, 150)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	a.add(1, 10)
	crash(l)
	// The checkpoint moves per segment: it must be inside the last one.
	segs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	lastBase := mustAtoi(t, strings.TrimSuffix(filepath.Base(segs[len(segs)-1]), ".log"))
	rp, err := readOffsetCheckpoint(filepath.Join(dir, RecoveryPointCheckpointFile))
	if err != nil || rp < lastBase {
		t.Fatalf("recovery point %d, %v; want >= %d", rp, err, lastBase)
	}
	// Damage an old, flushed segment's batch (not its header): recovery
	// does not look at it, so it is not truncated.
	f, _ := os.OpenFile(segs[0], os.O_RDWR, 0)
	f.WriteAt([]byte{0xFF}, 100)
	f.Close()
	var buf logBuf
	l = openLog(t, dir, cfg, false, &buf)
	defer l.Close()
	if l.EndOffset() != a.headers[len(a.headers)-1].NextOffset() {
		t.Fatalf("LEO %d", l.EndOffset())
	}
	if strings.Contains(buf.String(), "truncated") {
		t.Fatalf("old segment was recovered:\n%s", buf.String())
	}
}

func TestPreallocatedIndexAfterCrash(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 100
	cfg.MaxIndexBytes = 4096
	dir := t.TempDir()
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	for i := 0; i < 20; i++ {
		a.add(1, 100)
	}
	crash(l)
	st, _ := os.Stat(segmentPath(dir, 0, indexSuffix))
	if st.Size() != 4096 {
		t.Fatalf("index not preallocated: %d", st.Size())
	}
	// Even a "clean" open copes with the zero tail of the preallocated file.
	l = openLog(t, dir, cfg, true, nil)
	l.mu.RLock()
	entries := l.activeLocked().offIdx.entries
	l.mu.RUnlock()
	if entries != 19 {
		t.Fatalf("%d index entries, want 19", entries)
	}
	got, _ := l.Read(0, 1<<20, 100, false)
	if !bytes.Equal(got, a.from(0)) || l.EndOffset() != 20 {
		t.Fatal("data differs")
	}
	l.Close()
	st, _ = os.Stat(segmentPath(dir, 0, indexSuffix))
	if st.Size() != 19*8 {
		t.Fatalf("index not trimmed on close: %d", st.Size())
	}
}

func TestDamagedIndexRebuilt(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 200
	cfg.SegmentBytes = 3000
	for _, tc := range []struct {
		name   string
		damage func(dir string)
		msg    string
	}{
		{"misaligned", func(dir string) {
			f, _ := os.OpenFile(segmentPath(dir, 0, indexSuffix), os.O_WRONLY|os.O_APPEND, 0)
			f.Write([]byte{1, 2, 3})
			f.Close()
		}, "damaged index"},
		{"out of order", func(dir string) {
			f, _ := os.OpenFile(segmentPath(dir, 0, indexSuffix), os.O_RDWR, 0)
			f.WriteAt([]byte{0, 0, 0, 100, 0, 0, 0, 50}, 8)
			f.Close()
		}, "damaged index"},
		{"beyond log", func(dir string) {
			f, _ := os.OpenFile(segmentPath(dir, 0, indexSuffix), os.O_RDWR, 0)
			st, _ := f.Stat()
			var e [8]byte
			binary.BigEndian.PutUint32(e[:], 1000)
			binary.BigEndian.PutUint32(e[4:], 1<<30)
			f.WriteAt(e[:], st.Size()-8)
			f.Close()
		}, "damaged index"},
		{"wrong position", func(dir string) {
			// In order and inside the file, but not at a batch start.
			f, _ := os.OpenFile(segmentPath(dir, 0, indexSuffix), os.O_RDWR, 0)
			st, _ := f.Stat()
			var e [4]byte
			f.ReadAt(e[:], st.Size()-4)
			binary.BigEndian.PutUint32(e[:], binary.BigEndian.Uint32(e[:])+7)
			f.WriteAt(e[:], st.Size()-4)
			f.Close()
		}, "damaged batches at segment end"},
		{"time index garbage", func(dir string) {
			os.WriteFile(segmentPath(dir, 0, timeIndexSuffix), bytes.Repeat([]byte{0x7F}, 25), 0o644)
		}, "damaged index"},
		{"index missing", func(dir string) {
			os.Remove(segmentPath(dir, 0, indexSuffix))
		}, "index file missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, cfg, true, nil)
			a := newAppender(t, l)
			for i := 0; i < 40; i++ {
				a.add(1, 100)
			}
			l.Close()
			tc.damage(dir)
			var buf logBuf
			l = openLog(t, dir, cfg, true, &buf)
			defer l.Close()
			if !strings.Contains(buf.String(), tc.msg) {
				t.Fatalf("expected %q in log:\n%s", tc.msg, buf.String())
			}
			for i, h := range a.headers {
				got, err := l.Read(h.BaseOffset, 1<<20, l.EndOffset(), false)
				if err != nil || !bytes.Equal(got, a.from(i)) {
					t.Fatalf("read at %d differs: %v", h.BaseOffset, err)
				}
			}
			if l.EndOffset() != 40 {
				t.Fatalf("LEO %d", l.EndOffset())
			}
		})
	}
}

func TestStrayFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 600 // two batches per segment: bases 0, 2, 4
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	for i := 0; i < 6; i++ {
		a.add(1, 200)
	}
	l.Close()
	stray := []string{
		"00000000000000000000.log.deleted",
		"00000000000000000001.index.deleted",
		"00000000000000000002.log.cleaned",
		"00000000000000000003.log.swap",
		EpochCheckpointFile + ".tmp",
		"00000000000000000099.index",     // orphan
		"00000000000000000099.timeindex", // orphan
	}
	for _, n := range stray {
		os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644)
	}
	// An empty segment in the middle is dropped too (it would overlap).
	os.WriteFile(segmentPath(dir, 1, logSuffix), nil, 0o644)
	stray = append(stray, "00000000000000000001.log")
	os.WriteFile(filepath.Join(dir, "partition.metadata"), []byte("keep"), 0o644)
	l = openLog(t, dir, cfg, true, nil)
	defer l.Close()
	for _, n := range stray {
		if _, err := os.Stat(filepath.Join(dir, n)); !os.IsNotExist(err) {
			t.Errorf("%s not removed", n)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "partition.metadata")); err != nil {
		t.Error("unrelated file removed")
	}
	got, _ := l.Read(0, 1<<20, 100, false)
	if !bytes.Equal(got, a.from(0)) {
		t.Fatal("data differs")
	}
}

func TestIndexAheadOfLogRebuilt(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 200
	dir := t.TempDir()
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	for i := 0; i < 20; i++ {
		a.add(1, 100)
	}
	l.Close()
	// Cut the log (at a batch boundary) but keep the indexes: their last
	// entries now name offsets beyond the log end.
	keep := int64(len(a.from(0)) - len(a.from(12)))
	os.Truncate(segmentPath(dir, 0, logSuffix), keep)
	var buf logBuf
	l = openLog(t, dir, cfg, true, &buf)
	defer l.Close()
	if !strings.Contains(buf.String(), "damaged index") || l.EndOffset() != 12 {
		t.Fatalf("LEO %d, log:\n%s", l.EndOffset(), buf.String())
	}
	if ts, off := l.MaxTimestamp(); off != 11 || ts != a.headers[11].MaxTimestamp {
		t.Fatalf("MaxTimestamp %d %d", ts, off)
	}
}
