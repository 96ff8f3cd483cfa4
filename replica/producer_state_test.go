package replica

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
)

func hdr(pid int64, epoch int16, seq int32, n int32, base int64) recordbatch.Header {
	return recordbatch.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LastOffsetDelta: n - 1, RecordCount: n, BaseOffset: base}
}

func TestProducerStateSequences(t *testing.T) {
	s := newProducerStates()
	steps := []struct {
		name    string
		h       recordbatch.Header
		wantErr error
		dupAt   int64 // expected duplicate base offset, -1 for none
	}{
		{"first batch of new producer", hdr(7, 0, 0, 3, 0), nil, -1},
		{"next in sequence", hdr(7, 0, 3, 2, 3), nil, -1},
		{"retry of first batch", hdr(7, 0, 0, 3, 99), nil, 0},
		{"gap", hdr(7, 0, 9, 1, 99), kerr.OutOfOrderSequenceNumber, -1},
		{"old epoch", hdr(7, -1+0, 5, 1, 99), nil, -1},
		{"new producer any sequence", hdr(8, 0, 40, 1, 5), nil, -1},
	}
	// "old epoch" is set up below with a bumped epoch first.
	for _, st := range steps[:4] {
		c, err := s.check(st.h)
		if !errors.Is(err, st.wantErr) {
			t.Fatalf("%s: err = %v, want %v", st.name, err, st.wantErr)
		}
		if (c.duplicate != nil) != (st.dupAt >= 0) || (c.duplicate != nil && c.duplicate.baseOffset != st.dupAt) {
			t.Fatalf("%s: duplicate = %+v, want at %d", st.name, c.duplicate, st.dupAt)
		}
		if err == nil && c.duplicate == nil {
			s.update(st.h, -1)
		}
	}
	if _, err := s.check(hdr(7, 1, 5, 1, 5)); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("bumped epoch with non-zero sequence: %v", err)
	}
	s.update(hdr(7, 1, 0, 1, 5), -1)
	if _, err := s.check(hdr(7, 0, 5, 1, 6)); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("older epoch: %v", err)
	}
	if _, err := s.check(steps[5].h); err != nil {
		t.Fatalf("new producer: %v", err)
	}
}

func TestProducerStateKeepsFiveBatches(t *testing.T) {
	s := newProducerStates()
	for i := int32(0); i < 7; i++ {
		s.update(hdr(1, 0, i, 1, int64(i)), -1)
	}
	if c, _ := s.check(hdr(1, 0, 1, 1, 0)); c.duplicate != nil {
		t.Fatal("batch older than the last 5 still cached")
	}
	if c, _ := s.check(hdr(1, 0, 2, 1, 0)); c.duplicate == nil || c.duplicate.baseOffset != 2 {
		t.Fatalf("fifth newest batch not found as duplicate: %+v", c.duplicate)
	}
}

func TestInSequenceWraps(t *testing.T) {
	if !inSequence(1<<31-1, 0) || inSequence(3, 5) || !inSequence(-1, 17) {
		t.Fatal("inSequence rules broken")
	}
}

func txnHdr(pid int64, epoch int16, seq int32, n int32, base int64) recordbatch.Header {
	h := hdr(pid, epoch, seq, n, base)
	h.Attributes = recordbatch.TransactionalBit
	return h
}

func markerHdr(pid int64, epoch int16, base int64) recordbatch.Header {
	return recordbatch.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: -1, BaseOffset: base, RecordCount: 1,
		Attributes: recordbatch.TransactionalBit | recordbatch.ControlBit}
}

var (
	commitMarker = recordbatch.Control{Type: recordbatch.ControlCommit, CoordinatorEpoch: 0}
	abortMarker  = recordbatch.Control{Type: recordbatch.ControlAbort, CoordinatorEpoch: 0}
)

// completeRecording is completeTxn with the .txnindex entry its caller
// writes for an abort appended to *aborted.
func completeRecording(s *producerStates, aborted *[]AbortedTxn, h recordbatch.Header, c recordbatch.Control) {
	if a, ok := s.abortFor(h, c); ok {
		*aborted = append(*aborted, a)
	}
	s.completeTxn(h, c)
}

// collectAborted is what segment.Log.CollectAbortedTxns answers over one
// index holding aborted.
func collectAborted(aborted []AbortedTxn, from, upTo int64) []AbortedTxn {
	var out []AbortedTxn
	for _, a := range aborted {
		if a.LastOffset < from {
			continue
		}
		if a.FirstOffset < upTo {
			out = append(out, a)
		}
		if a.LastStableOffset >= upTo {
			break
		}
	}
	return out
}

// A transcript of two producers' transactions interleaved on one partition:
// the last stable offset and the aborted transactions after every step.
func TestProducerStateTransactions(t *testing.T) {
	s := newProducerStates()
	var aborted []AbortedTxn
	type step struct {
		name        string
		do          func()
		hw          int64
		wantLSO     int64
		wantAborted []AbortedTxn // collectAborted(aborted, 0, 100)
	}
	steps := []step{
		{"idempotent batch", func() { s.update(hdr(9, 0, 0, 2, 0), -1) }, 2, 2, nil},
		{"txn of producer 1 opens at 2", func() { s.update(txnHdr(1, 0, 0, 3, 2), -1) }, 5, 2, nil},
		{"txn of producer 2 opens at 5", func() { s.update(txnHdr(2, 0, 0, 1, 5), -1) }, 6, 2, nil},
		{"producer 1 writes more", func() { s.update(txnHdr(1, 0, 3, 1, 6), -1) }, 7, 2, nil},
		{"producer 1 commits at 7, marker not yet replicated", func() { s.completeTxn(markerHdr(1, 0, 7), commitMarker) }, 7, 2, nil},
		{"marker replicated: producer 2 holds the LSO", func() {}, 8, 5, nil},
		{"producer 2 aborts at 8", func() { completeRecording(s, &aborted, markerHdr(2, 0, 8), abortMarker) }, 9, 9,
			[]AbortedTxn{{ProducerID: 2, FirstOffset: 5, LastOffset: 8, LastStableOffset: 9}}},
		{"producer 1 opens again at 9", func() { s.update(txnHdr(1, 0, 4, 1, 9), -1) }, 10, 9,
			[]AbortedTxn{{ProducerID: 2, FirstOffset: 5, LastOffset: 8, LastStableOffset: 9}}},
		{"a marker without an open transaction changes nothing", func() { completeRecording(s, &aborted, markerHdr(2, 0, 10), abortMarker) }, 11, 9,
			[]AbortedTxn{{ProducerID: 2, FirstOffset: 5, LastOffset: 8, LastStableOffset: 9}}},
		{"producer 1 aborts at 11 with a bumped epoch", func() { completeRecording(s, &aborted, markerHdr(1, 1, 11), abortMarker) }, 12, 12,
			[]AbortedTxn{{ProducerID: 2, FirstOffset: 5, LastOffset: 8, LastStableOffset: 9}, {ProducerID: 1, FirstOffset: 9, LastOffset: 11, LastStableOffset: 12}}},
	}
	for _, st := range steps {
		st.do()
		if got := s.lastStableOffset(st.hw); got != st.wantLSO {
			t.Fatalf("%s: LSO = %d, want %d", st.name, got, st.wantLSO)
		}
		if got := collectAborted(aborted, 0, 100); !slices.Equal(got, st.wantAborted) {
			t.Fatalf("%s: aborted = %+v, want %+v", st.name, got, st.wantAborted)
		}
	}
	if e := s.byID[1]; e.epoch != 1 || len(e.batches) != 0 {
		t.Fatalf("the abort marker's epoch is the producer's: %+v", e)
	}
	if got := collectAborted(aborted, 9, 100); len(got) != 1 || got[0].ProducerID != 1 {
		t.Fatalf("abortedTxns(9, 100) = %+v, want producer 1's only", got)
	}
	if got := collectAborted(aborted, 0, 5); len(got) != 0 {
		t.Fatalf("abortedTxns(0, 5) = %+v: producer 2's transaction starts at 5", got)
	}
}

func TestProducerStateTransactionRules(t *testing.T) {
	s := newProducerStates()
	s.update(txnHdr(1, 3, 0, 1, 0), -1)
	if _, err := s.check(hdr(1, 3, 1, 1, 1)); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("non-transactional write in an open transaction: %v", err)
	}
	if _, err := s.check(txnHdr(1, 3, 1, 1, 1)); err != nil {
		t.Fatalf("transactional write in an open transaction: %v", err)
	}
	h := txnHdr(-1, -1, -1, 1, 1)
	if _, err := s.check(h); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("transactional batch without producer id: %v", err)
	}
	if err := s.checkMarker(1, 2, 0, false); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("marker of an older epoch: %v", err)
	}
	s.completeTxn(markerHdr(1, 3, 1), recordbatch.Control{Type: recordbatch.ControlCommit, CoordinatorEpoch: 5})
	if err := s.checkMarker(1, 3, 4, false); !errors.Is(err, kerr.TransactionCoordinatorFenced) {
		t.Fatalf("marker of an older coordinator: %v", err)
	}
	if err := s.checkMarker(1, 4, 5, false); err != nil {
		t.Fatalf("marker of a newer epoch: %v", err)
	}
	if err := s.checkMarker(77, 0, 0, false); err != nil {
		t.Fatalf("marker for an unknown producer: %v", err)
	}
	if got := s.list(); len(got) != 1 || got[0].CoordinatorEpoch != 5 || got[0].TxnStartOffset != -1 {
		t.Fatalf("list = %+v", got)
	}
}

// Trimming producer state at a truncation point at or above the high
// watermark gives what rebuilding from the remaining log gives: open
// transactions, aborted transactions, the last stable offset and the
// cached batches (seeded random histories of three transactional
// producers and one idempotent one).
func TestProducerStateTruncateMatchesRebuild(t *testing.T) {
	for seed := int64(0); seed < 2000; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		type step struct {
			h    recordbatch.Header
			ctrl *recordbatch.Control
		}
		var log []step
		seqs := map[int64]int32{}
		open := map[int64]bool{}
		offset := int64(0)
		for len(log) < 40 {
			pid := int64(rng.IntN(4))
			switch {
			case pid == 3: // idempotent, no transactions
				log = append(log, step{h: hdr(pid, 0, seqs[pid], 1, offset)})
				seqs[pid]++
			case open[pid] && rng.IntN(3) == 0:
				c := abortMarker
				if rng.IntN(2) == 0 {
					c = commitMarker
				}
				log = append(log, step{h: markerHdr(pid, 0, offset), ctrl: &c})
				open[pid] = false
			default:
				log = append(log, step{h: txnHdr(pid, 0, seqs[pid], 1, offset)})
				seqs[pid]++
				open[pid] = true
			}
			offset++
		}
		apply := func(s *producerStates, aborted *[]AbortedTxn, st step) {
			if st.ctrl != nil {
				completeRecording(s, aborted, st.h, *st.ctrl)
			} else {
				s.update(st.h, -1)
			}
		}
		hw := int64(rng.IntN(len(log) + 1))
		target := hw + int64(rng.IntN(len(log)-int(hw)+1))
		trimmed := newProducerStates()
		var trimmedAborted, rebuiltAborted []AbortedTxn
		for i, st := range log {
			apply(trimmed, &trimmedAborted, st)
			if i%5 == 0 { // the LSO is read now and then, pruning at hw
				trimmed.lastStableOffset(min(hw, int64(i)+1))
			}
		}
		trimmed.lastStableOffset(hw)
		trimmed.truncateFrom(target)
		// The log's truncation trims the .txnindex the same way.
		trimmedAborted = slices.DeleteFunc(trimmedAborted, func(a AbortedTxn) bool { return a.LastOffset >= target })
		rebuilt := newProducerStates()
		for _, st := range log[:target] {
			apply(rebuilt, &rebuiltAborted, st)
		}
		for _, at := range []int64{hw, target} {
			if a, b := trimmed.lastStableOffset(at), rebuilt.lastStableOffset(at); a != b {
				t.Fatalf("seed %d (hw %d, truncated at %d): LSO at %d: trimmed %d, rebuilt %d", seed, hw, target, at, a, b)
			}
		}
		if a, b := collectAborted(trimmedAborted, 0, 1<<40), collectAborted(rebuiltAborted, 0, 1<<40); !slices.Equal(a, b) {
			t.Fatalf("seed %d: aborted: trimmed %+v, rebuilt %+v", seed, a, b)
		}
		if a, b := fmt.Sprint(trimmed.open), fmt.Sprint(rebuilt.open); a != b {
			t.Fatalf("seed %d: open: trimmed %s, rebuilt %s", seed, a, b)
		}
		// Trimming keeps what the cache of the last 5 batches still has
		// below the cut: a suffix of what a rebuild finds, possibly none
		// (then the producer is forgotten, as before transactions: its
		// next batch is taken as a new producer's).
		for id, e := range rebuilt.byID {
			f := trimmed.byID[id]
			if f == nil {
				if e.txnFirstOffset >= 0 {
					t.Fatalf("seed %d: producer %d with an open transaction forgotten", seed, id)
				}
				continue
			}
			if f.txnFirstOffset != e.txnFirstOffset || len(f.batches) > len(e.batches) || !slices.Equal(f.batches, e.batches[len(e.batches)-len(f.batches):]) {
				t.Fatalf("seed %d: producer %d: trimmed %+v, rebuilt %+v", seed, id, f, e)
			}
		}
	}
}

// producer.id.expiration.ms: idle producers are forgotten, unless they
// have a transaction open.
func TestProducerStateExpiry(t *testing.T) {
	s := newProducerStates()
	old := hdr(1, 0, 0, 1, 0)
	old.MaxTimestamp = 1000
	s.update(old, -1)
	open := txnHdr(2, 0, 0, 1, 1)
	open.MaxTimestamp = 1000
	s.update(open, -1)
	recent := hdr(3, 0, 0, 1, 2)
	recent.MaxTimestamp = 5000
	s.update(recent, -1)
	s.expire(2000)
	if _, ok := s.byID[1]; ok {
		t.Fatal("idle producer kept")
	}
	if _, ok := s.byID[2]; !ok {
		t.Fatal("producer with an open transaction expired")
	}
	if _, ok := s.byID[3]; !ok {
		t.Fatal("recent producer expired")
	}
}
