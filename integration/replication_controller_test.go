package integration

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReplicationControllerKilledDuringElection (issue 5, scenario 6): four
// brokers, an RF=3 topic under acks=all load. A partition leader gets
// kill -9, and the controller gets kill -9 the moment ZooKeeper drops the
// leader's registration, that is while it is electing new leaders. Within
// a bound the cluster converges: a survivor is controller, every
// partition has a live leader taken from its previous ISR with a higher
// epoch where it changed, and both survivors' Metadata agree with
// ZooKeeper. With the two brokers back, every ISR is full again, all
// brokers agree, and no acknowledged record is lost or duplicated.
func TestReplicationControllerKilledDuringElection(t *testing.T) {
	const (
		topic      = "ctrl-kill"
		partitions = 8
		session    = 2 * time.Second
	)
	c := startCluster(t, clusterOpts{brokers: 4, session: session, replicated: true, lag: 1500 * time.Millisecond})
	before := c.createTopic(topic, partitions, nil)
	ctrl := c.controller()
	p := partitionLedByOtherThan(before, ctrl)
	leader := before[p].Leader
	epoch0 := c.controllerEpoch()
	t.Logf("controller %d (epoch %d); killing leader %d of %s-%d, then the controller during the election", ctrl, epoch0, leader, topic, p)

	load := startKgoLoad(c.client(), topic, "ctrl", -1, 3*time.Millisecond)
	load.waitAcked(t, 300, 30*time.Second)

	c.broker(leader).Kill()
	killed := time.Now()
	checkFor(t, session+10*time.Second, 5*time.Millisecond, func() error {
		if c.brokerRegistered(leader) {
			return fmt.Errorf("broker %d still registered", leader)
		}
		return nil
	})
	c.broker(ctrl).Kill()
	ctrlKilled := time.Now()
	t.Logf("broker %d's registration gone %v after its kill; controller %d killed", leader, ctrlKilled.Sub(killed).Round(time.Millisecond), ctrl)

	survivors := otherThan(4, leader, ctrl)
	dead := []int32{leader, ctrl}
	converged := func() error {
		nc := c.controller()
		if !slices.Contains(survivors, nc) {
			return fmt.Errorf("controller is %d, want one of %v", nc, survivors)
		}
		states := map[int32]zkPartState{}
		for q := int32(0); q < partitions; q++ {
			s, err := c.partState(topic, q)
			if err != nil {
				return err
			}
			if !slices.Contains(survivors, s.Leader) {
				return fmt.Errorf("%s-%d: leader %d not a survivor (%s)", topic, q, s.Leader, s)
			}
			if !slices.Contains(before[q].ISR, s.Leader) {
				return fmt.Errorf("%s-%d: leader %d was not in the ISR %v", topic, q, s.Leader, before[q].ISR)
			}
			for _, d := range dead {
				if slices.Contains(s.ISR, d) {
					return fmt.Errorf("%s-%d: dead broker %d still in the ISR (%s)", topic, q, d, s)
				}
			}
			if s.LeaderEpoch < before[q].LeaderEpoch || (s.Leader != before[q].Leader && s.LeaderEpoch <= before[q].LeaderEpoch) {
				return fmt.Errorf("%s-%d: epoch %d, before %d (leader %d -> %d)", topic, q, s.LeaderEpoch, before[q].LeaderEpoch, before[q].Leader, s.Leader)
			}
			states[q] = s
		}
		for _, id := range survivors {
			md, err := c.metadataFrom(id, time.Second)
			if err != nil {
				return err
			}
			if md.ControllerID != nc {
				return fmt.Errorf("broker %d names controller %d, ZooKeeper %d", id, md.ControllerID, nc)
			}
			if len(md.Brokers) != len(survivors) {
				return fmt.Errorf("broker %d lists %d brokers", id, len(md.Brokers))
			}
			if err := c.leadersAgree(id, topic, states); err != nil {
				return err
			}
		}
		return nil
	}
	bound := session + 3*time.Second
	checkFor(t, bound, 20*time.Millisecond, converged)
	t.Logf("converged %v after the controller kill (bound %v); controller %d", time.Since(ctrlKilled).Round(time.Millisecond), bound, c.controller())
	if e := c.controllerEpoch(); e <= epoch0 {
		t.Errorf("controller epoch %d after a failover, was %d", e, epoch0)
	}

	for _, id := range dead {
		c.broker(id).Restart()
	}
	c.waitSettled(30*time.Second, topic, partitions, 3)
	load.stop(t)
	acked, failed := load.log.snapshot()
	if len(failed) > 0 {
		t.Errorf("%d records failed: %s", len(failed), firstOf(failed))
	}
	for q := int32(0); q < partitions; q++ {
		c.waitInSyncEverywhere(30*time.Second, topic, q)
	}
	t.Logf("%d records acknowledged", len(acked))
	checkReadBack(t, c.readTopic(topic, 60*time.Second), acked)
}

// TestReplicationControlledShutdown (issue 5, scenario 8): SIGTERM to a
// broker leading partitions under acks=all load (session timeout 6 s, so
// a failover by session expiry would show). Leadership moves before the
// process exits; the idempotent producer sees at most retriable
// NOT_LEADER_OR_FOLLOWER answers, never a timeout, no record waits
// anywhere near the session timeout, and nothing acknowledged is lost or
// doubled. Back and in the ISR, the broker gets its leaderships back from
// a preferred-replica ElectLeaders.
func TestReplicationControlledShutdown(t *testing.T) {
	const (
		topic      = "ctrl-shutdown"
		partitions = 3
		session    = 6 * time.Second
	)
	c := startCluster(t, clusterOpts{brokers: 3, session: session, replicated: true, lag: 1500 * time.Millisecond})
	before := c.createTopic(topic, partitions, nil)
	victim := c.replicasOf(topic, 0)[0]
	var led []int32
	for q, s := range before {
		if s.Leader == victim {
			led = append(led, q)
		}
	}
	if len(led) == 0 {
		t.Fatalf("broker %d leads nothing: %v", victim, before)
	}
	logs := &kgoLogLines{}
	// A short metadata min age: franz-go otherwise waits up to 5 s
	// between metadata refreshes after a produce error, whatever the
	// broker does.
	cl := c.client(kgo.WithLogger(logs), kgo.ProducerLinger(2*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond))
	lat := &latencies{}
	load := startTimedLoad(cl, topic, "cs", 3*time.Millisecond, lat)
	load.waitAcked(t, 300, 30*time.Second)

	versions := map[int32]int32{}
	for q := int32(0); q < partitions; q++ {
		versions[q] = c.mustPartState(topic, q).Version
	}
	start := time.Now()
	c.broker(victim).Stop()
	stopped := time.Since(start)
	// The shutdown takes the broker out of every ISR in one write per
	// partition; leaders must not take it back while it still fetches
	// (which the controller would then have to undo when it leaves).
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		for q := int32(0); q < partitions; q++ {
			if s := c.mustPartState(topic, q); slices.Contains(s.ISR, victim) {
				return fmt.Errorf("%s-%d: %s still has the stopped broker %d in its ISR", topic, q, s, victim)
			}
		}
		return nil
	})
	for q := int32(0); q < partitions; q++ {
		if s := c.mustPartState(topic, q); s.Version != versions[q]+1 {
			t.Errorf("%s-%d: %d state writes during the controlled shutdown of broker %d (%s), want 1", topic, q, s.Version-versions[q], victim, s)
		}
	}
	for _, q := range led {
		s := c.mustPartState(topic, q)
		if s.Leader == victim || s.Leader < 0 || s.LeaderEpoch != before[q].LeaderEpoch+1 {
			t.Errorf("%s-%d after the controlled shutdown: %s, before %s: want another leader at the next epoch", topic, q, s, before[q])
		}
	}
	t.Logf("broker %d (leader of %v) stopped in %v", victim, led, stopped.Round(time.Millisecond))
	load.waitAcked(t, 300, 30*time.Second)
	load.stop(t)
	acked, failed := load.log.snapshot()
	if len(failed) > 0 {
		t.Errorf("%d records failed: %s", len(failed), firstOf(failed))
	}
	maxLat := lat.max()
	notLeader, timeouts := logs.count("NOT_LEADER"), logs.count("TIMED_OUT")+logs.count("timed out")+logs.count("deadline exceeded")
	t.Logf("%d records acknowledged; slowest took %v; client log lines: %d NOT_LEADER, %d timeouts", len(acked), maxLat.Round(time.Millisecond), notLeader, timeouts)
	if maxLat > session/2 {
		t.Errorf("a record took %v to be acknowledged across a controlled shutdown (session timeout %v)", maxLat, session)
	}
	for _, l := range logs.matching("NOT_LEADER", 5) {
		t.Logf("client saw: %s", l)
	}
	if timeouts > 0 {
		t.Errorf("the producer logged %d timeouts: %q", timeouts, logs.matching("timed out", 5))
	}
	checkReadBack(t, c.readTopic(topic, 60*time.Second), acked)

	// Back, in sync, and preferred again after ElectLeaders.
	c.broker(victim).Restart()
	c.waitSettled(30*time.Second, topic, partitions, 3)
	ctx := testContext(t, 30*time.Second)
	set := kadm.TopicsSet{}
	for q := int32(0); q < partitions; q++ {
		set.Add(topic, q)
	}
	res, err := c.admin().ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		t.Fatalf("ElectLeaders: %v", err)
	}
	for _, q := range led {
		if r, ok := res[topic][q]; ok && r.Err != nil {
			t.Errorf("preferred election of %s-%d: %v %s", topic, q, r.Err, r.ErrMessage)
		}
	}
	for q := int32(0); q < partitions; q++ {
		s := c.mustPartState(topic, q)
		if pref := c.replicasOf(topic, q)[0]; s.Leader != pref {
			t.Errorf("%s-%d led by %d after ElectLeaders, preferred %d", topic, q, s.Leader, pref)
		}
	}
	c.waitSettled(10*time.Second, topic, partitions, 3)
}

// kgoLogLines is a kgo.Logger keeping every line at debug level and above.
type kgoLogLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *kgoLogLines) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (l *kgoLogLines) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	line := fmt.Sprint(level, " ", msg, keyvals)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) < 200000 {
		l.lines = append(l.lines, line)
	}
}

func (l *kgoLogLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func (l *kgoLogLines) matching(s string, limit int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) && len(out) < limit {
			out = append(out, line)
		}
	}
	return out
}

// latencies keeps the slowest produce-to-acknowledgement time.
type latencies struct {
	mu      sync.Mutex
	slowest time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slowest = max(l.slowest, d)
}

func (l *latencies) max() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slowest
}

// startTimedLoad is startKgoLoad also measuring each record's latency.
func startTimedLoad(cl *kgo.Client, topic, prefix string, every time.Duration, lat *latencies) *kgoLoad {
	return startKgoLoadWith(cl, topic, prefix, -1, every, lat)
}
