package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/recordbatch"
)

func txnCommitReq(version int16, group, member string, gen int32, pid int64, epoch int16, topic string, offsets map[int32]int64) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version = version
	r.TransactionalID = "tx"
	r.Group, r.MemberID, r.Generation = group, member, gen
	r.ProducerID, r.ProducerEpoch = pid, epoch
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	for p, o := range offsets {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, o
		rp.LeaderEpoch = 5
		rp.Metadata = kmsg.StringPtr("txn")
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = append(r.Topics, rt)
	return r
}

// txnCommit sends a simple (v3, no member) TxnOffsetCommit and fails the
// test unless every partition succeeds.
func txnCommit(t *testing.T, c *Coordinator, group string, pid int64, topic string, offsets map[int32]int64) {
	t.Helper()
	resp := c.TxnOffsetCommit(ctxT(t), txnCommitReq(3, group, "", -1, pid, 0, topic, offsets))
	if codes := txnCodes(resp); len(codes) != 1 || codes[0] != len(offsets) {
		t.Fatalf("txn commit %s pid %d: codes %v", group, pid, codes)
	}
}

func txnCodes(resp *kmsg.TxnOffsetCommitResponse) map[int16]int {
	out := map[int16]int{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.ErrorCode]++
		}
	}
	return out
}

// fetchStable fetches one partition with OffsetFetch v7 and require_stable.
func fetchStable(t *testing.T, c *Coordinator, group, topic string, partition int32) (int64, int16) {
	t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 7
	r.Group = group
	r.RequireStable = true
	r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{partition}}}
	resp := c.OffsetFetch(context.Background(), r)
	if resp.ErrorCode != 0 {
		return -1, resp.ErrorCode
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// appendMarker writes producer pid's commit or abort marker to partition p,
// as the WriteTxnMarkers handler does before it calls CompleteTxn.
func appendMarker(t *testing.T, log *memLog, p int32, pid int64, commit bool) {
	t.Helper()
	if _, err := log.Append(context.Background(), p, recordbatch.BuildTxnMarker(pid, 0, commit, 0, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
}

func wantOffset(t *testing.T, c *Coordinator, group, topic string, partition int32, want int64) {
	t.Helper()
	if got, code := fetchOffset(t, c, group, topic, partition); code != 0 || got != want {
		t.Fatalf("%s %s/%d: offset %d code %d, want %d", group, topic, partition, got, code, want)
	}
}

func TestTxnOffsetsPendingUntilCommit(t *testing.T) {
	log := newMemLog()
	c := startCoordinator(t, testConfig(), log)
	const g = "etl"
	p := c.PartitionFor(g)
	c.OffsetCommit(ctxT(t), commitReq(2, g, "", -1, "in", map[int32]int64{0: 10}))

	txnCommit(t, c, g, 7, "in", map[int32]int64{0: 20, 1: 21})

	// The batch is transactional, of the producer, without a sequence.
	var h recordbatch.Header
	_ = log.ReadAll(context.Background(), p, func(b []byte) error {
		h, _ = recordbatch.ParseHeader(b)
		return nil
	})
	if !h.IsTransactional() || h.IsControl() || h.ProducerID != 7 || h.ProducerEpoch != 0 || h.BaseSequence != -1 || h.RecordCount != 2 {
		t.Fatalf("txn batch header: %+v", h)
	}

	wantOffset(t, c, g, "in", 0, 10) // not visible yet
	wantOffset(t, c, g, "in", 1, -1)
	if o, code := fetchStable(t, c, g, "in", 0); code != errUnstableOffsetCommit || o != -1 {
		t.Fatalf("require_stable while pending: offset %d code %d", o, code)
	}
	if o, code := fetchStable(t, c, g, "in", 2); code != 0 || o != -1 {
		t.Fatalf("require_stable on a partition without pending offsets: offset %d code %d", o, code)
	}

	appendMarker(t, log, p, 7, true)
	c.CompleteTxn(p, 7, true)
	wantOffset(t, c, g, "in", 0, 20)
	wantOffset(t, c, g, "in", 1, 21)
	if o, code := fetchStable(t, c, g, "in", 0); code != 0 || o != 20 {
		t.Fatalf("require_stable after commit: offset %d code %d", o, code)
	}
	// A second completion (a retried marker) changes nothing.
	c.CompleteTxn(p, 7, false)
	wantOffset(t, c, g, "in", 0, 20)

	// The same after a reload of the log.
	c.Close()
	c2 := startCoordinator(t, testConfig(), log)
	wantOffset(t, c2, g, "in", 0, 20)
	wantOffset(t, c2, g, "in", 1, 21)
}

func TestTxnOffsetsAbort(t *testing.T) {
	log := newMemLog()
	c := startCoordinator(t, testConfig(), log)
	const g = "aborting"
	p := c.PartitionFor(g)
	c.OffsetCommit(ctxT(t), commitReq(2, g, "", -1, "in", map[int32]int64{0: 10}))
	txnCommit(t, c, g, 8, "in", map[int32]int64{0: 30})
	appendMarker(t, log, p, 8, false)
	c.CompleteTxn(p, 8, false)
	wantOffset(t, c, g, "in", 0, 10)
	if o, code := fetchStable(t, c, g, "in", 0); code != 0 || o != 10 {
		t.Fatalf("require_stable after abort: offset %d code %d", o, code)
	}
	c.Close()
	c2 := startCoordinator(t, testConfig(), log)
	wantOffset(t, c2, g, "in", 0, 10)
}

// A plain commit appended after the transaction's batch stays when the
// transaction commits (Kafka compares the batches' append offsets).
func TestTxnCommitOlderThanPlainCommit(t *testing.T) {
	log := newMemLog()
	c := startCoordinator(t, testConfig(), log)
	const g = "mixed"
	p := c.PartitionFor(g)
	txnCommit(t, c, g, 9, "in", map[int32]int64{0: 50, 1: 51})
	c.OffsetCommit(ctxT(t), commitReq(2, g, "", -1, "in", map[int32]int64{0: 40}))
	appendMarker(t, log, p, 9, true)
	c.CompleteTxn(p, 9, true)
	wantOffset(t, c, g, "in", 0, 40)
	wantOffset(t, c, g, "in", 1, 51)
	c.Close()
	c2 := startCoordinator(t, testConfig(), log)
	wantOffset(t, c2, g, "in", 0, 40)
	wantOffset(t, c2, g, "in", 1, 51)
}

// TestTxnOffsetsLoad replays a log with committed, aborted and open
// transactions of several producers, interleaved, with markers for
// producers that wrote nothing here.
func TestTxnOffsetsLoad(t *testing.T) {
	cfg := testConfig()
	log := newMemLog()
	c := startCoordinator(t, cfg, log)
	const g = "load"
	p := c.PartitionFor(g)
	c.OffsetCommit(ctxT(t), commitReq(2, g, "", -1, "in", map[int32]int64{0: 1, 1: 1, 2: 1}))
	txnCommit(t, c, g, 1, "in", map[int32]int64{0: 100})
	txnCommit(t, c, g, 2, "in", map[int32]int64{1: 200})
	txnCommit(t, c, g, 3, "in", map[int32]int64{2: 300})
	txnCommit(t, c, "only-txn", 3, "in", map[int32]int64{0: 33}) // a group that exists only pending
	appendMarker(t, log, p, 1, true)
	appendMarker(t, log, p, 2, false)
	appendMarker(t, log, p, 99, true) // nothing pending: ignored
	c.CompleteTxn(p, 1, true)
	c.CompleteTxn(p, 2, false)
	live := dumpGroups(c)
	c.Close()

	c2 := startCoordinator(t, cfg, log)
	diffDumps(t, "live vs reloaded", dumpGroups(c2), live)
	wantOffset(t, c2, g, "in", 0, 100)
	wantOffset(t, c2, g, "in", 1, 1)
	wantOffset(t, c2, g, "in", 2, 1)
	if _, code := fetchStable(t, c2, g, "in", 2); code != errUnstableOffsetCommit {
		t.Fatalf("open transaction after reload: code %d, want UNSTABLE_OFFSET_COMMIT", code)
	}
	if d := describe(c2, "only-txn"); d.State != "Empty" {
		t.Fatalf("group with only pending offsets: state %s", d.State)
	}
	// The open transaction still completes after the reload.
	if p2 := c2.PartitionFor("only-txn"); p2 != p {
		appendMarker(t, log, p2, 3, true)
		c2.CompleteTxn(p2, 3, true)
	}
	appendMarker(t, log, p, 3, true)
	c2.CompleteTxn(p, 3, true)
	wantOffset(t, c2, g, "in", 2, 300)
	wantOffset(t, c2, "only-txn", "in", 0, 33)
}

// A completion that arrives while its partition loads is applied when the
// load ends, even though the replay did not see the marker.
func TestCompleteTxnDuringLoad(t *testing.T) {
	cfg := testConfig()
	log := newMemLog()
	c := startCoordinator(t, cfg, log)
	const g = "loading"
	p := c.PartitionFor(g)
	txnCommit(t, c, g, 4, "in", map[int32]int64{0: 44})
	c.Close()

	gate := make(chan struct{})
	log.mu.Lock()
	log.readGate = gate
	log.mu.Unlock()
	c2 := New(cfg, log, quietLogger())
	t.Cleanup(c2.Close)
	done := make(chan error, 1)
	go func() { done <- c2.BecomeLeader(context.Background(), p) }()
	checkFor(t, 5*time.Second, func() error {
		if _, code := fetchOffset(t, c2, g, "in", 0); code != errCoordinatorLoadInProgress {
			return fmt.Errorf("code %d, want COORDINATOR_LOAD_IN_PROGRESS", code)
		}
		return nil
	})
	c2.CompleteTxn(p, 4, true) // the marker is "appended" after the replay's read
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantOffset(t, c2, g, "in", 0, 44)
}

func TestTxnOffsetCommitValidation(t *testing.T) {
	c := startCoordinator(t, testConfig(), newMemLog())
	joins, _ := stableGroup(t, c, "members", 1, 10*time.Second, "in")
	var member string
	var gen int32
	for id, j := range joins {
		member, gen = id, j.Generation
	}
	ids, sgen := staticGroup(t, c, "static", 10*time.Second, "a")
	long := strings.Repeat("x", maxOffsetMetadataBytes+1)

	for _, tc := range []struct {
		name string
		req  *kmsg.TxnOffsetCommitRequest
		want int16
	}{
		{"member", txnCommitReq(3, "members", member, gen, 1, 0, "in", map[int32]int64{0: 1}), 0},
		{"v2 without member on a Stable group", txnCommitReq(2, "members", "", -1, 1, 0, "in", map[int32]int64{0: 1}), 0},
		{"v3 without member on a Stable group", txnCommitReq(3, "members", "", -1, 1, 0, "in", map[int32]int64{0: 1}), 0},
		{"v2 ignores a stale generation", txnCommitReq(2, "members", "gone", gen+5, 1, 0, "in", map[int32]int64{0: 1}), 0},
		{"stale generation", txnCommitReq(3, "members", member, gen-1, 1, 0, "in", map[int32]int64{0: 1}), errIllegalGeneration},
		{"unknown member", txnCommitReq(3, "members", "gone", gen, 1, 0, "in", map[int32]int64{0: 1}), errUnknownMemberID},
		{"generation without member", txnCommitReq(3, "members", "", gen, 1, 0, "in", map[int32]int64{0: 1}), errUnknownMemberID},
		{"new group with a generation", txnCommitReq(3, "fresh", "m", 3, 1, 0, "in", map[int32]int64{0: 1}), errUnknownMemberID},
		{"empty group id", txnCommitReq(3, "", "", -1, 1, 0, "in", map[int32]int64{0: 1}), errInvalidGroupID},
		{"metadata too large", func() *kmsg.TxnOffsetCommitRequest {
			r := txnCommitReq(3, "members", member, gen, 1, 0, "in", map[int32]int64{0: 1})
			r.Topics[0].Partitions[0].Metadata = &long
			return r
		}(), errOffsetMetadataTooLarge},
	} {
		if codes := txnCodes(c.TxnOffsetCommit(ctxT(t), tc.req)); len(codes) != 1 || codes[tc.want] != 1 {
			t.Errorf("%s: codes %v, want %d", tc.name, codes, tc.want)
		}
	}

	// Static members: the instance id must map to the member id.
	fenced := txnCommitReq(3, "static", "other", sgen, 1, 0, "in", map[int32]int64{0: 1})
	fenced.InstanceID = kmsg.StringPtr("a")
	if codes := txnCodes(c.TxnOffsetCommit(ctxT(t), fenced)); codes[errFencedInstanceID] != 1 {
		t.Errorf("fenced instance: %v", codes)
	}
	ok := txnCommitReq(3, "static", ids["a"], sgen, 1, 0, "in", map[int32]int64{0: 1})
	ok.InstanceID = kmsg.StringPtr("a")
	if codes := txnCodes(c.TxnOffsetCommit(ctxT(t), ok)); codes[0] != 1 {
		t.Errorf("static member: %v", codes)
	}

	// A group that did not exist is created Empty by a simple commit.
	if codes := txnCodes(c.TxnOffsetCommit(ctxT(t), txnCommitReq(0, "new-simple", "", -1, 1, 0, "in", map[int32]int64{0: 1}))); codes[0] != 1 {
		t.Errorf("new simple group: %v", codes)
	}
	if d := describe(c, "new-simple"); d.State != "Empty" {
		t.Errorf("new simple group state %s", d.State)
	}

	// Not the coordinator.
	c.Resign(c.PartitionFor("members"))
	if codes := txnCodes(c.TxnOffsetCommit(ctxT(t), txnCommitReq(3, "members", member, gen, 1, 0, "in", map[int32]int64{0: 1}))); codes[errNotCoordinator] != 1 {
		t.Errorf("resigned: %v", codes)
	}
}

// The partition's producer errors pass through; the rest map as a plain
// commit's.
func TestTxnAppendErrors(t *testing.T) {
	log := newMemLog()
	c := startCoordinator(t, testConfig(), log)
	for _, tc := range []struct {
		err  error
		want int16
	}{
		{fmt.Errorf("append: %w", kerr.InvalidProducerEpoch), kerr.InvalidProducerEpoch.Code},
		{fmt.Errorf("append: %w", kerr.ProducerFenced), kerr.ProducerFenced.Code},
		{kerr.InvalidTxnState, kerr.InvalidTxnState.Code},
		{kerr.NetworkException, errCoordinatorLoadInProgress},
		{kerr.NotLeaderForPartition, errNotCoordinator},
		{kerr.MessageTooLarge, errInvalidCommitOffsetSize},
		{context.DeadlineExceeded, errCoordinatorNotAvailable},
		{errors.New("other"), errCoordinatorNotAvailable},
	} {
		if got := txnAppendErrorCode(tc.err); got != tc.want {
			t.Errorf("%v: %d, want %d", tc.err, got, tc.want)
		}
	}
	log.mu.Lock()
	log.failNext = fmt.Errorf("stale epoch: %w", kerr.InvalidProducerEpoch)
	log.mu.Unlock()
	resp := c.TxnOffsetCommit(ctxT(t), txnCommitReq(3, "g", "", -1, 1, 0, "in", map[int32]int64{0: 1}))
	if codes := txnCodes(resp); codes[kerr.InvalidProducerEpoch.Code] != 1 {
		t.Fatalf("failed append: %v", codes)
	}
	if _, code := fetchStable(t, c, "g", "in", 0); code != 0 {
		t.Fatalf("a failed transactional append left the partition unstable: %d", code)
	}
}

// Deleting a group or its offsets drops its pending transactional offsets
// (Kafka's removeAllOffsets / removeOffsets); expiry keeps a group that has
// some.
func TestTxnOffsetsDeleteAndExpire(t *testing.T) {
	cfg := testConfig()
	log := newMemLog()
	c := startCoordinator(t, cfg, log)
	txnCommit(t, c, "del", 5, "in", map[int32]int64{0: 5})
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"del"}
	if r := c.DeleteGroups(ctxT(t), dg); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete group with pending offsets: %d", r.Groups[0].ErrorCode)
	}
	c.CompleteTxn(c.PartitionFor("del"), 5, true)
	wantOffset(t, c, "del", "in", 0, -1)

	txnCommit(t, c, "odel", 6, "in", map[int32]int64{0: 6, 1: 6})
	del := kmsg.NewPtrOffsetDeleteRequest()
	del.Group = "odel"
	del.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "in", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	if r := c.OffsetDelete(ctxT(t), del); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", r)
	}
	c.CompleteTxn(c.PartitionFor("odel"), 6, true)
	wantOffset(t, c, "odel", "in", 0, -1)
	wantOffset(t, c, "odel", "in", 1, 6)

	txnCommit(t, c, "exp", 7, "in", map[int32]int64{0: 7})
	c.expireOffsets(ctxT(t), time.Now().Add(10*cfg.OffsetsRetention))
	if d := describe(c, "exp"); d.State != "Empty" {
		t.Fatalf("expiry removed a group with pending offsets: %s", d.State)
	}
	c.CompleteTxn(c.PartitionFor("exp"), 7, true)
	wantOffset(t, c, "exp", "in", 0, 7)
}

// TestSnapshotKeepsOpenTransactions: a snapshot never moves the log start
// past an open transaction's first batch, and a reload compares a
// committed transaction against the original position of what the
// snapshot rewrote.
func TestSnapshotKeepsOpenTransactions(t *testing.T) {
	cfg := testConfig()
	cfg.SnapshotBytes = -1 // snapshots only where the test asks
	log := newMemLog()
	c := startCoordinator(t, cfg, log)
	const g = "snap"
	p := c.PartitionFor(g)
	c.OffsetCommit(ctxT(t), commitReq(2, g, "", -1, "in", map[int32]int64{0: 1, 1: 1}))
	txnCommit(t, c, g, 11, "in", map[int32]int64{0: 110})
	_, txnStart := log.retained(p)
	txnStart-- // the batch just written
	txnCommit(t, c, g, 12, "in", map[int32]int64{1: 120})
	for i := int64(2); i < 50; i++ {
		c.OffsetCommit(ctxT(t), commitReq(2, "other-"+g, "", -1, "in", map[int32]int64{0: i}))
	}
	// Producer 12's marker is in the log but not yet applied when the
	// snapshot copies the state.
	appendMarker(t, log, p, 12, true)
	if err := c.snapshot(ctxT(t), p); err != nil {
		t.Fatal(err)
	}
	c.CompleteTxn(p, 12, true)
	if start, _ := log.retained(p); start != txnStart {
		t.Fatalf("log start %d after the snapshot, want the open transaction's first batch %d", start, txnStart)
	}
	wantOffset(t, c, g, "in", 1, 120)

	// Reload: producer 11 is still open, producer 12 committed.
	c2 := startCoordinator(t, cfg, log)
	wantOffset(t, c2, g, "in", 0, 1)
	wantOffset(t, c2, g, "in", 1, 120)
	if _, code := fetchStable(t, c2, g, "in", 0); code != errUnstableOffsetCommit {
		t.Fatalf("open transaction lost by the snapshot: code %d", code)
	}
	c2.Close()

	// Producer 11 commits; its batch is newer than the plain commit the
	// snapshot rewrote after it, so it wins, live and after a reload.
	appendMarker(t, log, p, 11, true)
	c.CompleteTxn(p, 11, true)
	wantOffset(t, c, g, "in", 0, 110)
	if err := c.snapshot(ctxT(t), p); err != nil {
		t.Fatal(err)
	}
	if start, _ := log.retained(p); start <= txnStart {
		t.Fatalf("log start %d did not move past the finished transactions", start)
	}
	live := dumpGroups(c)
	c.Close()
	truncated, full := restartedDumps(t, cfg, log)
	diffDumps(t, "snapshot replay vs full replay", truncated, full)
	diffDumps(t, "live vs reloaded", truncated, live)
	c3 := startCoordinator(t, cfg, log)
	wantOffset(t, c3, g, "in", 0, 110)
	wantOffset(t, c3, g, "in", 1, 120)
}

// A marker applied between the snapshot's copy and its records: the
// rewrite of the older offset must not undo the committed transaction on
// reload.
func TestSnapshotRewriteDoesNotUndoTxnCommit(t *testing.T) {
	cfg := testConfig()
	cfg.SnapshotBytes = -1
	log := newMemLog()
	c := startCoordinator(t, cfg, log)
	const g = "undo"
	p := c.PartitionFor(g)
	c.OffsetCommit(ctxT(t), commitReq(2, g, "", -1, "in", map[int32]int64{0: 1}))
	txnCommit(t, c, g, 13, "in", map[int32]int64{0: 130})
	// The state as a snapshot copied it while the transaction was open,
	// appended after the marker.
	groups, _ := c.allGroups()
	var copied []record
	for _, gr := range groups {
		gr.mu.Lock()
		if gr.id == g {
			copied = gr.durableRecordsLocked(nil)
		}
		gr.mu.Unlock()
	}
	appendMarker(t, log, p, 13, true)
	c.CompleteTxn(p, 13, true)
	if _, err := log.Append(ctxT(t), p, buildBatch(copied, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	wantOffset(t, c, g, "in", 0, 130)
	c.Close()
	c2 := startCoordinator(t, cfg, log)
	wantOffset(t, c2, g, "in", 0, 130)
}

func TestLogStartAfterSnapshot(t *testing.T) {
	for _, tc := range []struct{ first, open, want int64 }{
		{100, -1, 100},
		{100, 40, 40},
		{100, 100, 100},
		{100, 150, 100}, // cannot happen (the snapshot comes later), harmless
		{0, -1, 0},
	} {
		if got := logStartAfterSnapshot(tc.first, tc.open); got != tc.want {
			t.Errorf("first %d open %d: %d, want %d", tc.first, tc.open, got, tc.want)
		}
	}
}

func TestApplyTxnCommit(t *testing.T) {
	a, b := topicPartition{"t", 0}, topicPartition{"t", 1}
	offsets := map[topicPartition]offsetEntry{
		a: {offset: 1, appendOffset: 10},
		b: {offset: 2, appendOffset: 30},
	}
	applyTxnCommit(offsets, map[topicPartition]offsetEntry{
		a:        {offset: 5, appendOffset: 20}, // newer batch: wins
		b:        {offset: 6, appendOffset: 20}, // older than the plain commit: loses
		{"u", 0}: {offset: 7, appendOffset: 20},
	})
	if offsets[a].offset != 5 || offsets[b].offset != 2 || offsets[topicPartition{"u", 0}].offset != 7 {
		t.Fatalf("after commit: %+v", offsets)
	}
}
