package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readCommittedAll reads topic read_committed from the start up to each
// partition's last stable offset (read once, first) and returns the
// values of its data records. Control records are kept so that the reader
// knows when it reached a last stable offset that is a marker's.
func readCommittedAll(t *testing.T, seeds []string, topic string, within time.Duration) []string {
	t.Helper()
	ctx := testContext(t, within)
	adm := kadm.NewClient(mustClient(t, kgo.SeedBrokers(seeds...)))
	var stable kadm.ListedOffsets
	var err error
	for {
		stable, err = adm.ListCommittedOffsets(ctx, topic)
		if err == nil {
			err = stable.Error()
		}
		if err == nil || ctx.Err() != nil {
			break
		}
		if !waitCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	if err != nil {
		t.Fatalf("last stable offsets of %s: %v", topic, err)
	}
	ends := map[int32]int64{}
	stable.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			ends[o.Partition] = o.Offset
		}
	})
	cl := mustClient(t, kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords(), kgo.FetchMaxWait(200*time.Millisecond))
	var values []string
	for len(ends) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s read_committed: partitions %v not read to their last stable offset within %v", topic, ends, within)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch %s-%d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := ends[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if !r.Attrs.IsControl() {
				values = append(values, string(r.Value))
			}
			if r.Offset+1 >= end {
				delete(ends, r.Partition)
			}
		})
	}
	return values
}

func mustClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// waitCtx waits d or until ctx ends (false).
func waitCtx(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// etlWorker is a franz-go GroupTransactSession copying etl input records
// to the output topic, one transaction per poll, until stopped.
func etlWorker(ctx context.Context, t *testing.T, seeds []string, id, in, out string, committedTxns *atomic.Int64) {
	// The client's own log, shown when the test fails: what a stuck
	// worker was doing.
	logPath := filepath.Join(t.TempDir(), id+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Errorf("worker %s: %v", id, err)
		return
	}
	defer logFile.Close()
	t.Cleanup(func() {
		if t.Failed() {
			dumpLog(t, "worker "+id, logPath)
		}
	})
	sess, err := kgo.NewGroupTransactSession(
		kgo.WithLogger(kgo.BasicLogger(logFile, kgo.LogLevelInfo, func() string { return time.Now().UTC().Format("15:04:05.000 ") })),
		kgo.SeedBrokers(seeds...),
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(10*time.Second),
		kgo.ConsumerGroup("etl"),
		kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(6*time.Second),
		kgo.DefaultProduceTopic(out),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RetryTimeout(60*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		t.Errorf("worker %s: %v", id, err)
		return
	}
	defer sess.Close()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := sess.PollFetches(pctx)
		cancel()
		if fs.Empty() {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Logf("worker %s: begin: %v", id, err)
			continue
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: append([]byte("out-"), r.Value...)}, nil)
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Logf("worker %s: end: %v", id, err)
			continue
		}
		if committed {
			committedTxns.Add(1)
		}
	}
}

// txnCoordinatorOf asks broker via for the coordinator of transactional id.
func (c *testCluster) txnCoordinatorOf(id string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = 1, id, []string{id}
	for _, b := range c.running() {
		resp, err := c.request(b, 5*time.Second, req)
		if err != nil {
			continue
		}
		r := resp.(*kmsg.FindCoordinatorResponse)
		code, node := r.ErrorCode, r.NodeID
		if len(r.Coordinators) == 1 { // v4+
			code, node = r.Coordinators[0].ErrorCode, r.Coordinators[0].NodeID
		}
		if err := kerr.ErrorForCode(code); err != nil {
			return -1, err
		}
		return node, nil
	}
	return -1, errors.New("no broker answered FindCoordinator")
}

// A consume-transform-produce loop on 3 brokers (RF 3) keeps exactly-once
// through kill -9 of the transaction coordinator and of an output
// partition's leader: the output, read read_committed, has every input
// record exactly once.
func TestTxnClusterETLExactlyOnceUnderFaults(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 3 * time.Second,
		extra: []string{"transaction.state.log.num.partitions=3", "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000"}})
	const in, out, n = "etl-in", "etl-out", 5000
	c.createTopic(in, 3, nil)
	c.createTopic(out, 3, nil)
	c.waitSettled(clusterSettle, in, 3, 3)
	c.waitSettled(clusterSettle, out, 3, 3)
	seeds := c.addrs()
	ctx := testContext(t, 3*time.Minute)
	// The input arrives in three phases while the workers run (50 records
	// every 50 ms); each fault comes once a transaction of its phase has
	// committed, while that phase's input is still arriving, so the
	// workers are busy when it strikes (and a phase with input always
	// brings another commit: the wait cannot outlast the input).
	prod := c.client(kgo.DefaultProduceTopic(in), kgo.RequiredAcks(kgo.AllISRAcks()))
	produce := func(from, to int) <-chan error {
		done := make(chan error, 1)
		go func() {
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for i := from; i < to; {
				select {
				case <-tick.C:
				case <-ctx.Done():
					done <- ctx.Err()
					return
				}
				for end := min(i+50, to); i < end; i++ {
					prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("in-%05d", i))}, func(_ *kgo.Record, err error) {
						if err != nil {
							t.Errorf("producing input: %v", err)
						}
					})
				}
			}
			done <- prod.Flush(ctx)
		}()
		return done
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var committedTxns atomic.Int64
	for _, id := range []string{"etl-a", "etl-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			etlWorker(wctx, t, seeds, id, in, out, &committedTxns)
		}()
	}
	defer func() { stop(); wg.Wait() }()
	waitCommitted := func(k int64) {
		t.Helper()
		for committedTxns.Load() < k {
			if !waitCtx(ctx, 20*time.Millisecond) {
				t.Fatalf("only %d transactions committed, waiting for %d", committedTxns.Load(), k)
			}
		}
	}
	waitProduced := func(done <-chan error) {
		t.Helper()
		if err := <-done; err != nil {
			t.Fatalf("producing input: %v", err)
		}
	}

	// Phase 1, then fault 1: kill -9 the coordinator of etl-a.
	phase := produce(0, n/3)
	waitCommitted(committedTxns.Load() + 2)
	coord, err := c.txnCoordinatorOf("etl-a")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kill -9 transaction coordinator %d after %d transactions", coord, committedTxns.Load())
	c.killAndRestart(coord)
	waitProduced(phase)

	// Phase 2, then fault 2: kill -9 the leader of an output partition.
	phase = produce(n/3, 2*n/3)
	waitCommitted(committedTxns.Load() + 1)
	// (A probe connection to a restarted broker fails once: retry.)
	var victim int32
	checkFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		leaders, err := c.mdLeaders(c.running()[0], out)
		if err == nil && leaders[0].Leader <= 0 {
			err = fmt.Errorf("%s-0 has no leader", out)
		}
		if err == nil {
			victim = leaders[0].Leader
		}
		return err
	})
	t.Logf("kill -9 output leader %d after %d transactions", victim, committedTxns.Load())
	c.killAndRestart(victim)
	waitProduced(phase)

	// Phase 3: the rest.
	waitProduced(produce(2*n/3, n))
	// Wait until the output has every input record, then stop the
	// workers and read it once more in full.
	for {
		got := len(readCommittedAll(t, c.addrs(), out, time.Minute))
		if got >= n {
			break
		}
		if !waitCtx(ctx, 500*time.Millisecond) {
			t.Fatalf("output has %d of %d records", got, n)
		}
	}
	stop()
	wg.Wait()
	// Every transaction's markers in (EndTxn is answered before them), so
	// the final read covers everything committed.
	waitAllStable(t, c.admin(), out, 30*time.Second)
	values := readCommittedAll(t, c.addrs(), out, time.Minute)
	counts := map[string]int{}
	for _, v := range values {
		counts[v]++
	}
	var dups, missing []string
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("out-in-%05d", i)
		switch counts[v] {
		case 1:
		case 0:
			missing = append(missing, v)
		default:
			dups = append(dups, v)
		}
	}
	if len(values) != n || len(dups) > 0 || len(missing) > 0 {
		slices.Sort(dups)
		t.Fatalf("output has %d records for %d inputs: %d duplicated (first %v), %d missing (first %v)",
			len(values), n, len(dups), dups[:min(len(dups), 5)], len(missing), missing[:min(len(missing), 5)])
	}
	t.Logf("%d records copied exactly once in %d committed transactions", n, committedTxns.Load())
}

// waitAllStable waits until every partition of topic has its last stable
// offset at its high watermark: no transaction is open or completing.
func waitAllStable(t *testing.T, adm *kadm.Client, topic string, within time.Duration) {
	t.Helper()
	checkFor(t, within, 50*time.Millisecond, func() error {
		ctx := testContext(t, 10*time.Second)
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return err
		}
		latest, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		var open []string
		latest.Each(func(l kadm.ListedOffset) {
			if s, _ := stable.Lookup(topic, l.Partition); s.Offset != l.Offset {
				open = append(open, fmt.Sprintf("%d: %d < %d", l.Partition, s.Offset, l.Offset))
			}
		})
		if len(open) > 0 {
			return fmt.Errorf("partitions below their high watermark: %v", open)
		}
		return nil
	})
}

// kill -9 of a partition's leader between AddPartitionsToTxn and EndTxn on
// 3 brokers: the commit still succeeds, its marker reaches the new leader,
// and read_committed readers get the transaction's records once, and none
// of an earlier aborted transaction (the new leader built its transaction
// state from what it copied as a follower).
func TestTxnClusterLeaderKilledMidTransaction(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 3 * time.Second,
		extra: []string{"transaction.state.log.num.partitions=3"}})
	const topic = "txn-mid"
	c.createTopic(topic, 1, nil)
	c.waitSettled(clusterSettle, topic, 1, 3)
	ctx := testContext(t, 2*time.Minute)
	// First a committed and an aborted transaction: after the failover the
	// new leader, which copied them as a follower, must list the abort.
	want := txnProduce(t, c.addrs(), "tx-before", topic, 2, 5)
	// A transactional id whose coordinator is not the leader to be killed:
	// the test is about the partition leader. (With both on one broker,
	// franz-go's EndTransaction can fail with the dead coordinator's dial
	// error before the coordinator moves: a CI rehearsal saw it; the
	// coordinator's kill is TestTxnClusterETLExactlyOnceUnderFaults'.)
	leader := c.mustPartState(topic, 0).Leader
	txnID := ""
	for i := 0; i < 30 && txnID == ""; i++ {
		id := fmt.Sprintf("tx-mid-%d", i)
		if coord, err := c.txnCoordinatorOf(id); err == nil && coord != leader {
			txnID = id
		}
	}
	if txnID == "" {
		t.Fatalf("no transactional id of 30 has a coordinator other than broker %d", leader)
	}
	cl := c.client(kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(60*time.Second))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		v := fmt.Sprintf("mid-%d", i)
		want = append(want, v)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if now := c.mustPartState(topic, 0).Leader; now != leader {
		t.Fatalf("leader of %s-0 moved from %d to %d without a fault", topic, leader, now)
	}
	coord, err := c.txnCoordinatorOf(txnID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kill -9 leader %d of %s-0 inside the transaction (transaction coordinator %d)", leader, topic, coord)
	c.broker(leader).Kill()
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the leader was killed: %v", err)
	}
	c.waitUnregistered(leader)
	c.broker(leader).Restart()
	adm := c.admin()
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if stable, latest := stableAndLatestVia(t, adm, topic); stable != latest {
			return fmt.Errorf("last stable offset %d, high watermark %d", stable, latest)
		}
		return nil
	})
	got := readCommittedAll(t, c.addrs(), topic, time.Minute)
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed after the failover: %q, want %q", got, want)
	}
}

// A transactional producer killed with -9 on 3 brokers: its transaction is
// aborted at its timeout, and a new producer with the same transactional
// id then commits; read_committed readers see only the new producer's
// records.
func TestTxnClusterKilledProducer(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 3 * time.Second,
		extra: []string{"transaction.state.log.num.partitions=3", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200"}})
	const topic = "txn-pk"
	c.createTopic(topic, 1, nil)
	c.waitSettled(clusterSettle, topic, 1, 3)
	const timeout = 3 * time.Second
	hung := startHungProducer(t, strings.Join(c.addrs(), ","), topic, "tx-pk", 10, timeout)
	if err := hung.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	adm := c.admin()
	if stable, latest := stableAndLatestVia(t, adm, topic); stable != 0 || latest != 10 {
		t.Fatalf("open transaction: last stable offset %d, high watermark %d; want 0 and 10", stable, latest)
	}
	checkFor(t, timeout+20*time.Second, 50*time.Millisecond, func() error {
		if stable, latest := stableAndLatestVia(t, adm, topic); stable != latest || latest != 11 {
			return fmt.Errorf("last stable offset %d, high watermark %d; want both 11", stable, latest)
		}
		return nil
	})
	committed := txnProduce(t, c.addrs(), "tx-pk", topic, 1, 5)
	// EndTxn is answered before the markers land: wait for the LSO.
	checkFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		if stable, latest := stableAndLatestVia(t, adm, topic); stable != latest || latest != 17 {
			return fmt.Errorf("last stable offset %d, high watermark %d; want both 17", stable, latest)
		}
		return nil
	})
	if got := readCommittedAll(t, c.addrs(), topic, time.Minute); !slices.Equal(got, committed) {
		t.Fatalf("read_committed: %q, want only the new producer's %q", got, committed)
	}
}
