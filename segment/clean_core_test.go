package segment

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestOffsetMapCapacityAsSkimpyOffsetMap(t *testing.T) {
	// 240 bytes: 10 slots of 24 bytes, 9 usable at load factor 0.9.
	m := newOffsetMap(240)
	if m.maxEntries != 9 {
		t.Fatalf("maxEntries = %d, want 9", m.maxEntries)
	}
	for i := 0; i < 9; i++ {
		if !m.put([]byte{byte(i)}, int64(i)) {
			t.Fatalf("put %d refused", i)
		}
	}
	if m.put([]byte{99}, 99) {
		t.Fatal("put of a 10th key accepted")
	}
	// Kafka checks the size before every put, so a full map refuses even a
	// key it has: the mapped range then ends before that record.
	if m.put([]byte{0}, 100) {
		t.Fatal("put into a full map accepted")
	}
	if got := m.get([]byte{3}); got != 3 {
		t.Fatalf("get = %d, want 3", got)
	}
	if got := m.get([]byte("absent")); got != -1 {
		t.Fatalf("get absent = %d, want -1", got)
	}
}

type kv struct {
	key, value string // "" value with tomb
	tomb       bool
	nullKey    bool
}

func keyedBatch(spec recordbatch.BatchSpec, recs ...kv) ([]byte, recordbatch.Header) {
	var rs []recordbatch.Record
	for i, r := range recs {
		rec := recordbatch.Record{TimestampDelta: int64(i)}
		if !r.nullKey {
			rec.Key = []byte(r.key)
		}
		if !r.tomb {
			rec.Value = []byte(r.value)
		}
		rs = append(rs, rec)
	}
	b := recordbatch.Build(spec, rs)
	h, err := recordbatch.Validate(b)
	if err != nil {
		panic(err)
	}
	return b, h
}

// recordsOf lists "offset:key=value" ("key=<nil>" for a tombstone).
func recordsOf(t testing.TB, batch []byte) []string {
	t.Helper()
	h, err := recordbatch.Validate(batch)
	if err != nil {
		t.Fatalf("invalid batch: %v", err)
	}
	var out []string
	err = recordbatch.ForEachRecord(batch, func(r kmsg.Record) error {
		v := string(r.Value)
		if r.Value == nil {
			v = "<nil>"
		}
		out = append(out, fmt.Sprintf("%d:%s=%s", h.BaseOffset+int64(r.OffsetDelta), r.Key, v))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFilterBatch(t *testing.T) {
	plain := recordbatch.NoProducer()
	plain.BaseOffset, plain.FirstTimestamp = 10, 5000
	producer := plain
	producer.ProducerID, producer.ProducerEpoch, producer.BaseSequence = 7, 2, 30
	txn := producer
	txn.Attributes = recordbatch.TransactionalBit
	// A batch a cleaning gave the delete horizon 2000 (KIP-534): the base
	// timestamp is the horizon.
	horizoned := plain
	horizoned.Attributes, horizoned.FirstTimestamp = recordbatch.DeleteHorizonBit, 2000

	// Map: a latest at 11, b latest at 20 (later batch), c latest at 12.
	m := newOffsetMap(1 << 20)
	m.put([]byte("a"), 11)
	m.put([]byte("b"), 20)
	m.put([]byte("c"), 12)
	m.latest = 20

	marker := recordbatch.BuildTxnMarker(7, 2, false, 1, 5000)
	recordbatch.SetBaseOffset(marker, 10)
	markerH, _ := recordbatch.Validate(marker)

	tests := []struct {
		name        string
		spec        recordbatch.BatchSpec
		recs        []kv
		latest      int64 // overrides m.latest when set
		now         int64
		wantHorizon int64 // of the output batch; 0: none expected
		lastData    map[int64]int64
		aborted     []AbortedTxn
		want        batchOutcome
		wantRecs    []string
	}{
		{name: "all latest kept as is", spec: plain, recs: []kv{{key: "x", value: "0"}, {key: "a", value: "1"}, {key: "c", value: "2"}},
			want: batchKept, wantRecs: []string{"10:x=0", "11:a=1", "12:c=2"}},
		{name: "superseded removed, offsets kept", spec: plain, recs: []kv{{key: "a", value: "0"}, {key: "a", value: "1"}, {key: "b", value: "2"}},
			want: batchRewritten, wantRecs: []string{"11:a=1"}},
		{name: "tombstone kept, batch gets its delete horizon", spec: plain, recs: []kv{{key: "x", value: "0"}, {key: "a", tomb: true}},
			now: 1000, wantHorizon: 1500, want: batchRewritten, wantRecs: []string{"10:x=0", "11:a=<nil>"}},
		{name: "tombstone kept before the horizon", spec: horizoned, recs: []kv{{key: "x", value: "0"}, {key: "a", tomb: true}},
			now: 1999, want: batchKept, wantRecs: []string{"10:x=0", "11:a=<nil>"}},
		{name: "tombstone removed at the horizon", spec: horizoned, recs: []kv{{key: "x", value: "0"}, {key: "a", tomb: true}},
			now: 2000, wantHorizon: 2000, want: batchRewritten, wantRecs: []string{"10:x=0"}},
		{name: "null key removed", spec: plain, recs: []kv{{nullKey: true, value: "0"}, {key: "a", value: "1"}},
			want: batchRewritten, wantRecs: []string{"11:a=1"}},
		{name: "past the mapped range kept", spec: plain, recs: []kv{{key: "b", value: "0"}, {key: "b", value: "1"}},
			latest: 10, want: batchRewritten, wantRecs: []string{"11:b=1"}},
		{name: "all superseded dropped", spec: plain, recs: []kv{{key: "b", value: "0"}, {key: "b", value: "1"}},
			want: batchDropped},
		{name: "producer's last batch kept empty", spec: producer, recs: []kv{{key: "b", value: "0"}, {key: "b", value: "1"}},
			lastData: map[int64]int64{7: 11}, want: batchEmptied},
		{name: "producer's earlier batch dropped", spec: producer, recs: []kv{{key: "b", value: "0"}, {key: "b", value: "1"}},
			lastData: map[int64]int64{7: 99}, want: batchDropped},
		{name: "aborted batch dropped", spec: txn, recs: []kv{{key: "x", value: "0"}, {key: "a", value: "1"}},
			aborted: []AbortedTxn{{ProducerID: 7, FirstOffset: 10, LastOffset: 15}}, want: batchDropped},
		{name: "aborted last batch of producer kept empty", spec: txn, recs: []kv{{key: "x", value: "0"}},
			lastData: map[int64]int64{7: 10}, aborted: []AbortedTxn{{ProducerID: 7, FirstOffset: 10, LastOffset: 15}}, want: batchEmptied},
		{name: "committed transaction kept", spec: txn, recs: []kv{{key: "x", value: "0"}},
			aborted: []AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 5}}, want: batchKept, wantRecs: []string{"10:x=0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, h := keyedBatch(tc.spec, tc.recs...)
			mm := *m
			if tc.latest != 0 {
				mm.latest = tc.latest
			}
			tails := producerTails{}
			for id, off := range tc.lastData {
				tails[id] = producerTail{lastData: off, dataEpoch: tc.spec.ProducerEpoch, epoch: tc.spec.ProducerEpoch}
			}
			f := &cleanFilter{offsets: &mm, nowMs: tc.now, deleteRetentionMs: 500, producers: tails, aborts: NewAbortedRanges(tc.aborted)}
			out, outcome, err := filterBatch(b, h, f)
			if err != nil {
				t.Fatal(err)
			}
			if outcome != tc.want {
				t.Fatalf("outcome %d, want %d", outcome, tc.want)
			}
			switch outcome {
			case batchKept:
				if !bytes.Equal(out, b) {
					t.Fatal("kept batch changed")
				}
			case batchDropped:
				if out != nil {
					t.Fatal("dropped batch returned bytes")
				}
				return
			}
			oh, err := recordbatch.Validate(out)
			if err != nil {
				t.Fatalf("output invalid: %v", err)
			}
			// What Kafka's filterTo keeps of the header: offsets, producer
			// fields, leader epoch, transactional bit.
			if oh.BaseOffset != h.BaseOffset || oh.LastOffset() != h.LastOffset() ||
				oh.ProducerID != h.ProducerID || oh.ProducerEpoch != h.ProducerEpoch || oh.BaseSequence != h.BaseSequence ||
				oh.PartitionLeaderEpoch != h.PartitionLeaderEpoch || oh.IsTransactional() != h.IsTransactional() {
				t.Fatalf("header %+v, from %+v", oh, h)
			}
			if tc.wantHorizon != 0 && oh.DeleteHorizon() != tc.wantHorizon {
				t.Fatalf("delete horizon %d, want %d", oh.DeleteHorizon(), tc.wantHorizon)
			}
			if outcome == batchEmptied {
				if oh.RecordCount != 0 || len(out) != recordbatch.HeaderSize {
					t.Fatalf("emptied batch has %d records, %d bytes", oh.RecordCount, len(out))
				}
				return
			}
			if got := recordsOf(t, out); fmt.Sprint(got) != fmt.Sprint(tc.wantRecs) {
				t.Fatalf("records %v, want %v", got, tc.wantRecs)
			}
		})
	}

	t.Run("control batch kept", func(t *testing.T) {
		f := &cleanFilter{offsets: m, aborts: NewAbortedRanges([]AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 10}})}
		out, outcome, err := filterBatch(marker, markerH, f)
		if err != nil || outcome != batchKept || !bytes.Equal(out, marker) {
			t.Fatalf("outcome %d err %v", outcome, err)
		}
	})
}

func TestRewrittenBatchTimestamps(t *testing.T) {
	spec := recordbatch.NoProducer()
	spec.BaseOffset, spec.FirstTimestamp = 0, 1000
	b, h := keyedBatch(spec, kv{key: "a", value: "0"}, kv{key: "b", value: "1"}, kv{key: "a", value: "2"})
	m := newOffsetMap(1 << 20)
	m.put([]byte("a"), 2)
	m.put([]byte("b"), 1)
	m.latest = 2
	out, _, err := filterBatch(b, h, &cleanFilter{offsets: m})
	if err != nil {
		t.Fatal(err)
	}
	oh, _ := recordbatch.Validate(out)
	// Kafka's builder: base timestamp is the first kept record's (1001),
	// max the largest kept (1002).
	if oh.BaseTimestamp != 1001 || oh.MaxTimestamp != 1002 {
		t.Fatalf("timestamps %d..%d, want 1001..1002", oh.BaseTimestamp, oh.MaxTimestamp)
	}
	var ts []int64
	_ = recordbatch.ForEachRecord(out, func(r kmsg.Record) error {
		ts = append(ts, oh.BaseTimestamp+r.TimestampDelta64)
		return nil
	})
	if fmt.Sprint(ts) != "[1001 1002]" {
		t.Fatalf("record timestamps %v", ts)
	}
}

func TestMapBatch(t *testing.T) {
	spec := recordbatch.NoProducer()
	spec.BaseOffset = 100
	b, h := keyedBatch(spec, kv{key: "a", value: "0"}, kv{nullKey: true, value: "1"}, kv{key: "b", value: "2"}, kv{key: "c", value: "3"})

	m := newOffsetMap(1 << 20)
	if ok, err := mapBatch(m, b, h, 101, nil); !ok || err != nil {
		t.Fatal(ok, err)
	}
	// Offset 100 is below the dirty start; the null key is not mapped.
	if m.get([]byte("a")) != -1 || m.get([]byte("b")) != 102 || m.get([]byte("c")) != 103 || m.latest != 103 {
		t.Fatalf("map of %d entries, latest %d", m.entries, m.latest)
	}

	small := newOffsetMap(3 * offsetMapEntryBytes) // 3 slots: 2 keys at 0.9
	if small.maxEntries != 2 {
		t.Fatalf("maxEntries %d", small.maxEntries)
	}
	if ok, _ := mapBatch(small, b, h, 0, nil); ok {
		t.Fatal("a map for 2 keys took 3")
	}
	if small.latest != -1 {
		t.Fatalf("latest %d after a partly mapped batch, want -1", small.latest)
	}

	txn := spec
	txn.ProducerID, txn.Attributes = 5, recordbatch.TransactionalBit
	tb, th := keyedBatch(txn, kv{key: "z", value: "0"})
	m2 := newOffsetMap(1 << 20)
	if ok, _ := mapBatch(m2, tb, th, 0, NewAbortedRanges([]AbortedTxn{{ProducerID: 5, FirstOffset: 100, LastOffset: 101}})); !ok {
		t.Fatal("refused")
	}
	if m2.get([]byte("z")) != -1 || m2.latest != 100 {
		t.Fatalf("aborted record mapped: %d entries, latest %d", m2.entries, m2.latest)
	}
}

func TestGroupSegmentsBySize(t *testing.T) {
	seg := func(base, size, idx int64) segmentInfo {
		return segmentInfo{base: base, size: size, offsetIdxBytes: idx, timeIdxBytes: idx * 3 / 2}
	}
	tests := []struct {
		name string
		segs []segmentInfo
		max  int64
		idx  int64
		uncl int64
		want string
	}{
		{"one", []segmentInfo{seg(0, 100, 8)}, 1000, 1000, 50, "[[0 1]]"},
		{"all fit", []segmentInfo{seg(0, 100, 8), seg(10, 100, 8), seg(20, 100, 8)}, 1000, 1000, 50, "[[0 3]]"},
		{"by log size", []segmentInfo{seg(0, 400, 8), seg(10, 400, 8), seg(20, 400, 8), seg(30, 100, 8)}, 1000, 1000, 50, "[[0 2] [2 4]]"},
		{"exact size fits", []segmentInfo{seg(0, 500, 8), seg(10, 500, 8)}, 1000, 1000, 50, "[[0 2]]"},
		{"by offset index", []segmentInfo{seg(0, 1, 64), seg(10, 1, 64), seg(20, 1, 64)}, 1000, 128, 50, "[[0 1] [1 2] [2 3]]"},
		{"by relative offset", []segmentInfo{seg(0, 1, 0), seg(1<<31, 1, 0)}, 1000, 1000, 1<<31 + 5, "[[0 1] [1 2]]"},
		{"empty segment ignores offsets", []segmentInfo{seg(0, 1, 0), seg(1<<31, 0, 0)}, 1000, 1000, 1<<31 + 5, "[[0 2]]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := fmt.Sprint(groupSegmentsBySize(tc.segs, tc.max, tc.idx, tc.uncl))
			if got != tc.want {
				t.Fatalf("groups %s, want %s", got, tc.want)
			}
		})
	}
}

// TestOffsetMapAgainstGoMap: the open-addressing table answers as a Go map
// over many keys and overwrites while it grows, and its memory never
// passes the buffer it was given.
func TestOffsetMapAgainstGoMap(t *testing.T) {
	for _, buffer := range []int64{5 * offsetMapEntryBytes, 1000 * offsetMapEntryBytes, 1 << 20} {
		m := newOffsetMap(buffer)
		want := map[string]int64{}
		for i := 0; ; i++ {
			key := fmt.Sprintf("key-%d", (i*7919)%(m.maxEntries+m.maxEntries/3+1))
			if !m.put([]byte(key), int64(i)) {
				if len(want) != m.maxEntries {
					t.Fatalf("buffer %d: refused at %d keys, limit %d", buffer, len(want), m.maxEntries)
				}
				break
			}
			want[key] = int64(i)
			if int64(len(m.table)) > buffer {
				t.Fatalf("buffer %d: table of %d bytes", buffer, len(m.table))
			}
		}
		if m.entries != len(want) {
			t.Fatalf("buffer %d: %d entries, want %d", buffer, m.entries, len(want))
		}
		for k, o := range want {
			if got := m.get([]byte(k)); got != o {
				t.Fatalf("buffer %d: get(%s) = %d, want %d", buffer, k, got, o)
			}
		}
		if m.get([]byte("absent")) != -1 {
			t.Fatalf("buffer %d: an absent key is mapped", buffer)
		}
	}
}
