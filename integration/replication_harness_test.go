package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kbroker/kbroker/internal/zktest"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Replication harness: a ZooKeeper with a short tick, N kbroker processes
// with /metrics endpoints, and the probes the replication tests share:
// partition state znodes, per-broker Metadata, Prometheus scrapes,
// continuous producers that record every acknowledged value, and a reader
// that checks what a topic holds against what was acknowledged.
//
// Names start with repl so they never clash with the other cluster
// helpers of this package.

// replOpts configures a replication test cluster.
type replOpts struct {
	brokers int
	// session is zookeeper.session.timeout.ms, lag replica.lag.time.max.ms.
	session, lag time.Duration
	// extra overrides, applied after the defaults (later ones win).
	extra []string
}

// replCluster is a ZooKeeper and brokers 1..n with metrics endpoints.
type replCluster struct {
	t       *testing.T
	opts    replOpts
	zk      *zktest.Server
	brokers []*Broker // brokers[i] has broker.id i+1
	metrics []string  // metrics[i] is broker i+1's kbroker.metrics.address

	probeSet

	mu       sync.Mutex // guards rawCount
	rawCount int
}

func startReplCluster(t *testing.T, o replOpts) *replCluster {
	t.Helper()
	start := time.Now()
	c := &replCluster{t: t, opts: o, zk: zktest.Start(t)}
	t.Cleanup(c.closeProbes)
	for id := 1; id <= o.brokers; id++ {
		c.metrics = append(c.metrics, "127.0.0.1:"+strconv.Itoa(freePort(t)))
		ov := []string{
			"broker.id=" + strconv.Itoa(id),
			"zookeeper.connect=" + c.zk.Addr(),
			"zookeeper.session.timeout.ms=" + strconv.Itoa(int(o.session/time.Millisecond)),
			"replica.lag.time.max.ms=" + strconv.Itoa(int(o.lag/time.Millisecond)),
			"min.insync.replicas=2",
			"default.replication.factor=3",
			"offsets.topic.replication.factor=3",
			"offsets.topic.num.partitions=3",
			"group.initial.rebalance.delay.ms=0",
			"unclean.leader.election.enable=false",
			"auto.leader.rebalance.enable=false",
			"kbroker.metrics.address=" + c.metrics[id-1],
		}
		c.brokers = append(c.brokers, StartBroker(t, append(ov, o.extra...)...))
	}
	checkFor(t, 30*time.Second, 25*time.Millisecond, func() error {
		ids, _, err := c.zkConn().Children("/brokers/ids")
		if err != nil {
			return err
		}
		if len(ids) != o.brokers {
			return fmt.Errorf("%d brokers registered, want %d", len(ids), o.brokers)
		}
		if c.controller() < 0 {
			return errors.New("no controller")
		}
		for id := int32(1); id <= int32(o.brokers); id++ {
			m, err := c.metadataFrom(id, time.Second)
			if err != nil {
				return err
			}
			if len(m.Brokers) != o.brokers {
				return fmt.Errorf("broker %d lists %d brokers", id, len(m.Brokers))
			}
		}
		return nil
	})
	t.Logf("replication cluster of %d brokers ready in %v (session %v, lag %v)", o.brokers, time.Since(start).Round(time.Millisecond), o.session, o.lag)
	return c
}

func (c *replCluster) broker(id int32) *Broker { return c.brokers[id-1] }

// addrs lists the addresses of the running brokers, or of all when none is
// excluded by being down.
func (c *replCluster) addrs() []string {
	var out []string
	for _, b := range c.brokers {
		if b.Running() {
			out = append(out, b.Addr())
		}
	}
	return out
}

// client is a kgo client seeded with every running broker, closed at test
// cleanup.
func (c *replCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.addrs()...), kgo.RetryTimeout(30 * time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		c.t.Fatalf("kgo.NewClient: %v", err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

func (c *replCluster) admin() *kadm.Client { return kadm.NewClient(c.client()) }

// request sends req to broker id itself.
func (c *replCluster) request(id int32, timeout time.Duration, req kmsg.Request) (kmsg.Response, error) {
	return c.requestTo(c.broker(id).Addr(), timeout, req)
}

// metadataFrom sends an all-topics Metadata request to broker id.
func (c *replCluster) metadataFrom(id int32, timeout time.Duration) (*kmsg.MetadataResponse, error) {
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
func (c *replCluster) mdLeaders(id int32, topic string) (map[int32]mdPartition, error) {
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

func (c *replCluster) zkConn() *zk.Conn { return c.zkConnTo(c.t, c.zk.Addr()) }

// controller is the broker id in /controller, -1 when there is none.
func (c *replCluster) controller() int32 {
	data, _, err := c.zkConn().Get("/controller")
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

func (c *replCluster) partState(topic string, p int32) (zkPartState, error) {
	data, st, err := c.zkConn().Get(fmt.Sprintf("/brokers/topics/%s/partitions/%d/state", topic, p))
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

func (c *replCluster) mustPartState(topic string, p int32) zkPartState {
	c.t.Helper()
	s, err := c.partState(topic, p)
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

// waitPartState polls the partition's znode until check passes.
func (c *replCluster) waitPartState(within time.Duration, topic string, p int32, check func(zkPartState) error) zkPartState {
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

// createTopic creates topic with replication factor 3 and waits until every
// partition has a full ISR in ZooKeeper and every running broker's Metadata
// names the same leaders. It returns the partitions' states.
func (c *replCluster) createTopic(topic string, partitions int32, configs map[string]*string) map[int32]zkPartState {
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

// waitSettled waits until every partition of topic has a leader and an ISR
// of isr members in ZooKeeper, and every running broker's Metadata agrees
// on the leaders and epochs.
func (c *replCluster) waitSettled(within time.Duration, topic string, partitions int32, isr int) map[int32]zkPartState {
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
		for i, b := range c.brokers {
			if !b.Running() {
				continue
			}
			id := int32(i + 1)
			md, err := c.mdLeaders(id, topic)
			if err != nil {
				return err
			}
			for p, s := range states {
				if m := md[p]; m.Leader != s.Leader || m.LeaderEpoch != s.LeaderEpoch {
					return fmt.Errorf("broker %d: %s-%d leader %d epoch %d, ZooKeeper says %s", id, topic, p, m.Leader, m.LeaderEpoch, s)
				}
			}
		}
		return nil
	})
	return states
}

// replicasOf returns the assignment of topic's partition p (replica order).
func (c *replCluster) replicasOf(topic string, p int32) []int32 {
	c.t.Helper()
	data, _, err := c.zkConn().Get("/brokers/topics/" + topic)
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

// metrics scrapes broker id's /metrics into "name{k=v,...}" -> value, with
// labels in name order.
func (c *replCluster) scrape(id int32) (map[string]float64, error) {
	hc := http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get("http://" + c.metrics[id-1] + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics of broker %d: %s", id, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[strings.ReplaceAll(line[:i], `"`, "")] = v
	}
	return out, sc.Err()
}

// metricKey names a series as scrape keys it: labels given as k, v pairs
// in label-name order (partition, replica, topic).
func metricKey(name string, kv ...string) string {
	if len(kv) == 0 {
		return name
	}
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, kv[i]+"="+kv[i+1])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// metric returns one series of broker id; missing series are an error.
func (c *replCluster) metric(id int32, name string, kv ...string) (float64, error) {
	m, err := c.scrape(id)
	if err != nil {
		return 0, err
	}
	key := metricKey(name, kv...)
	v, ok := m[key]
	if !ok {
		return 0, fmt.Errorf("broker %d exposes no %s", id, key)
	}
	return v, nil
}

func (c *replCluster) mustMetric(id int32, name string, kv ...string) float64 {
	c.t.Helper()
	v, err := c.metric(id, name, kv...)
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}

// partitionOffsets returns broker id's high watermark and log end offset
// of topic-p from its metrics.
func (c *replCluster) partitionOffsets(id int32, topic string, p int32) (hw, leo int64, err error) {
	m, err := c.scrape(id)
	if err != nil {
		return 0, 0, err
	}
	ps := strconv.Itoa(int(p))
	h, ok1 := m[metricKey("kbroker_partition_high_watermark", "partition", ps, "topic", topic)]
	l, ok2 := m[metricKey("kbroker_partition_log_end_offset", "partition", ps, "topic", topic)]
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("broker %d exposes no offsets of %s-%d", id, topic, p)
	}
	return int64(h), int64(l), nil
}

// waitInSyncEverywhere waits until every running replica of topic-p (a
// broker it is assigned to) has its high watermark at its log end and the
// same log end as the others (the partition is quiet and fully
// replicated), and returns that offset.
func (c *replCluster) waitInSyncEverywhere(within time.Duration, topic string, p int32) int64 {
	c.t.Helper()
	var end int64
	replicas := c.replicasOf(topic, p)
	checkFor(c.t, within, 50*time.Millisecond, func() error {
		first := true
		for i, b := range c.brokers {
			if !b.Running() || !slices.Contains(replicas, int32(i+1)) {
				continue
			}
			hw, leo, err := c.partitionOffsets(int32(i+1), topic, p)
			if err != nil {
				return err
			}
			if hw != leo {
				return fmt.Errorf("broker %d: %s-%d high watermark %d, log end %d", i+1, topic, p, hw, leo)
			}
			if first {
				end, first = leo, false
			} else if leo != end {
				return fmt.Errorf("broker %d: %s-%d log end %d, another replica %d", i+1, topic, p, leo, end)
			}
		}
		return nil
	})
	return end
}

// pauseFor stops a broker's process with SIGSTOP and resumes it with
// SIGCONT after d: the pause itself is what the test is about, so it is a
// timer, not a synchronisation.
func pauseFor(b *Broker, d time.Duration) {
	b.Signal(syscall.SIGSTOP)
	time.Sleep(d) // the pause under test
	b.Signal(syscall.SIGCONT)
}

// ---- producing and checking ----

// ackPos is where an acknowledged record landed.
type ackPos struct {
	Partition int32
	Offset    int64
}

// ackLog records acknowledged values of one producer.
type ackLog struct {
	mu     sync.Mutex
	acked  map[string]ackPos
	failed map[string]error
	sent   int
}

func newAckLog() *ackLog {
	return &ackLog{acked: map[string]ackPos{}, failed: map[string]error{}}
}

func (a *ackLog) snapshot() (map[string]ackPos, map[string]error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	acked := make(map[string]ackPos, len(a.acked))
	for k, v := range a.acked {
		acked[k] = v
	}
	failed := make(map[string]error, len(a.failed))
	for k, v := range a.failed {
		failed[k] = v
	}
	return acked, failed
}

func (a *ackLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.acked)
}

// kgoLoad produces unique values ("<prefix>-<n>") with cl until stop is
// called, keeping at most inflight records buffered, and records every
// acknowledgement. partition >= 0 sends every record there (cl must use
// the manual partitioner); otherwise keys spread them.
type kgoLoad struct {
	log     *ackLog
	stopCh  chan struct{}
	done    chan struct{}
	flushed error
}

func startKgoLoad(cl *kgo.Client, topic, prefix string, partition int32, every time.Duration) *kgoLoad {
	return startKgoLoadWith(cl, topic, prefix, partition, every, nil)
}

// startKgoLoadWith is startKgoLoad, also recording each record's latency
// in lat when it is not nil.
func startKgoLoadWith(cl *kgo.Client, topic, prefix string, partition int32, every time.Duration, lat *latencies) *kgoLoad {
	l := &kgoLoad{log: newAckLog(), stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-l.stopCh:
				fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
				l.flushed = cl.Flush(fctx)
				fcancel()
				return
			case <-tick.C:
			}
			v := fmt.Sprintf("%s-%07d", prefix, n)
			r := &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)}
			if partition >= 0 {
				r.Partition = partition
			}
			l.log.mu.Lock()
			l.log.sent++
			l.log.mu.Unlock()
			sent := time.Now()
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				if lat != nil {
					lat.add(time.Since(sent))
				}
				l.log.mu.Lock()
				defer l.log.mu.Unlock()
				if err != nil {
					l.log.failed[string(r.Value)] = err
					return
				}
				l.log.acked[string(r.Value)] = ackPos{r.Partition, r.Offset}
			})
		}
	}()
	return l
}

// stop ends the load and waits until every buffered record has its answer.
func (l *kgoLoad) stop(t testing.TB) {
	t.Helper()
	close(l.stopCh)
	select {
	case <-l.done:
	case <-time.After(90 * time.Second):
		t.Fatal("producer did not flush within 90s")
	}
	if l.flushed != nil {
		t.Errorf("flushing the producer: %v", l.flushed)
	}
}

// waitAcked waits until the load has n more acknowledgements than now.
func (l *kgoLoad) waitAcked(t testing.TB, n int, within time.Duration) {
	t.Helper()
	target := l.log.count() + n
	checkFor(t, within, 10*time.Millisecond, func() error {
		if got := l.log.count(); got < target {
			return fmt.Errorf("%d records acknowledged, waiting for %d", got, target)
		}
		return nil
	})
}

// readRec is one record read back.
type readRec struct {
	Partition int32
	Offset    int64
	Value     string
}

// readTopic reads every partition of topic from its log start to its
// current end (high watermark) through any running broker, retrying while
// leadership moves, and returns the records per partition in offset order.
func (c *replCluster) readTopic(topic string, within time.Duration) map[int32][]readRec {
	c.t.Helper()
	adm := c.admin()
	ctx := testContext(c.t, within)
	var starts, ends kadm.ListedOffsets
	checkFor(c.t, within, 100*time.Millisecond, func() error {
		var err error
		if starts, err = adm.ListStartOffsets(ctx, topic); err == nil {
			err = starts.Error()
		}
		if err != nil {
			return err
		}
		if ends, err = adm.ListEndOffsets(ctx, topic); err == nil {
			err = ends.Error()
		}
		return err
	})
	offsets := map[int32]kgo.Offset{}
	want := map[int32]int64{}
	total := 0
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		want[o.Partition] = o.Offset
		if o.Offset > s.Offset {
			offsets[o.Partition] = kgo.NewOffset().At(s.Offset)
			total += int(o.Offset - s.Offset)
		}
	})
	out := map[int32][]readRec{}
	if total == 0 {
		return out
	}
	cl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}), kgo.FetchMaxWait(200*time.Millisecond))
	got := 0
	for got < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			c.t.Fatalf("read %d of %d records of %s within %v", got, total, topic, within)
		}
		for _, fe := range fs.Errors() {
			c.t.Logf("fetching %s-%d: %v (retrying)", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= want[r.Partition] {
				return
			}
			out[r.Partition] = append(out[r.Partition], readRec{r.Partition, r.Offset, string(r.Value)})
			got++
		})
	}
	cl.Close()
	for p := range out {
		sort.Slice(out[p], func(i, j int) bool { return out[p][i].Offset < out[p][j].Offset })
	}
	return out
}

// checkReadBack asserts, for the records read back from a topic: offsets
// dense from each partition's first record, no value twice, and every
// acknowledged value present at the partition and offset it was
// acknowledged with (offset -1: anywhere in that partition). It returns
// the readable values.
func checkReadBack(t testing.TB, read map[int32][]readRec, acked map[string]ackPos) map[string]ackPos {
	t.Helper()
	where := map[string]ackPos{}
	dups := 0
	for p, rs := range read {
		for i, r := range rs {
			if i > 0 && r.Offset != rs[i-1].Offset+1 {
				t.Errorf("partition %d: offset %d follows %d (gap or repeat)", p, r.Offset, rs[i-1].Offset)
			}
			if prev, ok := where[r.Value]; ok {
				if dups++; dups <= 10 {
					t.Errorf("value %s appears twice: p%d@%d and p%d@%d", r.Value, prev.Partition, prev.Offset, p, r.Offset)
				}
				continue
			}
			where[r.Value] = ackPos{p, r.Offset}
		}
	}
	if dups > 10 {
		t.Errorf("%d duplicated values in all", dups)
	}
	lost := 0
	for v, a := range acked {
		got, ok := where[v]
		switch {
		case !ok:
			if lost++; lost <= 10 {
				t.Errorf("acknowledged value %s (p%d@%d) is lost", v, a.Partition, a.Offset)
			}
		case got.Partition != a.Partition || (a.Offset >= 0 && got.Offset != a.Offset):
			t.Errorf("acknowledged value %s at p%d@%d is at p%d@%d", v, a.Partition, a.Offset, got.Partition, got.Offset)
		}
	}
	if lost > 10 {
		t.Errorf("%d acknowledged values lost in all", lost)
	}
	return where
}

// rawProduce sends one Produce request with one small batch to partition p
// of topic to broker id and returns the partition's error code. acks is -1
// or 1.
func (c *replCluster) rawProduce(id int32, topic string, p int32, acks int16, timeout time.Duration) (int16, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 7
	req.Acks = acks
	req.TimeoutMillis = int32(timeout / time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	// Distinct value sizes keep every raw record's value unique.
	c.mu.Lock()
	c.rawCount++
	size := 16 + c.rawCount
	c.mu.Unlock()
	rp.Records = rawBatch(1, size)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// kgo rewrites a ProduceRequest's acks to its own configuration: one
	// client per acks value.
	ack := kgo.AllISRAcks()
	if acks == 1 {
		ack = kgo.LeaderAck()
	}
	addr := c.broker(id).Addr()
	cl, err := c.clientFor(fmt.Sprintf("%s/acks=%d", addr, acks), addr, kgo.RequiredAcks(ack), kgo.DisableIdempotentWrite())
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+5*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, err
	}
	for _, t := range resp.(*kmsg.ProduceResponse).Topics {
		for _, rp := range t.Partitions {
			return rp.ErrorCode, nil
		}
	}
	return 0, errors.New("produce response without a partition")
}

// errName names a Kafka error code.
func errName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return "NONE"
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

// brokerRegistered reports whether /brokers/ids/<id> exists.
func (c *replCluster) brokerRegistered(id int32) bool {
	ok, _, err := c.zkConn().Exists("/brokers/ids/" + strconv.Itoa(int(id)))
	return err == nil && ok
}
