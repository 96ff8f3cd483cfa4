package integration

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareGroupReadCommitted: share.isolation.level=read_committed, the
// group config of Kafka's KIP-932 (its testReadCommittedIsolationLevel:
// ten one-record transactions, every fifth aborted). A franz-go share
// consumer of a read_committed group gets the 8 committed records and
// neither the aborted ones nor the record of a transaction still open;
// that one arrives once it commits. A read_uncommitted group (the
// default) on the same topic gets every record, aborted ones included,
// and a change of the level reaches the next share session.
func TestShareGroupReadCommitted(t *testing.T) {
	b := StartBroker(t, "num.partitions=1")
	admin := b.Client(t)
	topic := "share-txn"
	createTopic(t, b.Admin(t), topic, 1, nil)
	committedGroup, uncommittedGroup := "sg-read-committed", "sg-read-uncommitted"
	for _, g := range []string{committedGroup, uncommittedGroup} {
		if code := alterGroupConfig(t, admin, g, "share.auto.offset.reset", "earliest"); code != 0 {
			t.Fatalf("%s: share.auto.offset.reset=earliest: %v", g, kerr.ErrorForCode(code))
		}
	}
	if code := alterGroupConfig(t, admin, committedGroup, "share.isolation.level", "read_committed"); code != 0 {
		t.Fatalf("share.isolation.level=read_committed: %v", kerr.ErrorForCode(code))
	}
	if code := alterGroupConfig(t, admin, committedGroup, "share.isolation.level", "serializable"); code != kerr.InvalidConfig.Code {
		t.Fatalf("share.isolation.level=serializable: %v, want INVALID_CONFIG", kerr.ErrorForCode(code))
	}

	ctx := testContext(t, 90*time.Second)
	tx := b.Client(t, kgo.TransactionalID("share-txn"), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(60*time.Second))
	var committed, all []string
	for i := range 10 {
		v := fmt.Sprintf("txn%d", i)
		commit := (i+1)%5 != 0
		oneTxn(ctx, t, tx, commit, &kgo.Record{Value: []byte(v)})
		all = append(all, v)
		if commit {
			committed = append(committed, v)
		}
	}
	// A transaction left open: its record is in the log, above the last
	// stable offset.
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatalf("produce in the open transaction: %v", err)
	}

	rc := b.Client(t, kgo.ShareGroup(committedGroup), kgo.ConsumeTopics(topic))
	got := pollShareValues(ctx, t, rc, nil, len(committed))
	slices.Sort(got)
	if !slices.Equal(got, committed) {
		t.Fatalf("read_committed group got %q, want the committed %q", got, committed)
	}

	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit the open transaction: %v", err)
	}
	got = pollShareValues(ctx, t, rc, got, len(committed)+1)
	if !slices.Contains(got, "open") || len(got) != len(committed)+1 {
		t.Fatalf("read_committed group after the commit got %q, want the committed ones and open", got)
	}

	ru := b.Client(t, kgo.ShareGroup(uncommittedGroup), kgo.ConsumeTopics(topic))
	got = pollShareValues(ctx, t, ru, nil, len(all)+1)
	slices.Sort(got)
	want := append(slices.Clone(all), "open")
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read_uncommitted group got %q, want every record %q", got, want)
	}

	// The level changed while the group's partition is loaded applies
	// from the next share session: a new member skips an aborted record.
	ru.Close()
	if code := alterGroupConfig(t, admin, uncommittedGroup, "share.isolation.level", "read_committed"); code != 0 {
		t.Fatalf("share.isolation.level=read_committed: %v", kerr.ErrorForCode(code))
	}
	for _, commit := range []bool{false, true} {
		oneTxn(ctx, t, tx, commit, &kgo.Record{Value: []byte(fmt.Sprintf("late-commit=%v", commit))})
	}
	ru = b.Client(t, kgo.ShareGroup(uncommittedGroup), kgo.ConsumeTopics(topic))
	if got := pollShareValues(ctx, t, ru, nil, 1); !slices.Equal(got, []string{"late-commit=true"}) {
		t.Fatalf("after the change to read_committed the group got %q, want only late-commit=true", got)
	}
}

// pollShareValues polls a share consumer, accepting what it gets, until
// it has n record values in all (got, then the new ones) or ctx ends,
// and returns them. A value delivered twice is a failure.
func pollShareValues(ctx context.Context, t *testing.T, cl *kgo.Client, got []string, n int) []string {
	t.Helper()
	for len(got) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if slices.Contains(got, string(r.Value)) {
				t.Errorf("%s delivered again (offset %d)", r.Value, r.Offset)
			}
			got = append(got, string(r.Value))
		})
		cl.MarkAcks(kgo.AckAccept)
	}
	return got
}

// TestShareGroupResetByDuration: share.auto.offset.reset=by_duration
// (KIP-1106, an ISO-8601 duration). A group reset by PT1H starts at the
// first record no more than an hour old, so a franz-go share consumer
// gets the five records stamped ten minutes ago and none of the five
// stamped two hours ago; a group reset by PT1M, younger than every
// record, starts at the end (latest) and gets only what is produced
// after. Malformed and negative durations answer INVALID_CONFIG.
func TestShareGroupResetByDuration(t *testing.T) {
	b := StartBroker(t, "num.partitions=1")
	admin := b.Client(t)
	topic := "share-by-duration"
	createTopic(t, b.Admin(t), topic, 1, nil)
	for _, bad := range []string{"by_duration:-PT1H", "by_duration:1h", "by_duration:", "by_duration:P", "BY_DURATION:PT1H"} {
		if code := alterGroupConfig(t, admin, "sg-bad", "share.auto.offset.reset", bad); code != kerr.InvalidConfig.Code {
			t.Errorf("share.auto.offset.reset=%s: %v, want INVALID_CONFIG", bad, kerr.ErrorForCode(code))
		}
	}

	ctx := testContext(t, 60*time.Second)
	now := time.Now()
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("old%d", i)), Timestamp: now.Add(-2 * time.Hour)})
	}
	var recent []string
	for i := range 5 {
		v := fmt.Sprintf("recent%d", i)
		recent = append(recent, v)
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(v), Timestamp: now.Add(-10 * time.Minute)})
	}
	if err := admin.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	hour, minute := "sg-by-hour", "sg-by-minute"
	if code := alterGroupConfig(t, admin, hour, "share.auto.offset.reset", "by_duration:PT1H"); code != 0 {
		t.Fatalf("by_duration:PT1H: %v", kerr.ErrorForCode(code))
	}
	if code := alterGroupConfig(t, admin, minute, "share.auto.offset.reset", "by_duration:PT1M"); code != 0 {
		t.Fatalf("by_duration:PT1M: %v", kerr.ErrorForCode(code))
	}

	cl := b.Client(t, kgo.ShareGroup(hour), kgo.ConsumeTopics(topic))
	got := pollShareValues(ctx, t, cl, nil, len(recent))
	slices.Sort(got)
	if !slices.Equal(got, recent) {
		t.Fatalf("by_duration:PT1H got %q, want the records of the last hour %q", got, recent)
	}

	// Loaded (at the end: no record is a minute old) before "after" is
	// produced.
	initShareGroup(t, admin, minute, topic)
	produceShare(t, admin, topic, 0, 1)
	cl = b.Client(t, kgo.ShareGroup(minute), kgo.ConsumeTopics(topic))
	if got := pollShareValues(ctx, t, cl, nil, 1); !slices.Equal(got, []string{"v0"}) {
		t.Fatalf("by_duration:PT1M got %q, want only the record produced after it started (v0)", got)
	}
}

// TestShareGroupReadCommittedLongAbort: under read_committed, an aborted
// transaction larger than a fetch's MaxBytes is archived over several
// reads within one ShareFetch, which then returns the committed record
// after it rather than wait out its MaxWait with nothing.
func TestShareGroupReadCommittedLongAbort(t *testing.T) {
	b := StartBroker(t, "num.partitions=1")
	admin := b.Client(t)
	topic, group := "share-long-abort", "sg-long-abort"
	createTopic(t, b.Admin(t), topic, 1, nil)
	for name, value := range map[string]string{"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"} {
		if code := alterGroupConfig(t, admin, group, name, value); code != 0 {
			t.Fatalf("%s=%s: %v", name, value, kerr.ErrorForCode(code))
		}
	}
	ctx := testContext(t, 60*time.Second)
	tx := b.Client(t, kgo.TransactionalID("share-long-abort"), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(60*time.Second))
	for _, commit := range []bool{false, true} {
		n := 1
		if !commit {
			n = 30 // 3 MiB: three times the fetch's MaxBytes
		}
		var recs []*kgo.Record
		for i := range n {
			v := make([]byte, 100<<10) // random: compression must not shrink it
			_, _ = crand.Read(v)
			copy(v, fmt.Sprintf("commit=%v-%d", commit, i))
			recs = append(recs, &kgo.Record{Value: v})
		}
		oneTxn(ctx, t, tx, commit, recs...)
	}
	m := newShareRaw(t, admin, group, "m", topic)
	start := time.Now()
	p, code := m.fetch(10 * time.Second)
	offs, _ := acquiredOffsets(p)
	if code != 0 || len(offs) != 1 || offs[0] != 31 {
		t.Fatalf("one fetch after a 3 MiB aborted transaction acquired offsets %v (error %d) after %v, want [31] (30 aborted records and their marker before it)", offs, code, time.Since(start))
	}
	t.Logf("the committed record came %v after the fetch began", time.Since(start))
}

// TestShareGroupMaxRecordLocks: the group's share.partition.max.record.locks
// bounds the records in flight on a partition (the broker's default is
// 2000): a member that asks for 500 of 150 records gets 100 while it
// holds them; out of range values answer INVALID_CONFIG.
func TestShareGroupMaxRecordLocks(t *testing.T) {
	topic, group := "share-max-locks", "sg-max-locks"
	_, admin := startShareGroup(t, topic, group)
	for _, bad := range []string{"99", "10001"} {
		if code := alterGroupConfig(t, admin, group, "share.partition.max.record.locks", bad); code != kerr.InvalidConfig.Code {
			t.Errorf("share.partition.max.record.locks=%s: %v, want INVALID_CONFIG", bad, kerr.ErrorForCode(code))
		}
	}
	if code := alterGroupConfig(t, admin, group, "share.partition.max.record.locks", "100"); code != 0 {
		t.Fatalf("share.partition.max.record.locks=100: %v", kerr.ErrorForCode(code))
	}
	produceShare(t, admin, topic, 0, 150) // one record per batch
	m := newShareRaw(t, admin, group, "m", topic)
	p, code := m.fetch(5 * time.Second)
	if offs, _ := acquiredOffsets(p); code != 0 || len(offs) != 100 {
		t.Fatalf("acquired %d records (error %d), want the 100 the group's limit allows", len(offs), code)
	}
}
