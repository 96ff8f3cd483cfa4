package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ISR tests run with a lag time well apart from the session timeout, so a
// paused broker clearly leaves the ISR long before ZooKeeper would end its
// session: lag 1 s, session 6 s, pauses of 0.3 s and 3 s.
const (
	isrLag     = 1 * time.Second
	isrSession = 6 * time.Second
)

// holdFor checks fn every 50 ms for d and fails at the first error: for
// asserting that something does NOT happen during a period.
func holdFor(t testing.TB, d time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := fn(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReplicationISRShrinkExpand (issue 5, scenario 2): under continuous
// acks=all load, a follower paused (SIGSTOP) for less than
// replica.lag.time.max.ms changes nothing; paused for longer (but less
// than the session timeout) it leaves the ISR exactly once - the
// leader's kbroker_isr_shrinks_total grows by 1 and the state znode's
// version by 1 - while acks=all writes go on with the two others; resumed,
// it catches up and rejoins exactly once (kbroker_isr_expands_total +1,
// znode version +1), after which every replica has the same log end and
// high watermark and no acknowledged record is missing.
func TestReplicationISRShrinkExpand(t *testing.T) {
	const topic = "isr"
	c := startCluster(t, clusterOpts{brokers: 3, session: isrSession, replicated: true, lag: isrLag})
	st := c.createTopic(topic, 1, nil)[0]
	leader, ctrl := st.Leader, c.controller()
	// The paused follower must not be the controller: the leader's ISR
	// change goes through it.
	var follower int32 = -1
	for _, id := range st.ISR {
		if id != leader && id != ctrl {
			follower = id
			break
		}
	}
	t.Logf("leader %d, controller %d, pausing follower %d; state %s", leader, ctrl, follower, st)

	load := startKgoLoad(c.client(), topic, "isr", -1, 3*time.Millisecond)
	load.waitAcked(t, 200, 30*time.Second)
	counters := func() (shrinks, expands float64) {
		return c.mustMetric(leader, "kbroker_isr_shrinks_total"), c.mustMetric(leader, "kbroker_isr_expands_total")
	}
	shrinks0, expands0 := counters()

	// A pause shorter than the lag time: no ISR change at all.
	pauseFor(c.broker(follower), 300*time.Millisecond)
	holdFor(t, 2*isrLag, func() error {
		s, err := c.partState(topic, 0)
		if err != nil {
			return err
		}
		if s.Version != st.Version || len(s.ISR) != 3 {
			return fmt.Errorf("the ISR changed after a %v pause (lag time %v): %s, before %s", 300*time.Millisecond, isrLag, s, st)
		}
		return nil
	})
	if s, e := counters(); s != shrinks0 || e != expands0 {
		t.Errorf("after a short pause the leader counts %v shrinks and %v expands, want %v and %v", s, e, shrinks0, expands0)
	}

	// A pause longer than the lag time.
	c.broker(follower).Signal(syscall.SIGSTOP)
	stopped := time.Now()
	out := c.waitPartState(isrSession-time.Second, topic, 0, func(s zkPartState) error {
		if slices.Contains(s.ISR, follower) {
			return fmt.Errorf("paused follower %d still in the ISR", follower)
		}
		return nil
	})
	t.Logf("follower %d left the ISR %v after its pause: %s", follower, time.Since(stopped).Round(time.Millisecond), out)
	if out.Version != st.Version+1 || out.Leader != leader || len(out.ISR) != 2 {
		t.Errorf("state after the shrink %s, before %s: want one write, same leader, 2 in sync", out, st)
	}
	// acks=all goes on with two in sync.
	load.waitAcked(t, 100, isrSession-2*time.Second)
	if v := c.mustMetric(leader, "kbroker_under_replicated_partitions"); v != 1 {
		t.Errorf("kbroker_under_replicated_partitions on the leader is %v while a follower is out, want 1", v)
	}
	if lag := c.mustMetric(leader, "kbroker_follower_lag_offsets", "partition", "0", "replica", strconv.Itoa(int(follower)), "topic", topic); lag <= 0 {
		t.Errorf("kbroker_follower_lag_offsets of the paused follower is %v, want > 0", lag)
	}
	time.Sleep(time.Until(stopped.Add(3 * time.Second))) // the 3 s pause under test
	c.broker(follower).Signal(syscall.SIGCONT)
	resumed := time.Now()
	back := c.waitPartState(10*time.Second, topic, 0, fullISR(3))
	t.Logf("follower %d rejoined the ISR %v after resuming: %s", follower, time.Since(resumed).Round(time.Millisecond), back)
	holdFor(t, 2*isrLag, func() error {
		s, err := c.partState(topic, 0)
		if err != nil {
			return err
		}
		if s.Version != st.Version+2 || len(s.ISR) != 3 || s.Leader != leader {
			return fmt.Errorf("state %s, started at %s: want exactly one shrink and one expand, nothing after", s, st)
		}
		return nil
	})
	if s, e := counters(); s != shrinks0+1 || e != expands0+1 {
		t.Errorf("the leader counts %v shrinks and %v expands, want %v and %v", s, e, shrinks0+1, expands0+1)
	}
	if v := c.mustMetric(leader, "kbroker_under_replicated_partitions"); v != 0 {
		t.Errorf("kbroker_under_replicated_partitions is %v with a full ISR", v)
	}

	load.stop(t)
	acked, failed := load.log.snapshot()
	if len(failed) > 0 {
		t.Errorf("%d acks=all records failed: e.g. %s", len(failed), firstOf(failed))
	}
	end := c.waitInSyncEverywhere(20*time.Second, topic, 0)
	t.Logf("%d records acknowledged; every replica ends at %d", len(acked), end)
	checkReadBack(t, c.readTopic(topic, 30*time.Second), acked)
}

// TestReplicationNotEnoughReplicas (issue 5, scenario 3), with
// min.insync.replicas=2: both followers of a partition paused past the lag
// time. An acks=all produce sent just before is appended but its wait ends
// with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrinks to the
// leader alone; then acks=all is refused before writing with
// NOT_ENOUGH_REPLICAS, while acks=1 still works. Resumed, the followers
// rejoin, acks=all works again, and every replica holds everything,
// including what acks=1 wrote while the leader was alone.
func TestReplicationNotEnoughReplicas(t *testing.T) {
	const topic = "min-isr"
	c := startCluster(t, clusterOpts{brokers: 3, session: isrSession, replicated: true, lag: isrLag})
	states := c.createTopic(topic, 3, nil)
	// The leader must be the controller, which shrinks the ISR while both
	// other brokers are paused.
	ctrl := c.controller()
	p := partitionLedBy(states, ctrl)
	if p < 0 {
		t.Fatalf("controller %d leads no partition of %s: %v", ctrl, topic, states)
	}
	leader := ctrl
	followers := otherThan(3, leader)
	t.Logf("%s-%d led by controller %d (%s); pausing %v", topic, p, leader, states[p], followers)
	for i := 0; i < 5; i++ {
		if code, err := c.rawProduce(leader, topic, p, -1, 5*time.Second); err != nil || code != 0 {
			t.Fatalf("acks=all produce with a full ISR: %s %v", errName(code), err)
		}
	}

	stopped := time.Now()
	for _, id := range followers {
		c.broker(id).Signal(syscall.SIGSTOP)
	}
	// kill(SIGSTOP) returns before the followers have stopped: a
	// follower could still fetch the record below and, once the other left
	// the ISR, complete the write with an ISR of two.
	for _, id := range followers {
		waitStopped(t, c.broker(id), 5*time.Second)
	}
	t.Logf("followers %v stopped %v after SIGSTOP", followers, time.Since(stopped).Round(time.Microsecond))
	// Sent with a full ISR, appended, then waiting for followers that do
	// not fetch: the ISR shrink ends the wait.
	type result struct {
		code int16
		err  error
		took time.Duration
	}
	waiting := make(chan result, 1)
	go func() {
		start := time.Now()
		code, err := c.rawProduce(leader, topic, p, -1, 10*time.Second)
		waiting <- result{code, err, time.Since(start)}
	}()
	alone := c.waitPartState(isrSession-2*time.Second, topic, p, func(s zkPartState) error {
		if !slices.Equal(s.ISR, []int32{leader}) {
			return fmt.Errorf("ISR is not the leader alone yet")
		}
		return nil
	})
	t.Logf("ISR shrank to the leader %v after pausing both followers: %s", time.Since(stopped).Round(time.Millisecond), alone)
	var r result
	select {
	case r = <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the acks=all produce waiting for followers had no answer 10s after the ISR shrank")
	}
	if r.err != nil || r.code != kerr.NotEnoughReplicasAfterAppend.Code {
		t.Errorf("acks=all produce waiting while the ISR shrank: %s %v after %v, want NOT_ENOUGH_REPLICAS_AFTER_APPEND", errName(r.code), r.err, r.took)
	}
	if code, err := c.rawProduce(leader, topic, p, -1, 5*time.Second); err != nil || code != kerr.NotEnoughReplicas.Code {
		t.Errorf("acks=all produce with the leader alone in the ISR: %s %v, want NOT_ENOUGH_REPLICAS", errName(code), err)
	}
	for i := 0; i < 3; i++ {
		if code, err := c.rawProduce(leader, topic, p, 1, 5*time.Second); err != nil || code != 0 {
			t.Errorf("acks=1 produce with the leader alone in the ISR: %s %v, want success", errName(code), err)
		}
	}
	// (The exact codes are checked with raw requests above: a franz-go
	// client would also try the paused brokers and could stretch the pause
	// past the session timeout this test must stay under.)

	if paused := time.Since(stopped); paused > isrSession-time.Second {
		t.Fatalf("followers paused for %v, too close to the session timeout %v for this test to mean anything", paused, isrSession)
	}
	for _, id := range followers {
		c.broker(id).Signal(syscall.SIGCONT)
	}
	resumed := time.Now()
	c.waitPartState(10*time.Second, topic, p, fullISR(3))
	t.Logf("followers back in the ISR %v after resuming", time.Since(resumed).Round(time.Millisecond))
	if code, err := c.rawProduce(leader, topic, p, -1, 5*time.Second); err != nil || code != 0 {
		t.Errorf("acks=all produce after the followers returned: %s %v", errName(code), err)
	}
	// 5 + 1 (appended, then NOT_ENOUGH_REPLICAS_AFTER_APPEND) + 3 acks=1 +
	// 1: every replica has all 10.
	if end := c.waitInSyncEverywhere(20*time.Second, topic, p); end != 10 {
		t.Errorf("every replica ends at %d, want 10 records", end)
	}
}

// waitStopped waits until every thread of broker b's process is stopped
// (state T in /proc). kill(SIGSTOP) only queues the signal: the process
// stops once one of its threads has run to take it, and until then its
// other threads go on (on a loaded machine, long enough for a follower to
// fetch again). Tests that need a broker to do nothing from some point on
// wait for this after sending SIGSTOP.
func waitStopped(t testing.TB, b *Broker, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := b.k.Process().WaitPaused(ctx); err != nil {
		t.Fatalf("broker %s did not stop within %v: %v", b.Addr(), within, err)
	}
}
