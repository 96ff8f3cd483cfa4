package replica

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
)

func txnBatch(pid int64, epoch int16, seq int32, n int) ([][]byte, []recordbatch.Header) {
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i].Value = []byte("v")
	}
	b := recordbatch.Build(recordbatch.BatchSpec{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LeaderEpoch: -1,
		Attributes: recordbatch.TransactionalBit}, recs)
	h, _ := recordbatch.Validate(b)
	return [][]byte{b}, []recordbatch.Header{h}
}

// readCommitted reads everything a read_committed consumer may see from 0.
func readCommitted(t *testing.T, p *Partition) ([]recordbatch.Header, ReadResult) {
	t.Helper()
	rr, err := p.Read(0, 1<<20, true, -1, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Records.Close()
	recs, err := rr.Records.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, hs, err := recordbatch.Split(recs)
	if err != nil {
		t.Fatal(err)
	}
	return hs, rr
}

// A leader's transactions: read_committed stops at the open one, sees the
// aborted one listed, and the state comes back the same after a restart
// and after a truncation that removes a marker.
func TestPartitionTransactions(t *testing.T) {
	dir := t.TempDir()
	m, p := openLeader(t, dir)
	now := time.Now()
	mustAppend := func(b [][]byte, h []recordbatch.Header) int64 {
		t.Helper()
		res, err := p.AppendAsLeader(b, h, -1, now)
		if err != nil {
			t.Fatal(err)
		}
		return res.BaseOffset
	}
	mustMark := func(pid int64, epoch int16, commit bool) int64 {
		t.Helper()
		res, err := p.AppendTxnMarker(pid, epoch, commit, 0, false, now)
		if err != nil {
			t.Fatal(err)
		}
		return res.BaseOffset
	}
	mustAppend(txnBatch(1, 0, 0, 2))     // 0-1, producer 1
	mustAppend(txnBatch(2, 0, 0, 1))     // 2, producer 2
	mustAppend(idempotentBatch(3, 0, 1)) // 3, no transaction
	if st := p.State(); st.LastStableOffset != 0 || st.HighWatermark != 4 {
		t.Fatalf("two open transactions: %+v", st)
	}
	if hs, _ := readCommitted(t, p); len(hs) != 0 {
		t.Fatalf("read_committed below an open transaction got %d batches", len(hs))
	}
	if off := mustMark(1, 0, true); off != 4 {
		t.Fatalf("commit marker at %d", off)
	}
	if st := p.State(); st.LastStableOffset != 2 {
		t.Fatalf("producer 2 still open at 2: LSO %d", st.LastStableOffset)
	}
	mustMark(2, 0, false) // 5
	if st := p.State(); st.LastStableOffset != 6 {
		t.Fatalf("all decided: LSO %d, want 6", st.LastStableOffset)
	}
	hs, rr := readCommitted(t, p)
	if len(hs) != 5 || !hs[4].IsControl() {
		t.Fatalf("read_committed: %d batches", len(hs))
	}
	want := []AbortedTxn{{ProducerID: 2, FirstOffset: 2, LastOffset: 5, LastStableOffset: 6}}
	if !slices.Equal(rr.AbortedTxns, want) {
		t.Fatalf("aborted = %+v, want %+v", rr.AbortedTxns, want)
	}
	// Bad input: a marker of an older epoch, a client's control batch.
	if _, err := p.AppendTxnMarker(1, -1, true, 0, false, now); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("stale marker: %v", err)
	}
	ctrl := recordbatch.BuildTxnMarker(1, 0, true, 0, 0)
	ch, _ := recordbatch.Validate(ctrl)
	if _, err := p.AppendAsLeader([][]byte{ctrl}, []recordbatch.Header{ch}, -1, now); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("client control batch: %v", err)
	}
	mustAppend(txnBatch(1, 0, 2, 1)) // 6: producer 1 opens again
	before := p.Producers()

	// Restart: the same state from the log.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, p = openLeader(t, dir)
	defer m.Close()
	if st := p.State(); st.LastStableOffset != 6 {
		t.Fatalf("after restart LSO %d, want 6", st.LastStableOffset)
	}
	if _, rr := readCommitted(t, p); !slices.Equal(rr.AbortedTxns, want) {
		t.Fatalf("after restart aborted = %+v", rr.AbortedTxns)
	}
	if after := p.Producers(); !slices.Equal(before, after) {
		t.Fatalf("producers before restart %+v, after %+v", before, after)
	}

	// Truncating away the abort marker reopens producer 2's transaction.
	p.mu.Lock()
	err := p.truncateLocked(5)
	p.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if st := p.State(); st.LastStableOffset != 2 {
		t.Fatalf("after truncation LSO %d, want 2", st.LastStableOffset)
	}
	if _, rr := readCommitted(t, p); len(rr.AbortedTxns) != 0 {
		t.Fatalf("after truncation aborted = %+v", rr.AbortedTxns)
	}
}

// KIP-890 part 1: a client's batch that opens a transaction needs a
// verification guard, and a marker written between verification and
// append voids the guard (the hanging-transaction race).
func TestPartitionTxnVerification(t *testing.T) {
	m, p := openLeader(t, t.TempDir())
	defer m.Close()
	now := time.Now()
	b, h := txnBatch(1, 0, 0, 1)
	if _, err := p.AppendFromClient(b, h, -1, now, nil); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("unverified batch opening a transaction: %v", err)
	}
	g := p.StartTxnVerification(1, 0, false)
	if g == nil {
		t.Fatal("no guard for a producer without an open transaction")
	}
	if _, err := p.AppendFromClient(b, h, -1, now, &TxnVerification{producerID: 1}); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("another guard: %v", err)
	}
	if _, err := p.AppendFromClient(b, h, -1, now, g); err != nil {
		t.Fatalf("verified batch: %v", err)
	}
	if p.StartTxnVerification(1, 0, false) != nil {
		t.Fatal("a guard asked for while the transaction is open")
	}
	b, h = txnBatch(1, 0, 1, 1)
	if _, err := p.AppendFromClient(b, h, -1, now, nil); err != nil {
		t.Fatalf("later batch of the open transaction: %v", err)
	}
	// Verified, then the coordinator aborts (timeout) before the append.
	if _, err := p.AppendTxnMarker(1, 0, true, 0, false, now); err != nil {
		t.Fatal(err)
	}
	g = p.StartTxnVerification(1, 0, false)
	if _, err := p.AppendTxnMarker(1, 1, false, 0, false, now); err != nil {
		t.Fatal(err)
	}
	b, h = txnBatch(1, 0, 2, 1)
	if _, err := p.AppendFromClient(b, h, -1, now, g); err == nil {
		t.Fatal("a batch verified before a marker was appended after it")
	}
	if st := p.State(); st.LastStableOffset != st.HighWatermark {
		t.Fatalf("a hanging transaction: LSO %d, HW %d", st.LastStableOffset, st.HighWatermark)
	}
}

// Review findings, each a test that failed before its fix: a fenced
// producer's coordinator-written batch (sequence -1: TxnOffsetCommit) is
// refused; a marker copied as follower voids a verification; a leadership
// round trip voids it; a marker is not appended while the ISR is below
// min.insync.replicas.
func TestPartitionTxnFencingAndGuards(t *testing.T) {
	m, p := openLeader(t, t.TempDir())
	defer m.Close()
	now := time.Now()
	b, h := txnBatch(1, 5, -1, 1)
	if _, err := p.AppendAsLeader(b, h, -1, now); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendTxnMarker(1, 6, false, 0, false, now); err != nil { // fenced: abort at epoch 6
		t.Fatal(err)
	}
	b, h = txnBatch(1, 5, -1, 1)
	if _, err := p.AppendAsLeader(b, h, -1, now); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("fenced producer's sequence -1 batch: %v", err)
	}

	// A marker arriving through applyBatchLocked (as a follower copies
	// it) voids the guard.
	g := p.StartTxnVerification(2, 0, false)
	marker := recordbatch.BuildTxnMarker(2, 0, false, 0, now.UnixMilli())
	mh, _ := recordbatch.Validate(marker)
	p.mu.Lock()
	p.applyBatchLocked(mh, marker)
	p.mu.Unlock()
	b, h = txnBatch(2, 0, 0, 1)
	if _, err := p.AppendFromClient(b, h, -1, now, g); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("guard after a copied marker: %v", err)
	}

	// A new leader epoch voids it too.
	g = p.StartTxnVerification(3, 0, false)
	if _, err := m.MakeLeader(TopicPartition{"t", 0}, [16]byte{1}, 1, 1, []int32{0}, testConfig()); err != nil {
		t.Fatal(err)
	}
	b, h = txnBatch(3, 0, 0, 1)
	if _, err := p.AppendFromClient(b, h, -1, now, g); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("guard from an earlier leader epoch: %v", err)
	}

	cfg := testConfig()
	cfg.MinInsyncReplicas = 2
	p.SetConfig(cfg)
	end := p.State().LogEndOffset
	if _, err := p.AppendTxnMarker(9, 0, true, 0, false, now); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("marker with the ISR below min.insync.replicas: %v", err)
	}
	if got := p.State().LogEndOffset; got != end {
		t.Fatalf("refused marker appended: log end %d, was %d", got, end)
	}
}

// A read_committed read lists the aborted transactions of what it read,
// not of everything up to the last stable offset.
func TestReadCommittedAbortedListIsBoundedByTheRead(t *testing.T) {
	m, p := openLeader(t, t.TempDir())
	defer m.Close()
	now := time.Now()
	for i := 0; i < 50; i++ { // producer i: one record, then an abort marker
		b, h := txnBatch(int64(i), 0, 0, 1)
		if _, err := p.AppendAsLeader(b, h, -1, now); err != nil {
			t.Fatal(err)
		}
		if _, err := p.AppendTxnMarker(int64(i), 0, false, 0, false, now); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := txnBatch(0, 0, 0, 1)
	rr, err := p.Read(0, len(b), true, -1, true) // about one batch
	if err != nil {
		t.Fatal(err)
	}
	rr.Records.Close()
	if len(rr.AbortedTxns) == 0 || len(rr.AbortedTxns) > 2 {
		t.Fatalf("a one-batch read lists %d aborted transactions, want 1 or 2 (of 50)", len(rr.AbortedTxns))
	}
	if rr, err = p.Read(0, 1<<20, true, -1, true); err != nil {
		t.Fatal(err)
	}
	rr.Records.Close()
	if len(rr.AbortedTxns) != 50 {
		t.Fatalf("a whole read lists %d aborted transactions, want 50", len(rr.AbortedTxns))
	}
}

// TestPartitionTxnVerificationV2: under transactions v2 the producer's next
// transaction (epoch+1) can be verified while the marker of its previous
// one, which carries that same epoch, is still on its way; the marker must
// not void the guard, and the batch then opens the new transaction alone.
// A late batch of the ended transaction is fenced by the epoch, and a
// marker above the guard's epoch (a fence) voids it.
func TestPartitionTxnVerificationV2(t *testing.T) {
	m, p := openLeader(t, t.TempDir())
	defer m.Close()
	now := time.Now()
	g := p.StartTxnVerification(1, 0, true)
	b, h := txnBatch(1, 0, 0, 2)
	if _, err := p.AppendFromClient(b, h, -1, now, g); err != nil {
		t.Fatal(err)
	}
	// EndTxn v5 answered epoch 1; the next transaction's first batch is
	// verified before the commit marker (epoch 1) lands.
	g = p.StartTxnVerification(1, 1, true)
	if g == nil {
		t.Fatal("no guard for the next transaction while the previous one is open")
	}
	marker, err := p.AppendTxnMarker(1, 1, true, 0, true, now)
	if err != nil {
		t.Fatal(err)
	}
	// The marker raised the epoch: the new transaction's first batch must
	// start at sequence 0 (a gap, such as a lost first request, is out of
	// order), as Kafka checks.
	b, h = txnBatch(1, 1, 3, 1)
	if _, err := p.AppendFromClient(b, h, -1, now, g); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("first batch of the new epoch at sequence 3: %v", err)
	}
	b, h = txnBatch(1, 1, 0, 1)
	res, err := p.AppendFromClient(b, h, -1, now, g)
	if err != nil {
		t.Fatalf("next transaction's batch verified before the previous marker: %v", err)
	}
	// The LSO is the new transaction's first offset: the old one ended
	// at the marker and did not swallow the new batch.
	if st := p.State(); st.LastStableOffset != res.BaseOffset || res.BaseOffset != marker.BaseOffset+1 {
		t.Fatalf("LSO %d, new transaction at %d, marker at %d", st.LastStableOffset, res.BaseOffset, marker.BaseOffset)
	}
	b, h = txnBatch(1, 0, 2, 1)
	if _, err := p.AppendFromClient(b, h, -1, now, nil); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("late batch of the ended transaction: %v", err)
	}
	// A stale copy of the previous transaction's marker (epoch 1) must not
	// end the transaction now open at epoch 1.
	if _, err := p.AppendTxnMarker(1, 1, true, 0, true, now); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("stale v2 marker over the next transaction: %v", err)
	}
	if st := p.State(); st.LastStableOffset != res.BaseOffset {
		t.Fatalf("the stale marker moved the LSO to %d (transaction at %d)", st.LastStableOffset, res.BaseOffset)
	}
	if _, err := p.AppendTxnMarker(1, 2, false, 0, true, now); err != nil {
		t.Fatal(err)
	}

	// A fence (abort marker above the guard's epoch) voids a v2 guard.
	g = p.StartTxnVerification(1, 2, true)
	if _, err := p.AppendTxnMarker(1, 3, false, 0, false, now); err != nil {
		t.Fatal(err)
	}
	b, h = txnBatch(1, 2, 0, 1)
	if _, err := p.AppendFromClient(b, h, -1, now, g); err == nil {
		t.Fatal("a v2 guard outlived a fence")
	}
	if st := p.State(); st.LastStableOffset != st.HighWatermark {
		t.Fatalf("a hanging transaction: LSO %d, HW %d", st.LastStableOffset, st.HighWatermark)
	}
}
