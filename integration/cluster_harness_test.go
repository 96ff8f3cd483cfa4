package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/kbroker/kbroker/internal/zktest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster harness: a ZooKeeper with a short tick (so sessions can be short)
// and N kbroker processes registered in it, plus the probes the cluster
// tests share. This file holds the cluster itself, requests to one broker
// and the ZooKeeper reads; cluster_views_test.go the brokers' views of the
// cluster and their agreement, cluster_metrics_test.go the /metrics
// scrapes, cluster_records_test.go producing and reading back.
//
// Methods that take a testing.TB may be called from subtests of the test
// that started the cluster; the others fail the starting test (c.t).

const (
	// clusterSession is the default zookeeper.session.timeout.ms.
	clusterSession = 2 * time.Second
	// clusterSessionSlack is how late after clusterSession a session may
	// be declared expired: ZooKeeper checks expiries once per tick, and a
	// loaded 2-core machine adds scheduling delay.
	clusterSessionSlack = 2 * time.Second
	// clusterSettle bounds how long a cluster may take to reach a state
	// that needs no session expiry (a broker joining, a topic spreading).
	clusterSettle = 20 * time.Second
	// clusterStartWithin bounds how long a started cluster may take until
	// every broker lists all of them and the same controller.
	clusterStartWithin = 30 * time.Second
)

// clusterOpts configures startCluster.
type clusterOpts struct {
	brokers int    // broker ids 1..brokers
	chroot  string // zookeeper.connect chroot, "" for none
	// session is zookeeper.session.timeout.ms; 0 means clusterSession.
	session time.Duration
	// replicated makes a cluster for replication tests: every broker gets
	// the replicationDefaults below, replica.lag.time.max.ms=lag (which
	// must then be set) and a /metrics endpoint.
	replicated bool
	lag        time.Duration
	// extra overrides, applied after the defaults (later ones win).
	extra []string
	// perBroker, if set, gives broker id's own overrides, applied last
	// (its listeners, say).
	perBroker func(id int) []string
	// probe, if set, tells whether a broker answers (a cluster whose
	// listeners need TLS or SASL); nil: a plain ApiVersions.
	probe func(addr string, timeout time.Duration) error
	// clientOpts are what every test client needs (TLS, SASL) with
	// these listeners.
	clientOpts []kgo.Opt
}

// replicationDefaults are the replicated cluster's broker settings besides
// the lag: RF 3 with two replicas required for acks=all, no unclean
// election, no automatic leader moves, groups that do not wait to form.
var replicationDefaults = []string{
	"min.insync.replicas=2",
	"default.replication.factor=3",
	"offsets.topic.replication.factor=3",
	"offsets.topic.num.partitions=3",
	"group.initial.rebalance.delay.ms=0",
	"unclean.leader.election.enable=false",
	"auto.leader.rebalance.enable=false",
}

// testCluster is a ZooKeeper and brokers 1..n registered in it.
type testCluster struct {
	t       *testing.T
	opts    clusterOpts // session filled in
	zk      *zktest.Server
	brokers []*Broker // brokers[i] has broker.id i+1
	metrics []string  // metrics[i] is broker i+1's kbroker.metrics.address (replicated only)

	probeSet

	mu       sync.Mutex // guards rawCount
	rawCount int
}

// startCluster starts a ZooKeeper and the brokers o describes, and waits
// until every broker lists all of them and the same controller, the one
// /controller names.
func startCluster(t *testing.T, o clusterOpts) *testCluster {
	t.Helper()
	if o.brokers < 1 {
		t.Fatalf("startCluster: %d brokers", o.brokers)
	}
	if o.replicated != (o.lag > 0) {
		t.Fatalf("startCluster: replicated=%v with lag %v (a replicated cluster needs a lag, and only it)", o.replicated, o.lag)
	}
	if o.session == 0 {
		o.session = clusterSession
	}
	start := time.Now()
	c := &testCluster{t: t, opts: o, zk: zktest.Start(t)}
	c.security = o.clientOpts
	t.Cleanup(c.closeProbes)
	for id := 1; id <= o.brokers; id++ {
		var metrics []string
		if o.replicated {
			c.metrics = append(c.metrics, "127.0.0.1:"+strconv.Itoa(freePort(t)))
			metrics = []string{"kbroker.metrics.address=" + c.metrics[id-1]}
		}
		c.brokers = append(c.brokers, startBroker(t, t.TempDir(), o.probe, c.brokerOverrides(id, metrics...)...))
	}
	c.waitAgreed(t, clusterStartWithin, func(v clusterView) error {
		if len(v.brokers) != o.brokers {
			return fmt.Errorf("%d brokers listed, want %d", len(v.brokers), o.brokers)
		}
		if zc := c.controller(); zc != v.controller {
			return fmt.Errorf("/controller names %d, the brokers %d", zc, v.controller)
		}
		return nil
	})
	kind := ""
	if o.replicated {
		kind = fmt.Sprintf(", replicated, lag %v", o.lag)
	}
	t.Logf("cluster of %d brokers (zookeeper %s%s, session %v%s) ready in %v", o.brokers, c.zk.Addr(), o.chroot, o.session, kind, time.Since(start).Round(time.Millisecond))
	return c
}

// addBroker starts one more broker (the next id) in the cluster and waits
// until every running broker lists it; it returns its id.
func (c *testCluster) addBroker() int32 {
	c.t.Helper()
	id := len(c.brokers) + 1
	var metrics []string
	if c.opts.replicated {
		c.metrics = append(c.metrics, "127.0.0.1:"+strconv.Itoa(freePort(c.t)))
		metrics = []string{"kbroker.metrics.address=" + c.metrics[id-1]}
	}
	c.brokers = append(c.brokers, startBroker(c.t, c.t.TempDir(), c.opts.probe, c.brokerOverrides(id, metrics...)...))
	want := len(c.running())
	c.waitAgreed(c.t, clusterStartWithin, func(v clusterView) error {
		if len(v.brokers) != want {
			return fmt.Errorf("%d brokers listed, want %d", len(v.brokers), want)
		}
		return nil
	})
	return int32(id)
}

// connect is the brokers' zookeeper.connect.
func (c *testCluster) connect() string { return c.zk.Addr() + c.opts.chroot }

// brokerOverrides are broker id's settings in this cluster (but its
// metrics address): the defaults, then the cluster's extra overrides, then
// extra.
func (c *testCluster) brokerOverrides(id int, extra ...string) []string {
	ov := []string{
		"broker.id=" + strconv.Itoa(id),
		"zookeeper.connect=" + c.connect(),
		"zookeeper.session.timeout.ms=" + strconv.Itoa(int(c.opts.session/time.Millisecond)),
	}
	if c.opts.replicated {
		ov = append(ov, "replica.lag.time.max.ms="+strconv.Itoa(int(c.opts.lag/time.Millisecond)))
		ov = append(ov, replicationDefaults...)
	}
	ov = append(ov, c.opts.extra...)
	if c.opts.perBroker != nil {
		ov = append(ov, c.opts.perBroker(id)...)
	}
	return append(ov, extra...)
}

// broker returns the broker with the given id.
func (c *testCluster) broker(id int32) *Broker { return c.brokers[id-1] }

// waitUnregistered waits until broker id's registration is gone (its
// session ended), so that it can start again under the same id.
func (c *testCluster) waitUnregistered(id int32) {
	c.t.Helper()
	checkFor(c.t, c.opts.session+10*time.Second, 25*time.Millisecond, func() error {
		if c.brokerRegistered(id) {
			return fmt.Errorf("broker %d still registered", id)
		}
		return nil
	})
}

// killAndRestart kills broker id with SIGKILL and starts it again once its
// session has ended.
func (c *testCluster) killAndRestart(id int32) {
	c.t.Helper()
	c.broker(id).Kill()
	c.waitUnregistered(id)
	c.broker(id).Restart()
}

// running lists the ids of the brokers whose process is alive.
func (c *testCluster) running() []int32 {
	var ids []int32
	for i, b := range c.brokers {
		if b.Running() {
			ids = append(ids, int32(i+1))
		}
	}
	return ids
}

// addrs lists the addresses of the running brokers.
func (c *testCluster) addrs() []string {
	var out []string
	for _, id := range c.running() {
		out = append(out, c.broker(id).Addr())
	}
	return out
}

// client is a kgo client seeded with every running broker, closed at test
// cleanup.
func (c *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	opts = append(append([]kgo.Opt{kgo.SeedBrokers(c.addrs()...), kgo.RetryTimeout(30 * time.Second)}, c.opts.clientOpts...), opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		c.t.Fatalf("kgo.NewClient: %v", err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

func (c *testCluster) admin() *kadm.Client { return kadm.NewClient(c.client()) }

// request sends req to broker id itself.
func (c *testCluster) request(id int32, timeout time.Duration, req kmsg.Request) (kmsg.Response, error) {
	return c.requestTo(c.broker(id).Addr(), timeout, req)
}

// metadataFrom sends an all-topics Metadata request to broker id itself.
func (c *testCluster) metadataFrom(id int32, timeout time.Duration) (*kmsg.MetadataResponse, error) {
	resp, err := c.request(id, timeout, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return nil, fmt.Errorf("metadata from broker %d: %w", id, err)
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// mdPartition is one partition as a broker's Metadata describes it.
type mdPartition struct {
	Leader, LeaderEpoch int32
	ISR                 []int32
	Err                 int16
}

// mdLeaders returns broker id's view of topic's partitions.
func (c *testCluster) mdLeaders(id int32, topic string) (map[int32]mdPartition, error) {
	m, err := c.metadataFrom(id, time.Second)
	if err != nil {
		return nil, err
	}
	for _, t := range m.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		out := map[int32]mdPartition{}
		for _, p := range t.Partitions {
			out[p.Partition] = mdPartition{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, ISR: p.ISR, Err: p.ErrorCode}
		}
		return out, nil
	}
	return nil, fmt.Errorf("broker %d does not list topic %s", id, topic)
}

// ---- ZooKeeper ----

// zkConn returns a go-zookeeper connection to the cluster's ZooKeeper (not
// chrooted: see zkPath).
func (c *testCluster) zkConn() *zk.Conn {
	c.t.Helper()
	return c.zkConnTo(c.t, c.zk.Addr())
}

// zkPath is p (a path as Kafka names it) under the cluster's chroot.
func (c *testCluster) zkPath(p string) string { return c.opts.chroot + p }

// zkGet reads a znode; go-zookeeper retries while it reconnects.
func (c *testCluster) zkGet(p string) ([]byte, *zk.Stat, error) {
	return c.zkConn().Get(c.zkPath(p))
}

func (c *testCluster) zkExists(p string) (bool, error) {
	ok, _, err := c.zkConn().Exists(c.zkPath(p))
	return ok, err
}

// controller is the broker id in /controller, -1 when there is none.
func (c *testCluster) controller() int32 {
	data, _, err := c.zkGet("/controller")
	if err != nil {
		return -1
	}
	var v struct {
		BrokerID int32 `json:"brokerid"`
	}
	if json.Unmarshal(data, &v) != nil {
		return -1
	}
	return v.BrokerID
}

// controllerEpoch reads /controller_epoch.
func (c *testCluster) controllerEpoch() int32 {
	c.t.Helper()
	data, _, err := c.zkGet("/controller_epoch")
	if err != nil {
		c.t.Fatalf("reading /controller_epoch: %v", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 32)
	if err != nil {
		c.t.Fatalf("/controller_epoch holds %q: %v", data, err)
	}
	return int32(n)
}

// brokerRegistered reports whether /brokers/ids/<id> exists.
func (c *testCluster) brokerRegistered(id int32) bool {
	ok, err := c.zkExists("/brokers/ids/" + strconv.Itoa(int(id)))
	return err == nil && ok
}

// zkPartState is /brokers/topics/<t>/partitions/<p>/state, with the
// znode's version (the partition epoch).
type zkPartState struct {
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	ISR         []int32 `json:"isr"`
	Version     int32   `json:"-"`
}

func (s zkPartState) String() string {
	return fmt.Sprintf("leader=%d epoch=%d isr=%v v%d", s.Leader, s.LeaderEpoch, s.ISR, s.Version)
}

func (c *testCluster) partState(topic string, p int32) (zkPartState, error) {
	data, st, err := c.zkGet(fmt.Sprintf("/brokers/topics/%s/partitions/%d/state", topic, p))
	if err != nil {
		return zkPartState{}, fmt.Errorf("state of %s-%d: %w", topic, p, err)
	}
	var s zkPartState
	if err := json.Unmarshal(data, &s); err != nil {
		return zkPartState{}, fmt.Errorf("state of %s-%d %q: %w", topic, p, data, err)
	}
	s.Version = st.Version
	return s, nil
}

func (c *testCluster) mustPartState(topic string, p int32) zkPartState {
	c.t.Helper()
	s, err := c.partState(topic, p)
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

// waitPartState polls the partition's znode until check passes.
func (c *testCluster) waitPartState(within time.Duration, topic string, p int32, check func(zkPartState) error) zkPartState {
	c.t.Helper()
	var got zkPartState
	checkFor(c.t, within, 20*time.Millisecond, func() error {
		s, err := c.partState(topic, p)
		if err != nil {
			return err
		}
		if err := check(s); err != nil {
			return fmt.Errorf("%s-%d: %w (state %s)", topic, p, err, s)
		}
		got = s
		return nil
	})
	return got
}

// fullISR is a waitPartState check: a leader and all n replicas in sync.
func fullISR(n int) func(zkPartState) error {
	return func(s zkPartState) error {
		if s.Leader < 0 || len(s.ISR) != n {
			return fmt.Errorf("want a leader and %d replicas in sync", n)
		}
		return nil
	}
}

// replicasOf returns the assignment of topic's partition p (replica order).
func (c *testCluster) replicasOf(topic string, p int32) []int32 {
	c.t.Helper()
	data, _, err := c.zkGet("/brokers/topics/" + topic)
	if err != nil {
		c.t.Fatalf("reading assignment of %s: %v", topic, err)
	}
	var a struct {
		Partitions map[string][]int32 `json:"partitions"`
	}
	if err := json.Unmarshal(data, &a); err != nil {
		c.t.Fatalf("assignment of %s %q: %v", topic, data, err)
	}
	return a.Partitions[strconv.Itoa(int(p))]
}

// ---- topics ----

// createTopic creates topic with replication factor 3 and waits until every
// partition has a full ISR in ZooKeeper and every running broker's Metadata
// names the same leaders. It returns the partitions' states.
func (c *testCluster) createTopic(topic string, partitions int32, configs map[string]*string) map[int32]zkPartState {
	c.t.Helper()
	ctx := testContext(c.t, 30*time.Second)
	resp, err := c.admin().CreateTopic(ctx, partitions, 3, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		c.t.Fatalf("creating topic %s: %v", topic, err)
	}
	return c.waitSettled(30*time.Second, topic, partitions, 3)
}

// createTopicVia creates a topic with replication factor 1 through broker
// via (franz-go sends it to the controller) and returns when the response
// came.
func (c *testCluster) createTopicVia(t testing.TB, via int32, topic string, partitions int32, configs map[string]*string) time.Time {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	resp, err := c.broker(via).Admin(t).CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s through broker %d: %v", topic, via, err)
	}
	return time.Now()
}

// waitSettled waits until every partition of topic has a leader and an ISR
// of isr members in ZooKeeper, and every running broker's Metadata agrees
// on the leaders and epochs.
func (c *testCluster) waitSettled(within time.Duration, topic string, partitions int32, isr int) map[int32]zkPartState {
	c.t.Helper()
	states := map[int32]zkPartState{}
	checkFor(c.t, within, 25*time.Millisecond, func() error {
		for p := int32(0); p < partitions; p++ {
			s, err := c.partState(topic, p)
			if err != nil {
				return err
			}
			if err := fullISR(isr)(s); err != nil {
				return fmt.Errorf("%s-%d: %w (state %s)", topic, p, err, s)
			}
			states[p] = s
		}
		for _, id := range c.running() {
			if err := c.leadersAgree(id, topic, states); err != nil {
				return err
			}
		}
		return nil
	})
	return states
}

// leadersAgree checks that broker id's Metadata gives topic's partitions
// the leaders and leader epochs of states (read from ZooKeeper).
func (c *testCluster) leadersAgree(id int32, topic string, states map[int32]zkPartState) error {
	md, err := c.mdLeaders(id, topic)
	if err != nil {
		return err
	}
	for p, s := range states {
		if m := md[p]; m.Leader != s.Leader || m.LeaderEpoch != s.LeaderEpoch {
			return fmt.Errorf("broker %d: %s-%d leader %d epoch %d, ZooKeeper says %s", id, topic, p, m.Leader, m.LeaderEpoch, s)
		}
	}
	return nil
}

// otherThan lists ids in 1..n except the given ones.
func otherThan(n int, except ...int32) []int32 {
	var out []int32
	for id := int32(1); id <= int32(n); id++ {
		if !slices.Contains(except, id) {
			out = append(out, id)
		}
	}
	return out
}

// partitionLedBy returns a partition of states led by id, -1 if none.
func partitionLedBy(states map[int32]zkPartState, id int32) int32 {
	ps := make([]int32, 0, len(states))
	for p := range states {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	for _, p := range ps {
		if states[p].Leader == id {
			return p
		}
	}
	return -1
}

// partitionLedByOtherThan returns a partition of states whose leader is not
// id, -1 if none.
func partitionLedByOtherThan(states map[int32]zkPartState, id int32) int32 {
	for p := int32(0); p < int32(len(states)); p++ {
		if s, ok := states[p]; ok && s.Leader != id {
			return p
		}
	}
	return -1
}

// pauseFor stops a broker's process with SIGSTOP and resumes it with
// SIGCONT after d: the pause itself is what the test is about, so it is a
// timer, not a synchronisation.
func pauseFor(b *Broker, d time.Duration) {
	b.Signal(syscall.SIGSTOP)
	time.Sleep(d) // the pause under test
	b.Signal(syscall.SIGCONT)
}
