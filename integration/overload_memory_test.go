package integration

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// procKiB reads a "Vm...:  N kB" line of /proc/pid/status.
func procKiB(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s not in /proc/%d/status", field, pid)
}

// With queued.max.request.bytes=16 MiB, 40 connections each sending a
// 4 MiB produce request at once (160 MiB) are all answered, and the
// broker's peak RSS grows by far less than without the bound, measured in
// the same test: at most half of it, and (for a broker built without the
// race detector, whose shadow memory multiplies every allocation) by less
// than the bound.
func TestQueuedMaxRequestBytes(t *testing.T) {
	const bound = 16 << 20
	bounded := peakGrowthUnderLoad(t, 40, 4<<20, "queued.max.request.bytes="+strconv.Itoa(bound))
	unbounded := peakGrowthUnderLoad(t, 40, 4<<20)
	t.Logf("40 x 4 MiB produce requests at once: peak RSS +%d MiB with queued.max.request.bytes %d MiB, +%d MiB without",
		bounded>>20, bound>>20, unbounded>>20)
	if 2*bounded > unbounded {
		t.Errorf("peak RSS grew by %d MiB with the bound, %d MiB without: want at most half", bounded>>20, unbounded>>20)
	}
	if os.Getenv("KBROKER_RACE") != "1" && bounded >= bound {
		t.Errorf("peak RSS grew by %d MiB, want under %d MiB", bounded>>20, bound>>20)
	}
}

// The figure: 200 clients each sending a 10 MiB produce request at
// once with queued.max.request.bytes at 64 MiB. Every request is answered
// and the broker's peak RSS grows by less than the bound over its
// baseline (a broker built without the race detector: its shadow memory
// multiplies the heap; for that one, by less than twice the bound).
// Produce bodies are read into the pool's arena, outside the Go heap, so
// the collector's headroom does not double them (see requestPool);
// measured here: ~60 MiB of the arena (six requests in flight) plus
// ~3 MiB of heap and stacks.
func TestQueuedMaxRequestBytesManyClients(t *testing.T) {
	const bound = 64 << 20
	growth := peakGrowthUnderLoad(t, 200, 10<<20, "queued.max.request.bytes="+strconv.Itoa(bound))
	t.Logf("200 x 10 MiB produce requests at once: peak RSS +%.1f MiB with queued.max.request.bytes %d MiB", float64(growth)/(1<<20), bound>>20)
	limit := int64(bound)
	if os.Getenv("KBROKER_RACE") == "1" {
		limit = 2 * bound
	}
	if growth >= limit {
		t.Errorf("peak RSS grew by %.1f MiB, want under %d MiB", float64(growth)/(1<<20), limit>>20)
	}
}

// peakGrowthUnderLoad starts a broker with overrides, sends conns produce
// requests of reqBytes at once on conns connections, checks every one is
// answered and appended, and returns by how many bytes the broker's peak
// RSS grew over its RSS with the connections open.
func peakGrowthUnderLoad(t *testing.T, conns, reqBytes int, overrides ...string) int64 {
	t.Helper()
	maxBytes := strconv.Itoa(reqBytes + 1<<20)
	b := StartBroker(t, append([]string{"message.max.bytes=" + maxBytes, "socket.request.max.bytes=" + maxBytes}, overrides...)...)
	pid := b.k.Process().Pid()
	ctx := testContext(t, 2*time.Minute)
	if _, err := b.Admin(t).CreateTopic(ctx, 1, 1, nil, "big"); err != nil {
		t.Fatal(err)
	}
	value := make([]byte, reqBytes-4096)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	batch := recordbatch.Build(recordbatch.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LeaderEpoch: -1,
		FirstTimestamp: time.Now().UnixMilli()}, []recordbatch.Record{{Value: value}})
	produce := func(c *overloadConn) error {
		req := kmsg.NewPtrProduceRequest()
		req.Version = 7
		req.Acks = 1
		req.TimeoutMillis = 30000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "big"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := kmsg.NewPtrProduceResponse()
		if err := c.request(req, resp, 60*time.Second); err != nil {
			return err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("produce response %+v", resp)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			return fmt.Errorf("produce answered error %d", code)
		}
		return nil
	}

	cs := make([]*overloadConn, conns)
	for i := range cs {
		c, err := dialOverload(b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs[i] = c
	}
	// Warm up (a small request on every connection, as a client's first,
	// and one produce request), then take the baseline.
	for _, c := range cs {
		if err := c.apiVersions(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := produce(cs[0]); err != nil {
		t.Fatal(err)
	}
	baseline, err := procKiB(pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	start := make(chan struct{})
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs <- produce(c)
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	t.Logf("%d produce requests of %d MiB answered in %v", conns, reqBytes>>20, time.Since(began).Round(time.Millisecond))
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	peak, err := procKiB(pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	ends, err := b.Admin(t).ListEndOffsets(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("big", 0); o.Err != nil || o.Offset != int64(conns+1) {
		t.Fatalf("end offset %d (%v), want %d: one record per request", o.Offset, o.Err, conns+1)
	}
	b.Stop()
	return (peak - baseline) << 10
}
