package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"
)

// openFDs counts the open descriptors of process pid.
func openFDs(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents), err
}

// A broker out of file descriptors (its limit lowered with prlimit, then
// connections flooding it to the limit) keeps running and serving: an
// existing producer goes on being acknowledged, an existing consumer in a
// group goes on reading what it produces and committing its offsets, a
// partition whose segment cannot roll answers a retriable error (its
// records are acknowledged once descriptors are free), accept failures are
// logged a few times rather than once per attempt, and once the flood's
// connections close a new topic can be created. Nothing acknowledged is
// lost.
func TestOutOfFileDescriptors(t *testing.T) {
	b := StartBroker(t, "offsets.topic.num.partitions=1", "group.initial.rebalance.delay.ms=0")
	pid := b.k.Process().Pid()
	ctx := testContext(t, 2*time.Minute)
	adm := b.Admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "steady"); err != nil {
		t.Fatal(err)
	}
	// Segments of about 20 records: producing rolls them often.
	segBytes := "20000"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &segBytes}, "rolling"); err != nil {
		t.Fatal(err)
	}

	steady := b.Client(t, kgo.DefaultProduceTopic("steady"), kgo.RecordDeliveryTimeout(90*time.Second))
	rolling := b.Client(t, kgo.DefaultProduceTopic("rolling"), kgo.RecordDeliveryTimeout(90*time.Second))
	value := strings.Repeat("v", 1000)
	// Connect both before the flood: a new connection cannot be accepted
	// while it lasts.
	for _, cl := range []*kgo.Client{steady, rolling} {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(value)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var steadyAcked, rollingAcked atomic.Int64
	steadyAcked.Store(1)
	rollingAcked.Store(1)
	var produceErrs []error
	var errMu sync.Mutex
	stop := make(chan struct{})
	var producers sync.WaitGroup
	produce := func(cl *kgo.Client, acked *atomic.Int64) {
		defer producers.Done()
		var inFlight sync.WaitGroup
		defer inFlight.Wait()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			inFlight.Add(1)
			cl.Produce(ctx, kgo.StringRecord(value), func(_ *kgo.Record, err error) {
				defer inFlight.Done()
				if err != nil {
					errMu.Lock()
					produceErrs = append(produceErrs, err)
					errMu.Unlock()
					return
				}
				acked.Add(1)
			})
		}
	}
	producers.Add(2)
	go produce(steady, &steadyAcked)
	go produce(rolling, &rollingAcked)

	// A consumer in a group reads steady throughout, committing every
	// second; it joins and reads before the flood, so that its
	// connections (coordinator, fetch) are open.
	const group = "flood-readers"
	consumer := b.Client(t, kgo.ConsumeTopics("steady"), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(time.Second),
		kgo.FetchMaxWait(200*time.Millisecond))
	var consumed atomic.Int64
	var consumeErr atomic.Value // first fetch error
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		for consumeCtx.Err() == nil {
			fs := consumer.PollFetches(consumeCtx)
			fs.EachError(func(topic string, p int32, err error) {
				if consumeCtx.Err() == nil {
					consumeErr.CompareAndSwap(nil, fmt.Errorf("fetch %s/%d: %w", topic, p, err))
				}
			})
			consumed.Add(int64(fs.NumRecords()))
		}
	}()
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if consumed.Load() < 2 {
			return fmt.Errorf("consumer read %d records", consumed.Load())
		}
		return nil
	})

	// Lower the broker's limit to a little above what it holds now.
	open, err := openFDs(pid)
	if err != nil {
		t.Fatal(err)
	}
	limit := uint64(open + 40)
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	t.Logf("broker holds %d descriptors; limit lowered to %d", open, limit)

	// Flood: far more connections than descriptors left (the rest wait in
	// the listen backlog).
	var flood []*overloadConn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range 300 {
		c, err := dialOverload(b.Addr())
		if err != nil {
			t.Fatalf("flood dial: %v", err)
		}
		flood = append(flood, c)
	}
	checkFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		n, err := openFDs(pid)
		if err != nil {
			return err
		}
		if uint64(n) < limit-1 {
			return fmt.Errorf("broker holds %d descriptors, limit %d", n, limit)
		}
		return nil
	})
	floodStart := time.Now()
	before := steadyAcked.Load()
	readBefore := consumed.Load()
	// Out of descriptors for 8 s: the steady producer is still
	// acknowledged meanwhile.
	checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		if !b.Running() {
			t.Fatalf("broker exited during the flood: %s", b.exitState())
		}
		if time.Since(floodStart) < 8*time.Second {
			return fmt.Errorf("flood for %v", time.Since(floodStart))
		}
		return nil
	})
	duringFlood := steadyAcked.Load() - before
	readDuringFlood := consumed.Load() - readBefore
	t.Logf("during %v out of descriptors: %d steady records acknowledged and %d read by the group consumer, rolling at %d",
		time.Since(floodStart).Round(time.Millisecond), duringFlood, readDuringFlood, rollingAcked.Load())
	if duringFlood < 50 {
		t.Errorf("only %d records acknowledged out of descriptors", duringFlood)
	}
	if readDuringFlood < 50 {
		t.Errorf("the consumer read only %d records out of descriptors", readDuringFlood)
	}
	if n, _ := openFDs(pid); uint64(n) < limit-2 {
		t.Errorf("flood over early: broker holds %d descriptors, limit %d", n, limit)
	}

	// End the flood; a new topic can be created.
	for _, c := range flood {
		c.Close()
	}
	flood = nil
	checkFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, "after-flood")
		if err != nil {
			return err
		}
		return resp.Err
	})
	close(stop)
	producers.Wait()
	errMu.Lock()
	if len(produceErrs) > 0 {
		t.Errorf("%d produce errors, first: %v", len(produceErrs), produceErrs[0])
	}
	errMu.Unlock()
	if !b.Running() {
		t.Fatalf("broker exited: %s", b.exitState())
	}
	if err := b.Client(t, kgo.DefaultProduceTopic("after-flood")).ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatalf("produce to the new topic: %v", err)
	}

	// The group consumer read every acknowledged steady record and
	// commits its position.
	checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		if n, want := consumed.Load(), steadyAcked.Load(); n < want {
			return fmt.Errorf("consumer read %d of %d steady records", n, want)
		}
		return nil
	})
	stopConsuming()
	<-consumerDone
	if err, _ := consumeErr.Load().(error); err != nil {
		t.Errorf("consumer: %v", err)
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := committed.Lookup("steady", 0); !ok || o.Err != nil || o.At != steadyAcked.Load() {
		t.Errorf("group %s committed %+v for steady, want offset %d", group, o, steadyAcked.Load())
	}

	// Nothing acknowledged is lost.
	ends, err := adm.ListEndOffsets(ctx, "steady", "rolling")
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]int64{"steady": steadyAcked.Load(), "rolling": rollingAcked.Load()} {
		o, _ := ends.Lookup(topic, 0)
		if o.Err != nil || o.Offset != want {
			t.Errorf("%s: end offset %d (%v), %d acknowledged", topic, o.Offset, o.Err, want)
		}
		if got := consumeCount(t, b, topic, want); got != want {
			t.Errorf("%s: read %d records, %d acknowledged", topic, got, want)
		}
	}

	// The accept failures were logged a few times, not per attempt.
	data, err := os.ReadFile(b.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	acceptLines := strings.Count(string(data), "accept failed")
	emfile := strings.Count(string(data), "too many open files")
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "too many open files") || strings.Contains(l, "descriptors") {
			t.Log(l)
		}
	}
	t.Logf("%d lines about accept failures, %d mentioning EMFILE, over %v", acceptLines, emfile, time.Since(floodStart).Round(time.Second))
	if acceptLines == 0 {
		t.Error("no accept failure logged: the flood did not exhaust the descriptors")
	}
	if acceptLines >= 100 {
		t.Errorf("%d accept failure lines", acceptLines)
	}
}

// consumeCount reads topic's partition 0 from the start until want records
// (or a bounded wait) and returns how many it read.
func consumeCount(t *testing.T, b *Broker, topic string, want int64) int64 {
	t.Helper()
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n int64
	for n < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(*kgo.Record) { n++ })
	}
	return n
}
