package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// rec is one record as produced or consumed. Partition and Offset are -1
// until a producer or consumer reports them.
type rec struct {
	Key       []byte
	Value     []byte
	Headers   []hdr
	Partition int32
	Offset    int64
}

type hdr struct {
	Key   string
	Value []byte
}

func (r rec) String() string {
	return fmt.Sprintf("p%d@%d key=%q value=%d bytes %.20q... headers=%v", r.Partition, r.Offset, r.Key, len(r.Value), r.Value, r.Headers)
}

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// makeRecords returns n records with unique deterministic keys and values
// (only [A-Za-z0-9-], so every client and kcat's line format carry them
// unchanged), value sizes spread over 10..1000 bytes, and 2 or 3 headers.
func makeRecords(prefix string, n int) []rec {
	out := make([]rec, n)
	for i := range out {
		size := 10 + (i*7919)%991
		v := make([]byte, 0, size)
		v = append(v, fmt.Sprintf("%d-", i)...)
		x := uint64(i)*0x9E3779B97F4A7C15 + 1
		for len(v) < size {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			// Runs of a repeated character keep the data compressible, so
			// codecs have something to do, without making it trivial.
			c := alnum[x%uint64(len(alnum))]
			for run := int(x>>32)%4 + 1; run > 0 && len(v) < size; run-- {
				v = append(v, c)
			}
		}
		headers := []hdr{{"idx", []byte(strconv.Itoa(i))}, {"src", []byte(prefix)}}
		if i%5 == 0 {
			headers = append(headers, hdr{"h" + strconv.Itoa(i%7), []byte(strings.Repeat("x", i%40+1))})
		}
		out[i] = rec{
			Key:       []byte(fmt.Sprintf("%s-k%06d", prefix, i)),
			Value:     v,
			Headers:   headers,
			Partition: -1,
			Offset:    -1,
		}
	}
	return out
}

// byPartition groups records by partition, keeping their order.
func byPartition(rs []rec) map[int32][]rec {
	m := make(map[int32][]rec)
	for _, r := range rs {
		m[r.Partition] = append(m[r.Partition], r)
	}
	return m
}

func sameHeaders(a, b []hdr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// compareOpts tunes compareRecords.
type compareOpts struct {
	// startOffsets, when set, gives per partition the offset of the first
	// consumed record; otherwise every partition starts at 0.
	startOffsets map[int32]int64
	// checkProducedOffsets compares consumed offsets with the offsets the
	// producer reported, not only density.
	checkProducedOffsets bool
}

// compareRecords asserts that, per partition, consumed equals produced in
// order: keys, values, headers, and dense offsets from the start offset.
// produced must carry the partitions the producer reported.
func compareRecords(t testing.TB, produced, consumed []rec, o compareOpts) {
	t.Helper()
	if len(produced) != len(consumed) {
		t.Errorf("consumed %d records, produced %d", len(consumed), len(produced))
	}
	want, got := byPartition(produced), byPartition(consumed)
	parts := make(map[int32]bool)
	for p := range want {
		parts[p] = true
	}
	for p := range got {
		parts[p] = true
	}
	var sorted []int32
	for p := range parts {
		sorted = append(sorted, p)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })

	const maxReports = 5
	reports := 0
	report := func(format string, args ...any) {
		t.Helper()
		if reports < maxReports {
			t.Errorf(format, args...)
		}
		reports++
	}
	for _, p := range sorted {
		w, g := want[p], got[p]
		if len(w) != len(g) {
			report("partition %d: consumed %d records, produced %d", p, len(g), len(w))
		}
		start := o.startOffsets[p]
		for i := 0; i < len(w) && i < len(g); i++ {
			wr, gr := w[i], g[i]
			switch {
			case !bytes.Equal(wr.Key, gr.Key):
				report("partition %d record %d: key %q, want %q (order or content differs)", p, i, gr.Key, wr.Key)
			case !bytes.Equal(wr.Value, gr.Value):
				report("partition %d record %d (key %q): value differs: got %d bytes %.40q, want %d bytes %.40q", p, i, gr.Key, len(gr.Value), gr.Value, len(wr.Value), wr.Value)
			case !sameHeaders(wr.Headers, gr.Headers):
				report("partition %d record %d (key %q): headers %v, want %v", p, i, gr.Key, gr.Headers, wr.Headers)
			case gr.Offset != start+int64(i):
				report("partition %d record %d (key %q): offset %d, want %d (offsets must be dense from %d)", p, i, gr.Key, gr.Offset, start+int64(i), start)
			case o.checkProducedOffsets && gr.Offset != wr.Offset:
				report("partition %d record %d (key %q): offset %d, producer was acknowledged offset %d", p, i, gr.Key, gr.Offset, wr.Offset)
			}
		}
	}
	if reports > maxReports {
		t.Errorf("... and %d more mismatches", reports-maxReports)
	}
}

// createTopic creates a topic with kadm and fails the test on any error.
func createTopic(t testing.TB, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
}

// offsetsOf lists the start or end offsets of a topic's partitions.
func offsetsOf(ctx context.Context, adm *kadm.Client, topic string, end bool) (map[int32]int64, error) {
	var lo kadm.ListedOffsets
	var err error
	if end {
		lo, err = adm.ListEndOffsets(ctx, topic)
	} else {
		lo, err = adm.ListStartOffsets(ctx, topic)
	}
	if err != nil {
		return nil, err
	}
	if err := lo.Error(); err != nil {
		return nil, err
	}
	out := make(map[int32]int64)
	lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	if len(out) == 0 {
		return nil, fmt.Errorf("no partitions listed for %s", topic)
	}
	return out, nil
}

func endOffsets(t testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	m, err := offsetsOf(ctx, adm, topic, true)
	if err != nil {
		t.Fatalf("listing end offsets of %s: %v", topic, err)
	}
	return m
}

// checkEndOffsets asserts that each partition's end offset equals the
// number of produced records the producer placed there.
func checkEndOffsets(t testing.TB, adm *kadm.Client, topic string, produced []rec, partitions int32) map[int32]int64 {
	t.Helper()
	ends := endOffsets(t, adm, topic)
	counts := make(map[int32]int64)
	for _, r := range produced {
		counts[r.Partition]++
	}
	if int32(len(ends)) != partitions {
		t.Errorf("topic %s has %d partitions listed, want %d", topic, len(ends), partitions)
	}
	for p := int32(0); p < partitions; p++ {
		if ends[p] != counts[p] {
			t.Errorf("partition %d end offset %d, want %d (records the producer put there)", p, ends[p], counts[p])
		}
	}
	return ends
}

// consumeKgo reads partitions [from, to) with kgo, without a group, and
// returns the records in arrival order.
func consumeKgo(t testing.TB, addr, topic string, from, to map[int32]int64, timeout time.Duration) []rec {
	t.Helper()
	offsets := make(map[int32]kgo.Offset)
	want := 0
	for p, end := range to {
		start := from[p]
		if end > start {
			offsets[p] = kgo.NewOffset().At(start)
			want += int(end - start)
		}
	}
	if want == 0 {
		return nil
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []rec
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s within %v", len(out), want, topic, timeout)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetching %s partition %d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= to[r.Partition] {
				return // produced concurrently past the range we want
			}
			out = append(out, fromKgo(r))
		})
	}
	return out
}

func fromKgo(r *kgo.Record) rec {
	out := rec{Key: r.Key, Value: r.Value, Partition: r.Partition, Offset: r.Offset}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, hdr{h.Key, h.Value})
	}
	return out
}

func toKgo(r rec, topic string) *kgo.Record {
	kr := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return kr
}

// produceKgo produces rs (acks=all, franz-go defaults otherwise) and returns
// them with the partitions and offsets the broker acknowledged.
func produceKgo(t testing.TB, cl *kgo.Client, topic string, rs []rec, timeout time.Duration) []rec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out := make([]rec, len(rs))
	copy(out, rs)
	errs := make(chan error, 1)
	for i := range out {
		i := i
		cl.Produce(ctx, toKgo(out[i], topic), func(r *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- fmt.Errorf("record %d: %w", i, err):
				default:
				}
				return
			}
			out[i].Partition, out[i].Offset = r.Partition, r.Offset
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flushing produces to %s: %v", topic, err)
	}
	select {
	case err := <-errs:
		t.Fatalf("producing to %s: %v", topic, err)
	default:
	}
	return out
}

// rawClient returns a kgo client capped at Kafka 2.8's request versions, so
// raw Fetch and ListOffsets requests name topics, not topic IDs.
func rawClient(t testing.TB, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V2_8_0()), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// rawFetch sends one Fetch for one partition and returns that partition's
// response.
func rawFetch(ctx context.Context, cl *kgo.Client, topic string, partition int32, offset int64, maxBytes int32) (*kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 100
	req.MinBytes = 1
	req.MaxBytes = maxBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = maxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if p := &resp.Topics[i].Partitions[j]; resp.Topics[i].Topic == topic && p.Partition == partition {
				return p, nil
			}
		}
	}
	return nil, errors.New("fetch response lacks the partition asked for")
}

// batchCodecs returns the compression codec (attributes & 7) of every
// complete record batch in a fetched record set.
func batchCodecs(records []byte) []int {
	var out []int
	for len(records) >= 61 {
		length := int(int32(binary.BigEndian.Uint32(records[8:12])))
		if length < 49 || 12+length > len(records) {
			break
		}
		attrs := binary.BigEndian.Uint16(records[21:23])
		out = append(out, int(attrs&7))
		records = records[12+length:]
	}
	return out
}

// tbRecorder collects Errorf calls, to test the checkers themselves.
type tbRecorder struct {
	testing.TB
	errs []string
}

func (r *tbRecorder) Helper() {}
func (r *tbRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestCompareRecordsCatchesMismatches: the round-trip checker notices every
// kind of difference it claims to check.
func TestCompareRecordsCatchesMismatches(t *testing.T) {
	produced := makeRecords("self", 30)
	for i := range produced {
		produced[i].Partition = int32(i % 3)
		produced[i].Offset = int64(i / 3)
	}
	same := func() []rec { return append([]rec(nil), produced...) }
	cases := map[string]func([]rec) []rec{
		"identical": func(rs []rec) []rec { return rs },
		"swapped":   func(rs []rec) []rec { rs[0], rs[3] = rs[3], rs[0]; return rs },
		"value": func(rs []rec) []rec {
			rs[4].Value = append(append([]byte(nil), rs[4].Value...), 'x')
			return rs
		},
		"header": func(rs []rec) []rec {
			rs[5].Headers = append(append([]hdr(nil), rs[5].Headers...), hdr{"extra", nil})
			return rs
		},
		"missing":   func(rs []rec) []rec { return rs[:len(rs)-1] },
		"offsetgap": func(rs []rec) []rec { rs[len(rs)-1].Offset++; return rs },
		"partition": func(rs []rec) []rec { rs[1].Partition = 0; return rs },
	}
	for name, mutate := range cases {
		r := &tbRecorder{TB: t}
		compareRecords(r, produced, mutate(same()), compareOpts{checkProducedOffsets: true})
		if got := len(r.errs) > 0; got != (name != "identical") {
			t.Errorf("%s: compareRecords reported %q", name, r.errs)
		}
	}
}
