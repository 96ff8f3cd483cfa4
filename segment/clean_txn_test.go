package segment

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnLog builds a log's batches for the cleaner's transaction tests, at
// consecutive offsets, with the .txnindex entries of its abort markers.
type txnLog struct {
	batches [][]byte
	index   []AbortedTxn
	open    map[int64]int64 // producer -> first offset of its open transaction
}

func newTxnLog() *txnLog { return &txnLog{open: map[int64]int64{}} }

func (l *txnLog) next() int64 {
	if len(l.batches) == 0 {
		return 0
	}
	h, _ := recordbatch.ParseHeader(l.batches[len(l.batches)-1])
	return h.NextOffset()
}

func (l *txnLog) add(b []byte) {
	recordbatch.SetBaseOffset(b, l.next())
	l.batches = append(l.batches, b)
}

// data appends a batch of keyed records ("k=v"); pid < 0: no producer.
func (l *txnLog) data(pid int64, epoch int16, txn bool, kvs ...string) {
	spec := recordbatch.NoProducer()
	spec.FirstTimestamp = 100
	if pid >= 0 {
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, epoch, 0
	}
	if txn {
		spec.Attributes = recordbatch.TransactionalBit
		if _, ok := l.open[pid]; !ok {
			l.open[pid] = l.next()
		}
	}
	var recs []kv
	for _, s := range kvs {
		k, v, _ := strings.Cut(s, "=")
		recs = append(recs, kv{key: k, value: v})
	}
	b, _ := keyedBatch(spec, recs...)
	l.add(b)
}

// marker appends a COMMIT or ABORT marker of pid at epoch.
func (l *txnLog) marker(pid int64, epoch int16, commit bool) {
	at := l.next()
	l.add(recordbatch.BuildTxnMarker(pid, epoch, commit, 0, 100))
	if first, ok := l.open[pid]; ok {
		if !commit {
			l.index = append(l.index, AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: at, LastStableOffset: at + 1})
		}
		delete(l.open, pid)
	}
}

// cleanRound runs one cleaning of every batch as Log.Clean does (one
// filter for the whole log, in offset order) and returns the log it
// writes: the kept batches and the .txnindex entries kept with them.
func cleanRound(t *testing.T, l *txnLog, nowMs int64) (*txnLog, *cleanFilter) {
	t.Helper()
	tails := producerTails{}
	for _, b := range l.batches {
		tails.observe(header(t, b))
	}
	aborts := NewAbortedRanges(l.index)
	m := newOffsetMap(1 << 20)
	for _, b := range l.batches {
		if ok, err := mapBatch(m, b, header(t, b), 0, aborts); err != nil || !ok {
			t.Fatalf("mapBatch: %v %v", ok, err)
		}
	}
	f := &cleanFilter{offsets: m, aborts: aborts, producers: tails, txns: newTxnMarkers(), keptAborts: map[int64]bool{},
		uncleanable: math.MaxInt64, nowMs: nowMs, deleteRetentionMs: 500}
	out := &txnLog{open: l.open}
	for _, b := range l.batches {
		kept, _, err := filterBatch(b, header(t, b), f)
		if err != nil {
			t.Fatal(err)
		}
		if kept != nil {
			if _, err := recordbatch.Validate(kept); err != nil {
				t.Fatalf("cleaned batch invalid: %v", err)
			}
			out.batches = append(out.batches, kept)
		}
	}
	for _, a := range l.index {
		if f.keptAborts[a.LastOffset] {
			out.index = append(out.index, a)
		}
	}
	return out, f
}

// describe is one line per batch: "offset:p<pid>e<epoch>[records]" for
// data ("[]" for an emptied batch), "offset:COMMIT(p<pid>e<epoch>)" or
// ABORT for markers, "+h<horizon>" for a delete horizon; then the
// .txnindex entries as "idx[<pid>:<first>-<last> ...]".
func describe(t *testing.T, l *txnLog) string {
	t.Helper()
	var lines []string
	for _, b := range l.batches {
		h := header(t, b)
		s := fmt.Sprintf("%d:", h.BaseOffset)
		switch {
		case h.IsControl() && h.RecordCount > 0:
			c, err := recordbatch.ParseControl(b)
			if err != nil {
				t.Fatal(err)
			}
			name := map[int16]string{recordbatch.ControlAbort: "ABORT", recordbatch.ControlCommit: "COMMIT"}[c.Type]
			if name == "" {
				name = fmt.Sprintf("CONTROL%d", c.Type)
			}
			s += fmt.Sprintf("%s(p%de%d)", name, h.ProducerID, h.ProducerEpoch)
		default:
			var recs []string
			_ = recordbatch.ForEachRecord(b, func(r kmsg.Record) error {
				recs = append(recs, fmt.Sprintf("%s=%s", r.Key, r.Value))
				return nil
			})
			if h.ProducerID >= 0 {
				s += fmt.Sprintf("p%de%d", h.ProducerID, h.ProducerEpoch)
			}
			s += "[" + strings.Join(recs, " ") + "]"
		}
		if hz := h.DeleteHorizon(); hz >= 0 {
			s += fmt.Sprintf("+h%d", hz)
		}
		lines = append(lines, s)
	}
	var idx []string
	for _, a := range l.index {
		idx = append(idx, fmt.Sprintf("%d:%d-%d", a.ProducerID, a.FirstOffset, a.LastOffset))
	}
	return strings.Join(lines, " ") + " idx[" + strings.Join(idx, " ") + "]"
}

// TestCleanTxnMarkersTranscript follows transaction markers through
// successive cleanings (delete.retention.ms 500): a marker stays while a
// batch of its transaction was read before it, gets a delete horizon at
// the first cleaning that finds none, and goes at the first cleaning from
// that horizon on; a producer's last batches stay whatever their age.
func TestCleanTxnMarkersTranscript(t *testing.T) {
	type round struct {
		now  int64
		want string
		// then appends to the log after this round.
		then func(l *txnLog)
	}
	for _, tc := range []struct {
		name   string
		build  func(l *txnLog)
		rounds []round
	}{
		{
			name: "committed, aborted, and producers' last transactions",
			build: func(l *txnLog) {
				l.data(1, 0, true, "a=1") // 0: p1's transaction A, superseded at 6
				l.marker(1, 0, true)      // 1
				l.data(2, 0, true, "b=x") // 2: p2's aborted transaction
				l.marker(2, 0, false)     // 3
				l.data(1, 0, true, "c=1") // 4: p1's transaction B, c stays latest
				l.marker(1, 0, true)      // 5
				l.data(-1, 0, false, "a=2")
				l.data(2, 0, true, "d=1") // 7: p2's last data batch, aborted
				l.marker(2, 1, false)     // 8: by the coordinator, epoch bumped
				l.data(3, 0, true, "e=1") // 9: p3's last data batch, superseded at 11
				l.marker(3, 0, true)      // 10
				l.data(-1, 0, false, "e=2")
			},
			rounds: []round{
				// The transactions' data go; every marker stays: a batch
				// of its transaction was read before it.
				{now: 1000, want: "1:COMMIT(p1e0) 3:ABORT(p2e0) 4:p1e0[c=1] 5:COMMIT(p1e0) 6:[a=2] 7:p2e0[] 8:ABORT(p2e1) 9:p3e0[] 10:COMMIT(p3e0) 11:[e=2] idx[2:2-3 2:7-8]"},
				// Markers 1 and 3 have nothing before them now: delete
				// horizon 1000+500; the abort's index entry goes (nothing
				// left to hide). p2's and p3's last batches keep theirs.
				{now: 1000, want: "1:COMMIT(p1e0)+h1500 3:ABORT(p2e0)+h1500 4:p1e0[c=1] 5:COMMIT(p1e0) 6:[a=2] 7:p2e0[] 8:ABORT(p2e1) 9:p3e0[] 10:COMMIT(p3e0) 11:[e=2] idx[2:7-8]"},
				{now: 1499, want: "1:COMMIT(p1e0)+h1500 3:ABORT(p2e0)+h1500 4:p1e0[c=1] 5:COMMIT(p1e0) 6:[a=2] 7:p2e0[] 8:ABORT(p2e1) 9:p3e0[] 10:COMMIT(p3e0) 11:[e=2] idx[2:7-8]"},
				{now: 1500, want: "4:p1e0[c=1] 5:COMMIT(p1e0) 6:[a=2] 7:p2e0[] 8:ABORT(p2e1) 9:p3e0[] 10:COMMIT(p3e0) 11:[e=2] idx[2:7-8]"},
				{now: 1 << 40, want: "4:p1e0[c=1] 5:COMMIT(p1e0) 6:[a=2] 7:p2e0[] 8:ABORT(p2e1) 9:p3e0[] 10:COMMIT(p3e0) 11:[e=2] idx[2:7-8]"},
			},
		},
		{
			// Kafka's third case of isBatchLastRecordOfProducer: the
			// producer's last batch is a marker of an epoch no data batch
			// has (an abort after an epoch bump): it carries the epoch
			// that fences the producer's zombies, so it stays until the
			// producer writes at that epoch.
			name: "a marker that is the producer's last batch",
			build: func(l *txnLog) {
				l.data(4, 0, true, "x=1") // 0
				l.marker(4, 0, true)      // 1
				l.marker(4, 1, false)     // 2: an empty transaction aborted with a bumped epoch
				l.data(-1, 0, false, "x=2")
			},
			rounds: []round{
				{now: 1000, want: "0:p4e0[] 1:COMMIT(p4e0) 2:ABORT(p4e1)+h1500 3:[x=2] idx[]"},
				{now: 5000, want: "0:p4e0[] 1:COMMIT(p4e0) 2:ABORT(p4e1)+h1500 3:[x=2] idx[]",
					then: func(l *txnLog) {
						l.data(4, 1, true, "y=1") // 4: the producer writes at epoch 1
						l.marker(4, 1, true)      // 5
						l.data(-1, 0, false, "y=2")
					}},
				// Batch 0 is no longer p4's last: dropped; marker 1 stays
				// (its batch was read); marker 2 is past its horizon.
				{now: 5000, want: "1:COMMIT(p4e0) 3:[x=2] 4:p4e1[] 5:COMMIT(p4e1) 6:[y=2] idx[]"},
				{now: 5000, want: "1:COMMIT(p4e0)+h5500 3:[x=2] 4:p4e1[] 5:COMMIT(p4e1) 6:[y=2] idx[]"},
				{now: 5500, want: "3:[x=2] 4:p4e1[] 5:COMMIT(p4e1) 6:[y=2] idx[]"},
			},
		},
		{
			// A marker whose transaction keeps a latest value keeps its
			// marker, however old: read_committed readers and a state
			// rebuild need it to close the transaction.
			name: "a committed transaction with live records",
			build: func(l *txnLog) {
				l.data(5, 0, true, "k=1", "j=1") // 0-1: k superseded, j live
				l.marker(5, 0, true)             // 2
				l.data(5, 0, true, "z=1")        // 3
				l.marker(5, 0, true)             // 4
				l.data(-1, 0, false, "k=2")
			},
			rounds: []round{
				{now: 1000, want: "0:p5e0[j=1] 2:COMMIT(p5e0) 3:p5e0[z=1] 4:COMMIT(p5e0) 5:[k=2] idx[]"},
				{now: 1 << 40, want: "0:p5e0[j=1] 2:COMMIT(p5e0) 3:p5e0[z=1] 4:COMMIT(p5e0) 5:[k=2] idx[]"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newTxnLog()
			tc.build(l)
			for i, r := range tc.rounds {
				l, _ = cleanRound(t, l, r.now)
				if got := describe(t, l); got != r.want {
					t.Fatalf("cleaning %d at %d:\n got %s\nwant %s", i+1, r.now, got, r.want)
				}
				if r.then != nil {
					r.then(l)
				}
			}
		})
	}
}

// TestFilterControl: the control batches that are not transaction markers
// of this broker's making.
func TestFilterControl(t *testing.T) {
	m := newOffsetMap(1 << 10)
	newFilter := func() *cleanFilter {
		return &cleanFilter{offsets: m, aborts: AbortedRanges{}, producers: producerTails{}, txns: newTxnMarkers(),
			keptAborts: map[int64]bool{}, uncleanable: math.MaxInt64, nowMs: 1000, deleteRetentionMs: 500}
	}
	otherType := func(typ int16) []byte {
		key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
		return recordbatch.Build(recordbatch.BatchSpec{LeaderEpoch: -1, ProducerID: -1, BaseSequence: -1,
			Attributes: recordbatch.ControlBit}, []recordbatch.Record{{Key: key, Value: []byte{0, 0}}})
	}
	commit := recordbatch.BuildTxnMarker(7, 0, true, 0, 100)
	ch := header(t, commit)
	emptied := recordbatch.BuildEmpty(ch) // a marker Kafka's cleaner emptied (RETAIN_EMPTY)
	for _, tc := range []struct {
		name  string
		batch []byte
		f     func() *cleanFilter
		want  batchOutcome
	}{
		{"another control type (KRaft's LEADER_CHANGE) stays", otherType(2), newFilter, batchKept},
		{"a marker emptied by an earlier cleaning goes", emptied, newFilter, batchDropped},
		{"a marker with no batch before it gets its horizon", commit, newFilter, batchRewritten},
		{"a marker at or past the first uncleanable offset stays as it is", commit, func() *cleanFilter {
			f := newFilter()
			f.uncleanable = 0
			return f
		}, batchKept},
		{"without transaction tracking every marker stays", commit, func() *cleanFilter {
			f := newFilter()
			f.txns = nil
			return f
		}, batchKept},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, outcome, err := filterBatch(tc.batch, header(t, tc.batch), tc.f())
			if err != nil || outcome != tc.want {
				t.Fatalf("outcome %d (%v), want %d", outcome, err, tc.want)
			}
			if out != nil {
				if oh, err := recordbatch.Validate(out); err != nil || !oh.IsControl() {
					t.Fatalf("output %+v %v", oh, err)
				}
			}
		})
	}
}
