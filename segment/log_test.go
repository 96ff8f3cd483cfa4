package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
)

func TestEmptyDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "topic-0")
	l := openLog(t, dir, testConfig(), true, nil)
	defer l.Close()
	if l.StartOffset() != 0 || l.EndOffset() != 0 || l.Size() != 0 || l.NumSegments() != 1 {
		t.Fatalf("empty log: start %d end %d size %d segments %d", l.StartOffset(), l.EndOffset(), l.Size(), l.NumSegments())
	}
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000000.log")); err != nil {
		t.Fatal(err)
	}
	b, err := l.Read(0, 1000, 0, true)
	if err != nil || len(b) != 0 || b == nil {
		t.Fatalf("Read at LEO: %v %v", b, err)
	}
	if _, err := l.Read(1, 1000, 10, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read past LEO: %v", err)
	}
	if ts, off := l.MaxTimestamp(); ts != -1 || off != -1 {
		t.Fatalf("MaxTimestamp of empty log = %d, %d", ts, off)
	}
	if _, _, ok := l.OffsetForTimestamp(0); ok {
		t.Fatal("OffsetForTimestamp on empty log found something")
	}
}

func TestAppendReadRoundTripAcrossSegments(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 8 << 10
	l := openLog(t, t.TempDir(), cfg, true, nil)
	defer l.Close()
	a := newAppender(t, l)
	for i := 0; i < 200; i++ {
		a.add(1+i%5, 100+i%300)
	}
	if l.NumSegments() < 5 {
		t.Fatalf("expected several segments, got %d", l.NumSegments())
	}
	got, err := l.Read(0, 1<<30, l.EndOffset(), false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, a.from(0)) {
		t.Fatalf("full read differs: %d bytes vs %d", len(got), len(a.from(0)))
	}
	var size int64
	for _, b := range a.batches {
		size += int64(len(b))
	}
	if l.Size() != size {
		t.Fatalf("Size %d, want %d", l.Size(), size)
	}
	// From every offset of every batch.
	for i, h := range a.headers {
		for off := h.BaseOffset; off <= h.LastOffset(); off++ {
			got, err := l.Read(off, 1<<30, l.EndOffset(), false)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, a.from(i)) {
				t.Fatalf("read from %d (batch %d) differs", off, i)
			}
		}
	}
}

func TestReadBounds(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig(), true, nil)
	defer l.Close()
	a := newAppender(t, l)
	a.add(10, 100)  // 0..9
	a.add(10, 1000) // 10..19, big
	a.add(5, 10)    // 20..24
	a.add(5, 10)    // 25..29
	leo := l.EndOffset()

	// Mid-batch offset returns the containing batch first.
	got, err := l.Read(15, 1<<20, leo, false)
	if err != nil || !bytes.Equal(got, a.from(1)) {
		t.Fatalf("mid-batch read: %v", err)
	}
	// maxBytes smaller than the first batch.
	big := len(a.batches[1])
	got, err = l.Read(12, big-1, leo, false)
	if err != nil || len(got) != 0 {
		t.Fatalf("small maxBytes without minOneBatch: %d bytes, %v", len(got), err)
	}
	got, err = l.Read(12, big-1, leo, true)
	if err != nil || !bytes.Equal(got, a.batches[1]) {
		t.Fatalf("small maxBytes with minOneBatch: %d bytes, %v", len(got), err)
	}
	got, err = l.Read(12, 0, leo, true)
	if err != nil || !bytes.Equal(got, a.batches[1]) {
		t.Fatalf("zero maxBytes with minOneBatch: %d bytes, %v", len(got), err)
	}
	// maxBytes cuts at whole batches.
	got, err = l.Read(0, len(a.batches[0])+len(a.batches[1])+10, leo, false)
	if err != nil || !bytes.Equal(got, a.from(0)[:len(a.batches[0])+len(a.batches[1])]) {
		t.Fatalf("maxBytes cut: %d bytes, %v", len(got), err)
	}
	// maxOffset: only batches with NextOffset <= maxOffset.
	for _, tc := range []struct {
		maxOffset int64
		batches   int
	}{{0, 0}, {9, 0}, {10, 1}, {19, 1}, {20, 2}, {25, 3}, {29, 3}, {30, 4}, {1000, 4}} {
		got, err := l.Read(0, 1<<20, tc.maxOffset, true)
		if err != nil {
			t.Fatal(err)
		}
		if hs := splitBatches(t, got); len(hs) != tc.batches {
			t.Errorf("maxOffset %d: %d batches, want %d", tc.maxOffset, len(hs), tc.batches)
		}
	}
	// minOneBatch does not override maxOffset.
	got, _ = l.Read(10, 1, 15, true)
	if len(got) != 0 {
		t.Fatalf("minOneBatch returned a batch beyond maxOffset")
	}
	// Range errors.
	if _, err := l.Read(-1, 100, leo, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatal(err)
	}
	if _, err := l.Read(leo+1, 100, leo, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatal(err)
	}
	if got, err := l.Read(leo, 100, leo, true); err != nil || len(got) != 0 {
		t.Fatal(err)
	}
}

func TestReadAcrossSegmentsRespectsMaxBytes(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	l := openLog(t, t.TempDir(), cfg, true, nil)
	defer l.Close()
	a := newAppender(t, l)
	for i := 0; i < 30; i++ {
		a.add(2, 200)
	}
	for maxBytes := 0; maxBytes < 5000; maxBytes += 97 {
		got, err := l.Read(3, maxBytes, l.EndOffset(), false)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > maxBytes {
			t.Fatalf("maxBytes %d: got %d", maxBytes, len(got))
		}
		want := a.from(1)
		n := 0
		for _, b := range a.batches[1:] {
			if n+len(b) > maxBytes {
				break
			}
			n += len(b)
		}
		if !bytes.Equal(got, want[:n]) {
			t.Fatalf("maxBytes %d: got %d bytes, want %d", maxBytes, len(got), n)
		}
	}
}

func TestIndexLookupMatchesLinearScan(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 700
	cfg.SegmentBytes = 300 << 10
	dir := t.TempDir()
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 1500; i++ {
		a.add(1+rng.IntN(8), rng.IntN(400))
	}
	check := func(l *Log) {
		t.Helper()
		l.mu.RLock()
		defer l.mu.RUnlock()
		entries := 0
		for _, s := range l.segments {
			entries += s.offIdx.entries
			// Linear scan of the segment.
			type bpos struct {
				pos        int64
				base, last int64
			}
			var all []bpos
			sc := newBatchScanner(s.log, 0, s.size, false)
			for sc.next() {
				all = append(all, bpos{sc.pos, sc.h.BaseOffset, sc.h.LastOffset()})
			}
			if sc.err != nil {
				t.Fatal(sc.err)
			}
			for _, b := range all {
				for off := b.base; off <= b.last; off++ {
					pos, h, ok, err := s.find(off)
					if err != nil || !ok || pos != b.pos || h.BaseOffset != b.base {
						t.Fatalf("find(%d) = %d, %d, %v, %v; want position %d base %d", off, pos, h.BaseOffset, ok, err, b.pos, b.base)
					}
				}
			}
			if _, _, ok, _ := s.find(s.next); ok {
				t.Fatalf("find past the segment end succeeded")
			}
		}
		if entries < 100 {
			t.Fatalf("only %d index entries; the test does not exercise the index", entries)
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg, true, nil)
	defer l.Close()
	check(l)
}

func TestRollBySize(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2500
	dir := t.TempDir()
	l := openLog(t, dir, cfg, true, nil)
	defer l.Close()
	a := newAppender(t, l)
	for i := 0; i < 10; i++ {
		a.add(1, 900) // ~1 KB each: 2 per segment
	}
	l.mu.RLock()
	for i, s := range l.segments {
		if s.size > cfg.SegmentBytes {
			t.Errorf("segment %d has %d bytes > %d", i, s.size, cfg.SegmentBytes)
		}
		if i+1 < len(l.segments) && s.next != l.segments[i+1].base {
			t.Errorf("segment %d ends at %d, next starts at %d", i, s.next, l.segments[i+1].base)
		}
	}
	n := len(l.segments)
	l.mu.RUnlock()
	if n != 5 {
		t.Fatalf("%d segments, want 5", n)
	}
	// Rolled segments have trimmed index files; the active one is preallocated.
	for _, base := range []int64{0, 2, 4, 6} {
		st, err := os.Stat(segmentPath(dir, base, indexSuffix))
		if err != nil || st.Size() != 0 {
			t.Fatalf("rolled index %d: size %v, err %v", base, st.Size(), err)
		}
		st, err = os.Stat(segmentPath(dir, base, timeIndexSuffix))
		if err != nil || st.Size() != timeIndexEntrySize {
			t.Fatalf("rolled time index %d should hold the roll entry: %v %v", base, st.Size(), err)
		}
	}
	st, _ := os.Stat(segmentPath(dir, 8, indexSuffix))
	if want := preallocatedIndexSize(cfg); st.Size() != want {
		t.Fatalf("active index size %d, want preallocated %d", st.Size(), want)
	}
	// A batch larger than SegmentBytes still goes in (alone).
	a.add(1, 5000)
	a.add(1, 10)
	if got, _ := l.Read(0, 1<<20, l.EndOffset(), false); !bytes.Equal(got, a.from(0)) {
		t.Fatal("read after oversized batch differs")
	}
}

func TestRollByTime(t *testing.T) {
	cfg := testConfig()
	cfg.RollAfter = time.Hour
	l := openLog(t, t.TempDir(), cfg, true, nil)
	defer l.Close()
	a := newAppender(t, l)
	a.add(1, 10)
	a.ts += int64(30 * time.Minute / time.Millisecond)
	a.add(1, 10)
	if l.NumSegments() != 1 {
		t.Fatal("rolled too early")
	}
	a.ts += int64(31 * time.Minute / time.Millisecond)
	a.add(1, 10)
	if l.NumSegments() != 2 {
		t.Fatalf("%d segments, want 2 after an hour of batch time", l.NumSegments())
	}
	if got, _ := l.Read(0, 1<<20, l.EndOffset(), false); !bytes.Equal(got, a.from(0)) {
		t.Fatal("read differs")
	}
}

func TestRollByTimeWithoutTimestamps(t *testing.T) {
	cfg := testConfig()
	cfg.RollAfter = time.Minute
	l := openLog(t, t.TempDir(), cfg, true, nil)
	defer l.Close()
	clock := &fixedClock{t: time.Unix(1000, 0)}
	l.now = clock.now
	l.mu.Lock()
	l.activeLocked().created = clock.now()
	l.mu.Unlock()
	a := newAppender(t, l)
	a.ts = -1 // no timestamps: age of the segment counts
	a.add(1, 10)
	a.ts = -1
	clock.advance(30 * time.Second)
	a.add(1, 10)
	if l.NumSegments() != 1 {
		t.Fatal("rolled too early")
	}
	a.ts = -1
	clock.advance(31 * time.Second)
	a.add(1, 10)
	if l.NumSegments() != 2 {
		t.Fatalf("%d segments, want 2", l.NumSegments())
	}
}

func TestRollWhenIndexFull(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 0 // an entry per batch (after the first)
	cfg.MaxIndexBytes = 48     // 6 offset entries, 4 time entries (+1 reserved)
	l := openLog(t, t.TempDir(), cfg, true, nil)
	defer l.Close()
	a := newAppender(t, l)
	for i := 0; i < 40; i++ {
		a.add(1, 10)
	}
	if l.NumSegments() < 5 {
		t.Fatalf("%d segments; full indexes should roll", l.NumSegments())
	}
	if got, _ := l.Read(0, 1<<20, l.EndOffset(), false); !bytes.Equal(got, a.from(0)) {
		t.Fatal("read differs")
	}
}

func TestAppendRejectsWrongOffset(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig(), true, nil)
	defer l.Close()
	a := newAppender(t, l)
	a.add(3, 10)
	for _, base := range []int64{0, 2, 4} {
		b := makeBatch(base, 1, 0, 0, 1)
		if err := l.Append(b, header(t, b)); !errors.Is(err, ErrUnexpectedOffset) {
			t.Errorf("append at %d: %v", base, err)
		}
	}
	b := makeBatch(3, 1, 0, 0, 1)
	h := header(t, b)
	if err := l.Append(b[:len(b)-1], h); err == nil {
		t.Error("append of a short slice accepted")
	}
}

func TestOffsetForTimestampAndMaxTimestamp(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4000
	cfg.IndexIntervalBytes = 300
	dir := t.TempDir()
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	// Timestamps rise overall but not monotonically.
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 300; i++ {
		a.ts = 10_000 + int64(i)*10 + int64(rng.IntN(40)) - 20
		a.add(1+rng.IntN(3), 50)
	}
	check := func(l *Log, start int64) {
		t.Helper()
		for ts := int64(9000); ts < 14_000; ts += 7 {
			wantOff, wantTs, wantOK := int64(-1), int64(-1), false
			for _, h := range a.headers {
				if h.NextOffset() <= start {
					continue
				}
				if h.MaxTimestamp >= ts {
					wantOff, wantTs, wantOK = max(h.BaseOffset, start), h.MaxTimestamp, true
					break
				}
			}
			off, gotTs, ok := l.OffsetForTimestamp(ts)
			if off != wantOff || gotTs != wantTs || ok != wantOK {
				t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d, %v", ts, off, gotTs, ok, wantOff, wantTs, wantOK)
			}
		}
		wantTs, wantOff := int64(-1), int64(-1)
		for _, h := range a.headers {
			if h.MaxTimestamp > wantTs {
				wantTs, wantOff = h.MaxTimestamp, h.LastOffset()
			}
		}
		if ts, off := l.MaxTimestamp(); ts != wantTs || off != wantOff {
			t.Fatalf("MaxTimestamp = %d, %d; want %d, %d", ts, off, wantTs, wantOff)
		}
	}
	check(l, 0)
	if err := l.SetStartOffset(a.headers[50].BaseOffset + 1); err != nil {
		t.Fatal(err)
	}
	check(l, l.StartOffset())
	l.Close()
	l = openLog(t, dir, cfg, true, nil)
	check(l, l.StartOffset())
	crash(l)
	l = openLog(t, dir, cfg, false, nil)
	defer l.Close()
	check(l, l.StartOffset())
}

func TestScanHeaders(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	l := openLog(t, t.TempDir(), cfg, true, nil)
	defer l.Close()
	a := newAppender(t, l)
	for i := 0; i < 50; i++ {
		a.add(3, 100)
	}
	var got []int64
	if err := l.ScanHeaders(31, func(h recordbatch.Header) bool {
		got = append(got, h.BaseOffset)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 40 || got[0] != 30 || got[39] != 147 {
		t.Fatalf("ScanHeaders(31): %d headers from %v", len(got), got[:1])
	}
	n := 0
	_ = l.ScanHeaders(0, func(h recordbatch.Header) bool { n++; return n < 5 })
	if n != 5 {
		t.Fatalf("ScanHeaders did not stop: %d", n)
	}
}

func TestReopenAfterCleanCloseIsIdentical(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 5000
	cfg.IndexIntervalBytes = 500
	dir := t.TempDir()
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	for i := 0; i < 100; i++ {
		a.epoch = int32(i / 30)
		a.add(2, 120)
	}
	if err := l.SetStartOffset(33); err != nil {
		t.Fatal(err)
	}
	type state struct {
		start, end, size int64
		segs             int
		data             []byte
		maxTs, maxOff    int64
		epochs           string
		files            map[string]int64
	}
	snap := func(l *Log) state {
		data, err := l.Read(l.StartOffset(), 1<<30, l.EndOffset(), false)
		if err != nil {
			t.Fatal(err)
		}
		ts, off := l.MaxTimestamp()
		return state{l.StartOffset(), l.EndOffset(), l.Size(), l.NumSegments(), data, ts, off,
			fmt.Sprint(l.EpochEntries()), nil}
	}
	files := func() map[string]int64 {
		m := map[string]int64{}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			info, _ := e.Info()
			m[e.Name()] = info.Size()
		}
		return m
	}
	before := snap(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	beforeFiles := files()
	l = openLog(t, dir, cfg, true, nil)
	after := snap(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("state changed over reopen:\n%+v\n%+v", before, after)
	}
	if fmt.Sprint(beforeFiles) != fmt.Sprint(files()) {
		t.Fatalf("files changed over reopen:\n%v\n%v", beforeFiles, files())
	}
	if before.start != 33 || before.epochs != "[{0 33} {1 60} {2 120} {3 180}]" {
		t.Fatalf("unexpected state %d %s", before.start, before.epochs)
	}
}

func TestConcurrentAppendAndRead(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 10 << 10
	cfg.IndexIntervalBytes = 256
	l := openLog(t, t.TempDir(), cfg, true, nil)
	defer l.Close()
	a := newAppender(t, l)
	const total = 400
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := int64(0)
			deadline := time.Now().Add(10 * time.Second)
			for off < total && time.Now().Before(deadline) {
				b, err := l.Read(off, 4096, l.EndOffset(), true)
				if err != nil {
					errc <- err
					return
				}
				hs := splitBatchesErr(b)
				if hs == nil && len(b) > 0 {
					errc <- errors.New("partial batch")
					return
				}
				for _, h := range hs {
					if h.BaseOffset > off {
						errc <- fmt.Errorf("gap: wanted %d got %d", off, h.BaseOffset)
						return
					}
					off = h.NextOffset()
				}
			}
			if off < total {
				errc <- fmt.Errorf("reader stuck at %d", off)
			}
		}()
	}
	for i := 0; i < total; i++ {
		a.add(1, 50+i%200)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

func TestFlushPolicy(t *testing.T) {
	cfg := testConfig()
	cfg.FlushMessages = 3
	l := openLog(t, t.TempDir(), cfg, true, nil)
	defer l.Close()
	rp := func() int64 {
		l.mu.RLock()
		defer l.mu.RUnlock()
		return l.recoveryPoint
	}
	a := newAppender(t, l)
	a.add(2, 10)
	if rp() != 0 {
		t.Fatalf("flushed too early: %d", rp())
	}
	a.add(1, 10)
	if rp() != 3 {
		t.Fatalf("recovery point %d after 3 messages, want 3", rp())
	}
	cfg.FlushMessages = -1
	cfg.FlushInterval = time.Minute
	l.SetConfig(cfg)
	clock := &fixedClock{t: time.Now()}
	l.mu.Lock()
	l.now, l.lastFlush = clock.now, clock.now()
	l.mu.Unlock()
	a.add(1, 10)
	if rp() != 3 {
		t.Fatalf("flushed before the interval: %d", rp())
	}
	clock.advance(time.Minute)
	a.add(1, 10)
	if rp() != 5 {
		t.Fatalf("recovery point %d after the interval, want 5", rp())
	}
}

// preallocatedIndexSize is the size of an active segment's offset index:
// the normalized MaxIndexBytes (capped to what a segment can use) in whole
// entries.
func preallocatedIndexSize(cfg Config) int64 {
	n := int64(cfg.normalized().MaxIndexBytes)
	return n - n%offsetIndexEntrySize
}

// A log directory is deleted by a rename out of the partition's name first:
// a leftover "-delete" directory is never a partition and goes at the next
// start.
func TestRemoveDirRenamesFirst(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "t-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RemoveDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := RemoveDir(dir); err != nil {
		t.Fatalf("removing a missing dir: %v", err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("left %v", entries)
	}
	// A crash between rename and removal leaves t-1.<id>-delete.
	left := filepath.Join(parent, "t-1.0123456789abcdef"+DeleteSuffix)
	if err := os.MkdirAll(filepath.Join(left, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(parent, "t-2")
	if err := os.MkdirAll(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveDeleted(parent)
	if err != nil || len(removed) != 1 || removed[0] != filepath.Base(left) {
		t.Fatalf("RemoveDeleted = %v, %v", removed, err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("a partition directory was removed: %v", err)
	}
}
