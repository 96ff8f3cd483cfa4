package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Producing to a cluster and checking what it holds: continuous producers
// that record every acknowledged value, a reader that checks a topic
// against what was acknowledged, raw Produce requests to one broker, and
// fixed record sets produced and compared.

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
func (c *testCluster) readTopic(topic string, within time.Duration) map[int32][]readRec {
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
func (c *testCluster) rawProduce(id int32, topic string, p int32, acks int16, timeout time.Duration) (int16, error) {
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
