package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Durability: what a broker acknowledged survives a clean stop, a SIGKILL,
// and damage to the tail of the active segment and its index; retention by
// size removes old segments and moves the log start offset.

const durabilityTimeout = 60 * time.Second

// TestDurabilityCleanRestart: acks=all records survive SIGTERM + restart
// at the offsets they were acknowledged at, and the log continues there.
func TestDurabilityCleanRestart(t *testing.T) {
	b := StartBroker(t)
	const topic, parts = "dur-clean", 3
	createTopic(t, b.Admin(t), topic, parts, nil)
	produced := produceKgo(t, b.Client(t), topic, makeRecords(topic, 3000), durabilityTimeout)

	b.Stop()
	b.Restart()

	adm := b.Admin(t)
	ends := checkEndOffsets(t, adm, topic, produced, parts)
	consumed := consumeKgo(t, b.Addr(), topic, nil, ends, durabilityTimeout)
	compareRecords(t, produced, consumed, compareOpts{checkProducedOffsets: true})

	// The log goes on where it ended: new records get the next offsets.
	more := produceKgo(t, b.Client(t), topic, makeRecords(topic+"-after", 300), durabilityTimeout)
	all := append(append([]rec(nil), produced...), more...)
	ends = checkEndOffsets(t, adm, topic, all, parts)
	consumed = consumeKgo(t, b.Addr(), topic, nil, ends, durabilityTimeout)
	compareRecords(t, all, consumed, compareOpts{checkProducedOffsets: true})
}

// TestDurabilityKill: the broker is SIGKILLed while a producer streams
// acks=all records; after a restart every acknowledged record is there, at
// its acknowledged offset, unchanged, and nothing appears twice.
func TestDurabilityKill(t *testing.T) {
	b := StartBroker(t)
	const topic, parts = "dur-kill", 3
	createTopic(t, b.Admin(t), topic, parts, nil)
	rs := makeRecords(topic, 20000)

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RetryTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		acked = make(map[int]rec) // index in rs -> with partition and offset
		errs  []error
	)
	enough := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), durabilityTimeout)
	defer cancel()
	producing := make(chan struct{})
	go func() {
		defer close(producing)
		for i := range rs {
			i := i
			if ctx.Err() != nil {
				return
			}
			cl.Produce(ctx, toKgo(rs[i], topic), func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				ra := rs[i]
				ra.Partition, ra.Offset = r.Partition, r.Offset
				acked[i] = ra
				if len(acked) == 5000 {
					close(enough)
				}
			})
		}
	}()
	select {
	case <-enough:
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		var first error
		if len(errs) > 0 {
			first = errs[0]
		}
		t.Fatalf("%d records acknowledged within %v, want 5000; %d errors, first: %v", len(acked), durabilityTimeout, len(errs), first)
	}
	b.Kill()
	cancel()
	<-producing
	if err := bounded(20*time.Second, "kgo Close", func() error { cl.Close(); return nil }); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	ackedSnapshot := make(map[int]rec, len(acked))
	for i, r := range acked {
		ackedSnapshot[i] = r
	}
	mu.Unlock()
	t.Logf("%d records acknowledged before SIGKILL", len(ackedSnapshot))

	b.Restart()
	adm := b.Admin(t)
	ends := endOffsets(t, adm, topic)
	for _, r := range ackedSnapshot {
		if r.Offset >= ends[r.Partition] {
			t.Fatalf("partition %d end offset %d after restart, but offset %d was acknowledged", r.Partition, ends[r.Partition], r.Offset)
		}
	}
	consumed := consumeKgo(t, b.Addr(), topic, nil, ends, durabilityTimeout)
	at := make(map[[2]int64]rec, len(consumed))
	seen := make(map[string]bool, len(consumed))
	index := make(map[string]int, len(rs))
	for i, r := range rs {
		index[string(r.Key)] = i
	}
	lastIndex := make(map[int32]int)
	for _, c := range consumed {
		at[[2]int64{int64(c.Partition), c.Offset}] = c
		k := string(c.Key)
		i, ok := index[k]
		switch {
		case !ok:
			t.Errorf("consumed a record never produced: %v", c)
		case seen[k]:
			t.Errorf("record %q appears twice (again at p%d@%d)", k, c.Partition, c.Offset)
		case string(c.Value) != string(rs[i].Value) || !sameHeaders(c.Headers, rs[i].Headers):
			t.Errorf("record %q at p%d@%d has another value or headers than produced", k, c.Partition, c.Offset)
		case i < lastIndex[c.Partition]:
			t.Errorf("partition %d: record %d stored after record %d (out of produce order)", c.Partition, i, lastIndex[c.Partition])
		}
		seen[k] = true
		lastIndex[c.Partition] = i
	}
	lost := 0
	for _, r := range ackedSnapshot {
		c, ok := at[[2]int64{int64(r.Partition), r.Offset}]
		if !ok || string(c.Key) != string(r.Key) {
			if lost < 5 {
				t.Errorf("acknowledged record %q at p%d@%d is lost or replaced (found %q)", r.Key, r.Partition, r.Offset, c.Key)
			}
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged records lost", lost, len(ackedSnapshot))
	}
}

// ---- damaged segments ----

// batchInfo is one record batch found in a .log file.
type batchInfo struct {
	pos        int64 // file position of the batch
	size       int64 // 12 + batchLength
	baseOffset int64
	lastOffset int64
}

// scanBatches walks a .log file's batches (Kafka's v2 layout: baseOffset
// int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc
// uint32, attributes int16, lastOffsetDelta int32, ...) up to the first
// incomplete or zero-length one.
func scanBatches(data []byte) []batchInfo {
	var out []batchInfo
	for pos := 0; pos+27 <= len(data); {
		length := int64(int32(binary.BigEndian.Uint32(data[pos+8:])))
		if length <= 0 || int64(pos)+12+length > int64(len(data)) {
			break
		}
		base := int64(binary.BigEndian.Uint64(data[pos:]))
		delta := int64(int32(binary.BigEndian.Uint32(data[pos+23:])))
		out = append(out, batchInfo{pos: int64(pos), size: 12 + length, baseOffset: base, lastOffset: base + delta})
		pos += int(12 + length)
	}
	return out
}

// segmentFile is one of a partition's segment files.
type segmentFile struct {
	base int64
	path string
	size int64
}

// logSegments lists a partition directory's .log files by base offset.
func logSegments(t testing.TB, dir string) []segmentFile {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading partition directory: %v", err)
	}
	var out []segmentFile
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		stem := strings.TrimSuffix(name, ".log")
		base, err := strconv.ParseInt(stem, 10, 64)
		if err != nil || len(stem) != 20 {
			t.Errorf("unexpected file %s in %s: segment files are named by a 20-digit base offset", name, dir)
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // deleted meanwhile
		}
		out = append(out, segmentFile{base: base, path: filepath.Join(dir, name), size: info.Size()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].base < out[j].base })
	return out
}

// activeSegment returns the .log file with the highest base offset that
// holds data.
func activeSegment(t testing.TB, dir string) segmentFile {
	t.Helper()
	segs := logSegments(t, dir)
	for i := len(segs) - 1; i >= 0; i-- {
		if segs[i].size > 0 {
			return segs[i]
		}
	}
	t.Fatalf("no non-empty .log file in %s (found %v)", dir, segs)
	return segmentFile{}
}

// damage changes a stopped broker's active segment files and returns the
// end offset the log must have after recovery.
type damage func(t *testing.T, seg segmentFile, batches []batchInfo) int64

func appendGarbage(t *testing.T, seg segmentFile, batches []batchInfo) int64 {
	garbage := make([]byte, 3000)
	rand.New(rand.NewSource(1)).Read(garbage)
	f, err := os.OpenFile(seg.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(garbage); err != nil {
		t.Fatal(err)
	}
	return batches[len(batches)-1].lastOffset + 1
}

func cutLastBatch(t *testing.T, seg segmentFile, batches []batchInfo) int64 {
	last := batches[len(batches)-1]
	if err := os.Truncate(seg.path, last.pos+last.size/2); err != nil {
		t.Fatal(err)
	}
	return last.baseOffset
}

func indexPath(seg segmentFile) string { return strings.TrimSuffix(seg.path, ".log") + ".index" }

func truncateIndex(t *testing.T, seg segmentFile, batches []batchInfo) int64 {
	requireIndexEntries(t, seg)
	if err := os.Truncate(indexPath(seg), 5); err != nil {
		t.Fatal(err)
	}
	return batches[len(batches)-1].lastOffset + 1
}

// garbageIndex overwrites every index entry with 0xff bytes: relative
// offsets of -1 and positions far past the end of the log.
func garbageIndex(t *testing.T, seg segmentFile, batches []batchInfo) int64 {
	n := requireIndexEntries(t, seg)
	garbage := make([]byte, n)
	for i := range garbage {
		garbage[i] = 0xff
	}
	if err := os.WriteFile(indexPath(seg), garbage, 0o644); err != nil {
		t.Fatal(err)
	}
	return batches[len(batches)-1].lastOffset + 1
}

func requireIndexEntries(t *testing.T, seg segmentFile) int64 {
	info, err := os.Stat(indexPath(seg))
	if err != nil {
		t.Fatalf("offset index of the active segment: %v", err)
	}
	if info.Size() < 16 {
		t.Fatalf("offset index %s has %d bytes; expected entries after ~%d bytes of log", indexPath(seg), info.Size(), seg.size)
	}
	return info.Size()
}

func both(d1, d2 damage) damage {
	return func(t *testing.T, seg segmentFile, batches []batchInfo) int64 {
		e1 := d1(t, seg, batches)
		e2 := d2(t, seg, batches)
		return min(e1, e2)
	}
}

// TestDurabilityDamagedSegment: after damage to the active segment's tail
// or offset index, a restarted broker serves every record of the intact
// batches (also from offsets in the middle, where the index is used),
// and appends new records at the next offset.
func TestDurabilityDamagedSegment(t *testing.T) {
	cases := []struct {
		name   string
		kill   bool // SIGKILL instead of a clean SIGTERM stop
		damage damage
	}{
		{"garbage-tail/after-kill", true, appendGarbage},
		{"garbage-tail/after-stop", false, appendGarbage},
		{"half-last-batch/after-kill", true, cutLastBatch},
		{"half-last-batch/after-stop", false, cutLastBatch},
		{"index-truncated/after-stop", false, truncateIndex},
		{"index-garbage/after-stop", false, garbageIndex},
		{"half-last-batch+index-truncated/after-stop", false, both(cutLastBatch, truncateIndex)},
	}
	for _, tc := range cases {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			b := StartBroker(t)
			const topic = "dmg"
			createTopic(t, b.Admin(t), topic, 1, nil)
			rs := makeRecords(topic, 2000)
			// Many batches of about 25 records, each acknowledged before the next.
			cl := b.Client(t, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
			var produced []rec
			for i := 0; i < len(rs); i += 25 {
				produced = append(produced, produceKgo(t, cl, topic, rs[i:i+25], durabilityTimeout)...)
			}
			cl.Close()
			if tc.kill {
				b.Kill()
			} else {
				b.Stop()
			}

			seg := activeSegment(t, b.PartitionDir(topic, 0))
			data, err := os.ReadFile(seg.path)
			if err != nil {
				t.Fatal(err)
			}
			batches := scanBatches(data)
			if len(batches) < 2 {
				t.Fatalf("%s: found %d record batches in %d bytes; want Kafka's v2 batch layout", seg.path, len(batches), len(data))
			}
			if last := batches[len(batches)-1].lastOffset; last != int64(len(produced)-1) {
				t.Fatalf("%s: last batch ends at offset %d, want %d", seg.path, last, len(produced)-1)
			}
			if end := batches[len(batches)-1].pos + batches[len(batches)-1].size; end != int64(len(data)) {
				t.Fatalf("%s: %d bytes after the last complete batch before any damage", seg.path, int64(len(data))-end)
			}
			wantEnd := tc.damage(t, seg, batches)
			t.Logf("segment %s: %d batches, damaged; want log end offset %d", filepath.Base(seg.path), len(batches), wantEnd)

			b.Restart()
			adm := b.Admin(t)
			if ends := endOffsets(t, adm, topic); ends[0] != wantEnd {
				t.Errorf("end offset after recovery %d, want %d", ends[0], wantEnd)
			}
			intact := produced[:wantEnd]
			consumed := consumeKgo(t, b.Addr(), topic, nil, map[int32]int64{0: wantEnd}, durabilityTimeout)
			compareRecords(t, intact, consumed, compareOpts{checkProducedOffsets: true})

			// Reads from the middle go through the (rebuilt) offset index.
			for _, off := range []int64{1, wantEnd / 3, wantEnd / 2, wantEnd - 2, wantEnd - 1} {
				got := consumeKgo(t, b.Addr(), topic, map[int32]int64{0: off}, map[int32]int64{0: off + 1}, durabilityTimeout)
				if len(got) != 1 || got[0].Offset != off || string(got[0].Key) != string(produced[off].Key) {
					t.Errorf("reading from offset %d: got %v, want key %q", off, got, produced[off].Key)
				}
			}

			// New records go at the next offset after the intact ones.
			more := produceKgo(t, b.Client(t), topic, makeRecords(topic+"-after", 10), durabilityTimeout)
			if more[0].Offset != wantEnd {
				t.Errorf("first record after recovery acknowledged at offset %d, want %d", more[0].Offset, wantEnd)
			}
			all := append(append([]rec(nil), intact...), more...)
			consumed = consumeKgo(t, b.Addr(), topic, nil, map[int32]int64{0: wantEnd + 10}, durabilityTimeout)
			compareRecords(t, all, consumed, compareOpts{checkProducedOffsets: true})
		})
	}
}

// TestRetentionBySize: with small segments and log.retention.bytes, old
// segments are deleted, the log start offset moves up to the first kept
// segment, later data stays readable and a fetch below the start offset
// gets OFFSET_OUT_OF_RANGE.
func TestRetentionBySize(t *testing.T) {
	const (
		segmentBytes   = 16384
		retentionBytes = 65536
	)
	b := StartBroker(t,
		"log.segment.bytes="+strconv.Itoa(segmentBytes),
		"log.retention.bytes="+strconv.Itoa(retentionBytes),
		"log.retention.check.interval.ms=200",
	)
	const topic = "retention"
	createTopic(t, b.Admin(t), topic, 1, nil)
	rs := makeRecords(topic, 4000) // about 2 MB with headers
	cl := b.Client(t, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(8192))
	produced := produceKgo(t, cl, topic, rs, durabilityTimeout)
	end := int64(len(produced))

	adm := b.Admin(t)
	dir := b.PartitionDir(topic, 0)
	var start int64
	checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		starts, err := offsetsOf(ctx, adm, topic, false)
		if err != nil {
			return err
		}
		segs := logSegments(t, dir)
		var total int64
		for _, s := range segs {
			total += s.size
		}
		switch {
		case len(segs) == 0:
			return fmt.Errorf("no .log files in %s", dir)
		case segs[0].base == 0:
			return fmt.Errorf("first segment still at base offset 0 (%d segments, %d bytes)", len(segs), total)
		case total > retentionBytes+2*segmentBytes:
			return fmt.Errorf("%d segments hold %d bytes, want at most retention %d + 2 segments", len(segs), total, retentionBytes)
		case starts[0] != segs[0].base:
			return fmt.Errorf("log start offset %d, want the first kept segment's base offset %d", starts[0], segs[0].base)
		}
		start = starts[0]
		return nil
	})
	t.Logf("log start offset %d of %d after retention", start, end)

	// Everything from the start offset on is still there and unchanged.
	consumed := consumeKgo(t, b.Addr(), topic, map[int32]int64{0: start}, map[int32]int64{0: end}, durabilityTimeout)
	compareRecords(t, produced[start:], consumed, compareOpts{startOffsets: map[int32]int64{0: start}, checkProducedOffsets: true})

	// Below the start offset: OFFSET_OUT_OF_RANGE, with the log start offset.
	ctx := testContext(t, 15*time.Second)
	p, err := rawFetch(ctx, rawClient(t, b.Addr()), topic, 0, 0, 1<<20)
	if err != nil {
		t.Fatalf("fetch at offset 0: %v", err)
	}
	if p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch at offset 0 below start %d: error code %d (%v), want %d OFFSET_OUT_OF_RANGE", start, p.ErrorCode, kerr.ErrorForCode(p.ErrorCode), kerr.OffsetOutOfRange.Code)
	}
	if len(p.RecordBatches) != 0 {
		t.Errorf("fetch below the start offset returned %d bytes of records", len(p.RecordBatches))
	}
	if p.LogStartOffset != start {
		t.Errorf("fetch response log start offset %d, want %d", p.LogStartOffset, start)
	}
}
