package segment

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fiveSegments makes a log of 5 segments with 4 one-record batches each
// (offsets 0..19), batch timestamps 1000*offset.
func fiveSegments(t *testing.T, cfg Config) (*Log, *appender, string) {
	t.Helper()
	dir := t.TempDir()
	cfg.SegmentBytes = 4 * int64(len(makeBatch(0, 1, 0, 0, 100)))
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	for i := 0; i < 20; i++ {
		a.ts = int64(i) * 1000
		a.add(1, 100)
	}
	if l.NumSegments() != 5 {
		t.Fatalf("%d segments, want 5", l.NumSegments())
	}
	return l, a, dir
}

func TestRetentionByTime(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionTime = 5 * time.Second
	l, a, _ := fiveSegments(t, cfg)
	defer l.Close()
	// Segment k holds timestamps 4000k..4000k+3000. At now=12_500 the first
	// two segments (largest 3000, 7000) are older than 5 s.
	n, err := l.DeleteOldSegments(time.UnixMilli(12_500), l.EndOffset())
	if err != nil || n != 2 {
		t.Fatalf("deleted %d, %v; want 2", n, err)
	}
	if l.StartOffset() != 8 || l.NumSegments() != 3 {
		t.Fatalf("start %d, segments %d", l.StartOffset(), l.NumSegments())
	}
	if _, err := l.Read(7, 100, 20, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	if got, _ := l.Read(8, 1<<20, 20, true); !bytes.Equal(got, a.from(8)) {
		t.Fatal("remaining data differs")
	}
	// The high watermark limit protects segments holding offsets >= limit.
	// Segment 8..11 ends below 13 and goes; 12..15 holds 13 and stays.
	n, err = l.DeleteOldSegments(time.UnixMilli(1_000_000), 13)
	if err != nil || n != 1 || l.StartOffset() != 12 {
		t.Fatalf("deleted %d, %v with limit 13, start %d; want 1, start 12", n, err, l.StartOffset())
	}
}

func TestRetentionTimeBreached(t *testing.T) {
	const now = int64(1_700_000_000_000)
	week := 7 * 24 * time.Hour
	for _, tc := range []struct {
		name           string
		nowMs, largest int64
		retention      time.Duration
		want           bool
	}{
		{"forever", now, 0, -1, false},
		{"forever, oldest timestamp", now, math.MinInt64, -1, false},
		{"zero retention, same ms", now, now, 0, false},
		{"zero retention, 1 ms old", now, now - 1, 0, true},
		{"exactly the retention", now, now - 1000, time.Second, false},
		{"1 ms past the retention", now, now - 1001, time.Second, true},
		{"a week old", now, now - week.Milliseconds() - 1, week, true},
		{"timestamp in the future", now, math.MaxInt64, 0, false},
		{"timestamp in the future, now negative", -5, math.MaxInt64, 0, false},
		{"age beyond int64 is older than any retention", now, math.MinInt64, week, true},
		{"age beyond int64, largest retention", math.MaxInt64, -1, math.MaxInt64, true},
		{"within the largest retention", now, 0, math.MaxInt64, false},
		{"past the largest retention", math.MaxInt64, 0, math.MaxInt64, true},
	} {
		if got := retentionTimeBreached(tc.nowMs, tc.largest, tc.retention); got != tc.want {
			t.Errorf("%s: retentionTimeBreached(%d, %d, %v) = %v, want %v",
				tc.name, tc.nowMs, tc.largest, tc.retention, got, tc.want)
		}
	}
}

// TestRetentionForeverKeepsOldSegments: segments whose every timestamp is
// decades old survive retention when RetentionTime is forever (what
// retention.ms=Long.MAX_VALUE or a compacted topic's policy becomes, -1) or
// the largest Duration, and no size limit is set.
func TestRetentionForeverKeepsOldSegments(t *testing.T) {
	for _, retention := range []time.Duration{-1, math.MaxInt64} {
		cfg := testConfig()
		cfg.RetentionTime = retention
		l, a, _ := fiveSegments(t, cfg) // timestamps 0..19 s after 1970
		now := time.Now()
		n, err := l.DeleteOldSegments(now, l.EndOffset())
		if err != nil || n != 0 {
			t.Fatalf("retention %v: deleted %d segments, %v; want none", retention, n, err)
		}
		if l.StartOffset() != 0 || l.NumSegments() != 5 {
			t.Fatalf("retention %v: start %d, %d segments", retention, l.StartOffset(), l.NumSegments())
		}
		if got, _ := l.Read(0, 1<<20, 20, true); !bytes.Equal(got, a.from(0)) {
			t.Fatalf("retention %v: data differs", retention)
		}
		// The log start offset still deletes what lies wholly below it
		// (segments 0..3 and 4..7), and retention deletes nothing more.
		if err := l.SetStartOffset(9); err != nil {
			t.Fatal(err)
		}
		if n, err := l.DeleteOldSegments(now, l.EndOffset()); err != nil || n != 0 || l.NumSegments() != 3 || l.StartOffset() != 9 {
			t.Fatalf("retention %v after start 9: deleted %d, %v, %d segments, start %d; want 0 more, 3 left, start 9",
				retention, n, err, l.NumSegments(), l.StartOffset())
		}
		l.Close()
	}
}

func TestRetentionHighWatermarkLimit(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionTime = 0
	l, _, _ := fiveSegments(t, cfg)
	defer l.Close()
	n, err := l.DeleteOldSegments(time.UnixMilli(1_000_000), 9)
	if err != nil || n != 2 || l.StartOffset() != 8 {
		t.Fatalf("deleted %d, %v, start %d; want 2 segments, start 8", n, err, l.StartOffset())
	}
}

func TestRetentionDeletesAllAndRolls(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionTime = time.Second
	l, a, dir := fiveSegments(t, cfg)
	n, err := l.DeleteOldSegments(time.UnixMilli(1_000_000), l.EndOffset())
	if err != nil || n != 5 {
		t.Fatalf("deleted %d, %v; want 5", n, err)
	}
	if l.NumSegments() != 1 || l.StartOffset() != 20 || l.EndOffset() != 20 || l.Size() != 0 {
		t.Fatalf("after deleting everything: segments %d start %d end %d size %d",
			l.NumSegments(), l.StartOffset(), l.EndOffset(), l.Size())
	}
	// Nothing more to delete: the empty active segment stays.
	if n, _ := l.DeleteOldSegments(time.UnixMilli(2_000_000), 20); n != 0 {
		t.Fatalf("deleted %d from an empty log", n)
	}
	a.ts = 2_000_000
	a.add(1, 10)
	l.Close()
	l = openLog(t, dir, cfg, true, nil)
	defer l.Close()
	if l.StartOffset() != 20 || l.EndOffset() != 21 {
		t.Fatalf("after reopen start %d end %d", l.StartOffset(), l.EndOffset())
	}
}

func TestRetentionBySize(t *testing.T) {
	cfg := testConfig()
	l, a, _ := fiveSegments(t, cfg)
	defer l.Close()
	seg := 4 * int64(len(a.batches[0]))
	l.SetConfig(func() Config { c := cfg; c.SegmentBytes = seg; c.RetentionBytes = 2*seg + 1; return c }())
	// 5 segments = 5*seg; deleting while size-seg >= 2*seg+1: delete 2 (5->3 segs; 3*seg-seg = 2seg < 2seg+1 stops).
	n, err := l.DeleteOldSegments(time.UnixMilli(0), l.EndOffset())
	if err != nil || n != 2 {
		t.Fatalf("deleted %d, %v; want 2", n, err)
	}
	if l.StartOffset() != 8 || l.Size() != 3*seg {
		t.Fatalf("start %d size %d", l.StartOffset(), l.Size())
	}
}

func TestDeletionIsLogged(t *testing.T) {
	var buf logBuf
	cfg := testConfig()
	cfg.RetentionTime = 0
	cfg.SegmentBytes = 500
	l := openLog(t, t.TempDir(), cfg, true, &buf)
	defer l.Close()
	a := newAppender(t, l)
	for i := 0; i < 4; i++ {
		a.add(1, 300)
	}
	if n, err := l.DeleteOldSegments(time.UnixMilli(1<<40), 2); err != nil || n != 2 {
		t.Fatalf("deleted %d %v", n, err)
	}
	if c := strings.Count(buf.String(), "msg=\"deleting segment\""); c != 2 {
		t.Fatalf("%d deletion log lines:\n%s", c, buf.String())
	}
}

func TestTruncateToMiddleOfSegment(t *testing.T) {
	l, a, dir := fiveSegments(t, testConfig())
	if err := l.TruncateTo(18); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 18 || l.NumSegments() != 5 {
		t.Fatalf("end %d segments %d", l.EndOffset(), l.NumSegments())
	}
	got, _ := l.Read(0, 1<<20, 100, false)
	if !bytes.Equal(got, a.from(0)[:18*len(a.batches[0])]) {
		t.Fatal("data after truncation differs")
	}
	a.batches, a.headers = a.batches[:18], a.headers[:18]
	a.add(3, 10)
	a.add(1, 10)
	got, _ = l.Read(0, 1<<20, 100, false)
	if !bytes.Equal(got, a.from(0)) {
		t.Fatal("data after re-append differs")
	}
	l.Close()
	l = openLog(t, dir, testConfig(), true, nil)
	defer l.Close()
	if l.EndOffset() != 22 {
		t.Fatalf("end after reopen %d", l.EndOffset())
	}
}

func TestTruncateToAcrossSegments(t *testing.T) {
	cfg := testConfig()
	l, a, dir := fiveSegments(t, cfg)
	if err := l.TruncateTo(6); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 6 || l.NumSegments() != 2 {
		t.Fatalf("end %d segments %d", l.EndOffset(), l.NumSegments())
	}
	for _, base := range []int64{8, 12, 16} {
		if _, err := os.Stat(segmentPath(dir, base, logSuffix)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("segment %d still on disk: %v", base, err)
		}
	}
	// The truncated segment is active again, with a preallocated index.
	if st, _ := os.Stat(segmentPath(dir, 4, indexSuffix)); st.Size() != preallocatedIndexSize(l.cfg) {
		t.Fatalf("index of new active segment not preallocated: %d", st.Size())
	}
	a.batches, a.headers = a.batches[:6], a.headers[:6]
	for i := 0; i < 10; i++ {
		a.add(1, 100)
	}
	got, _ := l.Read(0, 1<<20, 100, false)
	if !bytes.Equal(got, a.from(0)) {
		t.Fatal("data differs")
	}
	// Truncating at a segment base leaves that segment empty.
	if err := l.TruncateTo(8); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 8 {
		t.Fatalf("end %d", l.EndOffset())
	}
	l.Close()
	l = openLog(t, dir, cfg, false, nil)
	defer l.Close()
	if l.EndOffset() != 8 {
		t.Fatalf("end after reopen %d", l.EndOffset())
	}
}

func TestTruncateMidBatch(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig(), true, nil)
	defer l.Close()
	a := newAppender(t, l)
	a.add(5, 10) // 0..4
	a.add(5, 10) // 5..9
	if err := l.TruncateTo(7); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 5 {
		t.Fatalf("end %d, want 5 (the batch containing 7 is removed)", l.EndOffset())
	}
	// Beyond the end: no-op.
	if err := l.TruncateTo(100); err != nil || l.EndOffset() != 5 {
		t.Fatal(err)
	}
}

func TestTruncateBelowStart(t *testing.T) {
	l, _, _ := fiveSegments(t, testConfig())
	defer l.Close()
	if _, err := l.DeleteOldSegments(time.UnixMilli(0), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.SetStartOffset(9); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 3 || l.EndOffset() != 3 || l.NumSegments() != 1 {
		t.Fatalf("start %d end %d segs %d", l.StartOffset(), l.EndOffset(), l.NumSegments())
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	l, _, dir := fiveSegments(t, testConfig())
	if err := l.AssignEpoch(3, 10); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		if l.StartOffset() != 1000 || l.EndOffset() != 1000 || l.Size() != 0 || l.NumSegments() != 1 {
			t.Fatalf("start %d end %d size %d segs %d", l.StartOffset(), l.EndOffset(), l.Size(), l.NumSegments())
		}
		if _, ok := l.LatestEpoch(); ok {
			t.Fatal("epoch cache not cleared")
		}
	}
	check()
	ents, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(ents) != 1 || filepath.Base(ents[0]) != "00000000000000001000.log" {
		t.Fatalf("files: %v", ents)
	}
	l.Close()
	l = openLog(t, dir, testConfig(), true, nil)
	check()
	a := newAppender(t, l)
	a.add(2, 10)
	if got, _ := l.Read(1000, 1<<20, 1002, false); !bytes.Equal(got, a.from(0)) {
		t.Fatal("data differs")
	}
	// Starting lower than before also sticks.
	if err := l.TruncateFullyAndStartAt(5); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openLog(t, dir, testConfig(), true, nil)
	defer l.Close()
	if l.StartOffset() != 5 || l.EndOffset() != 5 {
		t.Fatalf("start %d end %d", l.StartOffset(), l.EndOffset())
	}
}

func TestSetStartOffsetPersisted(t *testing.T) {
	cfg := testConfig()
	l, a, dir := fiveSegments(t, cfg)
	if err := l.SetStartOffset(21); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("above LEO: %v", err)
	}
	if err := l.SetStartOffset(10); err != nil {
		t.Fatal(err)
	}
	if err := l.SetStartOffset(7); err != nil || l.StartOffset() != 10 {
		t.Fatalf("lowering: %v, start %d", err, l.StartOffset())
	}
	if l.NumSegments() != 3 { // 0..3 and 4..7 gone; 8..11 holds 10
		t.Fatalf("%d segments", l.NumSegments())
	}
	got, err := l.Read(10, 1<<20, 20, false)
	if err != nil || !bytes.Equal(got, a.from(10)) {
		t.Fatalf("read at start: %v", err)
	}
	if _, err := l.Read(9, 1<<20, 20, false); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatal(err)
	}
	l.Close()
	l = openLog(t, dir, cfg, true, nil)
	if l.StartOffset() != 10 {
		t.Fatalf("start after clean reopen %d", l.StartOffset())
	}
	crash(l)
	l = openLog(t, dir, cfg, false, nil)
	defer l.Close()
	if l.StartOffset() != 10 {
		t.Fatalf("start after crash %d", l.StartOffset())
	}
	if err := l.SetStartOffset(20); err != nil || l.StartOffset() != 20 || l.NumSegments() != 1 {
		t.Fatalf("start at LEO: %v %d %d", err, l.StartOffset(), l.NumSegments())
	}
}
