package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnProduce runs n transactions of perTxn records each on topic with a
// franz-go transactional producer, committing the even ones and aborting
// the odd ones, and returns the values committed.
func txnProduce(t *testing.T, seeds []string, txnID, topic string, n, perTxn int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic),
		kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testContext(t, 60*time.Second)
	var committed []string
	for i := 0; i < n; i++ {
		var vals []string
		var recs []*kgo.Record
		for j := 0; j < perTxn; j++ {
			v := fmt.Sprintf("%s-%d-%d", txnID, i, j)
			vals = append(vals, v)
			recs = append(recs, &kgo.Record{Key: []byte(v), Value: []byte(v)})
		}
		commit := i%2 == 0
		oneTxn(ctx, t, cl, commit, recs...)
		if commit {
			committed = append(committed, vals...)
		}
	}
	return committed
}

// oneTxn writes recs with the transactional client tx in one transaction,
// then commits or aborts it.
func oneTxn(ctx context.Context, t *testing.T, tx *kgo.Client, commit bool, recs ...*kgo.Record) {
	t.Helper()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatalf("begin a transaction: %v", err)
	}
	if err := tx.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce in a transaction: %v", err)
	}
	if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end a transaction (commit %v): %v", commit, err)
	}
}

// consumeValues reads topic from the start at the given isolation level
// until want values arrived, and returns them.
func consumeValues(t *testing.T, seeds []string, topic string, level kgo.IsolationLevel, want int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testContext(t, 60*time.Second)
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s", len(got), want, topic)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch %s-%d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// The transactional producer's commits are read by read_committed
// consumers, its aborts are not, and read_uncommitted consumers see both.
// Transactions alternate commit and abort and end with a commit on every
// partition, so an aborted record leaking into read_committed would show
// before the last committed one.
func TestTxnCommitAbortReadCommitted(t *testing.T) {
	b := StartBroker(t, "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1")
	topic := "txn-basic"
	createTopic(t, b.Admin(t), topic, 3, nil)
	seeds := []string{b.Addr()}
	const n, perTxn = 11, 30 // 6 committed, 5 aborted
	committed := txnProduce(t, seeds, "tx-basic", topic, n, perTxn)
	got := consumeValues(t, seeds, topic, kgo.ReadCommitted(), len(committed))
	slices.Sort(got)
	slices.Sort(committed)
	if !slices.Equal(got, committed) {
		t.Fatalf("read_committed got %d records, want the %d committed ones (first difference: %s)", len(got), len(committed), firstDiff(got, committed))
	}
	all := consumeValues(t, seeds, topic, kgo.ReadUncommitted(), n*perTxn)
	if len(all) != n*perTxn {
		t.Fatalf("read_uncommitted got %d records, want %d", len(all), n*perTxn)
	}
	// Once the markers are in, the last stable offset is the high
	// watermark: read_committed end offsets equal the latest.
	adm := b.Admin(t)
	checkFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		ctx := testContext(t, 10*time.Second)
		latest, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return err
		}
		for p := int32(0); p < 3; p++ {
			l, _ := latest.Lookup(topic, p)
			s, _ := stable.Lookup(topic, p)
			if l.Offset != s.Offset {
				return fmt.Errorf("partition %d: latest %d, stable %d", p, l.Offset, s.Offset)
			}
		}
		return nil
	})
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("%q vs %q at %d", a[i], b[i], i)
		}
	}
	return "lengths differ"
}

// A second producer with the same transactional id fences the first: the
// first's next transactional request fails with a fencing error, and its
// open transaction is aborted.
func TestTxnFencing(t *testing.T) {
	b := StartBroker(t, "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1")
	topic := "txn-fence"
	createTopic(t, b.Admin(t), topic, 1, nil)
	ctx := testContext(t, 60*time.Second)
	newProducer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("tx-fence"), kgo.DefaultProduceTopic(topic))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	first := newProducer()
	if err := first.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := first.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	second := newProducer()
	if err := second.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := second.ProduceSync(ctx, &kgo.Record{Value: []byte("live")}).FirstErr(); err != nil {
		t.Fatalf("second producer: %v", err)
	}
	if err := second.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("second producer commit: %v", err)
	}
	err := first.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("fenced producer's commit: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	got := consumeValues(t, []string{b.Addr()}, topic, kgo.ReadCommitted(), 1)
	if len(got) != 1 || got[0] != "live" {
		t.Fatalf("read_committed: %q, want only the second producer's record", got)
	}
}

// Bad input gets Kafka's errors and appends nothing: EndTxn for an unknown
// transactional id, a stale epoch, a client's control batch in Produce.
// waitTxnCoordinator waits until FindCoordinator finds the transaction
// coordinator of id (__transaction_state is created on first use).
func waitTxnCoordinator(t *testing.T, cl *kgo.Client, id string) {
	t.Helper()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKey = 1, id
	ctx := testContext(t, 25*time.Second)
	checkFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		resp, err := fc.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
}

func TestTxnBadInput(t *testing.T) {
	b := StartBroker(t, "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1")
	topic := "txn-bad"
	createTopic(t, b.Admin(t), topic, 1, nil)
	cl := b.Client(t)
	ctx := testContext(t, 30*time.Second)

	// The coordinator for the id (this single broker) must exist first.
	waitTxnCoordinator(t, cl, "tx-bad")

	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "tx-unknown-id", 12345, 0, true
	resp, err := end.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); !errors.Is(err, kerr.InvalidProducerIDMapping) {
		t.Fatalf("EndTxn for an unknown transactional id: %v, want INVALID_PRODUCER_ID_MAPPING", err)
	}

	init := kmsg.NewPtrInitProducerIDRequest()
	id := "tx-bad"
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 10000
	ir, err := init.RequestWith(ctx, cl)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %v", err, kerr.ErrorForCode(ir.ErrorCode))
	}
	end.TransactionalID, end.ProducerID, end.ProducerEpoch = id, ir.ProducerID, ir.ProducerEpoch-1
	resp, err = end.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("EndTxn with a stale epoch: %v", err)
	}
	end.ProducerEpoch = ir.ProducerEpoch
	resp, err = end.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("EndTxn without a transaction: %v, want INVALID_TXN_STATE", err)
	}

	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, ir.ProducerID, ir.ProducerEpoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "txn-no-such-topic", []int32{0}
	add.Topics = append(add.Topics, at)
	ar, err := add.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := ar.Topics[0].Partitions[0].ErrorCode; !errors.Is(kerr.ErrorForCode(code), kerr.UnknownTopicOrPartition) {
		t.Fatalf("AddPartitionsToTxn of a missing topic: %v", kerr.ErrorForCode(code))
	}

	// A control batch from a client: INVALID_RECORD, nothing appended;
	// without a transactional id, TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
	prod := kmsg.NewPtrProduceRequest()
	prod.Acks, prod.TimeoutMillis = -1, 10000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = controlBatch()
	pt.Partitions = append(pt.Partitions, pp)
	prod.Topics = append(prod.Topics, pt)
	pr, err := prod.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := pr.Topics[0].Partitions[0].ErrorCode; !errors.Is(kerr.ErrorForCode(code), kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("transactional batch without a transactional id: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	prod.TransactionID = &id
	pr, err = prod.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := pr.Topics[0].Partitions[0].ErrorCode; !errors.Is(kerr.ErrorForCode(code), kerr.InvalidRecord) {
		t.Fatalf("client control batch: %v, want INVALID_RECORD", kerr.ErrorForCode(code))
	}
	if ends := endOffsets(t, b.Admin(t), topic); ends[0] != 0 {
		t.Fatalf("end offset %d after refused writes, want 0", ends[0])
	}
}

// controlBatch is a commit marker as a client would have to forge it.
func controlBatch() []byte {
	return recordbatch.BuildTxnMarker(1, 0, true, 0, time.Now().UnixMilli())
}
