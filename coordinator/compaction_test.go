package coordinator

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/segment"
)

// segLog is an OffsetsLog over real segment logs, one per partition, so
// that a test can compact __consumer_offsets with the log cleaner
// (segment.Log.Clean, what the broker's cleaner threads run) and load a
// coordinator from what is left. Abort markers carry their .txnindex entry,
// as the replica layer appends them, so the cleaner knows which
// transactional records were aborted.
type segLog struct {
	mu       sync.Mutex
	t        *testing.T
	dir      string
	cfg      segment.Config
	logs     map[int32]*segment.Log
	txnFirst map[int32]map[int64]int64 // partition -> producer -> first offset of its open transaction
}

func newSegLog(t *testing.T, cfg segment.Config) *segLog {
	l := &segLog{t: t, dir: t.TempDir(), cfg: cfg, logs: map[int32]*segment.Log{}, txnFirst: map[int32]map[int64]int64{}}
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, sl := range l.logs {
			sl.Close()
		}
	})
	return l
}

func (l *segLog) logLocked(p int32) *segment.Log {
	sl := l.logs[p]
	if sl == nil {
		var err error
		sl, err = segment.Open(filepath.Join(l.dir, fmt.Sprint("__consumer_offsets-", p)), l.cfg, true, quietLogger())
		if err != nil {
			l.t.Fatal(err)
		}
		l.logs[p] = sl
		l.txnFirst[p] = map[int64]int64{}
	}
	return sl
}

func (l *segLog) Append(_ context.Context, p int32, batch []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.logLocked(p)
	b := append([]byte(nil), batch...)
	recordbatch.SetBaseOffset(b, sl.EndOffset())
	h, err := recordbatch.Validate(b)
	if err != nil {
		return -1, err
	}
	open := l.txnFirst[p]
	switch {
	case h.IsControl():
		typ, err := controlType(b)
		if err != nil {
			return -1, err
		}
		first, ok := open[h.ProducerID]
		delete(open, h.ProducerID)
		if typ == kmsg.ControlRecordKeyTypeAbort && ok {
			lso := h.BaseOffset + 1
			for _, o := range open {
				lso = min(lso, o)
			}
			return h.BaseOffset, sl.AppendAbortMarker(b, h, segment.AbortedTxn{ProducerID: h.ProducerID,
				FirstOffset: first, LastOffset: h.BaseOffset, LastStableOffset: lso})
		}
	case h.IsTransactional():
		if _, ok := open[h.ProducerID]; !ok {
			open[h.ProducerID] = h.BaseOffset
		}
	}
	return h.BaseOffset, sl.Append(b, h)
}

func (l *segLog) ReadAll(ctx context.Context, p int32, fn func([]byte) error) error {
	l.mu.Lock()
	sl := l.logLocked(p)
	l.mu.Unlock()
	end := sl.EndOffset()
	for off := sl.StartOffset(); off < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := sl.Read(off, 1<<20, end, true)
		if err != nil {
			return err
		}
		batches, hs, err := recordbatch.Split(b)
		if err != nil {
			return err
		}
		if len(batches) == 0 {
			return fmt.Errorf("partition %d: no batch at %d below %d", p, off, end)
		}
		for i, batch := range batches {
			if err := fn(batch); err != nil {
				return err
			}
			off = hs[i].LastOffset() + 1
		}
	}
	return nil
}

func (l *segLog) DeleteBefore(_ context.Context, p int32, offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.logLocked(p).SetStartOffset(offset)
}

// clean compacts every partition as the cleaner threads do at time now:
// up to the first offset of a transaction still open (the last stable
// offset), never the active segment.
func (l *segLog) clean(t *testing.T, now time.Time, deleteRetention time.Duration) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, sl := range l.logs {
		firstUncleanable := int64(math.MaxInt64)
		for _, o := range l.txnFirst[p] {
			firstUncleanable = min(firstUncleanable, o)
		}
		if _, err := sl.Clean(segment.CleanOptions{FirstUncleanable: firstUncleanable, DedupeBufferBytes: 1 << 20,
			DeleteRetention: deleteRetention, Now: now}); err != nil {
			t.Fatalf("clean partition %d: %v", p, err)
		}
	}
}

// records counts the records (not control batches) left in partition p.
func (l *segLog) records(t *testing.T, p int32) (n int64) {
	t.Helper()
	err := l.ReadAll(context.Background(), p, func(b []byte) error {
		h, err := recordbatch.ParseHeader(b)
		if err == nil && !h.IsControl() {
			n += int64(h.RecordCount)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// __consumer_offsets is an ordinary compacted topic: with the coordinator's
// own snapshots off (SnapshotBytes < 0, as the broker runs it with
// log.cleaner.enable), the log cleaner alone bounds it, and a coordinator
// loading the cleaned partitions rebuilds exactly the state a load of the
// uncleaned log gives: classic groups with members, offsets overwritten
// many times, a deleted offset, a deleted group whose tombstones the
// cleaner removed after delete.retention.ms, transactional offsets
// committed, aborted and still open (the cleaner stops at the open one and
// removes the aborted records and, past the horizon, the markers).
func TestCompactedOffsetsLoadAsUncleaned(t *testing.T) {
	cfg := testConfig()
	cfg.SnapshotBytes = -1
	log := newSegLog(t, segment.Config{SegmentBytes: 4096, RetentionTime: -1, RetentionBytes: -1, IndexIntervalBytes: 4096})
	c := New(cfg, log, quietLogger())
	for p := int32(0); p < cfg.NumPartitions; p++ {
		if err := c.BecomeLeader(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}

	simple := groupHistory(t, c)
	// Transactions: committed (over plain commits), aborted, and open.
	for pid, g := range map[int64]string{7: "g2", 8: "g3", 9: "g4"} {
		txnCommit(t, c, g, pid, "t", map[int32]int64{0: 1000 + pid, 3: 2000 + pid})
	}
	for pid, g := range map[int64]string{7: "g2", 8: "g3"} {
		p := c.PartitionFor(g)
		if _, err := log.Append(context.Background(), p, recordbatch.BuildTxnMarker(pid, 0, pid == 7, 0, time.Now().UnixMilli())); err != nil {
			t.Fatal(err)
		}
		c.CompleteTxn(p, pid, pid == 7)
	}
	// More traffic after the deletions and transactions, so that their
	// records are in cleanable segments.
	for round := int64(200); round < 300; round++ {
		for _, g := range simple[:len(simple)-1] {
			c.OffsetCommit(ctxT(t), commitReq(2, g, "", -1, "t", map[int32]int64{0: round}))
		}
	}
	live := dumpGroups(c)
	c.Close()

	var written int64
	for p := range cfg.NumPartitions {
		written += log.records(t, p)
	}
	uncleaned := startCoordinator(t, cfg, log)
	want := dumpGroups(uncleaned)
	uncleaned.Close()

	// The first cleaning keeps the newest record of each key (tombstones
	// and markers get their delete horizon); the second, past
	// delete.retention.ms, removes the tombstones and the markers whose
	// transactions have no record left.
	now := time.Now()
	log.clean(t, now, 24*time.Hour)
	log.clean(t, now.Add(48*time.Hour), 24*time.Hour)
	var retained int64
	for p := range cfg.NumPartitions {
		retained += log.records(t, p)
	}
	t.Logf("records: %d written, %d after cleaning", written, retained)
	if retained*4 > written {
		t.Errorf("cleaning kept %d of %d records", retained, written)
	}

	cleaned := startCoordinator(t, cfg, log)
	got := dumpGroups(cleaned)
	diffDumps(t, "load of the cleaned log vs the uncleaned one", got, want)
	for id, w := range live {
		if got[id] != w {
			t.Errorf("group %s live vs loaded from the cleaned log:\n live: %s\n load: %s", id, w, got[id])
		}
	}
	if _, ok := got["doomed"]; ok {
		t.Errorf("deleted group came back: %s", got["doomed"])
	}
	if strings.Contains(got["g1"], "t/1=") {
		t.Errorf("deleted offset came back: %s", got["g1"])
	}
	wantOffset(t, cleaned, "g2", "t", 3, 2007) // committed transaction
	wantOffset(t, cleaned, "g3", "t", 3, -1)   // aborted
	if o, code := fetchStable(t, cleaned, "g4", "t", 3); code != errUnstableOffsetCommit || o != -1 {
		t.Errorf("open transaction's offset: %d, code %d", o, code)
	}
}
