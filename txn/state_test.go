package txn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestValidTransitions(t *testing.T) {
	// Kafka's validPreviousStates, written out as the full table.
	allowed := map[State][]State{
		Empty:             {Empty, CompleteCommit, CompleteAbort},
		Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
		PrepareCommit:     {Ongoing},
		PrepareAbort:      {Ongoing, PrepareEpochFence},
		CompleteCommit:    {PrepareCommit},
		CompleteAbort:     {PrepareAbort},
		Dead:              {Empty, CompleteAbort, CompleteCommit},
		PrepareEpochFence: {Ongoing},
	}
	for to := Empty; to <= PrepareEpochFence; to++ {
		for from := Empty; from <= PrepareEpochFence; from++ {
			want := false
			for _, s := range allowed[to] {
				want = want || s == from
			}
			if got := to.validFrom(from); got != want {
				t.Errorf("%s -> %s allowed = %v, want %v", from, to, got, want)
			}
		}
		if s, ok := ParseState(to.String()); !ok || s != to {
			t.Errorf("ParseState(%q) = %v, %v", to.String(), s, ok)
		}
	}
	if _, ok := ParseState("Bogus"); ok {
		t.Error("ParseState(Bogus) succeeded")
	}
}

func meta(state State, pid int64, epoch int16) Metadata {
	return Metadata{TransactionalID: "t", ProducerID: pid, LastProducerID: -1, ProducerEpoch: epoch,
		LastProducerEpoch: -1, NextProducerID: -1, TimeoutMs: 60000, State: state, StartMs: -1, UpdateMs: 1}
}

func withLast(m Metadata, lastPID int64, lastEpoch int16) Metadata {
	m.LastProducerID, m.LastProducerEpoch = lastPID, lastEpoch
	return m
}

func ongoing(pid int64, epoch int16, parts ...TopicPartition) Metadata {
	m := meta(Ongoing, pid, epoch)
	m.Partitions, m.StartMs = parts, 5
	return m
}

var tpA, tpB = TopicPartition{"a", 0}, TopicPartition{"b", 1}

func TestPlanInit(t *testing.T) {
	const now = 100
	for _, tc := range []struct {
		name      string
		cur       Metadata
		pending   bool
		expected  *ProducerIDAndEpoch
		newID     int64
		wantErr   error
		wantPID   int64
		wantEpoch int16
		wantLast  int16
		wantFence bool
	}{
		{name: "new id: epoch -1 becomes 0", cur: meta(Empty, 7, -1), newID: -1, wantPID: 7, wantEpoch: 0, wantLast: -1},
		{name: "known id: bump fences the old producer", cur: meta(CompleteCommit, 7, 3), newID: -1, wantPID: 7, wantEpoch: 4, wantLast: -1},
		{name: "pending transition", cur: meta(Empty, 7, 3), pending: true, newID: -1, wantErr: kerr.ConcurrentTransactions},
		{name: "prepare commit in flight", cur: meta(PrepareCommit, 7, 3), newID: -1, wantErr: kerr.ConcurrentTransactions},
		{name: "prepare abort in flight", cur: meta(PrepareAbort, 7, 3), newID: -1, wantErr: kerr.ConcurrentTransactions},
		{name: "ongoing: fence with epoch+1", cur: ongoing(7, 3, tpA), newID: -1, wantPID: 7, wantEpoch: 4, wantLast: -1, wantFence: true},
		{name: "exhausted epoch: needs a producer id", cur: meta(Empty, 7, math.MaxInt16-1), newID: -1, wantErr: errNeedProducerID},
		{name: "exhausted epoch: rotates", cur: meta(CompleteAbort, 7, math.MaxInt16-1), newID: 9, wantPID: 9, wantEpoch: 0, wantLast: -1},
		{name: "KIP-360 rotation records the last epoch", cur: meta(Empty, 7, math.MaxInt16-1), newID: 9,
			expected: &ProducerIDAndEpoch{7, math.MaxInt16 - 1}, wantPID: 9, wantEpoch: 0, wantLast: math.MaxInt16 - 1},
		{name: "KIP-360 current epoch: bump, remember last", cur: meta(Empty, 7, 3), newID: -1,
			expected: &ProducerIDAndEpoch{7, 3}, wantPID: 7, wantEpoch: 4, wantLast: 3},
		{name: "KIP-360 retry of a bump: same epoch", cur: withLast(meta(Empty, 7, 4), 7, 3), newID: -1,
			expected: &ProducerIDAndEpoch{7, 3}, wantPID: 7, wantEpoch: 4, wantLast: 3},
		{name: "KIP-360 stale epoch: fenced", cur: meta(Empty, 7, 5), newID: -1,
			expected: &ProducerIDAndEpoch{7, 3}, wantErr: kerr.ProducerFenced},
		{name: "KIP-360 other producer id: fenced", cur: meta(Empty, 7, 5), newID: -1,
			expected: &ProducerIDAndEpoch{8, 5}, wantErr: kerr.ProducerFenced},
		{name: "KIP-360 new metadata accepts any id", cur: meta(Empty, 7, -1), newID: -1,
			expected: &ProducerIDAndEpoch{3, 2}, wantPID: 7, wantEpoch: 0, wantLast: -1},
		{name: "KIP-360 retry of a rotation: the rotated id again", cur: withLast(meta(Empty, 9, 0), 7, math.MaxInt16-1), newID: -1,
			expected: &ProducerIDAndEpoch{7, math.MaxInt16 - 1}, wantPID: 9, wantEpoch: 0, wantLast: math.MaxInt16 - 1},
		{name: "KIP-360 previous id, epoch not exhausted: fenced", cur: withLast(meta(Empty, 9, 0), 7, 5), newID: -1,
			expected: &ProducerIDAndEpoch{7, 5}, wantErr: kerr.ProducerFenced},
		{name: "dead is a bug", cur: meta(Dead, 7, 1), newID: -1, wantErr: kerr.UnknownServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := planInit(tc.cur, tc.pending, 30000, tc.expected, tc.newID, now)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := plan.next
			if n.ProducerID != tc.wantPID || n.ProducerEpoch != tc.wantEpoch || n.LastProducerEpoch != tc.wantLast || plan.fence != tc.wantFence {
				t.Fatalf("next = %+v fence %v, want pid %d epoch %d last %d fence %v", n, plan.fence, tc.wantPID, tc.wantEpoch, tc.wantLast, tc.wantFence)
			}
			if tc.wantFence {
				if n.State != PrepareAbort || !reflect.DeepEqual(n.Partitions, tc.cur.Partitions) || n.StartMs != tc.cur.StartMs {
					t.Fatalf("fence next = %+v", n)
				}
				return
			}
			if n.State != Empty || n.Partitions != nil || n.StartMs != -1 || n.TimeoutMs != 30000 || n.UpdateMs != now ||
				n.LastProducerID != tc.cur.ProducerID {
				t.Fatalf("next = %+v", n)
			}
		})
	}
}

func TestPlanFence(t *testing.T) {
	if _, err := planFence(meta(Empty, 1, 1), false, 9); !errors.Is(err, kerr.UnknownServerError) {
		t.Errorf("fence of Empty: %v", err)
	}
	if _, err := planFence(ongoing(1, 1, tpA), true, 9); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Errorf("fence while pending: %v", err)
	}
	if _, err := planFence(ongoing(1, math.MaxInt16, tpA), false, 9); err == nil {
		t.Error("fence at MaxInt16 overflowed")
	}
	n, err := planFence(withLast(ongoing(1, 1, tpA), 1, 0), false, 9)
	if err != nil || n.ProducerEpoch != 2 || n.LastProducerEpoch != -1 || n.State != PrepareAbort || n.UpdateMs != 9 {
		t.Errorf("fence = %+v, %v", n, err)
	}
}

func TestPlanAddPartitions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cur       Metadata
		pending   bool
		pid       int64
		epoch     int16
		parts     []TopicPartition
		wantErr   error
		wantWrite bool
		wantParts []TopicPartition
		wantStart int64
	}{
		{name: "first partition starts the transaction", cur: meta(Empty, 1, 0), pid: 1, epoch: 0, parts: []TopicPartition{tpB, tpA},
			wantWrite: true, wantParts: []TopicPartition{tpA, tpB}, wantStart: 50},
		{name: "after a commit starts a new one", cur: meta(CompleteCommit, 1, 0), pid: 1, epoch: 0, parts: []TopicPartition{tpA},
			wantWrite: true, wantParts: []TopicPartition{tpA}, wantStart: 50},
		{name: "more partitions keep the start", cur: ongoing(1, 0, tpA), pid: 1, epoch: 0, parts: []TopicPartition{tpB},
			wantWrite: true, wantParts: []TopicPartition{tpA, tpB}, wantStart: 5},
		{name: "already added: no write", cur: ongoing(1, 0, tpA, tpB), pid: 1, epoch: 0, parts: []TopicPartition{tpB}},
		{name: "wrong producer id", cur: ongoing(1, 0, tpA), pid: 2, epoch: 0, parts: []TopicPartition{tpA}, wantErr: kerr.InvalidProducerIDMapping},
		{name: "old epoch", cur: ongoing(1, 1, tpA), pid: 1, epoch: 0, parts: []TopicPartition{tpA}, wantErr: kerr.ProducerFenced},
		{name: "pending", cur: ongoing(1, 0, tpA), pending: true, pid: 1, epoch: 0, parts: []TopicPartition{tpB}, wantErr: kerr.ConcurrentTransactions},
		{name: "committing", cur: meta(PrepareCommit, 1, 0), pid: 1, epoch: 0, parts: []TopicPartition{tpB}, wantErr: kerr.ConcurrentTransactions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, write, err := planAddPartitions(tc.cur, tc.pending, tc.pid, tc.epoch, union(nil, tc.parts), false, 50)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil || write != tc.wantWrite {
				if write != tc.wantWrite {
					t.Fatalf("write = %v, want %v", write, tc.wantWrite)
				}
				return
			}
			if !write {
				return
			}
			if n.State != Ongoing || !reflect.DeepEqual(n.Partitions, tc.wantParts) || n.StartMs != tc.wantStart || n.UpdateMs != 50 {
				t.Fatalf("next = %+v", n)
			}
		})
	}
}

func TestVerifyPartitions(t *testing.T) {
	errs, err := verifyPartitions(ongoing(1, 0, tpA), 1, 0, []TopicPartition{tpA, tpB})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], kerr.InvalidTxnState) {
		t.Errorf("verify = %v, %v", errs, err)
	}
	errs, err = verifyPartitions(meta(CompleteCommit, 1, 0), 1, 0, []TopicPartition{tpA})
	if err != nil || !errors.Is(errs[0], kerr.InvalidTxnState) {
		t.Errorf("verify after commit = %v, %v", errs, err)
	}
	for _, tc := range []struct {
		cur   Metadata
		pid   int64
		epoch int16
		want  error
	}{
		{ongoing(1, 0, tpA), 2, 0, kerr.InvalidProducerIDMapping},
		{ongoing(1, 1, tpA), 1, 0, kerr.ProducerFenced},
		{meta(PrepareAbort, 1, 0), 1, 0, kerr.ConcurrentTransactions},
	} {
		if _, err := verifyPartitions(tc.cur, tc.pid, tc.epoch, []TopicPartition{tpA}); !errors.Is(err, tc.want) {
			t.Errorf("verify %v: %v, want %v", tc.cur.State, err, tc.want)
		}
	}
}

func TestPlanEndTxn(t *testing.T) {
	for _, tc := range []struct {
		cur       Metadata
		pending   bool
		pid       int64
		epoch     int16
		commit    bool
		wantErr   error
		wantWrite bool
		wantState State
	}{
		{cur: ongoing(1, 0, tpA), pid: 1, commit: true, wantWrite: true, wantState: PrepareCommit},
		{cur: ongoing(1, 0, tpA), pid: 1, commit: false, wantWrite: true, wantState: PrepareAbort},
		{cur: meta(CompleteCommit, 1, 0), pid: 1, commit: true},                                 // retry: OK
		{cur: meta(CompleteAbort, 1, 0), pid: 1, commit: false},                                 // retry: OK
		{cur: meta(CompleteCommit, 1, 0), pid: 1, commit: false, wantErr: kerr.InvalidTxnState}, // abort after commit
		{cur: meta(CompleteAbort, 1, 0), pid: 1, commit: true, wantErr: kerr.InvalidTxnState},
		{cur: meta(PrepareCommit, 1, 0), pid: 1, commit: true, wantErr: kerr.ConcurrentTransactions},
		{cur: meta(PrepareCommit, 1, 0), pid: 1, commit: false, wantErr: kerr.InvalidTxnState},
		{cur: meta(PrepareAbort, 1, 0), pid: 1, commit: false, wantErr: kerr.ConcurrentTransactions},
		{cur: meta(PrepareAbort, 1, 0), pid: 1, commit: true, wantErr: kerr.InvalidTxnState},
		{cur: meta(Empty, 1, 0), pid: 1, commit: true, wantErr: kerr.InvalidTxnState},
		{cur: ongoing(1, 0, tpA), pid: 2, commit: true, wantErr: kerr.InvalidProducerIDMapping},
		{cur: ongoing(1, 2, tpA), pid: 1, epoch: 1, commit: true, wantErr: kerr.ProducerFenced},
		{cur: ongoing(1, 2, tpA), pid: 1, epoch: 3, commit: true, wantErr: kerr.ProducerFenced},
		{cur: ongoing(1, 0, tpA), pending: true, pid: 1, commit: true, wantErr: kerr.ConcurrentTransactions},
	} {
		plan, err := planEndTxn(tc.cur, tc.pending, tc.pid, tc.epoch, tc.commit, false, -1, 70)
		n, write := plan.next, plan.write
		if err == nil && (plan.answer != ProducerIDAndEpoch{ID: tc.cur.ProducerID, Epoch: tc.cur.ProducerEpoch}) {
			t.Errorf("%s commit=%v: v1 answer %+v changed the producer", tc.cur.State, tc.commit, plan.answer)
		}
		if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) || write != tc.wantWrite {
			t.Errorf("%s commit=%v pid %d epoch %d: write %v err %v, want write %v err %v",
				tc.cur.State, tc.commit, tc.pid, tc.epoch, write, err, tc.wantWrite, tc.wantErr)
			continue
		}
		if write && (n.State != tc.wantState || !reflect.DeepEqual(n.Partitions, tc.cur.Partitions) || n.UpdateMs != 70) {
			t.Errorf("next = %+v", n)
		}
	}
}

func TestCompletedTimedOutExpired(t *testing.T) {
	c := completed(ongoingPrepared(PrepareCommit), 80)
	if c.State != CompleteCommit || c.Partitions != nil || c.StartMs != 5 || c.UpdateMs != 80 {
		t.Errorf("completed = %+v", c)
	}
	if c := completed(ongoingPrepared(PrepareAbort), 80); c.State != CompleteAbort {
		t.Errorf("completed abort = %+v", c)
	}
	o := ongoing(1, 0, tpA) // started at 5, timeout 60000
	if timedOut(o, false, 60005) || !timedOut(o, false, 60006) || timedOut(o, true, 70000) || timedOut(meta(Empty, 1, 0), false, 1e9) {
		t.Error("timedOut")
	}
	e := meta(CompleteCommit, 1, 0) // updated at 1
	if !expired(e, false, 101, 100) || expired(e, false, 100, 100) || expired(e, true, 1000, 100) || expired(o, false, 1e9, 100) {
		t.Error("expired")
	}
	if validTimeout(0, 10) || !validTimeout(10, 10) || validTimeout(11, 10) || validTimeout(-1, 10) {
		t.Error("validTimeout")
	}
}

func ongoingPrepared(s State) Metadata {
	m := ongoing(1, 0, tpA)
	m.State = s
	return m
}

func TestRecordsRoundTrip(t *testing.T) {
	m := ongoing(42, 3, TopicPartition{"x", 2}, tpA, TopicPartition{"x", 0})
	m.Partitions = union(nil, m.Partitions)
	dead := meta(Dead, 1, 1)
	dead.TransactionalID = "gone"
	batch := buildBatch([]Metadata{m, dead}, 1234)
	recs, err := decodeBatch(batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].id != "t" || recs[1].id != "gone" || recs[1].meta != nil {
		t.Fatalf("records = %+v", recs)
	}
	got := *recs[0].meta
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
}

func TestAppendError(t *testing.T) {
	for _, tc := range []struct {
		err, want error
	}{
		{kerr.NotEnoughReplicas, kerr.CoordinatorNotAvailable},
		{kerr.NotEnoughReplicasAfterAppend, kerr.CoordinatorNotAvailable},
		{kerr.RequestTimedOut, kerr.CoordinatorNotAvailable},
		{kerr.UnknownTopicOrPartition, kerr.CoordinatorNotAvailable},
		{context.DeadlineExceeded, kerr.CoordinatorNotAvailable},
		{kerr.NotLeaderForPartition, kerr.NotCoordinator},
		{kerr.KafkaStorageError, kerr.NotCoordinator},
		{kerr.MessageTooLarge, kerr.UnknownServerError},
		{errors.New("disk on fire"), kerr.UnknownServerError},
	} {
		if got := appendError(fmt.Errorf("append: %w", tc.err)); !errors.Is(got, tc.want) {
			t.Errorf("appendError(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestByTopicGroupsInFirstAppearanceOrder(t *testing.T) {
	var got []string
	ByTopic([]TopicPartition{{"b", 1}, {"a", 0}, {"b", 0}, {"a", 2}}, func(topic string, partitions []int32) {
		got = append(got, fmt.Sprint(topic, partitions))
	})
	if want := []string{"b[1 0]", "a[0 2]"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ByTopic = %v, want %v", got, want)
	}
}

// v2 marks metadata as written by a transactions v2 request.
func v2(m Metadata) Metadata {
	m.TxnVersion = txnV2
	return m
}

// TestPlanEndTxnV2 is EndTxn v5+ (KIP-890 part 2): every end bumps the
// epoch the markers and the producer's next transaction use; the lost
// answer's retry (one epoch back, or the old producer id after a
// rotation) gets the same answer; an abort with no transaction is legal;
// a stale epoch is fenced.
func TestPlanEndTxnV2(t *testing.T) {
	const maxEpoch = math.MaxInt16
	rotated := v2(meta(CompleteCommit, 9, 0)) // pid 1 ran out and moved to 9
	rotated.LastProducerID = 1
	preparedRotation := v2(ongoing(1, maxEpoch, tpA))
	preparedRotation.State, preparedRotation.NextProducerID = PrepareCommit, 9
	for _, tc := range []struct {
		name       string
		cur        Metadata
		pending    bool
		pid        int64
		epoch      int16
		commit     bool
		newID      int64
		wantErr    error
		wantWrite  bool
		wantState  State
		wantAnswer ProducerIDAndEpoch
		wantNext   int64 // NextProducerID written
	}{
		{name: "commit bumps", cur: ongoing(1, 4, tpA), pid: 1, epoch: 4, commit: true,
			wantWrite: true, wantState: PrepareCommit, wantAnswer: ProducerIDAndEpoch{1, 5}, wantNext: -1},
		{name: "abort bumps", cur: ongoing(1, 4, tpA), pid: 1, epoch: 4,
			wantWrite: true, wantState: PrepareAbort, wantAnswer: ProducerIDAndEpoch{1, 5}, wantNext: -1},
		{name: "retry after completion", cur: v2(meta(CompleteCommit, 1, 5)), pid: 1, epoch: 4, commit: true,
			wantAnswer: ProducerIDAndEpoch{1, 5}},
		{name: "retry with the other outcome", cur: v2(meta(CompleteCommit, 1, 5)), pid: 1, epoch: 4,
			wantErr: kerr.InvalidTxnState},
		{name: "retry while completing", cur: v2(meta(PrepareCommit, 1, 5)), pending: true, pid: 1, epoch: 4, commit: true,
			wantErr: kerr.ConcurrentTransactions},
		{name: "next end while completing waits", cur: v2(meta(PrepareCommit, 1, 5)), pending: true, pid: 1, epoch: 5,
			wantErr: kerr.ConcurrentTransactions},
		{name: "two epochs back", cur: v2(meta(CompleteCommit, 1, 6)), pid: 1, epoch: 4, commit: true,
			wantErr: kerr.ProducerFenced},
		{name: "stale end of a new transaction", cur: v2(ongoing(1, 5, tpA)), pid: 1, epoch: 4, commit: true,
			wantErr: kerr.ProducerFenced},
		{name: "empty abort after a commit", cur: v2(meta(CompleteCommit, 1, 5)), pid: 1, epoch: 5,
			wantWrite: true, wantState: PrepareAbort, wantAnswer: ProducerIDAndEpoch{1, 6}, wantNext: -1},
		{name: "empty abort after init", cur: meta(Empty, 1, 0), pid: 1, epoch: 0,
			wantWrite: true, wantState: PrepareAbort, wantAnswer: ProducerIDAndEpoch{1, 1}, wantNext: -1},
		{name: "empty commit", cur: meta(Empty, 1, 0), pid: 1, epoch: 0, commit: true, wantErr: kerr.InvalidTxnState},
		{name: "v1 transaction ended by v5", cur: meta(CompleteCommit, 1, 3), pid: 1, epoch: 3, commit: true,
			wantAnswer: ProducerIDAndEpoch{1, 3}},
		{name: "fenced producer (v1 fence)", cur: meta(CompleteAbort, 1, 5), pid: 1, epoch: 4, commit: true,
			wantErr: kerr.ProducerFenced},
		{name: "last epochs: rotation needs an id", cur: ongoing(1, maxEpoch-1, tpA), pid: 1, epoch: maxEpoch - 1, commit: true,
			newID: -1, wantErr: errNeedProducerID},
		{name: "last epochs: rotation", cur: ongoing(1, maxEpoch-1, tpA), pid: 1, epoch: maxEpoch - 1, commit: true,
			newID: 9, wantWrite: true, wantState: PrepareCommit, wantAnswer: ProducerIDAndEpoch{9, 0}, wantNext: 9},
		{name: "retry of the rotation", cur: rotated, pid: 1, epoch: maxEpoch - 1, commit: true,
			wantAnswer: ProducerIDAndEpoch{9, 0}},
		{name: "old id, not a rotation retry", cur: rotated, pid: 1, epoch: 3, commit: true,
			wantErr: kerr.InvalidProducerIDMapping},
		{name: "rotation still completing", cur: preparedRotation, pending: true, pid: 1, epoch: maxEpoch - 1, commit: true,
			wantErr: kerr.ConcurrentTransactions},
		{name: "the new id's empty abort while the rotation completes", cur: preparedRotation, pending: true, pid: 9, epoch: 0,
			wantErr: kerr.ConcurrentTransactions},
	} {
		plan, err := planEndTxn(tc.cur, tc.pending, tc.pid, tc.epoch, tc.commit, true, tc.newID, 70)
		if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) || plan.write != tc.wantWrite {
			t.Errorf("%s: write %v err %v, want write %v err %v", tc.name, plan.write, err, tc.wantWrite, tc.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if plan.answer != tc.wantAnswer {
			t.Errorf("%s: answer %+v, want %+v", tc.name, plan.answer, tc.wantAnswer)
		}
		if !plan.write {
			continue
		}
		n := plan.next
		if n.State != tc.wantState || n.TxnVersion != txnV2 || n.NextProducerID != tc.wantNext ||
			n.ProducerEpoch != tc.cur.ProducerEpoch+1 || n.ProducerID != tc.cur.ProducerID {
			t.Errorf("%s: next = %+v", tc.name, n)
		}
		if tc.cur.State != Ongoing && n.Partitions != nil {
			t.Errorf("%s: an empty abort has partitions %v", tc.name, n.Partitions)
		}
	}
}

// TestCompletedV2Rotation: a v2 transaction that rotated the producer id
// completes onto the new id at epoch 0, remembering the old one for the
// retry; the markers (from the prepared state) carry the old id's last
// epoch.
func TestCompletedV2Rotation(t *testing.T) {
	prepared := v2(ongoing(1, math.MaxInt16, tpA))
	prepared.State, prepared.NextProducerID = PrepareCommit, 9
	c := completed(prepared, 80)
	if c.State != CompleteCommit || c.ProducerID != 9 || c.ProducerEpoch != 0 || c.LastProducerID != 1 ||
		c.NextProducerID != -1 || c.TxnVersion != txnV2 {
		t.Errorf("completed = %+v", c)
	}
	plain := completed(v2(ongoingPrepared(PrepareCommit)), 80)
	if plain.ProducerID != ongoingPrepared(PrepareCommit).ProducerID || plain.NextProducerID != -1 {
		t.Errorf("completed without rotation = %+v", plain)
	}
}

// TestPlanAddPartitionsV2: an implicit add (Produce v12+) starts a v2
// transaction; a producer already moved to its next id by a rotation
// waits for the completion instead of being refused as unknown.
func TestPlanAddPartitionsV2(t *testing.T) {
	n, write, err := planAddPartitions(v2(meta(CompleteCommit, 1, 5)), false, 1, 5, []TopicPartition{tpA}, true, 50)
	if err != nil || !write || n.State != Ongoing || n.TxnVersion != txnV2 || n.StartMs != 50 {
		t.Errorf("v2 add = %+v %v %v", n, write, err)
	}
	n, _, err = planAddPartitions(v2(meta(CompleteCommit, 1, 5)), false, 1, 5, []TopicPartition{tpA}, false, 50)
	if err != nil || n.TxnVersion != 0 {
		t.Errorf("v1 add after a v2 transaction = %+v %v", n, err)
	}
	prepared := v2(ongoing(1, math.MaxInt16, tpA))
	prepared.State, prepared.NextProducerID = PrepareCommit, 9
	if _, _, err := planAddPartitions(prepared, true, 9, 0, []TopicPartition{tpA}, true, 50); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Errorf("add under the next producer id while completing: %v", err)
	}
	if _, _, err := planAddPartitions(prepared, true, 9, 1, []TopicPartition{tpA}, true, 50); !errors.Is(err, kerr.InvalidProducerIDMapping) {
		t.Errorf("add under the next producer id at a wrong epoch: %v", err)
	}
}

// TestRecordsRoundTripV2: v2 states are written as value version 1 with
// the tagged fields, which a load reads back.
func TestRecordsRoundTripV2(t *testing.T) {
	m := v2(ongoing(42, 7, tpA))
	m.State, m.LastProducerID, m.NextProducerID = PrepareCommit, 41, 99
	batch := buildBatch([]Metadata{m}, 1234)
	recs, err := decodeBatch(batch)
	if err != nil || len(recs) != 1 {
		t.Fatalf("decode: %v %+v", err, recs)
	}
	if got := *recs[0].meta; !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
	if v := binary.BigEndian.Uint16(recordValue(m)); v != valueVersionV2 {
		t.Errorf("value version %d, want %d", v, valueVersionV2)
	}
	if v := binary.BigEndian.Uint16(recordValue(meta(Ongoing, 1, 0))); v != valueVersion {
		t.Errorf("v1 transaction's value version %d, want %d", v, valueVersion)
	}
}
