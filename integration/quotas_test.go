package integration

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func strp(s string) *string { return &s }

// quotaEntity builds a kadm entity from type, name pairs; a "" name is the
// default entity (null on the wire).
func quotaEntity(pairs ...string) kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	for i := 0; i+1 < len(pairs); i += 2 {
		c := kadm.ClientQuotaEntityComponent{Type: pairs[i]}
		if pairs[i+1] != "" {
			c.Name = strp(pairs[i+1])
		}
		e = append(e, c)
	}
	return e
}

// describedSet prints described quotas sorted, one line each, as
// "{user=alice, client-id=<default>} producer_byte_rate=1048576".
func describedSet(qs kadm.DescribedClientQuotas) string {
	var lines []string
	for _, q := range qs {
		var vals []string
		for _, v := range q.Values {
			vals = append(vals, fmt.Sprintf("%s=%g", v.Key, v.Value))
		}
		sort.Strings(vals)
		lines = append(lines, q.Entity.String()+" "+strings.Join(vals, ","))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// Client quotas through the one control plane, with franz-go's kadm, on
// the embedded single node: every entity kind, Kafka's match semantics,
// Kafka's refusals, kept across a restart, removed.
func TestClientQuotasEmbedded(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin(t)
	ctx := testContext(t, 60*time.Second)
	set := func(e kadm.ClientQuotaEntity, key string, v float64) kadm.AlterClientQuotaEntry {
		return kadm.AlterClientQuotaEntry{Entity: e, Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: v}}}
	}
	entries := []kadm.AlterClientQuotaEntry{
		set(quotaEntity("user", "alice"), "producer_byte_rate", 1048576),
		set(quotaEntity("user", ""), "consumer_byte_rate", 2097152),
		set(quotaEntity("client-id", "app"), "request_percentage", 50),
		set(quotaEntity("client-id", ""), "producer_byte_rate", 4096),
		set(quotaEntity("user", "alice", "client-id", "app"), "controller_mutation_rate", 10),
		set(quotaEntity("user", "alice", "client-id", ""), "producer_byte_rate", 2048),
		set(quotaEntity("user", "", "client-id", ""), "consumer_byte_rate", 1024),
	}
	// Validation only: nothing is written.
	if res, err := adm.ValidateAlterClientQuotas(ctx, entries); err != nil || slices.ContainsFunc(res, func(r kadm.AlteredClientQuota) bool { return r.Err != nil }) {
		t.Fatalf("validate: %v %+v", err, res)
	}
	if qs, err := adm.DescribeClientQuotas(ctx, false, nil); err != nil || len(qs) != 0 {
		t.Fatalf("after validate_only: %v %+v", err, qs)
	}
	res, err := adm.AlterClientQuotas(ctx, entries)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("alter %s: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
	// Kafka's refusals, each on its own entry.
	bad, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		set(quotaEntity("user", "bob"), "producer_rate", 1),
		set(quotaEntity("user", "bob"), "producer_byte_rate", 0),
		set(quotaEntity("client-id", "x"), "request_percentage", -5),
		set(quotaEntity("client-id", "y"), "consumer_byte_rate", 1.5),
		set(quotaEntity("client-id", "ok"), "consumer_byte_rate", 100),
	})
	if err != nil {
		t.Fatal(err)
	}
	wantBad := map[string]string{
		"{user=bob}":     "", // two entries for one entity: both fail as duplicates
		"{client-id=x}":  "Quota request_percentage must be greater than 0",
		"{client-id=y}":  "consumer_byte_rate cannot be a fractional value.",
		"{client-id=ok}": "ok",
	}
	for _, r := range bad {
		want := wantBad[r.Entity.String()]
		switch {
		case want == "ok":
			if r.Err != nil {
				t.Errorf("%s: %v", r.Entity, r.Err)
			}
		case !errors.Is(r.Err, kerr.InvalidRequest) || (want != "" && r.ErrMessage != want):
			t.Errorf("%s: %v %q, want INVALID_REQUEST %q", r.Entity, r.Err, r.ErrMessage, want)
		}
	}
	one, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{set(quotaEntity("user", "bob"), "producer_rate", 1)})
	if err != nil || !errors.Is(one[0].Err, kerr.InvalidRequest) || one[0].ErrMessage != "Invalid configuration key producer_rate" {
		t.Fatalf("unknown key: %v %+v", err, one)
	}

	wantAll := strings.Join([]string{
		"{client-id=<default>} producer_byte_rate=4096",
		"{client-id=app} request_percentage=50",
		"{client-id=ok} consumer_byte_rate=100",
		"{user=<default>, client-id=<default>} consumer_byte_rate=1024",
		"{user=<default>} consumer_byte_rate=2.097152e+06",
		"{user=alice, client-id=<default>} producer_byte_rate=2048",
		"{user=alice, client-id=app} controller_mutation_rate=10",
		"{user=alice} producer_byte_rate=1.048576e+06",
	}, "\n")
	check := func(when string) {
		t.Helper()
		for _, tc := range []struct {
			strict bool
			comps  []kadm.DescribeClientQuotaComponent
			want   string
		}{
			{false, nil, wantAll},
			{true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: strp("alice")}}, "{user=alice} producer_byte_rate=1.048576e+06"},
			{true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 1}}, "{user=<default>} consumer_byte_rate=2.097152e+06"},
			{true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 2}, {Type: "client-id", MatchType: 1}},
				"{user=<default>, client-id=<default>} consumer_byte_rate=1024\n{user=alice, client-id=<default>} producer_byte_rate=2048"},
			{false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: strp("app")}},
				"{client-id=app} request_percentage=50\n{user=alice, client-id=app} controller_mutation_rate=10"},
		} {
			qs, err := adm.DescribeClientQuotas(ctx, tc.strict, tc.comps)
			if err != nil {
				t.Fatalf("%s: describe %+v: %v", when, tc.comps, err)
			}
			if got := describedSet(qs); got != tc.want {
				t.Fatalf("%s: describe strict=%v %+v:\n%s\nwant\n%s", when, tc.strict, tc.comps, got, tc.want)
			}
		}
	}
	check("after creation")
	if _, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "group", MatchType: 2}}); !errors.Is(err, kerr.UnsupportedVersion) {
		t.Fatalf("custom entity type: %v", err)
	}

	b.Restart()
	adm = b.Admin(t)
	check("after a restart")

	var removals []kadm.AlterClientQuotaEntry
	for _, e := range append(entries, set(quotaEntity("client-id", "ok"), "consumer_byte_rate", 0)) {
		removals = append(removals, kadm.AlterClientQuotaEntry{Entity: e.Entity, Ops: []kadm.AlterClientQuotaOp{{Key: e.Ops[0].Key, Remove: true}}})
	}
	if res, err := adm.AlterClientQuotas(ctx, removals); err != nil || slices.ContainsFunc(res, func(r kadm.AlteredClientQuota) bool { return r.Err != nil }) {
		t.Fatalf("remove: %v %+v", err, res)
	}
	if qs, err := adm.DescribeClientQuotas(ctx, false, nil); err != nil || len(qs) != 0 {
		t.Fatalf("after removing all: %v %+v", err, qs)
	}
}

// describeQuotasOn asks broker id itself for the quotas of one entity
// (strict, exact names; "" is the default).
func describeQuotasOn(c *testCluster, id int32, pairs ...string) (map[string]float64, error) {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Strict = true
	for i := 0; i+1 < len(pairs); i += 2 {
		rc := kmsg.NewDescribeClientQuotasRequestComponent()
		rc.EntityType = pairs[i]
		if pairs[i+1] == "" {
			rc.MatchType = 1
		} else {
			rc.Match = strp(pairs[i+1])
		}
		req.Components = append(req.Components, rc)
	}
	kresp, err := c.request(id, time.Second, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.DescribeClientQuotasResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, e := range resp.Entries {
		for _, v := range e.Values {
			out[v.Key] = v.Value
		}
	}
	return out, nil
}

// On a 3-broker cluster: quotas altered through a broker that is not the
// controller (forwarded) and through kadm are in Kafka's znodes with
// Kafka's notifications and described by every broker within a second;
// a kafka-configs.sh --zookeeper style write reaches every broker too;
// removal cleans the znodes away.
func TestClientQuotasCluster(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, chroot: "/kafka"})
	ctrl := c.controller()
	via := int32(1)
	if ctrl == via {
		via = 2
	}
	everyBrokerWithin := func(what string, d time.Duration, pairs []string, want map[string]float64) time.Duration {
		t.Helper()
		start := time.Now()
		for _, id := range c.running() {
			checkFor(t, d, 5*time.Millisecond, func() error {
				got, err := describeQuotasOn(c, id, pairs...)
				if err != nil {
					return err
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					return fmt.Errorf("%s: broker %d describes %v, want %v", what, id, got, want)
				}
				return nil
			})
		}
		return time.Since(start)
	}

	// Through a non-controller: forwarded, answered once its view has it.
	req := kmsg.NewPtrAlterClientQuotasRequest()
	entry := kmsg.NewAlterClientQuotasRequestEntry()
	for _, p := range [][2]*string{{strp("user"), strp("svc@example.com")}, {strp("client-id"), nil}} {
		e := kmsg.NewAlterClientQuotasRequestEntryEntity()
		e.Type, e.Name = *p[0], p[1]
		entry.Entity = append(entry.Entity, e)
	}
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = "producer_byte_rate", 1048576
	entry.Ops = append(entry.Ops, op)
	req.Entries = append(req.Entries, entry)
	kresp, err := c.request(via, 20*time.Second, req)
	if err != nil {
		t.Fatalf("alter through broker %d (controller %d): %v", via, ctrl, err)
	}
	if res := kresp.(*kmsg.AlterClientQuotasResponse).Entries; len(res) != 1 || res[0].ErrorCode != 0 {
		t.Fatalf("alter through broker %d: %+v", via, res)
	}
	if got, err := describeQuotasOn(c, via, "user", "svc@example.com", "client-id", ""); err != nil || got["producer_byte_rate"] != 1048576 {
		t.Fatalf("broker %d right after its answer: %v %v", via, got, err)
	}
	took := everyBrokerWithin("forwarded", time.Second, []string{"user", "svc@example.com", "client-id", ""}, map[string]float64{"producer_byte_rate": 1048576})
	t.Logf("every broker described the forwarded quota %v after the answer", took.Round(time.Millisecond))
	data, _, err := c.zkGet("/config/users/svc%40example.com/clients/<default>")
	if err != nil || string(data) != `{"version":1,"config":{"producer_byte_rate":"1048576"}}` {
		t.Fatalf("znode %s: %v", data, err)
	}
	if !changeNotified(t, c, "users/svc%40example.com/clients/<default>") {
		t.Fatal("no config change notification names users/svc%40example.com/clients/<default>")
	}

	// Through kadm (to the controller): the default client id.
	adm := c.admin()
	ctx := testContext(t, 30*time.Second)
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: quotaEntity("client-id", ""),
		Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 2097152}, {Key: "request_percentage", Value: 25.5}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("kadm alter: %v %+v", err, res)
	}
	took = everyBrokerWithin("kadm", time.Second, []string{"client-id", ""}, map[string]float64{"consumer_byte_rate": 2097152, "request_percentage": 25.5})
	t.Logf("every broker described the kadm quota %v after the answer", took.Round(time.Millisecond))
	if data, _, err := c.zkGet("/config/clients/<default>"); err != nil || string(data) != `{"version":1,"config":{"consumer_byte_rate":"2097152","request_percentage":"25.5"}}` {
		t.Fatalf("znode %s: %v", data, err)
	}
	if !changeNotified(t, c, "clients/<default>") {
		t.Fatal("no config change notification names clients/<default>")
	}

	// As kafka-configs.sh --zookeeper: the znode, then a notification.
	conn := c.zkConn()
	if _, err := conn.Create(c.zkPath("/config/clients/tool-client"), []byte(`{"version":1,"config":{"producer_byte_rate":"777"}}`), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create(c.zkPath("/config/changes/config_change_"), []byte(`{"version":2,"entity_path":"clients/tool-client"}`), zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	took = everyBrokerWithin("zookeeper write", 5*time.Second, []string{"client-id", "tool-client"}, map[string]float64{"producer_byte_rate": 777})
	t.Logf("every broker described the ZooKeeper-written quota %v after the write", took.Round(time.Millisecond))

	// Removal through kadm: gone everywhere, znodes cleaned as Kafka 3.9.
	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: quotaEntity("user", "svc@example.com", "client-id", ""),
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("kadm remove: %v %+v", err, res)
	}
	everyBrokerWithin("removal", time.Second, []string{"user", "svc@example.com", "client-id", ""}, map[string]float64{})
	if ok, err := c.zkExists("/config/users/svc%40example.com"); err != nil || ok {
		t.Fatalf("user znode left after its only quota went: %v %v", ok, err)
	}
}

// throttleCounter counts the throttles a client is told of (KIP-219).
type throttleCounter struct {
	n     atomic.Int64
	total atomic.Int64 // ms
}

func (c *throttleCounter) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	c.n.Add(1)
	c.total.Add(d.Milliseconds())
}

// ackTimeline counts a producer's acknowledged bytes per 100 ms since its
// start.
type ackTimeline struct {
	mu      sync.Mutex
	start   time.Time
	buckets []int64
}

const bucket = 100 * time.Millisecond

func (p *ackTimeline) ack(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := int(time.Since(p.start) / bucket)
	for len(p.buckets) <= i {
		p.buckets = append(p.buckets, 0)
	}
	p.buckets[i] += int64(n)
}

// bytes is the sum of the buckets [from, to).
func (p *ackTimeline) bytes(from, to int) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var sum int64
	for i := max(from, 0); i < to && i < len(p.buckets); i++ {
		sum += p.buckets[i]
	}
	return sum
}

// secondRates are the bytes/s of each whole second from the from-th to the
// to-th.
func (p *ackTimeline) secondRates(from, to int) []float64 {
	var out []float64
	for s := from; s < to; s++ {
		out = append(out, float64(p.bytes(s*10, s*10+10)))
	}
	return out
}

// bursts lists the buckets where a burst begins: the first of a run of
// buckets with at least 256 KiB (more than a throttled producer's lone
// request) that holds one with at least minBytes, once a second of
// quieter buckets has passed since the last burst.
func (p *ackTimeline) bursts(minBytes int64) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	const some = 256 << 10
	var out []int
	inBurst, quiet := false, 0
	for i, n := range p.buckets {
		if n < some {
			if quiet++; quiet >= 10 {
				inBurst = false
			}
			continue
		}
		quiet = 0
		if n >= minBytes && !inBurst {
			start := i
			for start > 0 && p.buckets[start-1] >= some {
				start--
			}
			out = append(out, start)
			inBurst = true
		}
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// produceFlatOut produces records of valueSize random bytes (the quota
// counts bytes on the wire, so nothing compresses) as fast as the client
// takes them, until ctx ends.
func produceFlatOut(ctx context.Context, cl *kgo.Client, topic string, valueSize int) *ackTimeline {
	run := &ackTimeline{start: time.Now()}
	value := make([]byte, valueSize)
	rand.Read(value)
	go func() {
		for ctx.Err() == nil {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(r *kgo.Record, err error) {
				if err == nil {
					run.ack(len(r.Value))
				}
			})
		}
	}()
	return run
}

// The measurement, on one broker with Kafka's quota windows (11
// of 1 s): a producer without a quota runs alone, then a producer whose
// client id has producer_byte_rate=1048576 joins it, both flat out. The
// quoted one is told throttle_time_ms and kept to 1 MiB/s; the other
// keeps at least 0.8x of its throughput alone (measured first; measured
// alone again at the end as a control for the shared machine's load, which
// an idle neighbour's test can halve).
//
// Kafka's rate is kept over about 11 s and lets a client spend a window's
// budget at once: a producer pushing harder than its quota sends a burst
// of about 10 MiB, is throttled until that burst leaves the window (about
// 11 s), bursts again, and so on. Its rate is therefore measured over
// whole periods, from its second burst to its third, which leaves out the
// first period (and its initial burst).
func TestProduceQuotaThrottles(t *testing.T) {
	b := StartBroker(t, "log.retention.check.interval.ms=1000")
	adm := b.Admin(t)
	ctx := testContext(t, 60*time.Second)
	// The free producer writes hundreds of MB/s: keep only the last few
	// segments.
	free := map[string]*string{"retention.bytes": strp("134217728"), "segment.bytes": strp("33554432")}
	if _, err := adm.CreateTopic(ctx, 1, 1, free, "free"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "quoted"); err != nil {
		t.Fatal(err)
	}
	const quota = 1048576
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: quotaEntity("client-id", "quoted"),
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: quota}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	noCompression := kgo.ProducerBatchCompression(kgo.NoCompression())

	// Alone.
	var freeThrottles throttleCounter
	// One request in flight of at most 256 KiB: its throughput is set by
	// round trips through the broker, not by the disk, so alone and
	// together compare the broker's service and not the page cache.
	freeCl := b.Client(t, kgo.ClientID("free"), noCompression, kgo.WithHooks(&freeThrottles),
		kgo.MaxProduceRequestsInflightPerBroker(1), kgo.ProducerBatchMaxBytes(256<<10))
	actx, acancel := context.WithTimeout(ctx, 7*time.Second)
	defer acancel()
	alone := produceFlatOut(actx, freeCl, "free", 4096)
	<-actx.Done()
	aloneRate := median(alone.secondRates(1, 7))

	// Together. 128 KiB batches keep the quoted producer's throttles
	// fine-grained.
	var quotedThrottles throttleCounter
	quotedCl := b.Client(t, kgo.ClientID("quoted"), noCompression, kgo.WithHooks(&quotedThrottles), kgo.ProducerBatchMaxBytes(128<<10))
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	quoted := produceFlatOut(pctx, quotedCl, "quoted", 4096)
	other := produceFlatOut(pctx, freeCl, "free", 4096)
	const burstBytes = 1 << 20 // a burst is ~10 MiB within 100-300 ms; a throttled request 128 KiB
	deadline := time.Now().Add(30 * time.Second)
	for len(quoted.bursts(burstBytes)) < 3 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(bucket) // the third burst's bucket complete
	pcancel()
	elapsed := time.Since(quoted.start)
	throttles, throttled := quotedThrottles.n.Load(), quotedThrottles.total.Load()
	quotedCl.Close() // nothing buffered goes on producing
	// The free producer alone once more: a control for the machine's
	// load changing during the run (other processes share its cores).
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	after := produceFlatOut(rctx, freeCl, "free", 4096)
	<-rctx.Done()
	afterRate := median(after.secondRates(1, 5))
	bursts := quoted.bursts(burstBytes)
	if len(bursts) < 3 {
		t.Fatalf("the quoted producer burst %d times in %v (at buckets %v), want 3 (every ~11 s)", len(bursts), elapsed, bursts)
	}
	from, to := bursts[1], bursts[2]
	quotedRate := float64(quoted.bytes(from, to)) / (time.Duration(to-from) * bucket).Seconds()
	firstPeriod := float64(quoted.bytes(bursts[0], bursts[1])) / (time.Duration(bursts[1]-bursts[0]) * bucket).Seconds()
	togetherRate := median(other.secondRates(1, int(elapsed/time.Second)))
	t.Logf("free producer alone: %.1f MB/s (median of seconds 1-7); with the quoted one: %.1f MB/s (%.2fx); alone again after: %.1f MB/s; throttled %d times",
		aloneRate/1e6, togetherRate/1e6, togetherRate/aloneRate, afterRate/1e6, freeThrottles.n.Load())
	t.Logf("quoted producer: %.3f MiB/s from its second burst to its third (%.1f s to %.1f s), %.3f MiB/s over its first period; bursts at %v s; %d throttles totalling %d ms",
		quotedRate/quota, float64(from)/10, float64(to)/10, firstPeriod/quota, bucketsToSeconds(bursts), throttles, throttled)
	var perSecond []string
	for _, r := range quoted.secondRates(0, int(elapsed/time.Second)+1) {
		perSecond = append(perSecond, fmt.Sprintf("%.2f", r/quota))
	}
	t.Logf("quoted producer per second (MiB/s): %s", strings.Join(perSecond, " "))
	mbs := func(rates []float64) string {
		var out []string
		for _, r := range rates {
			out = append(out, fmt.Sprintf("%.0f", r/1e6))
		}
		return strings.Join(out, " ")
	}
	t.Logf("free producer per second (MB/s): alone %s; together %s; alone after %s",
		mbs(alone.secondRates(0, 7)), mbs(other.secondRates(0, int(elapsed/time.Second))), mbs(after.secondRates(0, 5)))
	if quotedRate < 0.85*quota || quotedRate > 1.15*quota {
		t.Errorf("quoted producer at %.0f B/s, want %d ±15%%", quotedRate, quota)
	}
	if throttles == 0 {
		t.Error("the quoted producer was never told of a throttle")
	}
	if freeThrottles.n.Load() != 0 {
		t.Error("the producer without a quota was throttled")
	}
	switch {
	case togetherRate >= 0.8*aloneRate:
	case togetherRate >= 0.8*afterRate:
		// Slower together than alone before, but as slow alone after:
		// the machine, not the quoted producer, slowed it down.
		t.Logf("the free producer slowed down during the run and stayed slow once alone again (%.0f MB/s): the machine's load changed; compared with that, %.2fx",
			afterRate/1e6, togetherRate/afterRate)
	default:
		t.Errorf("producer without a quota: %.0f B/s next to the quoted one, %.0f alone before and %.0f after: below 0.8x", togetherRate, aloneRate, afterRate)
	}
}

func bucketsToSeconds(bs []int) []float64 {
	out := make([]float64, len(bs))
	for i, b := range bs {
		out[i] = float64(b) / 10
	}
	return out
}

// A consumer with consumer_byte_rate=1048576 reading a backlog gets what
// Kafka's rate allows (measured over at least 10 windows: about 10 MiB in
// the first 10 s, most of it at once), told of its throttles; a consumer
// without a quota reads the same backlog at once.
func TestFetchQuotaThrottles(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin(t)
	ctx := testContext(t, 60*time.Second)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "backlog"); err != nil {
		t.Fatal(err)
	}
	const quota = 1048576
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: quotaEntity("client-id", "slow-reader"),
		Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: quota}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	const backlog = 24 << 20
	value := make([]byte, 4096)
	rand.Read(value)
	producer := b.Client(t, kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := 0; i < backlog/len(value); i++ {
		producer.Produce(ctx, &kgo.Record{Topic: "backlog", Value: value}, nil)
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	read := func(clientID string, d time.Duration, hooks ...kgo.Hook) int64 {
		t.Helper()
		cl := b.Client(t, kgo.ClientID(clientID), kgo.ConsumeTopics("backlog"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(hooks...))
		rctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		var n int64
		for rctx.Err() == nil && n < backlog {
			fs := cl.PollFetches(rctx)
			fs.EachRecord(func(r *kgo.Record) { n += int64(len(r.Value)) })
		}
		return n
	}
	var th throttleCounter
	const window = 6 * time.Second
	slow := read("slow-reader", window, &th)
	start := time.Now()
	fast := read("fast-reader", 20*time.Second)
	t.Logf("in %v the quoted consumer read %.1f MiB (at most ~10 MiB in the first 10 s), told of %d throttles (%d ms); the other read all %.0f MiB in %v",
		window, float64(slow)/quota, th.n.Load(), th.total.Load(), float64(fast)/quota, time.Since(start).Round(time.Millisecond))
	if lo, hi := int64(8*quota), int64(10*quota*115/100); slow < lo || slow > hi {
		t.Errorf("quoted consumer read %d bytes in %v, want between %d and %d", slow, window, lo, hi)
	}
	if th.n.Load() == 0 {
		t.Error("the quoted consumer was never told of a throttle")
	}
	if fast < backlog {
		t.Errorf("the consumer without a quota read %d of %d bytes", fast, backlog)
	}
}
