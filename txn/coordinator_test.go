package txn

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/kafkahash"
	"github.com/twmb/franz-go/pkg/kerr"
)

// memLog is an in-memory __transaction_state: committed batches per
// partition. failNext makes the next Append fail; readGate, when set,
// holds ReadAll until closed, and readStarted is closed once ReadAll waits
// there.
type memLog struct {
	mu          sync.Mutex
	batches     map[int32][][]byte
	start       map[int32]int64 // offset (batch number) of batches[p][0]
	failNext    error
	readGate    chan struct{}
	readStarted chan struct{}
}

func newMemLog() *memLog { return &memLog{batches: map[int32][][]byte{}, start: map[int32]int64{}} }

func (l *memLog) Append(ctx context.Context, p int32, batch []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.failNext; err != nil {
		l.failNext = nil
		return -1, err
	}
	l.batches[p] = append(l.batches[p], append([]byte(nil), batch...))
	return l.start[p] + int64(len(l.batches[p])-1), nil
}

func (l *memLog) DeleteBefore(_ context.Context, p int32, offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if drop := offset - l.start[p]; drop > 0 {
		l.batches[p] = l.batches[p][drop:]
		l.start[p] = offset
	}
	return nil
}

func (l *memLog) ReadAll(ctx context.Context, p int32, fn func([]byte) error) error {
	l.mu.Lock()
	gate, started := l.readGate, l.readStarted
	l.readGate, l.readStarted = nil, nil
	l.mu.Unlock()
	if gate != nil {
		close(started)
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.mu.Lock()
	batches := append([][]byte(nil), l.batches[p]...)
	l.mu.Unlock()
	for _, b := range batches {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

// records is every record written to partition p, in order.
func (l *memLog) records(t *testing.T, p int32) []logRecord {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logRecord
	for _, b := range l.batches[p] {
		recs, err := decodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recs...)
	}
	return out
}

// memMarkers records the markers it is asked to write; gate, when set,
// holds each write until closed.
type memMarkers struct {
	mu    sync.Mutex
	calls []Markers
	gate  chan struct{}
}

func (m *memMarkers) WriteMarkers(ctx context.Context, mk Markers) error {
	m.mu.Lock()
	gate := m.gate
	m.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, mk)
	return nil
}

func (m *memMarkers) written() []Markers {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Markers(nil), m.calls...)
}

// fakeClock is the coordinator's clock in tests: it moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type harness struct {
	t       *testing.T
	c       *Coordinator
	log     *memLog
	markers *memMarkers
	clock   *fakeClock
	nextPID int64
}

const testParts = 3

// coordinatorEpoch is the leader epoch the tests lead at.
const coordinatorEpoch = 5

func newHarness(t *testing.T, log *memLog) *harness {
	t.Helper()
	return newHarnessWith(t, log, func(*Config) {})
}

// newHarnessWith is newHarness with the test config changed by tune.
func newHarnessWith(t *testing.T, log *memLog, tune func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, log: log, markers: &memMarkers{}, clock: &fakeClock{now: time.UnixMilli(1_000_000)}, nextPID: 1000}
	var pidMu sync.Mutex
	alloc := func() (int64, error) {
		pidMu.Lock()
		defer pidMu.Unlock()
		h.nextPID++
		return h.nextPID, nil
	}
	cfg := Config{NumPartitions: testParts, MaxTimeout: time.Hour, IDExpiration: 24 * time.Hour,
		AbortInterval: -1, ExpireInterval: -1, RetryBackoff: time.Millisecond, CompletionWait: 5 * time.Millisecond}
	tune(&cfg)
	h.c = New(cfg, log, h.markers, alloc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.c.now = h.clock.Now
	t.Cleanup(h.c.Close)
	return h
}

func (h *harness) leadAll() {
	h.t.Helper()
	for p := int32(0); p < testParts; p++ {
		if err := h.c.BecomeLeader(context.Background(), p, coordinatorEpoch); err != nil {
			h.t.Fatal(err)
		}
	}
}

// settle waits for the background completions (markers, Complete*): the
// tests disable the loops, so bg counts only those.
func (h *harness) settle() { h.c.bg.Wait() }

func (h *harness) init(id string, expected *ProducerIDAndEpoch) (ProducerIDAndEpoch, error) {
	return h.c.InitProducerID(context.Background(), id, 60000, expected)
}

func (h *harness) mustInit(id string) ProducerIDAndEpoch {
	h.t.Helper()
	pe, err := h.init(id, nil)
	if err != nil {
		h.t.Fatalf("InitProducerID(%s): %v", id, err)
	}
	return pe
}

func (h *harness) add(id string, pe ProducerIDAndEpoch, parts ...TopicPartition) error {
	return h.c.AddPartitions(context.Background(), id, pe.ID, pe.Epoch, parts, false, true)
}

func (h *harness) end(id string, pe ProducerIDAndEpoch, commit bool) error {
	_, err := h.c.EndTxn(context.Background(), id, pe.ID, pe.Epoch, commit, false)
	return err
}

func (h *harness) state(id string) Metadata {
	h.t.Helper()
	m, err := h.c.Describe(id)
	if err != nil {
		h.t.Fatalf("Describe(%s): %v", id, err)
	}
	return m
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) || (want == nil && err != nil) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

func TestCommitAndAbortTranscript(t *testing.T) {
	h := newHarness(t, newMemLog())
	h.leadAll()
	pe := h.mustInit("tx")
	if pe != (ProducerIDAndEpoch{1001, 0}) {
		t.Fatalf("first InitProducerID = %+v", pe)
	}
	wantErr(t, "add", h.add("tx", pe, tpB, tpA), nil)
	wantErr(t, "add again (no write)", h.add("tx", pe, tpA), nil)
	if m := h.state("tx"); m.State != Ongoing || !reflect.DeepEqual(m.Partitions, []TopicPartition{tpA, tpB}) || m.StartMs != 1_000_000 {
		t.Fatalf("after add: %+v", m)
	}
	wantErr(t, "commit", h.end("tx", pe, true), nil)
	h.settle()
	want := []Markers{{ProducerID: 1001, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: coordinatorEpoch, Partitions: []TopicPartition{tpA, tpB}}}
	if got := h.markers.written(); !reflect.DeepEqual(got, want) {
		t.Fatalf("markers = %+v, want %+v", got, want)
	}
	if m := h.state("tx"); m.State != CompleteCommit || m.Partitions != nil {
		t.Fatalf("after commit: %+v", m)
	}
	wantErr(t, "commit retried", h.end("tx", pe, true), nil)
	wantErr(t, "abort after commit", h.end("tx", pe, false), kerr.InvalidTxnState)

	wantErr(t, "add to a new transaction", h.add("tx", pe, tpB), nil)
	wantErr(t, "abort", h.end("tx", pe, false), nil)
	h.settle()
	if got := h.markers.written(); len(got) != 2 || got[1].Commit || !reflect.DeepEqual(got[1].Partitions, []TopicPartition{tpB}) {
		t.Fatalf("markers = %+v", got)
	}
	if m := h.state("tx"); m.State != CompleteAbort {
		t.Fatalf("after abort: %+v", m)
	}
	wantErr(t, "end of an empty transaction", h.end("tx", pe, true), kerr.InvalidTxnState)

	// The log holds each step, last value wins: Empty, Ongoing,
	// PrepareCommit, CompleteCommit, Ongoing, PrepareAbort, CompleteAbort.
	var states []State
	for _, r := range h.log.records(t, h.c.PartitionFor("tx")) {
		states = append(states, r.meta.State)
	}
	wantStates := []State{Empty, Ongoing, PrepareCommit, CompleteCommit, Ongoing, PrepareAbort, CompleteAbort}
	if !reflect.DeepEqual(states, wantStates) {
		t.Fatalf("logged states = %v, want %v", states, wantStates)
	}
}

func TestInitProducerIDFencesOngoingTransaction(t *testing.T) {
	h := newHarness(t, newMemLog())
	h.leadAll()
	old := h.mustInit("tx")
	wantErr(t, "add", h.add("tx", old, tpA), nil)

	_, err := h.init("tx", nil)
	wantErr(t, "init over an ongoing transaction", err, kerr.ConcurrentTransactions)
	h.settle()
	if got := h.markers.written(); len(got) != 1 || got[0].Commit || got[0].ProducerEpoch != old.Epoch+1 {
		t.Fatalf("fencing markers = %+v", got)
	}
	if m := h.state("tx"); m.State != CompleteAbort || m.ProducerEpoch != old.Epoch+1 {
		t.Fatalf("after fence: %+v", m)
	}
	wantErr(t, "old producer commits", h.end("tx", old, true), kerr.ProducerFenced)
	wantErr(t, "old producer adds", h.add("tx", old, tpB), kerr.ProducerFenced)

	pe := h.mustInit("tx")
	if pe.ID != old.ID || pe.Epoch != old.Epoch+2 {
		t.Fatalf("retried InitProducerID = %+v", pe)
	}
}

func TestInFlightEndTxnIsConcurrent(t *testing.T) {
	h := newHarness(t, newMemLog())
	h.leadAll()
	pe := h.mustInit("tx")
	wantErr(t, "add", h.add("tx", pe, tpA), nil)
	gate := make(chan struct{})
	h.markers.gate = gate
	wantErr(t, "commit", h.end("tx", pe, true), nil)
	wantErr(t, "commit while committing", h.end("tx", pe, true), kerr.ConcurrentTransactions)
	wantErr(t, "add while committing", h.add("tx", pe, tpB), kerr.ConcurrentTransactions)
	_, err := h.init("tx", nil)
	wantErr(t, "init while committing", err, kerr.ConcurrentTransactions)
	if m := h.state("tx"); m.State != PrepareCommit {
		t.Fatalf("while committing: %+v", m)
	}
	close(gate)
	h.settle()
	if m := h.state("tx"); m.State != CompleteCommit {
		t.Fatalf("after markers: %+v", m)
	}
	wantErr(t, "next transaction", h.add("tx", pe, tpB), nil)
}

// A request that finds the previous transaction completing waits for the
// completion instead of answering CONCURRENT_TRANSACTIONS at once.
func TestAddPartitionsWaitsForTheCompletion(t *testing.T) {
	h := newHarnessWith(t, newMemLog(), func(c *Config) { c.CompletionWait = time.Minute })
	h.leadAll()
	pe := h.mustInit("tx")
	wantErr(t, "add", h.add("tx", pe, tpA), nil)
	gate := make(chan struct{})
	h.markers.gate = gate
	wantErr(t, "commit", h.end("tx", pe, true), nil)
	added := make(chan error, 1)
	go func() { added <- h.add("tx", pe, tpB) }()
	select {
	case err := <-added:
		t.Fatalf("add answered %v while the markers were held", err)
	case <-time.After(20 * time.Millisecond):
		// Not a synchronisation: a bound on how soon a wrong answer
		// would have come; the add must still be waiting.
	}
	close(gate)
	select {
	case err := <-added:
		wantErr(t, "add after the completion", err, nil)
	case <-time.After(10 * time.Second):
		t.Fatal("add still waiting after the completion")
	}
	if m := h.state("tx"); m.State != Ongoing || !reflect.DeepEqual(m.Partitions, []TopicPartition{tpB}) {
		t.Fatalf("after the add: %+v", m)
	}
}

func TestErrorsBeforeAnyWrite(t *testing.T) {
	h := newHarness(t, newMemLog())
	_, err := h.init("tx", nil)
	wantErr(t, "not leading", err, kerr.NotCoordinator)
	h.leadAll()
	_, err = h.init("", nil)
	wantErr(t, "empty id", err, kerr.InvalidRequest)
	_, err = h.c.InitProducerID(context.Background(), "tx", 0, nil)
	wantErr(t, "zero timeout", err, kerr.InvalidTransactionTimeout)
	_, err = h.c.InitProducerID(context.Background(), "tx", int32(time.Hour.Milliseconds())+1, nil)
	wantErr(t, "timeout above the max", err, kerr.InvalidTransactionTimeout)
	wantErr(t, "add for an unknown id", h.add("nope", ProducerIDAndEpoch{1, 0}, tpA), kerr.InvalidProducerIDMapping)
	wantErr(t, "end for an unknown id", h.end("nope", ProducerIDAndEpoch{1, 0}, true), kerr.InvalidProducerIDMapping)
	_, err = h.c.Describe("nope")
	wantErr(t, "describe unknown", err, kerr.TransactionalIDNotFound)
	pe := h.mustInit("tx")
	wantErr(t, "end with a stale epoch", h.end("tx", ProducerIDAndEpoch{pe.ID, pe.Epoch - 1}, true), kerr.ProducerFenced)
	wantErr(t, "end with another producer id", h.end("tx", ProducerIDAndEpoch{pe.ID + 1, pe.Epoch}, true), kerr.InvalidProducerIDMapping)
	if len(h.log.records(t, h.c.PartitionFor("tx"))) != 1 {
		t.Fatal("refused requests wrote records")
	}
	h.c.Resign(h.c.PartitionFor("tx"))
	wantErr(t, "after resign", h.add("tx", pe, tpA), kerr.NotCoordinator)
}

func TestAppendFailures(t *testing.T) {
	h := newHarness(t, newMemLog())
	h.leadAll()
	h.log.failNext = kerr.NotEnoughReplicas
	_, err := h.init("tx", nil)
	wantErr(t, "init with too few replicas", err, kerr.CoordinatorNotAvailable)
	pe := h.mustInit("tx") // the pending mark was cleared
	if pe.Epoch != 0 {
		t.Fatalf("after a failed write the epoch is %d", pe.Epoch)
	}
	wantErr(t, "add", h.add("tx", pe, tpA), nil)
	h.log.failNext = kerr.NotLeaderForPartition
	wantErr(t, "commit on a lost leadership", h.end("tx", pe, true), kerr.NotCoordinator)
	if m := h.state("tx"); m.State != Ongoing {
		t.Fatalf("failed commit changed the state: %+v", m)
	}

	// A failed fence keeps its epoch for the next attempt.
	h.log.failNext = kerr.RequestTimedOut
	_, err = h.init("tx", nil)
	wantErr(t, "fence write fails", err, kerr.CoordinatorNotAvailable)
	_, err = h.init("tx", nil)
	wantErr(t, "fence again", err, kerr.ConcurrentTransactions)
	h.settle()
	if m := h.state("tx"); m.State != CompleteAbort || m.ProducerEpoch != 1 {
		t.Fatalf("after the second fence: %+v", m)
	}

	// The completion is retried while the log is unavailable.
	pe = h.mustInit("tx")
	wantErr(t, "add", h.add("tx", pe, tpA), nil)
	gate := make(chan struct{})
	h.markers.gate = gate
	wantErr(t, "commit", h.end("tx", pe, true), nil)
	h.log.mu.Lock()
	h.log.failNext = kerr.NotEnoughReplicas
	h.log.mu.Unlock()
	close(gate)
	h.settle()
	if m := h.state("tx"); m.State != CompleteCommit {
		t.Fatalf("after a retried completion: %+v", m)
	}
}

func TestLoadReplaysAndCompletes(t *testing.T) {
	log := newMemLog()
	h := newHarness(t, log)
	h.leadAll()
	// done: committed; open: ongoing; gone: expired (tombstone).
	pe := h.mustInit("done")
	wantErr(t, "add", h.add("done", pe, tpA), nil)
	wantErr(t, "commit", h.end("done", pe, true), nil)
	h.settle()
	open := h.mustInit("open")
	wantErr(t, "add", h.add("open", open, tpB), nil)
	h.mustInit("gone")
	h.clock.Advance(25 * time.Hour)
	pe = h.mustInit("done") // touch: not expired
	h.c.ExpireTransactionalIDs(context.Background())
	_, err := h.c.Describe("gone")
	wantErr(t, "expired", err, kerr.TransactionalIDNotFound)
	if m := h.state("open"); m.State != Ongoing {
		t.Fatalf("an ongoing transaction expired: %+v", m)
	}
	// A commit whose markers never got out before the broker went away.
	wantErr(t, "add", h.add("done", pe, tpB), nil)
	h.markers.gate = make(chan struct{}) // never opened
	wantErr(t, "commit", h.end("done", pe, true), nil)
	h.c.Close()

	// A new leader of the same log.
	h2 := newHarness(t, log)
	gate, started := make(chan struct{}), make(chan struct{})
	log.readGate, log.readStarted = gate, started
	loaded := make(chan error, 1)
	p := h2.c.PartitionFor("done")
	go func() { loaded <- h2.c.BecomeLeader(context.Background(), p, coordinatorEpoch) }()
	<-started
	_, err = h2.c.Describe("done")
	wantErr(t, "while loading", err, kerr.CoordinatorLoadInProgress)
	_, err = h2.init("done", nil)
	wantErr(t, "init while loading", err, kerr.CoordinatorLoadInProgress)
	close(gate)
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	h2.leadAll() // the other partitions (p is loaded at this epoch already: a no-op)
	h2.settle()
	if got := h2.markers.written(); len(got) != 1 || !got[0].Commit || got[0].ProducerID != pe.ID ||
		!reflect.DeepEqual(got[0].Partitions, []TopicPartition{tpB}) {
		t.Fatalf("markers resent after load = %+v", got)
	}
	if m := h2.state("done"); m.State != CompleteCommit || m.ProducerEpoch != pe.Epoch {
		t.Fatalf("done after load: %+v", m)
	}
	if m := h2.state("open"); m.State != Ongoing || !reflect.DeepEqual(m.Partitions, []TopicPartition{tpB}) {
		t.Fatalf("open after load: %+v", m)
	}
	_, err = h2.c.Describe("gone")
	wantErr(t, "expired after load", err, kerr.TransactionalIDNotFound)
	txns, _, err := h2.c.List(ListFilter{MinDurationMs: -1})
	if err != nil || len(txns) != 2 {
		t.Fatalf("List = %+v, %v", txns, err)
	}
}

func TestTimedOutTransactionIsAborted(t *testing.T) {
	h := newHarness(t, newMemLog())
	h.leadAll()
	pe := h.mustInit("tx") // timeout 60 s
	wantErr(t, "add", h.add("tx", pe, tpA, tpB), nil)
	h.clock.Advance(60 * time.Second)
	h.c.AbortTimedOut(context.Background())
	h.settle()
	if len(h.markers.written()) != 0 {
		t.Fatal("aborted at exactly the timeout")
	}
	h.clock.Advance(time.Millisecond)
	h.c.AbortTimedOut(context.Background())
	h.settle()
	want := []Markers{{ProducerID: pe.ID, ProducerEpoch: pe.Epoch + 1, Commit: false, CoordinatorEpoch: coordinatorEpoch,
		Partitions: []TopicPartition{tpA, tpB}}}
	if got := h.markers.written(); !reflect.DeepEqual(got, want) {
		t.Fatalf("markers = %+v, want %+v", got, want)
	}
	if m := h.state("tx"); m.State != CompleteAbort || m.ProducerEpoch != pe.Epoch+1 {
		t.Fatalf("after timeout: %+v", m)
	}
	wantErr(t, "the timed-out producer commits", h.end("tx", pe, true), kerr.ProducerFenced)
}

func TestListFilters(t *testing.T) {
	h := newHarness(t, newMemLog())
	h.leadAll()
	a := h.mustInit("a")
	wantErr(t, "add", h.add("a", a, tpA), nil)
	h.mustInit("b")
	h.clock.Advance(10 * time.Second)
	for _, tc := range []struct {
		f           ListFilter
		want        []string
		wantUnknown []string
	}{
		{f: ListFilter{MinDurationMs: -1}, want: []string{"a", "b"}},
		{f: ListFilter{States: []string{"Ongoing"}, MinDurationMs: -1}, want: []string{"a"}},
		{f: ListFilter{States: []string{"Bogus"}, MinDurationMs: -1}, wantUnknown: []string{"Bogus"}},
		{f: ListFilter{ProducerIDs: []int64{a.ID}, MinDurationMs: -1}, want: []string{"a"}},
		{f: ListFilter{MinDurationMs: 5000}, want: []string{"a", "b"}}, // b never started: start -1
		{f: ListFilter{States: []string{"Ongoing"}, MinDurationMs: 10000}},
	} {
		txns, unknown, err := h.c.List(tc.f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range txns {
			ids = append(ids, m.TransactionalID)
		}
		if !reflect.DeepEqual(ids, tc.want) || !reflect.DeepEqual(unknown, tc.wantUnknown) {
			t.Errorf("List(%+v) = %v unknown %v, want %v unknown %v", tc.f, ids, unknown, tc.want, tc.wantUnknown)
		}
	}
}

// Loads are registered in the order leadership changes are applied: an
// older epoch after a newer one changes nothing, and a load that a Resign
// overtook does not install its tenure.
func TestBeginLoadOrdering(t *testing.T) {
	h := newHarness(t, newMemLog())
	p := h.c.PartitionFor("tx")
	if err := h.c.BecomeLeader(context.Background(), p, 7); err != nil {
		t.Fatal(err)
	}
	if load, err := h.c.BeginLoad(p, 5); load != nil || err != nil {
		t.Fatalf("older epoch 5 after 7: load %v, err %v; want nothing to do", load != nil, err)
	}
	h.c.mu.Lock()
	epoch := h.c.partitions[p].epoch
	h.c.mu.Unlock()
	if epoch != 7 {
		t.Fatalf("coordinator epoch %d after an older load, want 7", epoch)
	}

	load, err := h.c.BeginLoad(p, 8)
	if err != nil || load == nil {
		t.Fatalf("newer epoch 8: load %v, err %v", load != nil, err)
	}
	h.c.Resign(p)
	if err := load(context.Background()); !IsResigned(err) {
		t.Fatalf("load overtaken by Resign: %v, want resigned", err)
	}
	_, err = h.init("tx", nil)
	wantErr(t, "init after the resignation", err, kerr.NotCoordinator)
}

// TestProducerIDRotation runs both decisions that need a new producer id
// through the coordinator, which allocates it outside its lock and decides
// again: InitProducerId over an exhausted epoch, and a transactions v2
// EndTxn whose bump uses the last epoch (the markers take the old id's
// last epoch; the producer continues under the new id at epoch 0, once
// the transaction is complete).
func TestProducerIDRotation(t *testing.T) {
	log := newMemLog()
	seed := func(id string, epoch int16) {
		m := newMetadata(id, 7, 60000, 1)
		m.ProducerEpoch, m.State = epoch, CompleteCommit
		if _, err := log.Append(context.Background(), kafkahash.PartitionFor(id, testParts), buildBatch([]Metadata{m}, 1)); err != nil {
			t.Fatal(err)
		}
	}
	seed("init-rot", math.MaxInt16-1)
	seed("end-rot", math.MaxInt16-2)
	h := newHarness(t, log)
	h.leadAll()

	pe := h.mustInit("init-rot")
	if pe.ID == 7 || pe.Epoch != 0 {
		t.Fatalf("InitProducerId over an exhausted epoch: %+v, want a new producer id at epoch 0", pe)
	}

	pe = h.mustInit("end-rot") // epoch MaxInt16-1: exhausted
	if pe.ID != 7 || pe.Epoch != math.MaxInt16-1 {
		t.Fatalf("InitProducerId: %+v", pe)
	}
	if err := h.c.AddPartitions(context.Background(), "end-rot", pe.ID, pe.Epoch, []TopicPartition{tpA}, true, true); err != nil {
		t.Fatal(err)
	}
	next, err := h.c.EndTxn(context.Background(), "end-rot", pe.ID, pe.Epoch, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if next.ID == 7 || next.Epoch != 0 {
		t.Fatalf("v2 EndTxn at the last epochs answered %+v, want a new producer id at epoch 0", next)
	}
	h.settle()
	if m := h.state("end-rot"); m.ProducerID != next.ID || m.ProducerEpoch != 0 || m.State != CompleteCommit || m.LastProducerID != 7 {
		t.Fatalf("after completion: %+v", m)
	}
	var marker *Markers
	for _, mk := range h.markers.written() {
		if mk.ProducerID == 7 {
			marker = &mk
		}
	}
	if marker == nil || marker.ProducerEpoch != math.MaxInt16 || !marker.TxnV2 {
		t.Fatalf("markers of the old producer id: %+v", marker)
	}
}
