package segment

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rec is one record as read back from a log.
type rec struct {
	offset     int64
	key, value string
	tomb       bool
}

func (r rec) String() string {
	if r.tomb {
		return fmt.Sprintf("%d:%s=<nil>", r.offset, r.key)
	}
	return fmt.Sprintf("%d:%s=%s", r.offset, r.key, r.value)
}

// logRecords reads every record of the log from its start, checking that
// offsets strictly increase.
func logRecords(t testing.TB, l *Log) []rec {
	t.Helper()
	b, err := l.Read(l.StartOffset(), math.MaxInt32, math.MaxInt64, true)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	batches, _, err := recordbatch.Split(b)
	if err != nil {
		t.Fatalf("Read returned invalid batches: %v", err)
	}
	var out []rec
	last := int64(-1)
	for _, batch := range batches {
		h, _ := recordbatch.ParseHeader(batch)
		if h.BaseOffset <= last {
			t.Fatalf("batch at %d after offset %d", h.BaseOffset, last)
		}
		last = h.LastOffset()
		err := recordbatch.ForEachRecord(batch, func(r kmsg.Record) error {
			o := h.BaseOffset + int64(r.OffsetDelta)
			if len(out) > 0 && o <= out[len(out)-1].offset {
				return fmt.Errorf("offset %d after %d", o, out[len(out)-1].offset)
			}
			out = append(out, rec{offset: o, key: string(r.Key), value: string(r.Value), tomb: r.Value == nil})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// writeKeyed appends n batches of 3 keyed records over 10 keys, every 11th
// record a tombstone, and returns what it wrote.
func writeKeyed(t testing.TB, l *Log, n int) []rec {
	t.Helper()
	var out []rec
	for i := 0; i < n; i++ {
		base := l.EndOffset()
		spec := recordbatch.NoProducer()
		spec.BaseOffset, spec.FirstTimestamp = base, 1_000_000+base
		var rs []recordbatch.Record
		for j := 0; j < 3; j++ {
			o := base + int64(j)
			r := rec{offset: o, key: fmt.Sprintf("k%d", (o*7)%10), value: fmt.Sprintf("v%d", o), tomb: o%11 == 5}
			rr := recordbatch.Record{Key: []byte(r.key), TimestampDelta: int64(j)}
			if !r.tomb {
				rr.Value = []byte(r.value)
			} else {
				r.value = ""
			}
			rs = append(rs, rr)
			out = append(out, r)
		}
		b := recordbatch.Build(spec, rs)
		h, err := recordbatch.Validate(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Append(b, h); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	return out
}

// compacted is what a cleaning of [0, end) with a map holding all of it
// keeps: the latest record of each key below end (tombstones too unless
// dropTombs), and everything from end on.
func compacted(all []rec, end int64, dropTombs bool) []rec {
	latest := map[string]int64{}
	for _, r := range all {
		if r.offset < end {
			latest[r.key] = r.offset
		}
	}
	var out []rec
	for _, r := range all {
		if r.offset >= end || (latest[r.key] == r.offset && !(dropTombs && r.tomb)) {
			out = append(out, r)
		}
	}
	return out
}

// liveValues is key -> latest value, deleted keys left out.
func liveValues(rs []rec) map[string]string {
	m := map[string]string{}
	for _, r := range rs {
		if r.tomb {
			delete(m, r.key)
		} else {
			m[r.key] = r.value
		}
	}
	return m
}

func cleanConfig() Config {
	cfg := testConfig()
	cfg.SegmentBytes = 1500
	return cfg
}

func TestCleanKeepsLatestValues(t *testing.T) {
	dir := t.TempDir()
	cfg := cleanConfig()
	l := openLog(t, dir, cfg, true, nil)
	all := writeKeyed(t, l, 150)
	before := l.Size()
	active := l.ActiveSegmentBase()

	res, err := l.Clean(CleanOptions{FirstUncleanable: math.MaxInt64, DedupeBufferBytes: 1 << 20, DeleteRetention: time.Hour})
	if err != nil {
		t.Fatalf("Clean: %v", err)
	}
	if res.EndOffset != active {
		t.Fatalf("EndOffset %d, want the active segment's base %d", res.EndOffset, active)
	}
	want := compacted(all, active, false)
	if got := logRecords(t, l); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after cleaning:\n got %v\nwant %v", got, want)
	}
	if l.Size() >= before {
		t.Fatalf("%d bytes after cleaning, %d before", l.Size(), before)
	}
	// Appends go on, and a restart (clean or not) reads the same.
	all = append(all, writeKeyed(t, l, 5)...)
	want = compacted(all, active, false)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, cleanShutdown := range []bool{true, false} {
		l = openLog(t, dir, cfg, cleanShutdown, nil)
		if got := logRecords(t, l); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("after reopen (clean %v):\n got %v\nwant %v", cleanShutdown, got, want)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// The second cleaning, after delete.retention.ms: the tombstones the
	// first one kept (and gave a delete horizon) go.
	l = openLog(t, dir, cfg, true, nil)
	defer l.Close()
	all = append(all, writeKeyed(t, l, 40)...)
	sizeBefore := l.Size()
	res2, err := l.Clean(CleanOptions{FirstDirty: res.EndOffset, FirstUncleanable: math.MaxInt64, DedupeBufferBytes: 1 << 20,
		DeleteRetention: time.Hour, Now: time.Now().Add(time.Hour + time.Second)})
	if err != nil {
		t.Fatalf("second Clean: %v", err)
	}
	if l.Size() >= sizeBefore {
		t.Fatalf("%d bytes after the second cleaning, %d before", l.Size(), sizeBefore)
	}
	got := logRecords(t, l)
	for _, r := range got {
		if r.tomb && r.offset < res.EndOffset {
			t.Fatalf("tombstone %v of the first cleaned range survived the horizon", r)
		}
	}
	if lv, want := liveValues(got), liveValues(all); fmt.Sprint(lv) != fmt.Sprint(want) {
		t.Fatalf("live values %v, want %v", lv, want)
	}
	keys := map[string]bool{}
	for _, r := range got {
		if r.offset < res2.EndOffset {
			if keys[r.key] {
				t.Fatalf("key %s twice below the cleaned end %d", r.key, res2.EndOffset)
			}
			keys[r.key] = true
		}
	}
}

// TestCleanBoundedMap cleans with a map for 5 of the 10 keys: each
// cleaning covers what fits and the next one goes on from there.
func TestCleanBoundedMap(t *testing.T) {
	l := openLog(t, t.TempDir(), cleanConfig(), true, nil)
	defer l.Close()
	all := writeKeyed(t, l, 100)
	active := l.ActiveSegmentBase()
	dirty := int64(0)
	for rounds := 0; dirty < active; rounds++ {
		if rounds > 200 {
			t.Fatalf("no progress past %d", dirty)
		}
		res, err := l.Clean(CleanOptions{FirstDirty: dirty, FirstUncleanable: math.MaxInt64,
			DedupeBufferBytes: 6 * offsetMapEntryBytes, DeleteRetention: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if res.EndOffset <= dirty {
			t.Fatalf("EndOffset %d did not pass %d", res.EndOffset, dirty)
		}
		if res.MapEntries > 5 {
			t.Fatalf("%d map entries with room for 5", res.MapEntries)
		}
		dirty = res.EndOffset
		if lv, want := liveValues(logRecords(t, l)), liveValues(all); fmt.Sprint(lv) != fmt.Sprint(want) {
			t.Fatalf("live values %v, want %v", lv, want)
		}
	}
	if dirty != active {
		t.Fatalf("cleaned up to %d, want %d", dirty, active)
	}
}

func TestCleanNothingDirty(t *testing.T) {
	l := openLog(t, t.TempDir(), cleanConfig(), true, nil)
	defer l.Close()
	writeKeyed(t, l, 3) // one segment: the active one
	res, err := l.Clean(CleanOptions{FirstUncleanable: math.MaxInt64, DedupeBufferBytes: 1 << 20})
	if err != nil || res.EndOffset != 0 || res.Groups != 0 {
		t.Fatalf("res %+v err %v", res, err)
	}
}

// TestCleanAbortsOnTruncation: a truncation while the cleaner reads makes
// the swap give up and leaves no cleaner file behind.
func TestCleanAbortsOnTruncation(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, cleanConfig(), true, nil)
	defer l.Close()
	writeKeyed(t, l, 60)
	before := logRecords(t, l)
	truncated := false
	_, err := l.Clean(CleanOptions{FirstUncleanable: math.MaxInt64, DedupeBufferBytes: 1 << 20,
		Throttle: func(int64) {
			if !truncated {
				truncated = true
				if err := l.TruncateTo(l.EndOffset() - 1); err != nil {
					t.Error(err)
				}
			}
		}})
	if !errors.Is(err, ErrCleaningAborted) {
		t.Fatalf("err %v, want ErrCleaningAborted", err)
	}
	got := logRecords(t, l)
	if fmt.Sprint(got) != fmt.Sprint(before[:len(got)]) {
		t.Fatal("log changed by an aborted cleaning")
	}
	assertNoCleanerFiles(t, dir)
}

func assertNoCleanerFiles(t testing.TB, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		for _, sfx := range []string{cleanedSuffix, swapSuffix, deletedSuffix, swapEndSuffix} {
			if strings.HasSuffix(e.Name(), sfx) {
				t.Fatalf("cleaner file %s left", e.Name())
			}
		}
	}
}

func copyDir(t testing.TB, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

var errInjectedCrash = errors.New("injected crash")

// TestCleanCrashAtEveryPoint kills a cleaning at every point of the swap
// protocol (the files left as they are, nothing flushed or closed
// cleanly), reopens the directory with crash recovery and checks the log:
// with one group it is exactly the old log or exactly the cleaned one;
// with many groups each group is old or new, so the log holds every record
// of the cleaned log and only records of the old one.
func TestCleanCrashAtEveryPoint(t *testing.T) {
	for _, tc := range []struct {
		name         string
		segmentBytes int64 // at cleaning time: how segments group
		oneGroup     bool
	}{
		{"one group", 1 << 20, true},
		{"many groups", 1500, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := t.TempDir()
			cfg := cleanConfig()
			l := openLog(t, orig, cfg, true, nil)
			writeKeyed(t, l, 120)
			oldRecs := logRecords(t, l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			cleanCfg := cfg
			cleanCfg.SegmentBytes = tc.segmentBytes
			opts := CleanOptions{FirstUncleanable: math.MaxInt64, DedupeBufferBytes: 1 << 20, DeleteRetention: time.Hour}

			ref := filepath.Join(t.TempDir(), "ref")
			copyDir(t, orig, ref)
			l = openLog(t, ref, cleanCfg, true, nil)
			points := 0
			opts.Hook = func(int) error { points++; return nil }
			res, err := l.Clean(opts)
			if err != nil {
				t.Fatal(err)
			}
			if tc.oneGroup != (res.Groups == 1) {
				t.Fatalf("%d groups", res.Groups)
			}
			newRecs := logRecords(t, l)
			l.Close()
			if fmt.Sprint(newRecs) == fmt.Sprint(oldRecs) {
				t.Fatal("cleaning changed nothing")
			}

			for k := 0; k < points; k++ {
				dir := filepath.Join(t.TempDir(), fmt.Sprint(k))
				copyDir(t, orig, dir)
				l := openLog(t, dir, cleanCfg, true, nil)
				o := opts
				o.Hook = func(p int) error {
					if p == k {
						return errInjectedCrash
					}
					return nil
				}
				if _, err := l.Clean(o); !errors.Is(err, errInjectedCrash) {
					t.Fatalf("point %d: Clean returned %v", k, err)
				}
				crash(l)
				l = openLog(t, dir, cleanCfg, false, nil)
				got := logRecords(t, l)
				assertNoCleanerFiles(t, dir)
				l.Close()
				if tc.oneGroup {
					if fmt.Sprint(got) != fmt.Sprint(oldRecs) && fmt.Sprint(got) != fmt.Sprint(newRecs) {
						t.Fatalf("crash at point %d: log is neither old nor new:\n%v", k, got)
					}
					continue
				}
				for _, r := range newRecs {
					if !slices.Contains(got, r) {
						t.Fatalf("crash at point %d: record %v of the cleaned log missing", k, r)
					}
				}
				for _, r := range got {
					if !slices.Contains(oldRecs, r) {
						t.Fatalf("crash at point %d: record %v not in the old log", k, r)
					}
				}
			}
			t.Logf("%d crash points checked", points)
		})
	}
}

// TestCleanTransactionsAndProducers: an aborted transaction's records go
// (its marker and .txnindex entry stay), and an idempotent producer's last
// batch stays as an empty header when its records are superseded, so the
// producer's epoch and sequence survive.
func TestCleanTransactionsAndProducers(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, cleanConfig(), true, nil)
	defer func() { l.Close() }()
	appendBatch := func(spec recordbatch.BatchSpec, recs ...kv) recordbatch.Header {
		spec.BaseOffset = l.EndOffset()
		b, h := keyedBatch(spec, recs...)
		if err := l.Append(b, h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	txn := recordbatch.NoProducer()
	txn.ProducerID, txn.ProducerEpoch, txn.BaseSequence, txn.Attributes = 9, 0, 0, recordbatch.TransactionalBit
	aborted := appendBatch(txn, kv{key: "t", value: "aborted"})
	marker := recordbatch.BuildTxnMarker(9, 0, false, 0, 0)
	recordbatch.SetBaseOffset(marker, l.EndOffset())
	mh, _ := recordbatch.Validate(marker)
	if err := l.AppendAbortMarker(marker, mh, AbortedTxn{ProducerID: 9, FirstOffset: aborted.BaseOffset, LastOffset: mh.BaseOffset}); err != nil {
		t.Fatal(err)
	}
	idem := recordbatch.NoProducer()
	idem.ProducerID, idem.ProducerEpoch, idem.BaseSequence = 11, 3, 40
	idemH := appendBatch(idem, kv{key: "b", value: "old"})
	writeKeyed(t, l, 60) // overwrites b (key k-values only: b stays) and rolls
	appendBatch(recordbatch.NoProducer(), kv{key: "b", value: "new"})
	writeKeyed(t, l, 20)

	if _, err := l.Clean(CleanOptions{FirstUncleanable: math.MaxInt64, DedupeBufferBytes: 1 << 20, DeleteRetention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	b, err := l.Read(0, math.MaxInt32, math.MaxInt64, true)
	if err != nil {
		t.Fatal(err)
	}
	batches, hs, err := recordbatch.Split(b)
	if err != nil {
		t.Fatal(err)
	}
	var sawMarker, sawIdem bool
	for i, h := range hs {
		switch {
		case h.BaseOffset == aborted.BaseOffset:
			// Producer 9's last data batch: kept, emptied.
			if h.RecordCount != 0 {
				t.Fatalf("aborted batch kept %d records", h.RecordCount)
			}
		case h.BaseOffset == mh.BaseOffset:
			sawMarker = h.IsControl()
		case h.BaseOffset == idemH.BaseOffset:
			sawIdem = true
			if h.RecordCount != 0 || h.ProducerID != 11 || h.ProducerEpoch != 3 || h.BaseSequence != 40 || h.LastSequence() != 40 {
				t.Fatalf("producer 11's last batch: %+v", h)
			}
		default:
			for _, r := range recordsOf(t, batches[i]) {
				if strings.Contains(r, "aborted") || strings.HasSuffix(r, ":b=old") {
					t.Fatalf("record %s survived", r)
				}
			}
		}
	}
	if !sawMarker || !sawIdem {
		t.Fatalf("marker kept %v, producer 11's batch kept %v", sawMarker, sawIdem)
	}
	txns, err := l.AbortedTxnsOfSegments()
	if err != nil || len(txns) != 1 || txns[0].LastOffset != mh.BaseOffset {
		t.Fatalf("aborted transactions after cleaning: %v %v", txns, err)
	}
	if got, _ := l.CollectAbortedTxns(0, l.EndOffset()); len(got) != 1 {
		t.Fatalf("CollectAbortedTxns: %v", got)
	}
	l.Close()
	l = openLog(t, dir, cleanConfig(), false, nil)
	if txns, err := l.AbortedTxnsOfSegments(); err != nil || len(txns) != 1 || txns[0].LastOffset != mh.BaseOffset {
		t.Fatalf("aborted transactions after reopen: %v %v", txns, err)
	}
}

func TestSegmentStatsAndTruncatedTo(t *testing.T) {
	l := openLog(t, t.TempDir(), cleanConfig(), true, nil)
	defer l.Close()
	writeKeyed(t, l, 40)
	st := l.SegmentStats()
	if len(st) != l.NumSegments() || !st[len(st)-1].Active || st[0].Active || st[0].Base != 0 || st[0].Next != st[1].Base {
		t.Fatalf("stats %+v", st)
	}
	if got := l.TakeTruncatedTo(); got != math.MaxInt64 {
		t.Fatalf("TakeTruncatedTo without truncation = %d", got)
	}
	if err := l.TruncateTo(50); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(70); err != nil { // past the end now: no truncation
		t.Fatal(err)
	}
	if got := l.TakeTruncatedTo(); got != 50 {
		t.Fatalf("TakeTruncatedTo = %d, want 50", got)
	}
	if got := l.TakeTruncatedTo(); got != math.MaxInt64 {
		t.Fatalf("second TakeTruncatedTo = %d", got)
	}
}

// TestAppendAsFollowerCopiesHoles: a follower copies a cleaned leader's
// batches with the holes between them, rolling where needed, and reads
// and reopens the same.
func TestAppendAsFollowerCopiesHoles(t *testing.T) {
	leaderDir := t.TempDir()
	leader := openLog(t, leaderDir, cleanConfig(), true, nil)
	defer leader.Close()
	writeKeyed(t, leader, 150)
	if _, err := leader.Clean(CleanOptions{FirstUncleanable: math.MaxInt64, DedupeBufferBytes: 1 << 20, DeleteRetention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	want := logRecords(t, leader)
	b, err := leader.Read(0, math.MaxInt32, math.MaxInt64, true)
	if err != nil {
		t.Fatal(err)
	}
	batches, hs, err := recordbatch.Split(b)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := cleanConfig()
	cfg.SegmentBytes = 300 // rolls at the gaps too
	f := openLog(t, dir, cfg, true, nil)
	gaps := 0
	for i, batch := range batches {
		if hs[i].BaseOffset != f.EndOffset() {
			gaps++
		}
		if err := f.AppendAsFollower(batch, hs[i], nil); err != nil {
			t.Fatalf("batch at %d: %v", hs[i].BaseOffset, err)
		}
	}
	if gaps == 0 {
		t.Fatal("the cleaned leader has no holes to copy")
	}
	if err := f.AppendAsFollower(batches[0], hs[0], nil); !errors.Is(err, ErrUnexpectedOffset) {
		t.Fatalf("a batch below the log end: %v", err)
	}
	if f.EndOffset() != leader.EndOffset() {
		t.Fatalf("follower ends at %d, leader at %d", f.EndOffset(), leader.EndOffset())
	}
	if got := logRecords(t, f); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("follower reads\n%v\nwant\n%v", got, want)
	}
	crash(f)
	f = openLog(t, dir, cfg, false, nil)
	defer f.Close()
	if got := logRecords(t, f); fmt.Sprint(got) != fmt.Sprint(want) || f.EndOffset() != leader.EndOffset() {
		t.Fatalf("after recovery the follower reads\n%v\nwant\n%v", got, want)
	}
	// Reads from inside a hole start at the next batch.
	if len(want) > 2 {
		hole := want[1].offset - 1
		if hole > want[0].offset {
			got, err := f.Read(hole, 1<<20, math.MaxInt64, true)
			if err != nil {
				t.Fatal(err)
			}
			if h, _ := recordbatch.ParseHeader(got); h.LastOffset() < hole {
				t.Fatalf("read from %d returned a batch ending at %d", hole, h.LastOffset())
			}
		}
	}
}

func TestCleanStops(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, cleanConfig(), true, nil)
	defer l.Close()
	writeKeyed(t, l, 60)
	before := logRecords(t, l)
	stop := make(chan struct{})
	close(stop)
	_, err := l.Clean(CleanOptions{FirstUncleanable: math.MaxInt64, DedupeBufferBytes: 1 << 20, Stop: stop})
	if !errors.Is(err, ErrCleaningAborted) {
		t.Fatalf("err %v, want ErrCleaningAborted", err)
	}
	if got := logRecords(t, l); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatal("a stopped cleaning changed the log")
	}
	assertNoCleanerFiles(t, dir)
}
