package replica

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/segment"
)

// keyedTestBatch is a batch of "key=value" records; pid < 0: no producer.
func keyedTestBatch(pid int64, epoch int16, seq int32, txn bool, kvs ...string) []byte {
	spec := recordbatch.BatchSpec{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LeaderEpoch: -1}
	if pid < 0 {
		spec.ProducerEpoch, spec.BaseSequence = -1, -1
	}
	if txn {
		spec.Attributes = recordbatch.TransactionalBit
	}
	recs := make([]recordbatch.Record, len(kvs))
	for i, s := range kvs {
		k, v, _ := strings.Cut(s, "=")
		recs[i] = recordbatch.Record{Key: []byte(k), Value: []byte(v)}
	}
	return recordbatch.Build(spec, recs)
}

// txnSummary is what a restart must rebuild the same: the last stable
// offset at the high watermark, the open transactions, and each
// producer's epoch, last sequence and open transaction.
func txnSummary(p *Partition) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lso %d open %v", p.producers.lastStableOffset(p.highWatermark), p.producers.open)
	for _, pi := range p.producers.list() {
		fmt.Fprintf(&b, " p%d:e%d/seq%d/txn%d", pi.ProducerID, pi.ProducerEpoch, pi.LastSequence, pi.TxnStartOffset)
	}
	return b.String()
}

// markerOffsets lists the offsets of the log's control batches.
func markerOffsets(t *testing.T, l *segment.Log) []int64 {
	t.Helper()
	var out []int64
	err := l.ScanWithControl(l.StartOffset(), func(h recordbatch.Header, _ []byte) bool {
		if h.IsControl() {
			out = append(out, h.BaseOffset)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// stateAt is the producer state of the log's batches below offset.
func stateAt(t *testing.T, l *segment.Log, offset int64) *producerStates {
	t.Helper()
	s := newProducerStates()
	err := l.ScanWithControl(l.StartOffset(), func(h recordbatch.Header, control []byte) bool {
		if h.BaseOffset >= offset {
			return false
		}
		if !h.IsControl() {
			s.update(h, logAppendTime(h))
			return true
		}
		c, err := recordbatch.ParseControl(control)
		if err != nil {
			t.Fatal(err)
		}
		s.completeTxn(h, c)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func copyTestDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
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

// markerLog is a transactional compacted log built by newMarkerLog and
// cleaned twice: the third cleaning (markerLog.clean with the third
// time) removes the markers of transactions A and B.
type markerLog struct {
	p                             *Partition
	dir                           string
	txnA, markerA, txnB, markerB  int64
	markerC, markerD, openTxn, hw int64
	lso                           int64
	before                        string  // txnSummary before any cleaning
	openSnapshots                 []int64 // snapshots taken while A or B was open
	cleanTimes                    [3]time.Time
}

// newMarkerLog builds the log of TestCleanedTxnMarkersReopen in dir and
// cleans it twice (delete.retention.ms 1h): the first cleaning drops A's
// and B's batches, the second gives their markers a delete horizon. The
// third cleaning, two hours on, is left to the caller. The dangerous case
// is built in: a producer snapshot taken while a transaction was open,
// between its batches and its marker (a roll), which the cleaning must not
// leave behind once the marker is gone.
func newMarkerLog(t *testing.T, dir string) *markerLog {
	t.Helper()
	p := openTestPartition(t, dir, true, 0, nil)
	m := &markerLog{p: p, dir: dir}
	p.mu.Lock()
	fillerN := 0
	filler := func(n int) { // enough plain overwrites of three keys to roll
		for range n {
			appendTestBatch(t, p, keyedTestBatch(-1, 0, 0, false, fmt.Sprintf("f%d=%d", fillerN%3, fillerN)))
			fillerN++
		}
	}
	at := func() int64 { return p.log().EndOffset() }
	filler(3)
	m.txnA = at() // producer 1's transaction A: key a, superseded below
	appendTestBatch(t, p, keyedTestBatch(1, 0, 0, true, "a=A"))
	filler(8)
	// A snapshot while A is open, as a roll here writes (the log's own
	// at this roll may be gone by now: older snapshots are deleted as the
	// recovery point moves, which the flush at each roll does
	// asynchronously).
	openAt := at()
	m.markerA = at()
	appendTestBatch(t, p, recordbatch.BuildTxnMarker(1, 0, true, 0, 0))
	m.txnB = at() // producer 2's aborted transaction
	appendTestBatch(t, p, keyedTestBatch(2, 0, 0, true, "b=aborted"))
	filler(8)
	m.markerB = at()
	appendTestBatch(t, p, recordbatch.BuildTxnMarker(2, 0, false, 0, 0))
	appendTestBatch(t, p, keyedTestBatch(-1, 0, 0, false, "a=plain"))
	appendTestBatch(t, p, keyedTestBatch(3, 0, 0, false, "i=idempotent")) // producer 3: idempotent, superseded
	appendTestBatch(t, p, keyedTestBatch(-1, 0, 0, false, "i=plain"))
	appendTestBatch(t, p, keyedTestBatch(1, 0, 1, true, "c=C")) // producer 1's last transaction: live
	m.markerC = at()
	appendTestBatch(t, p, recordbatch.BuildTxnMarker(1, 0, true, 0, 0))
	appendTestBatch(t, p, keyedTestBatch(2, 0, 1, true, "d=aborted"))    // producer 2's last batch,
	m.markerD = at()                                                     // aborted by the coordinator with
	appendTestBatch(t, p, recordbatch.BuildTxnMarker(2, 1, false, 0, 0)) // a bumped epoch
	filler(8)
	m.openTxn = at() // producer 4's transaction stays open: the LSO
	appendTestBatch(t, p, keyedTestBatch(4, 0, 0, true, "o=open"))
	filler(8)
	m.hw = at()
	p.highWatermark = m.hw
	m.before = txnSummary(p)
	m.lso = p.producers.lastStableOffset(m.hw)
	p.mu.Unlock()
	if m.lso != m.openTxn {
		t.Fatalf("LSO %d, want the open transaction's %d", m.lso, m.openTxn)
	}
	st := stateAt(t, p.log(), openAt)
	if st.byID[1] == nil || st.byID[1].txnFirstOffset != m.txnA {
		t.Fatalf("state at %d: %+v", openAt, st.byID[1])
	}
	if err := p.log().WriteProducerSnapshot(openAt, st.snapshot()); err != nil {
		t.Fatal(err)
	}
	// The snapshots taken while A or B was open, between its batch and
	// its marker: loading one replays from it, so its marker must stay
	// or it must go.
	for _, o := range p.log().ProducerSnapshotOffsets() {
		if (o > m.txnA && o <= m.markerA) || (o > m.txnB && o <= m.markerB) {
			m.openSnapshots = append(m.openSnapshots, o)
		}
	}
	if len(m.openSnapshots) == 0 {
		t.Fatalf("no snapshot between a transaction's batch and its marker: %v", p.log().ProducerSnapshotOffsets())
	}
	now := time.Now()
	m.cleanTimes = [3]time.Time{now, now.Add(time.Minute), now.Add(2 * time.Hour)}
	for i := range 2 {
		m.clean(t, m.p, i, nil)
	}
	if got := markerOffsets(t, p.log()); !slices.Contains(got, m.markerA) || !slices.Contains(got, m.markerB) {
		t.Fatalf("markers %v before the delete horizon, want %d and %d kept", got, m.markerA, m.markerB)
	}
	return m
}

// clean runs cleaning i of p's log (p is m.p or a reopened copy of it)
// with hook, returning the cleaning's error.
func (m *markerLog) clean(t *testing.T, p *Partition, i int, hook func(int) error) error {
	t.Helper()
	_, err := p.log().Clean(segment.CleanOptions{FirstUncleanable: m.lso, DedupeBufferBytes: 1 << 20,
		DeleteRetention: time.Hour, Now: m.cleanTimes[i], Hook: hook})
	if hook == nil && err != nil {
		t.Fatal(err)
	}
	return err
}

// checkReopened checks a reopened copy of the log: producer and
// transaction state as a full rescan of it gives, only producer 4's
// transaction open, and only D's abort in the .txnindex files.
func (m *markerLog) checkReopened(t *testing.T, name string, r *Partition) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	compareWithRescan(t, name, r)
	for id, first := range r.producers.open {
		if id != 4 || first != m.openTxn {
			t.Fatalf("%s: producer %d has a transaction open at %d (loaded from %d)", name, id, first, r.loadedFrom)
		}
	}
	if got, err := r.log().CollectAbortedTxns(0, math.MaxInt64); err != nil || len(got) != 1 || got[0].LastOffset != m.markerD {
		t.Fatalf("%s: aborted transactions %+v (%v), want only the one ended at %d", name, got, err, m.markerD)
	}
}

// A transactional compacted log whose cleaner removed transaction markers
// reopens, cleanly and after crashes, with the producer and transaction
// state it had before the cleaning: the same last stable offset, the open
// transaction still open, none of the closed ones open again, each
// producer's epoch and last sequence, including after a restart whose
// high watermark checkpoint lags (as after a crash) so that it would load
// a snapshot taken while a removed marker's transaction was open.
func TestCleanedTxnMarkersReopen(t *testing.T) {
	dir := t.TempDir()
	m := newMarkerLog(t, dir)
	p := m.p
	t.Cleanup(func() { p.log().Close() })
	m.clean(t, p, 2, nil)
	markerC, markerD := m.markerC, m.markerD
	openSnapshots, before, hw := m.openSnapshots, m.before, m.hw
	markers := markerOffsets(t, p.log())
	if want := []int64{markerC, markerD}; !slices.Equal(markers, want) {
		t.Fatalf("markers after cleaning %v, want %v (A's and B's removed, the producers' last kept)", markers, want)
	}
	for _, o := range p.log().ProducerSnapshotOffsets() {
		if slices.Contains(openSnapshots, o) {
			t.Fatalf("snapshot %d holds a transaction whose marker was removed", o)
		}
	}
	p.mu.Lock()
	compareWithRescan(t, "after cleaning", p)
	if got := txnSummary(p); got != before {
		t.Fatalf("state changed:\n got %s\nwant %s", got, before)
	}
	p.mu.Unlock()
	if err := p.log().Close(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name  string
		clean bool
		hw    int64
		prep  func(dir string)
	}{
		{name: "clean restart", clean: true, hw: hw},
		{name: "crash", hw: hw},
		{name: "crash without a recovery point", hw: hw, prep: func(dir string) {
			os.Remove(filepath.Join(dir, segment.RecoveryPointCheckpointFile))
		}},
		// The high watermark checkpoint lags: the newest snapshot at or
		// below it would be one taken while A was open.
		{name: "crash with a lagging high watermark", hw: openSnapshots[0]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "p")
			copyTestDir(t, dir, d)
			if tc.prep != nil {
				tc.prep(d)
			}
			r := openTestPartition(t, d, tc.clean, tc.hw, io.Discard)
			defer r.log().Close()
			m.checkReopened(t, tc.name, r)
			if tc.hw == hw {
				r.mu.Lock()
				got := txnSummary(r)
				r.mu.Unlock()
				if got != before {
					t.Fatalf("loaded from %d:\n got %s\nwant %s", r.loadedFrom, got, before)
				}
			}
		})
	}
}

var errInjectedCrash = errors.New("injected crash")

// The cleaning that removes transaction markers, killed at every point of
// its swap (the files left as a kill -9 leaves them, copied aside at that
// instant), recovers to a log whose producer and transaction state is what
// a full rescan of it gives (no removed marker's transaction open again,
// the open one still open at the same last stable offset, only D's abort
// indexed), holding every marker the finished cleaning keeps and only
// markers the log had before; with the high watermark checkpoint as
// written and lagging to a snapshot taken while A or B was open.
func TestCleanedTxnMarkersCrashAtEveryPoint(t *testing.T) {
	m := newMarkerLog(t, filepath.Join(t.TempDir(), "built"))
	oldMarkers := markerOffsets(t, m.p.log())
	if err := m.p.log().Close(); err != nil {
		t.Fatal(err)
	}

	// The finished cleaning, on a copy: its points and its markers.
	ref := filepath.Join(t.TempDir(), "ref")
	copyTestDir(t, m.dir, ref)
	r := openTestPartition(t, ref, true, m.hw, io.Discard)
	points := 0
	if err := m.clean(t, r, 2, func(int) error { points++; return nil }); err != nil {
		t.Fatal(err)
	}
	newMarkers := markerOffsets(t, r.log())
	r.log().Close()
	if want := []int64{m.markerC, m.markerD}; !slices.Equal(newMarkers, want) {
		t.Fatalf("markers after cleaning %v, want %v", newMarkers, want)
	}
	if points < 4 {
		t.Fatalf("only %d swap points", points)
	}

	for k := range points {
		dir := filepath.Join(t.TempDir(), fmt.Sprint(k))
		copyTestDir(t, m.dir, dir)
		l := openTestPartition(t, dir, true, m.hw, io.Discard)
		err := m.clean(t, l, 2, func(p int) error {
			if p == k {
				return errInjectedCrash
			}
			return nil
		})
		if !errors.Is(err, errInjectedCrash) {
			t.Fatalf("point %d: cleaning returned %v", k, err)
		}
		// The files as the crash leaves them: nothing flushed or closed.
		crashed := filepath.Join(t.TempDir(), fmt.Sprint(k, "-crashed"))
		copyTestDir(t, dir, crashed)
		l.log().Close()

		for _, hw := range []int64{m.hw, m.openSnapshots[0]} {
			d := filepath.Join(t.TempDir(), fmt.Sprint(k, "-", hw))
			copyTestDir(t, crashed, d)
			name := fmt.Sprintf("crash at point %d, high watermark %d", k, hw)
			r := openTestPartition(t, d, false, hw, io.Discard)
			m.checkReopened(t, name, r)
			got := markerOffsets(t, r.log())
			r.log().Close()
			for _, o := range newMarkers {
				if !slices.Contains(got, o) {
					t.Fatalf("%s: marker %d of the cleaned log missing: %v", name, o, got)
				}
			}
			for _, o := range got {
				if !slices.Contains(oldMarkers, o) {
					t.Fatalf("%s: marker %d not in the old log: %v", name, o, got)
				}
			}
		}
	}
	t.Logf("%d crash points checked", points)
}
