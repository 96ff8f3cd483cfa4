package txn

import (
	"context"
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
		LastProducerEpoch: -1, TimeoutMs: 60000, State: state, StartMs: -1, UpdateMs: 1}
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
			n, write, err := planAddPartitions(tc.cur, tc.pending, tc.pid, tc.epoch, union(nil, tc.parts), 50)
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
		n, write, err := planEndTxn(tc.cur, tc.pending, tc.pid, tc.epoch, tc.commit, 70)
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
