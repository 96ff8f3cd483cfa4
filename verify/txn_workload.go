package verify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TxnWorkload is the transactional workload (kverify --txn): producers
// writing unique values in transactions that span partitions, each ending
// in a commit or (one in four, or when a produce failed) an abort;
// read_committed consumers; and a consume-transform-produce loop (franz-go's
// GroupTransactSession) copying every input record to the output topic
// exactly once. Every step is recorded for check_txn.go.
type TxnWorkload struct {
	Rec        *Recorder
	Seeds      []string
	Topic      string // input, written by the producers
	Out        string // output of the loop
	Partitions int32
	Producers  int
	Group      string // the loop's consumer group (and transactional id)
	Seed       uint64
	// Interval is each producer's pause between transactions.
	Interval time.Duration
	Logf     func(string, ...any)
	// Security is what every client needs to reach the brokers (nil:
	// plaintext).
	Security *Security

	read readPositions // control records too
}

// txnTimeout is transaction.timeout.ms of every transactional client:
// short, so that a transaction its producer abandoned (killed broker,
// fenced client) is aborted by the coordinator soon after healing.
const txnTimeout = 10 * time.Second

func (w *TxnWorkload) logf(format string, args ...any) {
	if w.Logf != nil {
		w.Logf(format, args...)
	}
}

// TxnConsumers are the names of the workload's read_committed consumers.
var TxnConsumers = []string{"rc", "rc-out"}

// RunProducers runs the transactional producers until ctx ends; each
// finishes its current transaction first.
func (w *TxnWorkload) RunProducers(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range w.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.producer(ctx, fmt.Sprintf("t%d", i), rand.New(rand.NewPCG(w.Seed, uint64(i))))
		}()
	}
	wg.Wait()
}

// txnOpts are a transactional client's options, for transactional id id.
func (w *TxnWorkload) txnOpts(id string, more ...kgo.Opt) []kgo.Opt {
	return w.Security.Client(append([]kgo.Opt{
		kgo.SeedBrokers(w.Seeds...),
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(txnTimeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(8 * time.Second),
		kgo.ProduceRequestTimeout(3 * time.Second),
		kgo.RetryTimeout(8 * time.Second),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}, more...)...)
}

// producer writes transactions of 2 to 4 records ("<txn>-<j>") to
// consecutive partitions from a random one. Its client is replaced (same
// transactional id, so the new one fences the old and the coordinator
// aborts what it left open) after any error ending a transaction.
func (w *TxnWorkload) producer(ctx context.Context, name string, r *rand.Rand) {
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for n := 1; ctx.Err() == nil; n++ {
		if cl == nil {
			var err error
			if cl, err = kgo.NewClient(w.txnOpts("kverify-" + name)...); err != nil {
				w.logf("%s: %v", name, err)
				return
			}
		}
		id := fmt.Sprintf("%s-%d", name, n)
		if err := cl.BeginTransaction(); err != nil {
			w.logf("%s: begin %s: %v", name, id, err)
			cl.Close()
			cl = nil
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		k := 2 + r.IntN(3)
		first := r.Int32N(w.Partitions)
		var wg sync.WaitGroup
		var failed atomic.Bool
		for j := range k {
			p := (first + int32(j)) % w.Partitions
			v := fmt.Sprintf("%s-%d", id, j)
			wg.Add(1)
			cl.Produce(context.Background(), &kgo.Record{Topic: w.Topic, Partition: p, Value: []byte(v)}, func(rec *kgo.Record, err error) {
				defer wg.Done()
				e := Event{Kind: KindTxnSend, Topic: w.Topic, Proc: name, Txn: id, Seq: int64(j), Partition: p, Value: v, Outcome: OK, Offset: rec.Offset}
				if err != nil {
					e.Outcome, e.Offset, e.Err = Info, -1, err.Error()
					failed.Store(true)
				}
				w.Rec.Add(e)
			})
		}
		wg.Wait() // bounded by the record delivery timeout
		commit := !failed.Load() && r.IntN(4) != 0
		if !w.end(cl, name, id, commit) {
			cl.Close()
			cl = nil
		}
		sleepCtx(ctx, w.Interval)
	}
	if cl != nil {
		ectx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = cl.EndTransaction(ectx, kgo.TryAbort)
		cancel()
	}
}

// end commits or aborts transaction id and records the attempt; after a
// failed commit it tries an abort. It reports whether the client can go
// on.
func (w *TxnWorkload) end(cl *kgo.Client, name, id string, commit bool) bool {
	what := map[bool]string{true: "commit", false: "abort"}[commit]
	w.Rec.Add(Event{Kind: KindTxnEnd, Topic: w.Topic, Proc: name, Txn: id, Detail: what, Phase: "start"})
	ectx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	err := cl.EndTransaction(ectx, kgo.TransactionEndTry(commit))
	cancel()
	e := Event{Kind: KindTxnEnd, Topic: w.Topic, Proc: name, Txn: id, Detail: what, Phase: "end", Outcome: OK}
	if err != nil {
		e.Outcome, e.Err = Info, err.Error()
		if commit && errors.Is(err, kerr.OperationNotAttempted) {
			e.Outcome = Fail // the client did not send EndTxn
		}
	}
	w.Rec.Add(e)
	if err == nil {
		return true
	}
	if commit {
		return w.end(cl, name, id, false)
	}
	return false
}

// RunConsumers runs the read_committed consumers of the input and output
// topics until ctx ends.
func (w *TxnWorkload) RunConsumers(ctx context.Context) {
	var wg sync.WaitGroup
	for i, topic := range []string{w.Topic, w.Out} {
		wg.Add(1)
		go func() { defer wg.Done(); w.consumer(ctx, TxnConsumers[i], topic) }()
	}
	wg.Wait()
}

// committedFromStart is a read_committed client of every partition of
// topic from the start that also returns control records (so its position
// is known when the last records are markers).
func (w *TxnWorkload) committedFromStart(topic string, opts ...kgo.Opt) (*kgo.Client, error) {
	parts := map[int32]kgo.Offset{}
	for p := range w.Partitions {
		parts[p] = kgo.NewOffset().AtStart()
	}
	return kgo.NewClient(w.Security.Client(append([]kgo.Opt{kgo.SeedBrokers(w.Seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()}, opts...)...)...)
}

func (w *TxnWorkload) consumer(ctx context.Context, name, topic string) {
	cl, err := w.committedFromStart(topic, kgo.FetchMaxWait(500*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		w.logf("%s: %v", name, err)
		return
	}
	defer cl.Close()
	w.Rec.Add(Event{Kind: KindTxnAssign, Topic: topic, Proc: name, Partitions: upTo(w.Partitions)})
	pollRecords(ctx, cl, func(poll int64, r *kgo.Record) {
		w.read.saw(name, r.Partition, r.Offset)
		if !r.Attrs.IsControl() {
			w.Rec.Add(Event{Kind: KindTxnRead, Topic: topic, Proc: name, Poll: poll, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		}
	})
}

// RunEtl copies every input record to the output topic (same partition,
// value EtlValue) in transactions that also commit the group's offsets,
// until ctx ends. Its reads, writes and commits are recorded like the
// producers' (proc "etl", transactions "etl-N"); after an abort the
// session rewinds to the committed offsets, which a txn-assign records. A
// transaction in which a record failed to produce is aborted: franz-go's
// session would commit the records that were produced.
// A session that can no longer begin a transaction (its producer id failed
// fatally, e.g. fenced after the coordinator aborted a transaction that
// outlived its timeout) is replaced by a new one with the same
// transactional id, which starts from the committed offsets too.
func (w *TxnWorkload) RunEtl(ctx context.Context) {
	var poll, n int64
	for ctx.Err() == nil {
		if !w.etlSession(ctx, &poll, &n) || ctx.Err() != nil {
			return
		}
		w.Rec.Add(Event{Kind: KindTxnAssign, Topic: w.Topic, Proc: "etl", Partitions: upTo(w.Partitions), Detail: "rewind: new session"})
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// etlSession runs one GroupTransactSession of RunEtl until ctx ends or it
// cannot begin a transaction; it reports whether a new session may help
// (false when none could be made). poll and n number polls and
// transactions across sessions.
func (w *TxnWorkload) etlSession(ctx context.Context, poll, n *int64) bool {
	const name = "etl"
	all := upTo(w.Partitions)
	s, err := kgo.NewGroupTransactSession(w.txnOpts(w.Group,
		kgo.ConsumerGroup(w.Group),
		kgo.ConsumeTopics(w.Topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			w.Rec.Add(Event{Kind: KindTxnAssign, Topic: w.Topic, Proc: name, Partitions: m[w.Topic]})
		}),
	)...)
	if err != nil {
		w.logf("%s: %v", name, err)
		return false
	}
	defer s.Close()
	for ctx.Err() == nil {
		fs := s.PollFetches(ctx)
		if ctx.Err() != nil {
			return true
		}
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		if len(recs) == 0 {
			continue
		}
		*poll++
		*n++
		id := fmt.Sprintf("%s-%d", name, *n)
		for _, r := range recs {
			w.Rec.Add(Event{Kind: KindTxnRead, Topic: w.Topic, Proc: name, Poll: *poll, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		}
		if err := s.Begin(); err != nil {
			w.logf("%s: begin %s: %v; starting a new session", name, id, err)
			return true
		}
		var wg sync.WaitGroup
		var produceFailed atomic.Bool
		for j, r := range recs {
			v := EtlValue(string(r.Value))
			p := r.Partition
			wg.Add(1)
			s.Produce(context.Background(), &kgo.Record{Topic: w.Out, Partition: p, Value: []byte(v)}, func(rec *kgo.Record, err error) {
				defer wg.Done()
				e := Event{Kind: KindTxnSend, Topic: w.Out, Proc: name, Txn: id, Seq: int64(j), Partition: p, Value: v, Outcome: OK, Offset: rec.Offset}
				if err != nil {
					e.Outcome, e.Offset, e.Err = Info, -1, err.Error()
					produceFailed.Store(true)
				}
				w.Rec.Add(e)
			})
		}
		wg.Wait()
		// franz-go's session commits whatever was produced: a record
		// that failed (timed out in a fault) is simply not in the
		// transaction, so committing would commit the input offsets
		// without its copy. Exactly-once needs the abort, as franz-go's
		// transaction examples do (Java's producer refuses the commit
		// itself).
		try, detail := kgo.TryCommit, "commit"
		if produceFailed.Load() {
			try, detail = kgo.TryAbort, "abort"
		}
		w.Rec.Add(Event{Kind: KindTxnEnd, Topic: w.Out, Proc: name, Txn: id, Detail: detail, Phase: "start"})
		ectx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		committed, err := s.End(ectx, try)
		cancel()
		e := Event{Kind: KindTxnEnd, Topic: w.Out, Proc: name, Txn: id, Detail: detail, Phase: "end", Outcome: OK}
		switch {
		case err != nil:
			e.Outcome, e.Err = Info, err.Error()
		case try == kgo.TryCommit && !committed:
			// The session aborted instead (a rebalance, a failed
			// offset commit): the commit was not sent.
			e.Outcome, e.Err = Fail, "aborted by the session"
		}
		w.Rec.Add(e)
		if e.Outcome != OK || try == kgo.TryAbort {
			w.Rec.Add(Event{Kind: KindTxnAssign, Topic: w.Topic, Proc: name, Partitions: all, Detail: "rewind after abort"})
		}
	}
	return true
}

// EtlOffsets is the loop's group's committed offsets of the input topic
// (stable: no transactional commit pending).
func (w *TxnWorkload) EtlOffsets(ctx context.Context) (map[int32]int64, error) {
	cl, err := kgo.NewClient(w.Security.Admin(kgo.SeedBrokers(w.Seeds...))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).FetchOffsets(kadm.RequireStable(ctx), w.Group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p := range w.Partitions {
		out[p] = 0
		if o, ok := resp.Lookup(w.Topic, p); ok {
			out[p] = o.At
		}
	}
	return out, nil
}

// StableEnds waits (within d) until every partition of topic has no open
// transaction (last stable offset = high watermark) and returns the high
// watermarks.
func (w *TxnWorkload) StableEnds(ctx context.Context, topic string, d time.Duration) (map[int32]int64, error) {
	cl, err := kgo.NewClient(w.Security.Admin(kgo.SeedBrokers(w.Seeds...))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var ends map[int32]int64
	err = waitFor(ctx, d, func() error {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		hw, err := adm.ListEndOffsets(rctx, topic)
		if err != nil || hw.Error() != nil {
			return errors.Join(err, hw.Error())
		}
		lso, err := adm.ListCommittedOffsets(rctx, topic)
		if err != nil || lso.Error() != nil {
			return errors.Join(err, lso.Error())
		}
		ends = map[int32]int64{}
		var open []string
		for p := range w.Partitions {
			h, ok1 := hw.Lookup(topic, p)
			l, ok2 := lso.Lookup(topic, p)
			if !ok1 || !ok2 {
				return fmt.Errorf("%s/%d: no offsets listed", topic, p)
			}
			if h.Offset != l.Offset {
				open = append(open, fmt.Sprintf("%d: LSO %d HW %d", p, l.Offset, h.Offset))
			}
			ends[p] = h.Offset
		}
		if len(open) > 0 {
			return fmt.Errorf("%s has open transactions: partition %v", topic, open)
		}
		return nil
	})
	return ends, err
}

// FinalRead reads every partition of topic read_committed from the start
// up to ends (which StableEnds returned) and records its data records. It
// returns, per partition, the offset after the last data record read.
func (w *TxnWorkload) FinalRead(ctx context.Context, topic string, ends map[int32]int64) (map[int32]int64, error) {
	cl, err := w.committedFromStart(topic, kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	next, data := map[int32]int64{}, map[int32]int64{}
	done := map[int32]bool{}
	finish := func(p int32) {
		if !done[p] && next[p] >= ends[p] {
			done[p] = true
			w.Rec.Add(Event{Kind: KindTxnFinalDone, Topic: topic, Proc: "final", Partition: p, Offset: ends[p]})
		}
	}
	parts := slices.Sorted(maps.Keys(ends))
	for _, p := range parts {
		finish(p)
	}
	for len(done) < len(ends) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return data, fmt.Errorf("final read of %s: %d of %d partitions complete (at %v of %v): %w", topic, len(done), len(ends), next, ends, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] || done[r.Partition] {
				return
			}
			if !r.Attrs.IsControl() {
				w.Rec.Add(Event{Kind: KindTxnFinal, Topic: topic, Proc: "final", Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
				data[r.Partition] = r.Offset + 1
			}
			next[r.Partition] = r.Offset + 1
		})
		for _, p := range parts {
			finish(p)
		}
	}
	return data, nil
}

// finish ends the transactional workload once the producers stopped and
// the cluster healed: it reads the input topic read_committed once no
// transaction is open on it, waits for the loop to copy it all, stops the
// loop (stopEtl), records the group's committed offsets, reads the output
// topic the same way, and waits for the consumers to read as far. The
// topics' high watermarks go into ends. It returns warnings.
func (w *TxnWorkload) finish(ctx context.Context, stopEtl func(), ends map[string]map[int32]int64, phase func(string)) []string {
	var warnings []string
	warn := func(err error) { warnings = append(warnings, err.Error()) }
	final := func(topic string) map[int32]int64 {
		// Abandoned transactions end within their timeout and the
		// coordinator's abort interval.
		e, err := w.StableEnds(ctx, topic, 3*txnTimeout)
		if err != nil {
			warn(err)
			return nil
		}
		ends[topic] = e
		fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		data, err := w.FinalRead(fctx, topic, e)
		if err != nil {
			warn(err)
		}
		phase(fmt.Sprintf("final-read %s %v", topic, e))
		return data
	}
	if data := final(w.Topic); data != nil {
		// The loop commits the offset after the last record it
		// consumed (markers after it are not consumed).
		if err := waitFor(ctx, 60*time.Second, func() error {
			got, err := w.EtlOffsets(ctx)
			for p, o := range data {
				if err == nil && got[p] < o {
					err = fmt.Errorf("the loop's committed offsets %v, input's last records end at %v", got, data)
				}
			}
			return err
		}); err != nil {
			warn(err)
		}
	}
	stopEtl()
	phase("etl-stopped")
	var etl map[int32]int64
	if err := waitFor(ctx, 3*txnTimeout, func() error {
		var err error
		etl, err = w.EtlOffsets(ctx)
		return err
	}); err != nil {
		warn(fmt.Errorf("the loop's committed offsets: %w", err))
	} else {
		for _, p := range slices.Sorted(maps.Keys(etl)) {
			w.Rec.Add(Event{Kind: KindTxnOffsets, Topic: w.Topic, Proc: "etl", Partition: p, Offset: etl[p]})
		}
	}
	final(w.Out)
	for i, topic := range []string{w.Topic, w.Out} {
		if ends[topic] == nil {
			continue
		}
		if err := waitFor(ctx, 30*time.Second, func() error {
			if !w.read.caughtUp(TxnConsumers[i:i+1], ends[topic]) {
				return fmt.Errorf("consumer %s not caught up with %s", TxnConsumers[i], topic)
			}
			return nil
		}); err != nil {
			warn(err)
		}
	}
	return warnings
}
