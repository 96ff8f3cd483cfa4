package verify

// The compacted topic's workload.
//
// CompactTopicName is created with cleanup.policy=compact and settings
// that make the cleaner run all the time (small segment.bytes, segment.ms
// of a second, min.cleanable.dirty.ratio 0.01, delete.retention.ms of two
// seconds; the brokers get log.cleaner.backoff.ms=200). Producers write
// keyed records and tombstones, each key written by one producer only (so
// "later" is its send order): a raw producer per partition (one
// single-record request at a time, no retries: NOT_ENOUGH_REPLICAS is a
// definite failure) and an idempotent franz-go producer. Every record
// carries its id in a "kverify" header, so a tombstone (null value) read
// back names the send it came from. A reader re-reads the topic from
// offset 0 with a new client every few seconds, across cleanings and
// faults. Once the producers stop, Settle writes a fence record to each
// partition every half second (rolling the active segment after
// segment.ms, so everything written becomes cleanable and cleanings keep
// coming) until a read from the start holds no tombstone or a bound
// passes; that last read is the final read. CompactReplicaCheck compares
// the replicas' compacted views after the brokers stopped (replicas clean
// on their own, so their bytes differ). check_compact.go holds the rules.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/segment"
)

// CompactTopicName is the compacted topic (RF 3).
const CompactTopicName = "kverify-compact"

// compactIDHeader is the record header holding a record's id ("proc-seq").
const compactIDHeader = "kverify"

// fenceProc writes the fence records (keys "fence-p<partition>").
const fenceProc = "fence"

// CompactTopicConfigs are the compacted topic's configs: cleaned whenever
// a little is dirty, a new segment every second or 32 KiB, tombstones kept
// 2 s after the cleaning that first keeps them.
func CompactTopicConfigs() map[string]*string {
	out := map[string]*string{}
	for k, v := range map[string]string{
		"cleanup.policy":            "compact",
		"segment.bytes":             "32768",
		"segment.ms":                "1000",
		"min.cleanable.dirty.ratio": "0.01",
		"delete.retention.ms":       strconv.FormatInt(CompactDeleteRetention.Milliseconds(), 10),
		"min.compaction.lag.ms":     "0",
	} {
		out[k] = &v
	}
	return out
}

// CompactDeleteRetention is the compacted topic's delete.retention.ms.
const CompactDeleteRetention = 2 * time.Second

// CompactBrokerSettings are the broker settings the compacted topic needs:
// a cleaner that looks for work five times a second (Kafka's default
// backoff is 15 s).
var CompactBrokerSettings = []string{"log.cleaner.backoff.ms=200"}

// compactSettleBound bounds Settle's wait for the tombstones to go:
// delete.retention.ms, two segment rolls and two cleanings take a few
// seconds; a broker that just restarted may need longer.
const compactSettleBound = 45 * time.Second

// compactReread is how long the reader keeps one client before it starts
// again from offset 0.
const compactReread = 4 * time.Second

// CompactWorkload drives the compacted topic.
type CompactWorkload struct {
	Rec        *Recorder
	Seeds      []string
	Topic      string
	Partitions int32
	// Keys is how many keys each producer writes (the raw producers:
	// each; the franz-go one: in all, spread over the partitions).
	Keys int
	// Interval paces the producers as the plain workload's.
	Interval time.Duration
	Seed     uint64
	Logf     func(string, ...any)
	Security *Security
}

func (w *CompactWorkload) logf(format string, args ...any) {
	if w.Logf != nil {
		w.Logf(format, args...)
	}
}

// compactRecordID is the id of a producer's seq-th record.
func compactRecordID(proc string, seq int64) string { return fmt.Sprintf("%s-%d", proc, seq) }

// tombstoneOdds: one write in tombstoneOdds deletes its key.
const tombstoneOdds = 5

// RunProducers runs every producer until ctx ends, then lets outstanding
// sends resolve.
func (w *CompactWorkload) RunProducers(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.franzProducer(ctx, "cfranz") }()
	for p := range w.Partitions {
		wg.Add(1)
		go func() { defer wg.Done(); w.rawProducer(ctx, fmt.Sprintf("craw-p%d", p), p) }()
	}
	wg.Wait()
}

// compactBatch is a non-idempotent v2 batch of one keyed record (a
// tombstone: null value) with its id header.
func compactBatch(key, id string, tombstone bool) []byte {
	r := recordbatch.Record{Key: []byte(key), Value: []byte(id), Headers: []recordbatch.RecordHeader{{Key: compactIDHeader, Value: []byte(id)}}}
	if tombstone {
		r.Value = nil
	}
	spec := recordbatch.NoProducer()
	spec.FirstTimestamp = time.Now().UnixMilli()
	return recordbatch.Build(spec, []recordbatch.Record{r})
}

// rawProducer writes keys "<name>-k<i>" of partition p, one single-record
// Produce request at a time to the partition's leader, without retries.
func (w *CompactWorkload) rawProducer(ctx context.Context, name string, p int32) {
	cl, err := kgo.NewClient(w.Security.Client(kgo.SeedBrokers(w.Seeds...), kgo.MetadataMinAge(250*time.Millisecond), kgo.RequestRetries(0))...)
	if err != nil {
		w.logf("%s: %v", name, err)
		return
	}
	defer cl.Close()
	r := rand.New(rand.NewPCG(w.Seed, 0x636f6d70+uint64(p)))
	leader := int32(-1)
	var seq int64
	for ctx.Err() == nil {
		if leader < 0 {
			if leader = partitionLeader(ctx, cl, w.Topic, p); leader < 0 {
				sleepCtx(ctx, 100*time.Millisecond)
				continue
			}
		}
		seq++
		key := fmt.Sprintf("%s-k%d", name, r.IntN(w.Keys))
		tomb := r.IntN(tombstoneOdds) == 0
		id := compactRecordID(name, seq)
		e := Event{Kind: KindSend, Topic: w.Topic, Proc: name, Seq: seq, Partition: p, Key: key, Value: id, Tombstone: tomb}
		var relookup bool
		e.Outcome, e.Offset, e.Err, relookup = produceOne(cl, leader, w.Topic, p, compactBatch(key, id, tomb))
		if relookup {
			leader = -1
		}
		w.Rec.Add(e)
		if e.Outcome != OK {
			sleepCtx(ctx, 50*time.Millisecond)
		}
		sleepCtx(ctx, w.Interval*time.Duration(w.Partitions))
	}
}

// produceOne sends batch to topic/p on broker leader (acks=all, 3 s for
// the broker, 6 s for the answer) and classifies the answer: ok with the
// batch's offset; fail for NOT_ENOUGH_REPLICAS (checked before the append:
// nothing written); info otherwise. relookup says the leader may have
// moved.
func produceOne(cl *kgo.Client, leader int32, topic string, p int32, batch []byte) (outcome Outcome, offset int64, errText string, relookup bool) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 3000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	resp, err := cl.Broker(int(leader)).Request(rctx, req)
	cancel()
	if err != nil {
		return Info, -1, err.Error(), true
	}
	pr := resp.(*kmsg.ProduceResponse)
	code := int16(-1)
	if len(pr.Topics) == 1 && len(pr.Topics[0].Partitions) == 1 {
		code = pr.Topics[0].Partitions[0].ErrorCode
		offset = pr.Topics[0].Partitions[0].BaseOffset
	}
	switch {
	case code == 0:
		return OK, offset, "", false
	case code == kerr.NotEnoughReplicas.Code:
		return Fail, -1, kerr.ErrorForCode(code).Error(), false
	default:
		return Info, -1, fmt.Sprintf("error code %d: %v", code, kerr.ErrorForCode(code)), true
	}
}

// franzProducer writes keys "<name>-k<i>" (key i to partition i mod
// partitions) with franz-go: idempotent, acks=all, at most 100 records
// outstanding. Its errors are indefinite (it retried before giving up).
func (w *CompactWorkload) franzProducer(ctx context.Context, name string) {
	cl, err := w.Security.AcksAllProducer(w.Seeds, w.Topic, w.Rec, name)
	if err != nil {
		w.logf("%s: %v", name, err)
		return
	}
	defer cl.Close()
	r := rand.New(rand.NewPCG(w.Seed, 0x6672616e))
	producePaced(ctx, cl, w.Interval, func(seq int64) (*kgo.Record, Event) {
		k := r.IntN(w.Keys)
		e := Event{Kind: KindSend, Topic: w.Topic, Proc: name, Seq: seq, Partition: int32(k) % w.Partitions,
			Key: fmt.Sprintf("%s-k%d", name, k), Value: compactRecordID(name, seq), Tombstone: r.IntN(tombstoneOdds) == 0}
		rec := &kgo.Record{Partition: e.Partition, Key: []byte(e.Key), Value: []byte(e.Value),
			Headers: []kgo.RecordHeader{{Key: compactIDHeader, Value: []byte(e.Value)}}}
		if e.Tombstone {
			rec.Value = nil
		}
		return rec, e
	}, w.Rec.Add)
}

// readEvent is the event of record r read by proc.
func (w *CompactWorkload) readEvent(kind Kind, proc string, poll int64, r *kgo.Record) Event {
	id := ""
	for _, h := range r.Headers {
		if h.Key == compactIDHeader {
			id = string(h.Value)
		}
	}
	return Event{Kind: kind, Topic: w.Topic, Proc: proc, Poll: poll, Partition: r.Partition, Offset: r.Offset,
		Key: string(r.Key), Value: id, Tombstone: r.Value == nil}
}

// fromStart is a client reading every partition from offset 0.
func (w *CompactWorkload) fromStart(opts ...kgo.Opt) (*kgo.Client, error) {
	parts := map[int32]kgo.Offset{}
	for p := range w.Partitions {
		parts[p] = kgo.NewOffset().AtStart()
	}
	return kgo.NewClient(w.Security.Client(append([]kgo.Opt{kgo.SeedBrokers(w.Seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.Topic: parts})}, opts...)...)...)
}

// RunReader reads the topic from offset 0 with a new client every
// compactReread until ctx ends: each client is an assignment of its own.
func (w *CompactWorkload) RunReader(ctx context.Context) {
	const name = "creader"
	for ctx.Err() == nil {
		cl, err := w.fromStart(kgo.FetchMaxWait(500*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond))
		if err != nil {
			w.logf("%s: %v", name, err)
			return
		}
		w.Rec.Add(Event{Kind: KindAssign, Topic: w.Topic, Proc: name, Partitions: upTo(w.Partitions)})
		rctx, cancel := context.WithTimeout(ctx, compactReread)
		pollRecords(rctx, cl, func(poll int64, r *kgo.Record) { w.Rec.Add(w.readEvent(KindRead, name, poll, r)) })
		cancel()
		cl.Close()
	}
}

// Settle runs once the producers have stopped: every half second it writes
// a fence record to each partition (acks=all; the records roll the active
// segments after segment.ms and keep the cleaner busy) and reads the topic
// from offset 0 up to its high watermarks, until a read holds no tombstone
// or compactSettleBound passed. It records that last read as the final
// read and returns the high watermarks it read up to.
func (w *CompactWorkload) Settle(ctx context.Context) (map[int32]int64, error) {
	cl, err := kgo.NewClient(w.Security.Client(kgo.SeedBrokers(w.Seeds...),
		kgo.DefaultProduceTopic(w.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(10*time.Second),
		kgo.ProduceRequestTimeout(3*time.Second), kgo.MetadataMinAge(250*time.Millisecond))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	began := time.Now()
	var seq int64
	for {
		var recs []*kgo.Record
		events := map[*kgo.Record]Event{}
		for p := range w.Partitions {
			seq++
			e := Event{Kind: KindSend, Topic: w.Topic, Proc: fenceProc, Seq: seq, Partition: p,
				Key: fmt.Sprintf("%s-p%d", fenceProc, p), Value: compactRecordID(fenceProc, seq)}
			r := &kgo.Record{Partition: p, Key: []byte(e.Key), Value: []byte(e.Value),
				Headers: []kgo.RecordHeader{{Key: compactIDHeader, Value: []byte(e.Value)}}}
			recs = append(recs, r)
			events[r] = e
		}
		fenced := true
		for _, res := range cl.ProduceSync(ctx, recs...) {
			e := events[res.Record]
			e.Outcome, e.Offset = OK, res.Record.Offset
			if res.Err != nil {
				e.Outcome, e.Offset, e.Err = Info, -1, res.Err.Error()
				fenced = false
			}
			w.Rec.Add(e)
		}
		if !fenced {
			// The read below ends at the fences: the last record below
			// each high watermark, never cleaned away (the latest of
			// its key, not a tombstone), so a read reaches it.
			if time.Since(began) > compactSettleBound || ctx.Err() != nil {
				return nil, fmt.Errorf("fence records to %s not acknowledged within %v", w.Topic, compactSettleBound)
			}
			sleepCtx(ctx, 500*time.Millisecond)
			continue
		}
		ends, read, err := w.readAll(ctx)
		tombstones := 0
		for _, r := range read {
			if r.Value == nil {
				tombstones++
			}
		}
		settled := err == nil && tombstones == 0
		if settled || time.Since(began) > compactSettleBound || ctx.Err() != nil {
			if err != nil {
				return nil, fmt.Errorf("final read of %s: %w", w.Topic, err)
			}
			detail := fmt.Sprintf("no tombstone left %v after the producers stopped", time.Since(began).Round(time.Millisecond))
			if !settled {
				detail = fmt.Sprintf("%d tombstones left %v after the producers stopped", tombstones, time.Since(began).Round(time.Millisecond))
			}
			w.Rec.Add(Event{Kind: KindAssign, Topic: w.Topic, Proc: "final", Partitions: upTo(w.Partitions)})
			for _, r := range read {
				w.Rec.Add(w.readEvent(KindFinal, "final", 0, r))
			}
			for _, p := range slices.Sorted(maps.Keys(ends)) {
				w.Rec.Add(Event{Kind: KindFinalDone, Topic: w.Topic, Proc: "final", Partition: p, Offset: ends[p], Detail: detail})
			}
			w.logf("compacted topic: final read of %d records up to %v: %s", len(read), ends, detail)
			return ends, nil
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

// readAll reads every partition from offset 0 up to the high watermarks it
// lists first, within 30 s. The record just below each high watermark must
// exist (Settle's fence): franz-go returns no record for a hole, so a read
// could not tell it reached the end of one.
func (w *CompactWorkload) readAll(ctx context.Context) (map[int32]int64, []*kgo.Record, error) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ends, err := EndOffsets(rctx, w.Seeds, w.Topic, w.Security.Admin()...)
	if err == nil && int32(len(ends)) != w.Partitions {
		err = fmt.Errorf("end offsets of %d partitions", len(ends))
	}
	if err != nil {
		return nil, nil, err
	}
	cl, err := w.fromStart(kgo.FetchMaxWait(200 * time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	next := map[int32]int64{}
	var out []*kgo.Record
	complete := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	for !complete() {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			return nil, nil, fmt.Errorf("read up to %v: at %v: %w", ends, next, rctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] && r.Offset >= next[r.Partition] {
				out = append(out, r)
				next[r.Partition] = r.Offset + 1
			}
		})
	}
	return ends, out, nil
}

// compactedView is a replica log's records up to the high watermark:
// what each offset holds, and the live keys (whose last record is not a
// tombstone) with the offset of that record.
type compactedView struct {
	records map[int64]compactedRecord
	live    map[string]int64
}

type compactedRecord struct {
	key, id   string
	tombstone bool
}

// readCompactedView reads the partition directory dir up to hw with the
// segment package.
func readCompactedView(dir string, hw int64) (compactedView, error) {
	v := compactedView{records: map[int64]compactedRecord{}, live: map[string]int64{}}
	l, err := segment.Open(dir, segment.Config{RetentionTime: -1, RetentionBytes: -1}, false, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return v, err
	}
	defer l.Close()
	if l.EndOffset() < hw {
		return v, fmt.Errorf("log ends at %d, below the high watermark %d", l.EndOffset(), hw)
	}
	data, err := l.Read(l.StartOffset(), 1<<31-1, hw, true)
	if err != nil {
		return v, err
	}
	batches, headers, err := recordbatch.Split(data)
	if err != nil {
		return v, err
	}
	last := map[string]compactedRecord{}
	lastAt := map[string]int64{}
	for i, b := range batches {
		h := headers[i]
		if h.IsControl() {
			continue
		}
		err := recordbatch.ForEachRecord(b, func(r kmsg.Record) error {
			o := h.BaseOffset + int64(r.OffsetDelta)
			if o >= hw {
				return nil
			}
			rec := compactedRecord{key: string(r.Key), tombstone: r.Value == nil}
			for _, hd := range r.Headers {
				if hd.Key == compactIDHeader {
					rec.id = string(hd.Value)
				}
			}
			v.records[o] = rec
			last[rec.key], lastAt[rec.key] = rec, o
			return nil
		})
		if err != nil {
			return v, fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	for k, r := range last {
		if !r.tombstone {
			v.live[k] = lastAt[k]
		}
	}
	return v, nil
}

// compareCompactedViews says how got differs from want ("" when it does
// not): an offset both hold with different records, or a key live in one
// and not the other or live with its last record at different offsets.
// Replicas clean on their own, so one may hold records the other removed;
// the latest record of every key is the same in both, and a key a
// tombstone deletes is absent from both live sets whether or not the
// tombstone itself is still there.
func compareCompactedViews(got, want compactedView) string {
	for _, o := range slices.Sorted(maps.Keys(got.records)) {
		if w, ok := want.records[o]; ok && w != got.records[o] {
			return fmt.Sprintf("offset %d holds %+v, the reference %+v", o, got.records[o], w)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want.live)) {
		if o, ok := got.live[k]; !ok || o != want.live[k] {
			return fmt.Sprintf("key %s: latest value at offset %d in the reference, here %d (present: %v)", k, want.live[k], o, ok)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got.live)) {
		if _, ok := want.live[k]; !ok {
			return fmt.Sprintf("key %s live here (offset %d), deleted or absent in the reference", k, got.live[k])
		}
	}
	return ""
}

// CompactReplicaCheck compares, for one partition of the compacted topic,
// the compacted view of every ISR member's log with the leader's up to hw
// (call it after the brokers stopped); one KindReplica event per member.
func CompactReplicaCheck(rec *Recorder, c *Cluster, topic string, p int32, st PartitionState, hw int64) {
	read := func(id int32) (compactedView, error) {
		return readCompactedView(filepath.Join(c.Broker(id).LogDir, fmt.Sprintf("%s-%d", topic, p)), hw)
	}
	ref := st.Leader
	if !slices.Contains(st.ISR, ref) && len(st.ISR) > 0 {
		ref = st.ISR[0]
	}
	want, err := read(ref)
	if err != nil {
		rec.Add(Event{Kind: KindReplica, Topic: topic, Proc: fmt.Sprintf("b%d", ref), Partition: p, Offset: hw, Outcome: Fail, Detail: fmt.Sprintf("reference replica b%d: %v", ref, err)})
		return
	}
	for _, id := range st.ISR {
		got, err := read(id)
		e := Event{Kind: KindReplica, Topic: topic, Proc: fmt.Sprintf("b%d", id), Partition: p, Offset: hw, Outcome: OK,
			Detail: fmt.Sprintf("compacted view up to HW %d (%d records, %d live keys) agrees with b%d's (%d records)", hw, len(got.records), len(got.live), ref, len(want.records))}
		if err != nil {
			e.Outcome, e.Detail = Fail, err.Error()
		} else if diff := compareCompactedViews(got, want); diff != "" {
			e.Outcome, e.Detail = Fail, fmt.Sprintf("compacted view up to HW %d differs from b%d's: %s", hw, ref, diff)
		}
		rec.Add(e)
	}
}
