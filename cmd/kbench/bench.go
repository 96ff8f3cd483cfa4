package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// valuePool is pre-generated random data; record i's value is a window of
// it, so value generation costs nothing during the measurement. Random bytes
// are incompressible, which keeps --compression honest (it measures codec
// overhead, not ratio).
type valuePool struct {
	buf  []byte
	size int
}

const poolWindow = 8 << 20

func newValuePool(size int) (*valuePool, error) {
	buf := make([]byte, poolWindow+size)
	if _, err := rand.Read(buf); err != nil {
		return nil, err
	}
	return &valuePool{buf: buf, size: size}, nil
}

func (p *valuePool) value(i int) []byte {
	if p.size == 0 {
		return []byte{}
	}
	off := (i * p.size) % poolWindow
	return p.buf[off : off+p.size : off+p.size]
}

// workload runs topic creation, produce and (optionally) consume against the
// cluster at seeds, filling the throughput and latency fields of a result.
type workload struct {
	cfg   *config
	pool  *valuePool
	log   io.Writer
	label string
	// cpu, when the broker is a process kbench started, returns the CPU
	// time (user + system) it has used so far; the produce and consume
	// phases are charged the difference across them.
	cpu func() (time.Duration, error)
	// clientOpts connect the producer and consumer to the target's
	// listener (TLS, SASL), when it needs more than its address.
	clientOpts []kgo.Opt
	// profiler, when set, saves a CPU profile of the broker per phase.
	profiler *phaseProfiler
}

// cpuMark is the broker CPU time at the start of a phase (ok false when it
// is unknown).
type cpuMark struct {
	at time.Duration
	ok bool
}

func (w *workload) cpuMark() cpuMark {
	if w.cpu == nil {
		return cpuMark{}
	}
	at, err := w.cpu()
	if err != nil {
		w.logf("broker CPU time: %v", err)
		return cpuMark{}
	}
	return cpuMark{at: at, ok: true}
}

// cpuSince returns the broker CPU seconds spent since m, or 0 when
// unknown.
func (w *workload) cpuSince(m cpuMark) float64 {
	if !m.ok {
		return 0
	}
	now := w.cpuMark()
	if !now.ok {
		return 0
	}
	return (now.at - m.at).Seconds()
}

// perGB returns cpuSecs per GB (1e9 bytes) of record values moved, or 0
// when either is unknown.
func perGB(cpuSecs float64, bytes int) float64 {
	if cpuSecs <= 0 || bytes <= 0 {
		return 0
	}
	return cpuSecs / (float64(bytes) / 1e9)
}

// setCPUPerGB fills the broker's combined CPU per GB moved (produced plus
// consumed) from the phases' CPU seconds.
func (r *result) setCPUPerGB(recordSize int) {
	if r.ProduceCPUSecs+r.ConsumeCPUSecs > 0 {
		r.CPUPerGB = perGB(r.ProduceCPUSecs+r.ConsumeCPUSecs, r.Records*recordSize+r.ConsumedBytes)
	}
}

// phase runs one measured phase (produce or consume): the profile, if
// asked for, brackets the CPU marks, so that starting and saving it is
// not charged to the phase.
func (w *workload) phase(ctx context.Context, name string, cpuSecs *float64, do func() error) error {
	if w.profiler != nil {
		if err := w.profiler.start(ctx); err != nil {
			return err
		}
	}
	mark := w.cpuMark()
	err := do()
	*cpuSecs = w.cpuSince(mark)
	if w.profiler != nil {
		path, perr := w.profiler.stop(ctx, name)
		if perr != nil {
			return errors.Join(err, perr)
		}
		w.logf("%s profile saved to %s", name, path)
	}
	return err
}

func (w *workload) logf(format string, args ...any) {
	fmt.Fprintf(w.log, "kbench: %s: "+format+"\n", append([]any{w.label}, args...)...)
}

func (w *workload) run(ctx context.Context, seeds []string, topic string, r *result) error {
	cfg := w.cfg
	opts := append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, w.clientOpts...)
	opts = append(opts, cfg.producerOpts()...)
	if cfg.txnRecords > 0 {
		opts = append(opts, kgo.TransactionalID(transactionalID(topic)))
	}
	prod, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("producer client: %w", err)
	}
	defer prod.Close()
	adm := kadm.NewClient(prod)

	if err := createTopic(ctx, adm, topic, cfg.partitions, cfg.replication, cfg.topicConfigs); err != nil {
		return err
	}
	if cfg.topic == "" {
		// A fresh topic per run: delete it afterwards, so that the data of
		// earlier runs (page cache, dirty pages being written back) does
		// not slow the later runs against the same cluster.
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if _, err := adm.DeleteTopic(dctx, topic); err != nil {
				w.logf("deleting topic %q: %v", topic, err)
			}
		}()
	}
	// Warm up: one synchronous record loads the topic's metadata and opens
	// the produce connection (and, with transactions, gets the producer id
	// and finds the transaction coordinator in a committed transaction of
	// its own), so none of it is charged to the first measured records.
	// End offsets are taken after it, so it is not consumed.
	if err := w.warmUp(ctx, prod, topic); err != nil {
		return fmt.Errorf("warm-up produce: %w", err)
	}
	start, err := endOffsets(ctx, adm, topic)
	if err != nil {
		return err
	}

	w.logf("producing %d records of %d bytes to %q (%d partitions, acks=%s, rate=%s, records per transaction=%d)",
		cfg.records, cfg.recordSize, topic, cfg.partitions, cfg.acks, rateString(cfg.rate), cfg.txnRecords)
	defer r.setCPUPerGB(cfg.recordSize)
	err = w.phase(ctx, "produce", &r.ProduceCPUSecs, func() error { return w.produce(ctx, prod, topic, r) })
	r.ProduceCPUPerGB = perGB(r.ProduceCPUSecs, r.Records*cfg.recordSize)
	if err != nil {
		return err
	}
	if !cfg.consume {
		return nil
	}
	want := r.Records
	if cfg.acks == "0" {
		// Without acks the client can't know what the broker kept; ask
		// it, so that a lost record doesn't make the consumer wait for
		// --timeout. The last requests may still be in flight: wait
		// until the end offsets settle (at most 2s).
		end, err := endOffsets(ctx, adm, topic)
		for deadline := time.Now().Add(2 * time.Second); err == nil && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			var again map[int32]int64
			if again, err = endOffsets(ctx, adm, topic); err == nil && maps.Equal(again, end) {
				break
			}
			end = again
		}
		if err != nil {
			return err
		}
		want = 0
		for p, o := range end {
			want += int(o - start[p])
		}
		if want < r.Records {
			w.logf("acks=0: broker kept %d of %d records", want, r.Records)
		}
	}
	w.logf("consuming %d records (%s)", want, cfg.isolation)
	err = w.phase(ctx, "consume", &r.ConsumeCPUSecs, func() error { return w.consumeAll(ctx, seeds, topic, start, want, r) })
	r.ConsumeCPUPerGB = perGB(r.ConsumeCPUSecs, r.ConsumedBytes)
	return err
}

// transactionalID is the transactional producer's id with --txn-records.
func transactionalID(topic string) string { return "kbench-" + topic }

// warmUp produces one record synchronously, in a transaction of its own
// with --txn-records.
func (w *workload) warmUp(ctx context.Context, cl *kgo.Client, topic string) error {
	if w.cfg.txnRecords > 0 {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: w.pool.value(0)}).FirstErr(); err != nil {
		return err
	}
	if w.cfg.txnRecords > 0 {
		return cl.EndTransaction(ctx, kgo.TryCommit)
	}
	return nil
}

func rateString(rate float64) string {
	if rate == 0 {
		return "max"
	}
	return fmt.Sprintf("%g/s", rate)
}

// createTopic creates topic (an existing topic is reused) and waits until
// the metadata shows a leader for every partition.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions, rf int, configs map[string]*string) error {
	resp, err := adm.CreateTopic(ctx, int32(partitions), int16(rf), configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %q: %w", topic, err)
	}
	var last error
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			err = leadersReady(md, topic)
		}
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for leaders of %q: %w (last: %v)", topic, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func leadersReady(md kadm.Metadata, topic string) error {
	td, ok := md.Topics[topic]
	if !ok {
		return fmt.Errorf("topic %q not in metadata", topic)
	}
	if td.Err != nil {
		return td.Err
	}
	if len(td.Partitions) == 0 {
		return fmt.Errorf("topic %q has no partitions yet", topic)
	}
	for _, p := range td.Partitions {
		if p.Err != nil {
			return fmt.Errorf("partition %d: %w", p.Partition, p.Err)
		}
		if p.Leader < 0 {
			return fmt.Errorf("partition %d has no leader", p.Partition)
		}
	}
	return nil
}

func endOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	if err := listed.Error(); err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	out := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	if len(out) == 0 {
		return nil, fmt.Errorf("list end offsets: no partitions for %q", topic)
	}
	return out, nil
}

// produce sends cfg.records records and records per-record latency. With
// --rate, record i is scheduled at start + i/rate and its latency runs from
// that scheduled time (not the actual send time) to the ack, so time spent
// waiting behind a slow broker or a full client buffer is counted
// (coordinated-omission safe). At max speed the latency runs from the
// Produce call, which includes time blocked on a full client buffer.
func (w *workload) produce(ctx context.Context, cl *kgo.Client, topic string, r *result) error {
	n := w.cfg.records
	lats := make([]time.Duration, n) // written once per index by its promise
	var (
		done     atomic.Int64
		failed   atomic.Int64
		firstErr atomic.Pointer[error]
		lastAck  atomic.Int64 // nanoseconds from start to the last ack
		allDone  = make(chan struct{})
	)
	start := time.Now()
	send := func(i int, sched time.Time) {
		rec := &kgo.Record{Topic: topic, Value: w.pool.value(i)}
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			now := time.Now()
			if err != nil {
				lats[i] = -1
				failed.Add(1)
				firstErr.CompareAndSwap(nil, &err)
			} else {
				lats[i] = now.Sub(sched)
			}
			if done.Add(1) == int64(n) {
				lastAck.Store(int64(now.Sub(start)))
				close(allDone)
			}
		})
	}

	var committed time.Duration // in groups (transactions, --flush-every): start to the last group's end
	switch {
	case w.cfg.txnRecords > 0 || w.cfg.flushEvery > 0:
		if err := w.sendGroups(ctx, cl, n, func(i int) { send(i, time.Now()) }); err != nil {
			r.Records = int(done.Load() - failed.Load())
			return fmt.Errorf("produce: %w", err)
		}
		committed = time.Since(start)
	case w.cfg.rate == 0:
		for i := 0; i < n && ctx.Err() == nil; i++ {
			send(i, time.Now())
		}
	default:
		rate := w.cfg.rate
		interval := time.Duration(float64(time.Second) / rate)
		tick := max(interval, 250*time.Microsecond)
		t := time.NewTicker(tick)
		defer t.Stop()
		next := 0
		for next < n && ctx.Err() == nil {
			// Send every record whose scheduled time has passed:
			// i/rate <= elapsed.
			due := min(int(time.Since(start).Seconds()*rate)+1, n)
			for ; next < due; next++ {
				send(next, start.Add(time.Duration(float64(next)*float64(time.Second)/rate)))
			}
			if next < n {
				select {
				case <-ctx.Done():
				case <-t.C:
				}
			}
		}
		r.OfferedRate = rate
	}
	// Wait for every promise (Produce fails records itself once ctx is done).
	select {
	case <-allDone:
	case <-ctx.Done():
		// Promises still run on cancellation; give them a moment.
		select {
		case <-allDone:
		case <-time.After(5 * time.Second):
		}
	}
	if d := done.Load(); d < int64(n) {
		// Stragglers may still write lats: leave it alone.
		r.Records = int(d - failed.Load())
		r.ProduceErrors = int(failed.Load())
		return fmt.Errorf("produce: only %d of %d records completed: %w", d, n, ctx.Err())
	}
	elapsed := time.Duration(lastAck.Load())
	if committed > 0 {
		// The last commit (or flush), not the last ack, ends a run in
		// groups.
		elapsed = committed
	}
	ok := make([]time.Duration, 0, n)
	for _, l := range lats {
		if l > 0 { // -1: failed
			ok = append(ok, l)
		}
	}
	r.Records = int(done.Load() - failed.Load())
	r.ProduceErrors = int(failed.Load())
	r.ProduceSecs = elapsed.Seconds()
	if elapsed > 0 {
		r.ProduceRecS = float64(r.Records) / elapsed.Seconds()
		r.ProduceMBs = float64(r.Records) * float64(w.cfg.recordSize) / elapsed.Seconds() / 1e6
	}
	r.latencyStats(ok)
	if p := firstErr.Load(); p != nil {
		return fmt.Errorf("produce: %d of %d records failed, first: %w", failed.Load(), n, *p)
	}
	return nil
}

// sendGroups sends records 0..n-1 with send in groups: with transactions,
// cfg.txnRecords per transaction (begin, send, flush: every record
// acknowledged, commit); without, cfg.flushEvery per flush. It returns
// when the last group has ended.
func (w *workload) sendGroups(ctx context.Context, cl *kgo.Client, n int, send func(i int)) error {
	txn := w.cfg.txnRecords > 0
	per := w.cfg.flushEvery
	if txn {
		per = w.cfg.txnRecords
	}
	for first := 0; first < n; first += per {
		if txn {
			if err := cl.BeginTransaction(); err != nil {
				return fmt.Errorf("begin transaction at record %d: %w", first, err)
			}
		}
		for i := first; i < min(first+per, n); i++ {
			send(i)
		}
		if err := cl.Flush(ctx); err != nil {
			return fmt.Errorf("flush at record %d: %w", first, err)
		}
		if txn {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				return fmt.Errorf("commit transaction at record %d: %w", first, err)
			}
		}
	}
	return nil
}

// consumeAll reads want records from the given start offsets with a direct
// (non-group) consumer and times it from client creation to the last record.
func (w *workload) consumeAll(ctx context.Context, seeds []string, topic string, start map[int32]int64, want int, r *result) error {
	offsets := make(map[int32]kgo.Offset, len(start))
	for p, o := range start {
		offsets[p] = kgo.NewOffset().At(o)
	}
	t0 := time.Now()
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
	}, w.clientOpts...)
	if w.cfg.isolation == readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("consumer client: %w", err)
	}
	defer cl.Close()
	var (
		got, bytes int
		lastErr    error
		last       = t0
	)
	for got < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				lastErr = fmt.Errorf("fetch %s[%d]: %w", t, p, err)
			}
		})
		fs.EachRecord(func(rec *kgo.Record) {
			got++
			bytes += len(rec.Value)
		})
		last = time.Now()
	}
	elapsed := last.Sub(t0)
	r.Consumed = got
	r.ConsumedBytes = bytes
	r.ConsumeSecs = elapsed.Seconds()
	if elapsed > 0 && got > 0 {
		r.ConsumeRecS = float64(got) / elapsed.Seconds()
		r.ConsumeMBs = float64(bytes) / elapsed.Seconds() / 1e6
	}
	if got < want {
		if lastErr != nil {
			return fmt.Errorf("consume: got %d of %d records: %w (last fetch error: %v)", got, want, ctx.Err(), lastErr)
		}
		return fmt.Errorf("consume: got %d of %d records: %w", got, want, ctx.Err())
	}
	return nil
}
