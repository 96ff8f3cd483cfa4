package verify

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Workload drives producers and consumers against a cluster and records
// every operation.
type Workload struct {
	Rec        *Recorder
	Seeds      []string
	Topic      string
	Partitions int32
	// Interval is each producer's pause between sends.
	Interval time.Duration
	Dir      string // kcat logs
	Logf     func(string, ...any)
	// Recreate, if set, is a second topic, which the RecreateTopic fault
	// deletes and creates again: raw producers write to it and a consumer
	// reads it (see recreate.go).
	Recreate *Incarnations
	// Security is what every client needs to reach the brokers (nil:
	// plaintext).
	Security *Security

	read readPositions
}

func (w *Workload) logf(format string, args ...any) {
	if w.Logf != nil {
		w.Logf(format, args...)
	}
}

// label is what events of topic say in their Topic: empty for the main
// topic.
func (w *Workload) label(topic string) string {
	if topic == w.Topic {
		return ""
	}
	return topic
}

// RunProducers runs every producer until ctx ends, then lets outstanding
// sends resolve (bounded by the clients' delivery timeouts).
func (w *Workload) RunProducers(ctx context.Context) {
	var wg sync.WaitGroup
	run := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	run(func() { w.franzProducer(ctx, "franz") })
	for p := int32(0); p < w.Partitions; p++ {
		run(func() { w.rawProducer(ctx, fmt.Sprintf("raw-p%d", p), p, nil) })
		run(func() { w.kcatProducer(ctx, fmt.Sprintf("kcat-p%d", p), p) })
	}
	if g := w.Recreate; g != nil {
		for p := int32(0); p < g.Partitions; p++ {
			run(func() { w.rawProducer(ctx, fmt.Sprintf("recreate-p%d", p), p, g) })
		}
	}
	wg.Wait()
}

// franzProducer: franz-go, idempotent, acks=all, round robin over the
// partitions, at most 100 records outstanding. Every error is indefinite:
// franz-go retries internally, so an error says only that it gave up.
func (w *Workload) franzProducer(ctx context.Context, name string) {
	cl, err := w.Security.AcksAllProducer(w.Seeds, w.Topic, w.Rec, name)
	if err != nil {
		w.logf("%s: %v", name, err)
		return
	}
	defer cl.Close()
	producePaced(ctx, cl, w.Interval, func(seq int64) (*kgo.Record, Event) {
		e := Event{Kind: KindSend, Proc: name, Seq: seq, Partition: int32(seq % int64(w.Partitions)), Value: fmt.Sprintf("%s-%d", name, seq)}
		return &kgo.Record{Partition: e.Partition, Value: []byte(e.Value)}, e
	}, w.Rec.Add)
}

// producePaced sends one record per tick of interval until ctx ends, with
// at most 100 awaiting their answer, then flushes (30 s at most). next
// makes the seq-th record (seq from 1) and its send event; done is given
// the event once the answer has filled its outcome and offset (Info, an
// indefinite outcome, when franz-go gave up: it retried first).
func producePaced(ctx context.Context, cl *kgo.Client, interval time.Duration, next func(seq int64) (*kgo.Record, Event), done func(Event)) {
	var outstanding atomic.Int64
	t := time.NewTicker(interval)
	defer t.Stop()
	var seq int64
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		if ctx.Err() != nil || outstanding.Load() >= 100 {
			continue
		}
		seq++
		rec, e := next(seq)
		outstanding.Add(1)
		cl.Produce(context.Background(), rec, func(r *kgo.Record, err error) {
			outstanding.Add(-1)
			e.Outcome, e.Offset = OK, r.Offset
			if err != nil {
				e.Outcome, e.Offset, e.Err = Info, -1, err.Error()
			}
			done(e)
		})
	}
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = cl.Flush(fctx)
}

// rawProducer sends one single-record Produce request at a time to the
// partition's leader, without idempotence or retries, so that errors the
// broker returns before writing (NOT_ENOUGH_REPLICAS) are definite
// failures. With g it writes to the re-created topic, holding g for each
// send and naming the incarnation in the value; else to the main topic.
func (w *Workload) rawProducer(ctx context.Context, name string, p int32, g *Incarnations) {
	topic := w.Topic
	if g != nil {
		topic = g.Topic
	}
	cl, err := kgo.NewClient(w.Security.Client(kgo.SeedBrokers(w.Seeds...), kgo.MetadataMinAge(250*time.Millisecond), kgo.RequestRetries(0))...)
	if err != nil {
		w.logf("%s: %v", name, err)
		return
	}
	defer cl.Close()
	s := &rawSender{w: w, cl: cl, topic: topic, p: p, name: name, leader: -1}
	inc := int32(0)
	for ctx.Err() == nil {
		if g != nil {
			if k := g.hold(); k != inc {
				inc, s.leader = k, -1
			}
		}
		e, ok := s.send(ctx, inc)
		if g != nil {
			g.release()
		}
		if !ok {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		w.Rec.Add(e)
		if e.Outcome != OK {
			sleepCtx(ctx, 50*time.Millisecond)
		}
		sleepCtx(ctx, w.Interval*time.Duration(w.Partitions))
	}
}

// rawSender is rawProducer's connection to one partition.
type rawSender struct {
	w      *Workload
	cl     *kgo.Client
	topic  string
	p      int32
	name   string
	leader int32 // -1: look it up
	seq    int64
}

// send sends the next value and returns its event, or false when the
// partition has no leader to send to. An error that may mean the leader
// moved makes the next send look it up again. inc > 0 names the re-created
// topic's incarnation in the value.
func (s *rawSender) send(ctx context.Context, inc int32) (Event, bool) {
	if s.leader < 0 {
		if s.leader = s.w.leaderOf(ctx, s.cl, s.topic, s.p); s.leader < 0 {
			return Event{}, false
		}
	}
	s.seq++
	v := fmt.Sprintf("%s-%d", s.name, s.seq)
	if inc > 0 {
		v = incarnationValue(inc, s.name, s.seq)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 3000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = s.topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = s.p
	rp.Records = oneRecordBatch([]byte(v))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	resp, err := s.cl.Broker(int(s.leader)).Request(rctx, req)
	cancel()
	e := Event{Kind: KindSend, Topic: s.w.label(s.topic), Proc: s.name, Seq: s.seq, Partition: s.p, Value: v, Outcome: Info, Offset: -1}
	if err != nil {
		e.Err = err.Error()
		s.leader = -1
		return e, true
	}
	pr := resp.(*kmsg.ProduceResponse)
	code := int16(-1)
	if len(pr.Topics) == 1 && len(pr.Topics[0].Partitions) == 1 {
		code = pr.Topics[0].Partitions[0].ErrorCode
		e.Offset = pr.Topics[0].Partitions[0].BaseOffset
	}
	switch {
	case code == 0:
		e.Outcome = OK
	case code == kerr.NotEnoughReplicas.Code:
		// Checked before the append: nothing was written.
		e.Outcome, e.Err, e.Offset = Fail, kerr.ErrorForCode(code).Error(), -1
	default:
		e.Err, e.Offset = fmt.Sprintf("error code %d: %v", code, kerr.ErrorForCode(code)), -1
		s.leader = -1
	}
	return e, true
}

func (w *Workload) leaderOf(ctx context.Context, cl *kgo.Client, topic string, p int32) int32 {
	return partitionLeader(ctx, cl, topic, p)
}

// partitionLeader asks cl's brokers for the leader of topic/p (-1 when
// there is none or no answer within 2 s).
func partitionLeader(ctx context.Context, cl *kgo.Client, topic string, p int32) int32 {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return -1
	}
	for _, t := range resp.Topics {
		for _, pp := range t.Partitions {
			if pp.Partition == p && pp.ErrorCode == 0 {
				return pp.Leader
			}
		}
	}
	return -1
}

// oneRecordBatch is an uncompressed, non-idempotent v2 batch of one record.
func oneRecordBatch(value []byte) []byte {
	var r []byte
	r = append(r, 0)              // attributes
	r = binary.AppendVarint(r, 0) // timestamp delta
	r = binary.AppendVarint(r, 0) // offset delta
	r = binary.AppendVarint(r, -1)
	r = binary.AppendVarint(r, int64(len(value)))
	r = append(r, value...)
	r = binary.AppendVarint(r, 0) // headers
	var recs []byte
	recs = binary.AppendVarint(recs, int64(len(r)))
	recs = append(recs, r...)
	now := uint64(time.Now().UnixMilli())
	b := make([]byte, 0, 61+len(recs))
	b = binary.BigEndian.AppendUint64(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(49+len(recs)))
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	b = append(b, 2)
	b = binary.BigEndian.AppendUint32(b, 0) // crc, below
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint64(b, now)
	b = binary.BigEndian.AppendUint64(b, now)
	b = binary.BigEndian.AppendUint64(b, 0xffffffffffffffff)
	b = binary.BigEndian.AppendUint16(b, 0xffff)
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// kcatProducer runs kcat (librdkafka, idempotent, acks=all) again and
// again, each time feeding it a batch of values for one fixed partition on
// stdin and closing it (kcat reads its input in large blocks, so it only
// produces at EOF), and reads its delivery reports: with -vv it prints
// "Message delivered to partition P (offset O)" or "Delivery failed for
// message: ERR" per message, and librdkafka reports one partition's
// deliveries in the order the messages were produced, so the n-th report
// is the n-th line. A message kcat never reported (it exited or was killed)
// is indefinite; failures are indefinite too, since librdkafka retried
// before giving up.
func (w *Workload) kcatProducer(ctx context.Context, name string, p int32) {
	logf, err := os.OpenFile(filepath.Join(w.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		w.logf("%s: %v", name, err)
		return
	}
	defer logf.Close()
	var seq int64
	for run := 0; ctx.Err() == nil; run++ {
		start := time.Now()
		var batch []Event
		for i := 0; i < kcatBatch; i++ {
			seq++
			batch = append(batch, Event{Kind: KindSend, Proc: name, Seq: seq, Partition: p, Value: fmt.Sprintf("%s-%d", name, seq)})
		}
		w.kcatRun(logf, name, p, run, batch)
		// Pace kcat like the other producers.
		sleepCtx(ctx, w.Interval*time.Duration(w.Partitions)*kcatBatch-time.Since(start))
	}
}

const kcatBatch = 20

func (w *Workload) kcatRun(logf io.Writer, name string, p int32, run int, batch []Event) {
	fmt.Fprintf(logf, "=== run %d at %s: %s..%s\n", run, time.Now().Format(time.RFC3339Nano), batch[0].Value, batch[len(batch)-1].Value)
	var in strings.Builder
	for _, e := range batch {
		in.WriteString(e.Value + "\n")
	}
	// Bounded: message.timeout.ms plus start-up and shutdown.
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	args := append(w.Security.KcatArgs(), "-P", "-b", strings.Join(w.Seeds, ","), "-t", w.Topic, "-p", strconv.Itoa(int(p)), "-vv",
		"-X", "acks=all", "-X", "enable.idempotence=true", "-X", "linger.ms=5",
		"-X", "message.timeout.ms=10000", "-X", "request.timeout.ms=3000",
		"-X", "topic.metadata.refresh.interval.ms=1000", "-X", "reconnect.backoff.max.ms=500")
	cmd := exec.CommandContext(cctx, "kcat", args...)
	cmd.Stdin = strings.NewReader(in.String())
	var out strings.Builder
	cmd.Stderr = &out
	cmd.Stdout = logf
	err := cmd.Run()
	fmt.Fprint(logf, out.String())
	next := 0
	for _, line := range strings.Split(out.String(), "\n") {
		var e Event
		if rest, ok := strings.CutPrefix(line, "% Message delivered to partition "); ok {
			var pp int32
			var off int64
			if _, err := fmt.Sscanf(rest, "%d (offset %d)", &pp, &off); err != nil {
				continue
			}
			e = Event{Outcome: OK, Offset: off}
		} else if rest, ok := strings.CutPrefix(line, "% Delivery failed for message: "); ok {
			e = Event{Outcome: Info, Offset: -1, Err: rest}
		} else {
			continue
		}
		if next == len(batch) {
			fmt.Fprintln(logf, "kverify: more delivery reports than messages")
			break
		}
		b := batch[next]
		next++
		b.Outcome, b.Offset, b.Err = e.Outcome, e.Offset, e.Err
		w.Rec.Add(b)
	}
	for _, b := range batch[next:] {
		b.Outcome, b.Offset, b.Err = Info, -1, fmt.Sprintf("kcat exited (%v) without a delivery report", err)
		w.Rec.Add(b)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// readPositions is the highest offset each consumer read per partition.
type readPositions struct {
	// mu guards max.
	mu  sync.Mutex
	max map[string]map[int32]int64 // consumer -> partition -> highest offset read
}

func (r *readPositions) saw(consumer string, p int32, o int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.max == nil {
		r.max = map[string]map[int32]int64{}
	}
	if r.max[consumer] == nil {
		r.max[consumer] = map[int32]int64{}
	}
	if cur, ok := r.max[consumer][p]; !ok || o > cur {
		r.max[consumer][p] = o
	}
}

// caughtUp reports whether every consumer has read up to ends (offset
// end-1) on every partition.
func (r *readPositions) caughtUp(consumers []string, ends map[int32]int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range consumers {
		for p, end := range ends {
			if o, ok := r.max[c][p]; end > 0 && (!ok || o < end-1) {
				return false
			}
		}
	}
	return true
}

// CaughtUp reports whether every consumer has read up to ends (offset
// end-1) on every partition.
func (w *Workload) CaughtUp(consumers []string, ends map[int32]int64) bool {
	return w.read.caughtUp(consumers, ends)
}

// Consumers are the names RunConsumers uses.
var Consumers = []string{"assigned", "group"}

// RunConsumers runs a consumer with assigned partitions and one in a
// consumer group until ctx ends, and one of the re-created topic if there
// is one.
func (w *Workload) RunConsumers(ctx context.Context, group string) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.assignedConsumer(ctx, "assigned") }()
	go func() { defer wg.Done(); w.groupConsumer(ctx, "group", group) }()
	if w.Recreate != nil {
		wg.Add(1)
		go func() { defer wg.Done(); w.recreateConsumer(ctx, "recreate") }()
	}
	wg.Wait()
}

// poll records what cl reads of topic until ctx ends.
func (w *Workload) poll(ctx context.Context, name, topic string, cl *kgo.Client) {
	pollRecords(ctx, cl, func(poll int64, r *kgo.Record) {
		w.Rec.Add(Event{Kind: KindRead, Topic: w.label(topic), Proc: name, Poll: poll, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		w.read.saw(name, r.Partition, r.Offset)
	})
}

// pollRecords hands each record cl polls, with the number of its poll, to
// fn until ctx ends.
func pollRecords(ctx context.Context, cl *kgo.Client, fn func(poll int64, r *kgo.Record)) {
	var poll int64
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		poll++
		fs.EachRecord(func(r *kgo.Record) { fn(poll, r) })
	}
}

// fromStart is a client reading the partitions of topic from the start.
func (w *Workload) fromStart(topic string, partitions []int32, opts ...kgo.Opt) (*kgo.Client, error) {
	parts := map[int32]kgo.Offset{}
	for _, p := range partitions {
		parts[p] = kgo.NewOffset().AtStart()
	}
	return kgo.NewClient(w.Security.Client(append([]kgo.Opt{kgo.SeedBrokers(w.Seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts})}, opts...)...)...)
}

func upTo(n int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

func (w *Workload) assignedConsumer(ctx context.Context, name string) {
	all := upTo(w.Partitions)
	cl, err := w.fromStart(w.Topic, all, kgo.FetchMaxWait(500*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		w.logf("%s: %v", name, err)
		return
	}
	defer cl.Close()
	w.Rec.Add(Event{Kind: KindAssign, Proc: name, Partitions: all})
	w.poll(ctx, name, w.Topic, cl)
}

// recreateConsumer reads the re-created topic's partitions from the start
// with a client it replaces by a new one each time the topic is created
// again; each client's assign event names the incarnation that existed
// when it started.
func (w *Workload) recreateConsumer(ctx context.Context, name string) {
	g := w.Recreate
	all := upTo(g.Partitions)
	for ctx.Err() == nil {
		inc, next := g.Current()
		cl, err := w.fromStart(g.Topic, all, kgo.FetchMaxWait(500*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond))
		if err != nil {
			w.logf("%s: %v", name, err)
			return
		}
		w.Rec.Add(Event{Kind: KindAssign, Topic: g.Topic, Proc: name, Partitions: all, Incarnation: inc})
		pctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-next:
				cancel()
			case <-pctx.Done():
			}
		}()
		w.poll(pctx, name, g.Topic, cl)
		cancel()
		cl.Close()
	}
}

func (w *Workload) groupConsumer(ctx context.Context, name, group string) {
	cl, err := kgo.NewClient(w.Security.Client(kgo.SeedBrokers(w.Seeds...),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(w.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(time.Second),
		kgo.AutoCommitInterval(time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			w.Rec.Add(Event{Kind: KindAssign, Proc: name, Partitions: m[w.Topic]})
		}),
	)...)
	if err != nil {
		w.logf("%s: %v", name, err)
		return
	}
	defer cl.Close()
	w.poll(ctx, name, w.Topic, cl)
}

// EndOffsets lists each partition's high watermark; opts are what the
// client needs besides its seeds (TLS, SASL).
func EndOffsets(ctx context.Context, seeds []string, topic string, opts ...kgo.Opt) (map[int32]int64, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	var errs []error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", o.Partition, o.Err))
			return
		}
		out[o.Partition] = o.Offset
	})
	return out, errors.Join(errs...)
}

// FinalRead reads every partition of topic from the start up to its high
// watermark (ends) and records what it holds. For the re-created topic it
// first records the incarnation it reads (an assign event of "final").
func (w *Workload) FinalRead(ctx context.Context, topic string, ends map[int32]int64) error {
	var parts []int32
	for p := range ends {
		parts = append(parts, p)
	}
	label := w.label(topic)
	if label != "" && w.Recreate != nil {
		inc, _ := w.Recreate.Current()
		slices.Sort(parts)
		w.Rec.Add(Event{Kind: KindAssign, Topic: label, Proc: "final", Partitions: parts, Incarnation: inc})
	}
	cl, err := w.fromStart(topic, parts, kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	next := map[int32]int64{}
	done := map[int32]bool{}
	finish := func(p int32) {
		if !done[p] && next[p] >= ends[p] {
			done[p] = true
			w.Rec.Add(Event{Kind: KindFinalDone, Topic: label, Proc: "final", Partition: p, Offset: ends[p]})
		}
	}
	for p := range ends {
		finish(p)
	}
	for len(done) < len(ends) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("final read: %d of %d partitions complete: %w", len(done), len(ends), ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] || done[r.Partition] {
				return
			}
			w.Rec.Add(Event{Kind: KindFinal, Topic: label, Proc: "final", Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			next[r.Partition] = r.Offset + 1
		})
		for p := range ends {
			finish(p)
		}
	}
	return nil
}
