package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Unclean-election tests: lag 1 s, session 4 s; the stale replica stays
// paused about 2 s, well inside its session.
const (
	uncleanLag     = 1 * time.Second
	uncleanSession = 4 * time.Second
)

// staleSetup is a one-partition RF=3 topic whose only live replica is out
// of sync: the ISR members (the old leader and one follower) are dead.
type staleSetup struct {
	c                    *testCluster
	topic                string
	leader, stale, other int32
	before               zkPartState // the state before anything happened
	acked                map[string]ackPos
	staleEnd             int64 // the stale replica's log end offset
	leaderEnd            int64 // the old leader's log end offset
}

// makeStale: under acks=all load, pause a follower that is not the
// controller until it leaves the ISR, go on producing so it misses
// records, stop the load, kill -9 both ISR members, resume the stale one
// and wait until the partition is offline (unclean election is off).
func makeStale(t *testing.T, topic string) *staleSetup {
	c := startCluster(t, clusterOpts{brokers: 3, session: uncleanSession, replicated: true, lag: uncleanLag})
	st := c.createTopic(topic, 1, nil)[0]
	s := &staleSetup{c: c, topic: topic, leader: st.Leader, before: st}
	ctrl := c.controller()
	for _, id := range st.ISR {
		if id != st.Leader && id != ctrl {
			s.stale = id
			break
		}
	}
	s.other = otherThan(3, s.leader, s.stale)[0]
	t.Logf("leader %d, controller %d, stale-to-be %d, other follower %d", s.leader, ctrl, s.stale, s.other)

	load := startKgoLoad(c.client(), topic, "unclean", -1, 3*time.Millisecond)
	load.waitAcked(t, 200, 30*time.Second)
	c.broker(s.stale).Signal(syscall.SIGSTOP)
	stopped := time.Now()
	c.waitPartState(uncleanSession/2, topic, 0, func(z zkPartState) error {
		if slices.Contains(z.ISR, s.stale) {
			return fmt.Errorf("paused replica %d still in the ISR", s.stale)
		}
		return nil
	})
	load.waitAcked(t, 100, uncleanSession/2) // records the stale replica lacks
	load.stop(t)
	var failed map[string]error
	s.acked, failed = load.log.snapshot()
	if len(failed) > 0 {
		t.Fatalf("%d acks=all records failed before the faults: %s", len(failed), firstOf(failed))
	}
	for _, a := range s.acked {
		s.leaderEnd = max(s.leaderEnd, a.Offset+1)
	}
	c.broker(s.leader).Kill()
	c.broker(s.other).Kill()
	c.broker(s.stale).Signal(syscall.SIGCONT)
	paused := time.Since(stopped)
	t.Logf("replica %d paused for %v; ISR members %d and %d killed with %d records acknowledged", s.stale, paused.Round(time.Millisecond), s.leader, s.other, len(s.acked))
	if paused > uncleanSession-time.Second {
		t.Fatalf("paused for %v, too close to the session timeout %v", paused, uncleanSession)
	}
	killed := time.Now()
	off := c.waitPartState(uncleanSession+10*time.Second, topic, 0, func(z zkPartState) error {
		if z.Leader != -1 {
			return fmt.Errorf("not offline")
		}
		return nil
	})
	t.Logf("offline %v after the kills: %s", time.Since(killed).Round(time.Millisecond), off)
	if slices.Contains(off.ISR, s.stale) || len(off.ISR) == 0 {
		t.Errorf("offline state %s: the ISR must keep the dead members, not the stale replica, and never be empty", off)
	}
	// The survivor's own Metadata says so, and its metrics.
	checkFor(t, 10*time.Second, 25*time.Millisecond, func() error {
		md, err := c.mdLeaders(s.stale, topic)
		if err != nil {
			return err
		}
		if md[0].Leader != -1 {
			return fmt.Errorf("broker %d's Metadata names leader %d", s.stale, md[0].Leader)
		}
		if v, err := c.metric(s.stale, "kbroker_offline_partitions"); err != nil || v != 1 {
			return fmt.Errorf("kbroker_offline_partitions on broker %d is %v (%v), want 1", s.stale, v, err)
		}
		return nil
	})
	_, leo, err := c.partitionOffsets(s.stale, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.staleEnd = leo
	t.Logf("stale replica ends at %d, the dead leader at %d", s.staleEnd, s.leaderEnd)
	if s.staleEnd >= s.leaderEnd {
		t.Fatalf("the paused replica is not behind (%d >= %d): the test set-up failed", s.staleEnd, s.leaderEnd)
	}
	return s
}

// TestReplicationUncleanElectionOff (issue 5, scenario 4, unclean off):
// with every ISR member dead and only an out-of-sync replica alive, the
// partition is offline (leader -1) rather than led by it; when an ISR
// member returns it leads again and nothing acknowledged is lost.
func TestReplicationUncleanElectionOff(t *testing.T) {
	s := makeStale(t, "unclean-off")
	c := s.c
	// No leader comes from the stale replica, however long we look.
	holdFor(t, 2*time.Second, func() error {
		z, err := c.partState(s.topic, 0)
		if err != nil {
			return err
		}
		if z.Leader != -1 {
			return fmt.Errorf("unclean election off, yet %s", z)
		}
		return nil
	})
	if v := c.mustMetric(s.stale, "kbroker_unclean_leader_elections_total"); v != 0 {
		t.Errorf("kbroker_unclean_leader_elections_total is %v with unclean election off", v)
	}
	c.broker(s.other).Restart()
	back := c.waitPartState(20*time.Second, s.topic, 0, func(z zkPartState) error {
		if z.Leader != s.other {
			return fmt.Errorf("want ISR member %d leading", s.other)
		}
		return nil
	})
	t.Logf("ISR member %d leads again: %s", s.other, back)
	checkReadBack(t, c.readTopic(s.topic, 30*time.Second), s.acked)
	c.broker(s.leader).Restart()
	c.waitPartState(20*time.Second, s.topic, 0, fullISR(3))
	if end := c.waitInSyncEverywhere(20*time.Second, s.topic, 0); end != s.leaderEnd {
		t.Errorf("replicas end at %d after healing, want %d", end, s.leaderEnd)
	}
}

// TestReplicationUncleanElectionOn (issue 5, scenario 4, unclean on): the
// same offline partition; unclean.leader.election.enable=true set on the
// topic at runtime (AlterConfigs) makes the stale replica leader. The
// partition is available again, and what is readable is exactly the
// acknowledged records below the stale replica's log end: the lost ones
// are exactly those it lacked. The controller counts one unclean
// election. When the old leader returns it logs the offsets it truncates
// (its suffix from the stale replica's end), and rejoins with the new
// leader's log.
func TestReplicationUncleanElectionOn(t *testing.T) {
	s := makeStale(t, "unclean-on")
	c := s.c
	adm := kadm.NewClient(c.client(kgo.SeedBrokers(c.broker(s.stale).Addr())))
	on := "true"
	ctx := testContext(t, 30*time.Second)
	res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "unclean.leader.election.enable", Value: &on}}, s.topic)
	if err == nil {
		_, err = res.On(s.topic, nil)
	}
	if err != nil {
		t.Fatalf("AlterTopicConfigs unclean.leader.election.enable=true: %v", err)
	}
	altered := time.Now()
	elected := c.waitPartState(10*time.Second, s.topic, 0, func(z zkPartState) error {
		if z.Leader != s.stale {
			return fmt.Errorf("want the stale replica %d leading", s.stale)
		}
		return nil
	})
	t.Logf("unclean election %v after the config change: %s", time.Since(altered).Round(time.Millisecond), elected)
	if !slices.Equal(elected.ISR, []int32{s.stale}) || elected.LeaderEpoch <= s.before.LeaderEpoch {
		t.Errorf("state after the unclean election %s: want the stale replica alone in the ISR and a new epoch", elected)
	}
	if ctrl := c.controller(); ctrl != s.stale {
		t.Errorf("controller is %d, want the only live broker %d", ctrl, s.stale)
	} else if v := c.mustMetric(ctrl, "kbroker_unclean_leader_elections_total"); v != 1 {
		t.Errorf("kbroker_unclean_leader_elections_total on the controller is %v, want 1", v)
	}

	// Exactly the records the stale replica lacked are lost.
	var kept, lost []string
	keptAcked := map[string]ackPos{}
	for v, a := range s.acked {
		if a.Offset < s.staleEnd {
			kept = append(kept, v)
			keptAcked[v] = a
		} else {
			lost = append(lost, v)
		}
	}
	read := c.readTopic(s.topic, 30*time.Second)
	where := checkReadBack(t, read, keptAcked)
	if len(where) != len(kept) {
		t.Errorf("%d values readable, want exactly the %d acknowledged below offset %d", len(where), len(kept), s.staleEnd)
	}
	for _, v := range lost {
		if w, ok := where[v]; ok {
			t.Errorf("value %s, which the stale replica lacked, is readable at %d", v, w.Offset)
		}
	}
	t.Logf("unclean election lost %d acknowledged records (offsets %d..%d), kept %d", len(lost), s.staleEnd, s.leaderEnd-1, len(kept))

	// The new leader alone takes acks=1 writes, not acks=all.
	if code, err := c.rawProduce(s.stale, s.topic, 0, -1, 3*time.Second); err != nil || code != kerr.NotEnoughReplicas.Code {
		t.Errorf("acks=all produce to the lone unclean leader: %s %v, want NOT_ENOUGH_REPLICAS", errName(code), err)
	}
	for i := 0; i < 3; i++ {
		if code, err := c.rawProduce(s.stale, s.topic, 0, 1, 3*time.Second); err != nil || code != 0 {
			t.Fatalf("acks=1 produce to the unclean leader: %s %v", errName(code), err)
		}
	}

	// The old leader returns, truncates the suffix the new leader never
	// had, says so, and rejoins.
	c.broker(s.leader).Restart()
	c.waitPartState(20*time.Second, s.topic, 0, func(z zkPartState) error {
		if !slices.Contains(z.ISR, s.leader) {
			return fmt.Errorf("old leader %d not back in the ISR", s.leader)
		}
		return nil
	})
	if end := c.waitInSyncEverywhere(20*time.Second, s.topic, 0); end != s.staleEnd+3 {
		t.Errorf("replicas end at %d, want %d (stale end + 3 new records)", end, s.staleEnd+3)
	}
	want := fmt.Sprintf("from=%d to=%d", s.staleEnd, s.leaderEnd)
	data, _ := os.ReadFile(c.broker(s.leader).LogPath())
	var truncLines []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "truncat") && strings.Contains(line, s.topic) {
			truncLines = append(truncLines, line)
		}
	}
	if !slices.ContainsFunc(truncLines, func(l string) bool { return strings.Contains(l, want) }) {
		t.Errorf("old leader's log has no truncation line with %q; truncation lines: %q", want, truncLines)
	} else {
		t.Logf("old leader logged: %s", truncLines[0])
	}
	// The cluster's event history names the offsets the old leader
	// dropped: the records the unclean election lost.
	checkFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		e, err := c.truncationEvent(s.topic, 0, s.leader)
		if err != nil {
			return err
		}
		if e.TruncatedFrom != s.staleEnd || e.TruncatedTo != s.leaderEnd || e.NewLeader != s.stale {
			return fmt.Errorf("truncation event %+v, want offsets %d-%d dropped to follow broker %d", e, s.staleEnd, s.leaderEnd, s.stale)
		}
		t.Logf("event history: %s", e.Text)
		return nil
	})
	// What is readable did not change (plus the 3 acks=1 records).
	after := checkReadBack(t, c.readTopic(s.topic, 30*time.Second), keptAcked)
	if len(after) != len(kept)+3 {
		t.Errorf("%d values readable after the old leader returned, want %d", len(after), len(kept)+3)
	}
	if v := c.mustMetric(s.stale, "kbroker_unclean_leader_elections_total"); v != 1 {
		t.Errorf("kbroker_unclean_leader_elections_total is %v after healing, want still 1", v)
	}
}

// TestReplicationDivergentSuffix (issue 5, scenario 5): the leader holds a
// suffix its followers never got, a new leader writes different records at
// those offsets, and the old leader, returning, truncates its suffix; after
// healing all three logs are byte-identical.
//
// The sequence: 50 acks=all records reach all replicas; both followers are
// paused (SIGSTOP) and, once any fetch they had pending has been answered
// (a follower fetch waits at most 500 ms), the leader appends 5 acks=1
// records nobody else can fetch; the leader is killed (-9) and the
// followers resumed, well within the lag time, so the ISR still names
// them and one is elected cleanly; 20 acks=all records then go to the new
// leader at offsets 50..69 under the new epoch. The old leader restarts:
// OffsetForLeaderEpoch on its last epoch gets 50 from the new leader, so it
// must cut offsets 50..54 and copy the new leader's 50..69.
func TestReplicationDivergentSuffix(t *testing.T) {
	const topic = "diverge"
	c := startCluster(t, clusterOpts{brokers: 3, session: 3 * time.Second, replicated: true, lag: 4 * time.Second})
	st := c.createTopic(topic, 1, nil)[0]
	old := st.Leader
	followers := otherThan(3, old)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	first := produceValues(t, cl, topic, "div-a", 50)
	c.waitInSyncEverywhere(10*time.Second, topic, 0)

	for _, id := range followers {
		c.broker(id).Signal(syscall.SIGSTOP)
	}
	time.Sleep(700 * time.Millisecond) // pending follower fetches (max wait 500 ms) are answered, empty
	for i := 0; i < 5; i++ {
		if code, err := c.rawProduce(old, topic, 0, 1, 3*time.Second); err != nil || code != 0 {
			t.Fatalf("acks=1 produce to the leader: %s %v", errName(code), err)
		}
	}
	if _, leo, err := c.partitionOffsets(old, topic, 0); err != nil || leo != 55 {
		t.Fatalf("leader's log end is %d (%v), want 55", leo, err)
	}
	c.broker(old).Kill()
	for _, id := range followers {
		c.broker(id).Signal(syscall.SIGCONT)
	}
	killed := time.Now()
	next := c.waitPartState(15*time.Second, topic, 0, func(z zkPartState) error {
		if z.Leader < 0 || z.Leader == old {
			return fmt.Errorf("no new leader")
		}
		return nil
	})
	t.Logf("new leader %v after killing %d: %s", time.Since(killed).Round(time.Millisecond), old, next)
	if next.LeaderEpoch != st.LeaderEpoch+1 || len(next.ISR) != 2 {
		t.Errorf("clean election: %s, before %s", next, st)
	}
	second := produceValues(t, cl, topic, "div-b", 20)
	for v, a := range second {
		if a.Offset < 50 {
			t.Errorf("%s acknowledged at %d, want >= 50", v, a.Offset)
		}
	}

	c.broker(old).Restart()
	c.waitPartState(20*time.Second, topic, 0, fullISR(3))
	end := c.waitInSyncEverywhere(20*time.Second, topic, 0)
	if end != 70 {
		t.Errorf("replicas end at %d, want 70", end)
	}
	if !logContains(c.broker(old), "from=50 to=55") {
		t.Errorf("the returning old leader did not log truncating offsets 50..54 (from=50 to=55)")
	}
	for v, a := range second {
		first[v] = a
	}
	where := checkReadBack(t, c.readTopic(topic, 30*time.Second), first)
	if len(where) != 70 {
		t.Errorf("%d values readable, want the 70 acknowledged ones only (the 5 acks=1 records are gone)", len(where))
	}

	// Byte-identical logs: stop everything (nothing writes after the
	// check above) and compare each replica's segment files.
	for _, b := range c.brokers {
		b.Kill()
	}
	ref := c.broker(1).PartitionDir(topic, 0)
	refSegs := logSegments(t, ref)
	for id := int32(2); id <= 3; id++ {
		segs := logSegments(t, c.broker(id).PartitionDir(topic, 0))
		if len(segs) != len(refSegs) {
			t.Errorf("broker %d has %d segments, broker 1 has %d", id, len(segs), len(refSegs))
			continue
		}
		for i := range segs {
			a, errA := os.ReadFile(refSegs[i].path)
			b, errB := os.ReadFile(segs[i].path)
			if errA != nil || errB != nil {
				t.Fatal(errA, errB)
			}
			if string(a) != string(b) {
				t.Errorf("segment %s differs between broker 1 (%d bytes) and broker %d (%d bytes)", filepath.Base(segs[i].path), len(a), id, len(b))
			}
			if bs := scanBatches(a); len(bs) == 0 || bs[len(bs)-1].lastOffset != end-1 {
				t.Errorf("segment %s: batches %v, want them to end at offset %d", filepath.Base(segs[i].path), bs, end-1)
			}
		}
	}
}

// produceValues produces n values "<prefix>-<i>" to partition 0 with acks=all
// and returns where each was acknowledged.
func produceValues(t *testing.T, cl *kgo.Client, topic, prefix string, n int) map[string]ackPos {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	out := map[string]ackPos{}
	var rs []*kgo.Record
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("%s-%04d", prefix, i)
		rs = append(rs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)})
	}
	for _, r := range cl.ProduceSync(ctx, rs...) {
		if r.Err != nil {
			t.Fatalf("producing %s: %v", r.Record.Value, r.Err)
		}
		out[string(r.Record.Value)] = ackPos{r.Record.Partition, r.Record.Offset}
	}
	return out
}

// truncationEvent finds broker's replica_truncated event for topic's
// partition p in the cluster's event history (/kbroker/events).
func (c *testCluster) truncationEvent(topic string, p int32, broker int32) (zk.ClusterEvent, error) {
	names, _, err := c.zkConn().Children(c.zkPath(zk.EventsPath))
	if err != nil {
		return zk.ClusterEvent{}, err
	}
	for _, n := range names {
		seq, ok := zk.ParseEventName(n)
		if !ok {
			continue
		}
		data, _, err := c.zkGet(zk.EventsPath + "/" + n)
		if err != nil {
			return zk.ClusterEvent{}, err
		}
		e, err := zk.DecodeEvent(seq, data)
		if err != nil {
			return zk.ClusterEvent{}, fmt.Errorf("event %s: %w", n, err)
		}
		if e.Kind == "replica_truncated" && e.Topic == topic && e.Partition == p && e.Broker == broker {
			return e, nil
		}
	}
	return zk.ClusterEvent{}, fmt.Errorf("no replica_truncated event of broker %d for %s-%d among %d events", broker, topic, p, len(names))
}
