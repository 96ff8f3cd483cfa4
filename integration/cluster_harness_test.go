package integration

import (
	"errors"
	"fmt"
	"github.com/kbroker/kbroker/internal/zktest"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster harness: a ZooKeeper with a short tick (so sessions can be short)
// and N kbroker processes registered in it, plus the probes the cluster
// tests share: a Metadata request sent to one chosen broker, the cluster
// view it describes, and znode reads with go-zookeeper.

const (
	// clusterSession is the brokers' zookeeper.session.timeout.ms.
	clusterSession = 2 * time.Second
	// clusterSessionSlack is how late after clusterSession a session may
	// be declared expired: ZooKeeper checks expiries once per tick, and a
	// loaded 2-core machine adds scheduling delay.
	clusterSessionSlack = 2 * time.Second
	// clusterSettle bounds how long a cluster may take to reach a state
	// that needs no session expiry (a broker joining, a topic spreading).
	clusterSettle = 20 * time.Second
)

// testCluster is a ZooKeeper and brokers 1..n registered in it.
type testCluster struct {
	zk      *zktest.Server
	chroot  string
	brokers []*Broker // brokers[i] has broker.id i+1

	probeSet
}

// startCluster starts a ZooKeeper and n brokers (ids 1..n, session timeout
// clusterSession, plus overrides), and waits until every broker lists all
// of them and the same controller.
func startCluster(t *testing.T, n int, chroot string, overrides ...string) *testCluster {
	t.Helper()
	start := time.Now()
	c := &testCluster{zk: zktest.Start(t), chroot: chroot}
	t.Cleanup(c.closeProbes)
	for id := 1; id <= n; id++ {
		c.brokers = append(c.brokers, StartBroker(t, c.brokerOverrides(id, overrides...)...))
	}
	c.waitAgreed(t, clusterSettle, func(v clusterView) error {
		if len(v.brokers) != n {
			return fmt.Errorf("%d brokers listed, want %d", len(v.brokers), n)
		}
		return nil
	})
	t.Logf("cluster of %d brokers (zookeeper %s%s) ready in %v", n, c.zk.Addr(), chroot, time.Since(start).Round(time.Millisecond))
	return c
}

// connect is the brokers' zookeeper.connect.
func (c *testCluster) connect() string { return c.zk.Addr() + c.chroot }

func (c *testCluster) brokerOverrides(id int, extra ...string) []string {
	return append([]string{
		"broker.id=" + strconv.Itoa(id),
		"zookeeper.connect=" + c.connect(),
		"zookeeper.session.timeout.ms=" + strconv.Itoa(int(clusterSession/time.Millisecond)),
	}, extra...)
}

// broker returns the broker with the given id.
func (c *testCluster) broker(id int32) *Broker { return c.brokers[id-1] }

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

// metadataFrom sends an all-topics Metadata request to broker id itself.
func (c *testCluster) metadataFrom(id int32, timeout time.Duration) (*kmsg.MetadataResponse, error) {
	resp, err := c.requestTo(c.broker(id).Addr(), timeout, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return nil, fmt.Errorf("metadata from broker %d: %w", id, err)
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// clusterView is what one broker's Metadata says about the cluster.
type clusterView struct {
	from       int32
	brokers    []string // "id@host:port", sorted
	controller int32
	leaders    map[string][]int32 // topic -> leader per partition
}

func viewOf(from int32, m *kmsg.MetadataResponse) clusterView {
	v := clusterView{from: from, controller: m.ControllerID, leaders: map[string][]int32{}}
	for _, b := range m.Brokers {
		v.brokers = append(v.brokers, fmt.Sprintf("%d@%s:%d", b.NodeID, b.Host, b.Port))
	}
	sort.Strings(v.brokers)
	for _, t := range m.Topics {
		if t.Topic == nil {
			continue
		}
		ls := make([]int32, len(t.Partitions))
		for _, p := range t.Partitions {
			if int(p.Partition) < len(ls) {
				ls[p.Partition] = p.Leader
			}
		}
		v.leaders[*t.Topic] = ls
	}
	return v
}

// key is the view's canonical text: equal keys, equal views.
func (v clusterView) key() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "brokers=%v controller=%d", v.brokers, v.controller)
	names := make([]string, 0, len(v.leaders))
	for n := range v.leaders {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&sb, " %s=%v", n, v.leaders[n])
	}
	return sb.String()
}

func (v clusterView) hasBroker(id int32) bool {
	prefix := strconv.Itoa(int(id)) + "@"
	return slices.ContainsFunc(v.brokers, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// leadCounts counts a topic's partitions per leader.
func (v clusterView) leadCounts(topic string) map[int32]int {
	out := map[int32]int{}
	for _, l := range v.leaders[topic] {
		out[l]++
	}
	return out
}

// views asks every running broker for its view.
func (c *testCluster) views(timeout time.Duration) ([]clusterView, error) {
	var out []clusterView
	for _, id := range c.running() {
		m, err := c.metadataFrom(id, timeout)
		if err != nil {
			return nil, err
		}
		out = append(out, viewOf(id, m))
	}
	return out, nil
}

// agreed returns the running brokers' common view, or an error naming a
// disagreement.
func (c *testCluster) agreed(timeout time.Duration) (clusterView, error) {
	vs, err := c.views(timeout)
	if err != nil {
		return clusterView{}, err
	}
	if len(vs) == 0 {
		return clusterView{}, errors.New("no broker running")
	}
	for _, v := range vs[1:] {
		if v.key() != vs[0].key() {
			return clusterView{}, fmt.Errorf("broker %d sees %s\nbroker %d sees %s", vs[0].from, vs[0].key(), v.from, v.key())
		}
	}
	return vs[0], nil
}

// waitAgreed polls until the running brokers agree on a view with a live
// controller, every running broker listed, and that passes check.
func (c *testCluster) waitAgreed(t testing.TB, within time.Duration, check func(clusterView) error) clusterView {
	t.Helper()
	var got clusterView
	checkFor(t, within, 25*time.Millisecond, func() error {
		v, err := c.agreed(time.Second)
		if err != nil {
			return err
		}
		if err := c.sane(v); err != nil {
			return err
		}
		if check != nil {
			if err := check(v); err != nil {
				return fmt.Errorf("%w (view: %s)", err, v.key())
			}
		}
		got = v
		return nil
	})
	return got
}

// sane checks that v has a controller that is listed and lists every
// running broker.
func (c *testCluster) sane(v clusterView) error {
	if v.controller < 0 || !v.hasBroker(v.controller) {
		return fmt.Errorf("controller %d is not a listed broker (view: %s)", v.controller, v.key())
	}
	for _, id := range c.running() {
		if !v.hasBroker(id) {
			return fmt.Errorf("running broker %d is not listed (view: %s)", id, v.key())
		}
	}
	return nil
}

// zk returns a go-zookeeper connection to the cluster's ZooKeeper.
func (c *testCluster) zkConn(t testing.TB) *zk.Conn {
	t.Helper()
	return c.zkConnTo(t, c.zk.Addr())
}

// zkPath is p (a path as Kafka names it) under the cluster's chroot.
func (c *testCluster) zkPath(p string) string { return c.chroot + p }

// zkGet reads a znode; go-zookeeper retries while it reconnects.
func (c *testCluster) zkGet(t testing.TB, p string) ([]byte, *zk.Stat, error) {
	return c.zkConn(t).Get(c.zkPath(p))
}

func (c *testCluster) zkExists(t testing.TB, p string) (bool, error) {
	ok, _, err := c.zkConn(t).Exists(c.zkPath(p))
	return ok, err
}

// controllerEpoch reads /controller_epoch.
func (c *testCluster) controllerEpoch(t testing.TB) int32 {
	t.Helper()
	data, _, err := c.zkGet(t, "/controller_epoch")
	if err != nil {
		t.Fatalf("reading /controller_epoch: %v", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 32)
	if err != nil {
		t.Fatalf("/controller_epoch holds %q: %v", data, err)
	}
	return int32(n)
}

// createTopic creates a topic with replication factor 1 through broker id
// (franz-go sends it to the controller) and returns when the response came.
func (c *testCluster) createTopic(t testing.TB, via int32, topic string, partitions int32, configs map[string]*string) time.Time {
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

// allLed is a waitAgreed check: topic has partitions partitions, all led.
func allLed(topic string, partitions int) func(clusterView) error {
	return func(v clusterView) error {
		ls, ok := v.leaders[topic]
		if !ok {
			return fmt.Errorf("topic %s not listed", topic)
		}
		if len(ls) != partitions {
			return fmt.Errorf("topic %s has %d partitions, want %d", topic, len(ls), partitions)
		}
		for p, l := range ls {
			if l < 0 {
				return fmt.Errorf("%s-%d has no leader", topic, p)
			}
		}
		return nil
	}
}

// logContains reports whether a broker's output holds s.
func logContains(b *Broker, s string) bool {
	data, err := os.ReadFile(b.LogPath())
	return err == nil && strings.Contains(string(data), s)
}

// adminAt is a kadm client seeded with the given brokers.
func adminAt(t *testing.T, addrs ...string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// produceToPartitions produces n records to each of partitions of topic through the
// brokers at addrs (manual partitioning) and returns them with the
// acknowledged offsets.
func produceToPartitions(t *testing.T, topic string, partitions []int32, n int, prefix string, addrs ...string) []rec {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	defer cl.Close()
	ctx := testContext(t, 60*time.Second)
	rs := makeRecords(prefix, n*len(partitions))
	for i := range rs {
		rs[i].Partition = partitions[i%len(partitions)]
	}
	var mu sync.Mutex
	var firstErr error
	for i := range rs {
		kr := toKgo(rs[i], topic)
		kr.Partition = rs[i].Partition
		cl.Produce(ctx, kr, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("record %d to partition %d: %w", i, r.Partition, err)
				}
				return
			}
			rs[i].Offset = r.Offset
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flushing produces to %s: %v", topic, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		t.Fatalf("producing to %s: %v", topic, firstErr)
	}
	return rs
}

// consumeAndCompare reads every partition of topic from 0 to its end offset
// through addr and compares with produced (which must be all the topic
// holds).
func consumeAndCompare(t *testing.T, addr, topic string, produced []rec) {
	t.Helper()
	adm := adminAt(t, addr)
	ends := endOffsets(t, adm, topic)
	counts := map[int32]int64{}
	for _, r := range produced {
		counts[r.Partition]++
	}
	for p, n := range counts {
		if ends[p] != n {
			t.Errorf("%s partition %d: end offset %d, want %d (records acknowledged there)", topic, p, ends[p], n)
		}
	}
	consumed := consumeKgo(t, addr, topic, nil, ends, 60*time.Second)
	compareRecords(t, produced, consumed, compareOpts{checkProducedOffsets: true})
}
