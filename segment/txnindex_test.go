package segment

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kbroker/kbroker/recordbatch"
)

// appendAbort appends an abort marker of producer pid whose transaction
// began at first, with lso as its last stable offset.
func (a *appender) appendAbort(pid, first, lso int64) AbortedTxn {
	a.t.Helper()
	b := recordbatch.BuildTxnMarker(pid, 0, false, 0, a.ts)
	base := a.l.EndOffset()
	recordbatch.SetBaseOffset(b, base)
	h := header(a.t, b)
	at := AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: base, LastStableOffset: lso}
	if lso < 0 {
		at.LastStableOffset = base + 1
	}
	if err := a.l.AppendAbortMarker(b, h, at); err != nil {
		a.t.Fatalf("AppendAbortMarker at %d: %v", base, err)
	}
	a.batches = append(a.batches, b)
	a.headers = append(a.headers, h)
	return at
}

// Kafka's AbortedTxn layout, byte for byte: version 0, then producer id,
// first offset, last offset and last stable offset, big-endian, 34 bytes.
func TestAbortedTxnEncoding(t *testing.T) {
	var b [abortedTxnSize]byte
	AbortedTxn{ProducerID: 0x0102030405060708, FirstOffset: 5, LastOffset: 9, LastStableOffset: 10}.encode(b[:])
	want := "0000" + "0102030405060708" + "0000000000000005" + "0000000000000009" + "000000000000000a"
	if got := hex.EncodeToString(b[:]); got != want {
		t.Fatalf("entry = %s, want %s", got, want)
	}
	b[1] = 1
	if _, err := decodeAbortedTxn(b[:]); err == nil {
		t.Fatal("version 1 entry accepted")
	}
}

// Entries go to the segment of their marker; a fetch range collects them
// across segments, stopping where a last stable offset reaches the upper
// bound; truncation, segment deletion and a full truncation remove them.
func TestTxnIndexAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 300
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	var want []AbortedTxn
	for i := 0; i < 12; i++ {
		a.add(2, 50)
		first := l.EndOffset() - 2
		want = append(want, a.appendAbort(int64(i), first, -1))
	}
	if l.NumSegments() < 3 {
		t.Fatalf("%d segments, want several", l.NumSegments())
	}
	got, err := l.AbortedTxnsOfSegments()
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("entries = %+v, %v; want %+v", got, err, want)
	}
	for _, s := range l.segments {
		if s.txnIdx.entries > 0 {
			if _, err := os.Stat(segmentPath(dir, s.base, txnIndexSuffix)); err != nil {
				t.Fatalf("segment %d has entries but no file: %v", s.base, err)
			}
		}
	}
	// Collect: everything; from the middle; an upper bound that stops
	// at the first entry whose LSO reaches it.
	if c, _ := l.CollectAbortedTxns(0, math.MaxInt64); !slices.Equal(c, want) {
		t.Fatalf("collect all = %+v", c)
	}
	mid := want[5]
	if c, _ := l.CollectAbortedTxns(mid.LastOffset, math.MaxInt64); !slices.Equal(c, want[5:]) {
		t.Fatalf("collect from %d = %+v", mid.LastOffset, c)
	}
	if c, _ := l.CollectAbortedTxns(want[2].FirstOffset, want[4].FirstOffset); !slices.Equal(c, want[2:4]) {
		t.Fatalf("collect [%d, %d) = %+v, want %+v", want[2].FirstOffset, want[4].FirstOffset, c, want[2:4])
	}
	if c, _ := l.CollectAbortedTxns(want[2].FirstOffset, want[4].LastOffset); !slices.Equal(c, want[2:5]) {
		t.Fatalf("collect [%d, %d) = %+v, want %+v", want[2].FirstOffset, want[4].LastOffset, c, want[2:5])
	}
	// Truncation removes the entries at or after the cut; a crash-free
	// reopen finds the same.
	if err := l.TruncateTo(want[7].LastOffset); err != nil {
		t.Fatal(err)
	}
	if c, _ := l.CollectAbortedTxns(0, math.MaxInt64); !slices.Equal(c, want[:7]) {
		t.Fatalf("after truncation: %+v", c)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg, true, nil)
	if c, _ := l.CollectAbortedTxns(0, math.MaxInt64); !slices.Equal(c, want[:7]) || l.TxnIndexCompleteBelow() != math.MaxInt64 {
		t.Fatalf("after reopen: %+v (complete below %d)", c, l.TxnIndexCompleteBelow())
	}
	// Retention of the first segments deletes their files.
	first := l.segments[0]
	if err := l.SetStartOffset(l.segments[2].base); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(segmentPath(dir, first.base, txnIndexSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("txnindex of a deleted segment: %v", err)
	}
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if c, _ := l.CollectAbortedTxns(1000, math.MaxInt64); len(c) != 0 {
		t.Fatalf("after full truncation: %+v", c)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*"+txnIndexSuffix))
	if len(matches) != 0 {
		t.Fatalf("txnindex files left: %v", matches)
	}
	l.Close()
}

// A crash between an abort marker's append and its index entry (or with
// the entry torn, or written while the marker was lost) is recovered: the
// entries at or above the recovery point of the rescanned segments are
// dropped and TxnIndexCompleteBelow says where the caller must re-add them
// from; RepairTxnIndex re-adds what is missing and skips what is there.
func TestTxnIndexCrashRecovery(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 300
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	a.add(2, 10)
	e1 := a.appendAbort(1, 0, -1)
	a.add(1, 400)                     // rolls: the next segment starts at 3
	if err := l.Flush(); err != nil { // the recovery point moves into it
		t.Fatal(err)
	}
	a.add(2, 10)
	e2 := a.appendAbort(2, 4, -1)
	a.add(1, 10)
	e3 := a.appendAbort(3, 7, -1)
	last := l.ActiveSegmentBase()
	crash(l)
	rp, err := readOffsetCheckpoint(filepath.Join(dir, RecoveryPointCheckpointFile))
	if err != nil || rp < 3 || rp > e3.LastOffset {
		t.Fatalf("recovery point %d, %v", rp, err)
	}
	var durable []AbortedTxn
	for _, e := range []AbortedTxn{e1, e2, e3} {
		if e.LastOffset < rp {
			durable = append(durable, e)
		}
	}
	// A torn half entry at the end of the rescanned segment's index.
	path := segmentPath(dir, last, txnIndexSuffix)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 17))
	f.Close()

	l = openLog(t, dir, cfg, false, nil)
	if got := l.TxnIndexCompleteBelow(); got != rp {
		t.Fatalf("TxnIndexCompleteBelow = %d, want the recovery point %d", got, rp)
	}
	if c, _ := l.CollectAbortedTxns(0, math.MaxInt64); !slices.Equal(c, durable) {
		t.Fatalf("after recovery: %+v, want the flushed entries %+v", c, durable)
	}
	if err := l.RepairTxnIndex([]AbortedTxn{e1, e2, e3}); err != nil {
		t.Fatal(err)
	}
	if c, _ := l.CollectAbortedTxns(0, math.MaxInt64); !slices.Equal(c, []AbortedTxn{e1, e2, e3}) {
		t.Fatalf("after repair: %+v", c)
	}
	if l.TxnIndexCompleteBelow() != math.MaxInt64 {
		t.Fatal("repair did not mark the index complete")
	}
	if st, _ := os.Stat(path); st.Size()%abortedTxnSize != 0 {
		t.Fatalf("index is %d bytes", st.Size())
	}
	l.Close()
	path = segmentPath(dir, 0, txnIndexSuffix)

	// A damaged index (an entry outside its segment) of a cleanly closed
	// log is emptied and reported from the segment's base.
	bad := make([]byte, abortedTxnSize)
	AbortedTxn{ProducerID: 9, FirstOffset: 0, LastOffset: 1 << 40, LastStableOffset: 1 << 40}.encode(bad)
	f, _ = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(bad)
	f.Close()
	var logs logBuf
	l = openLog(t, dir, cfg, true, &logs)
	defer l.Close()
	if l.TxnIndexCompleteBelow() != 0 || !strings.Contains(logs.String(), "damaged transaction index") {
		t.Fatalf("damaged index: complete below %d; log %s", l.TxnIndexCompleteBelow(), logs.String())
	}
	if c, _ := l.CollectAbortedTxns(0, math.MaxInt64); !slices.Equal(c, []AbortedTxn{e2, e3}) {
		t.Fatalf("damaged index kept: %+v", c)
	}
}

// Kafka's snapshot layout, byte for byte, and its CRC-32C (Castagnoli)
// over everything after the crc field.
func TestProducerSnapshotEncoding(t *testing.T) {
	e := ProducerSnapshotEntry{ProducerID: 7, Epoch: 2, LastSequence: 9, LastOffset: 100, OffsetDelta: 4,
		Timestamp: 1700000000000, CoordinatorEpoch: 3, CurrentTxnFirstOffset: -1}
	b := EncodeProducerSnapshot([]ProducerSnapshotEntry{e})
	body := "00000001" + // array length
		"0000000000000007" + "0002" + "00000009" + "0000000000000064" + "00000004" +
		"0000018bcfe56800" + "00000003" + "ffffffffffffffff"
	raw, _ := hex.DecodeString(body)
	crc := crc32.Checksum(raw, crc32.MakeTable(crc32.Castagnoli))
	want := "0001" + hex.EncodeToString([]byte{byte(crc >> 24), byte(crc >> 16), byte(crc >> 8), byte(crc)}) + body
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("snapshot =\n%s, want\n%s", got, want)
	}
	if crc32.Checksum([]byte("123456789"), crc32.MakeTable(crc32.Castagnoli)) != 0xe3069283 {
		t.Fatal("not CRC-32C")
	}
	got, err := DecodeProducerSnapshot(b)
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], e) {
		t.Fatalf("decode = %+v, %v", got, err)
	}
	for name, bad := range map[string][]byte{
		"short":     b[:len(b)-3],
		"empty":     nil,
		"crc":       append(slices.Clone(b[:len(b)-1]), b[len(b)-1]^1),
		"version":   append([]byte{0, 2}, b[2:]...),
		"trailing":  append(slices.Clone(b), 0),
		"neg count": EncodeProducerSnapshot(nil)[:6],
	} {
		if _, err := DecodeProducerSnapshot(bad); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("%s: err = %v", name, err)
		}
	}
}

// kbroker's extension: the earlier batches of a producer's window follow
// Kafka's entries inside the CRC, so the file starts with the v1 snapshot
// Kafka reads (its count and entries unchanged, its CRC over the whole
// rest) and decodes back whole; a damaged extension is corrupt.
func TestProducerSnapshotExtension(t *testing.T) {
	plain := ProducerSnapshotEntry{ProducerID: 3, Epoch: 0, LastSequence: -1, LastOffset: -1, CurrentTxnFirstOffset: -1}
	windowed := ProducerSnapshotEntry{ProducerID: 7, Epoch: 2, LastSequence: 9, LastOffset: 100, OffsetDelta: 4,
		Timestamp: 1700000000000, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1,
		Earlier: []SnapshotBatch{{0, 2, 80, 2, -1}, {3, 5, 90, 2, 1700000000001}}}
	entries := []ProducerSnapshotEntry{plain, windowed}
	b := EncodeProducerSnapshot(entries)
	kafka := EncodeProducerSnapshot([]ProducerSnapshotEntry{plain, {ProducerID: 7, Epoch: 2, LastSequence: 9, LastOffset: 100,
		OffsetDelta: 4, Timestamp: 1700000000000, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}})
	if !bytes.Equal(b[6:len(kafka)], kafka[6:]) || len(b) != len(kafka)+snapshotExtHeaderSize+snapshotExtEntrySize+2*snapshotExtBatchSize {
		t.Fatalf("extension changed Kafka's entries or has the wrong size:\n%x\n%x", b, kafka)
	}
	if crc := crc32.Checksum(b[6:], crc32.MakeTable(crc32.Castagnoli)); binary.BigEndian.Uint32(b[2:]) != crc {
		t.Fatal("the CRC does not cover the extension")
	}
	got, err := DecodeProducerSnapshot(b)
	if err != nil || !reflect.DeepEqual(got, entries) {
		t.Fatalf("decode = %+v, %v", got, err)
	}
	resum := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], crc32.MakeTable(crc32.Castagnoli)))
		return b
	}
	ext := len(kafka)
	for name, bad := range map[string][]byte{
		"trailing byte":    resum(append(slices.Clone(b), 0)),
		"cut":              resum(slices.Clone(b[:len(b)-1])),
		"magic":            resum(append(slices.Clone(b[:ext]), append([]byte{0, 0, 0, 0}, b[ext+4:]...)...)),
		"unknown producer": resum(append(slices.Clone(b[:ext+snapshotExtHeaderSize]), append([]byte{0, 0, 0, 0, 0, 0, 0, 9}, b[ext+snapshotExtHeaderSize+8:]...)...)),
		"too many":         resum(EncodeProducerSnapshot([]ProducerSnapshotEntry{{ProducerID: 1, Earlier: make([]SnapshotBatch, MaxEarlierBatches+1)}})),
	} {
		if _, err := DecodeProducerSnapshot(bad); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("%s: err = %v", name, err)
		}
	}
}

// Snapshots: the newest usable one loads, a corrupt one is logged,
// deleted and the next older one used; truncation deletes those past the
// new end, a higher log start those below it, a full truncation all.
func TestProducerSnapshots(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	var logs logBuf
	l := openLog(t, dir, cfg, true, &logs)
	a := newAppender(t, l)
	for i := 0; i < 30; i++ {
		a.add(1, 40)
	}
	entries := func(id int64) []ProducerSnapshotEntry {
		return []ProducerSnapshotEntry{{ProducerID: id, LastSequence: -1, LastOffset: -1, CurrentTxnFirstOffset: -1}}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, o := range []int64{5, 10, 20} {
		if err := l.WriteProducerSnapshot(o, entries(o)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.WriteProducerSnapshot(31, nil); err == nil {
		t.Fatal("snapshot past the log end written")
	}
	if name := filepath.Join(dir, "00000000000000000020.snapshot"); !fileExists(name) {
		t.Fatalf("%s missing", name)
	}
	if off, e, ok := l.LoadProducerSnapshot(0, 15); !ok || off != 10 || e[0].ProducerID != 10 {
		t.Fatalf("load <= 15: %d %+v %v", off, e, ok)
	}
	// Corrupt the one at 10: the load falls back to 5 and deletes it.
	path10 := segmentPath(dir, 10, snapshotSuffix)
	b, _ := os.ReadFile(path10)
	b[len(b)-1] ^= 0xff
	os.WriteFile(path10, b, 0o644)
	if off, _, ok := l.LoadProducerSnapshot(0, 15); !ok || off != 5 {
		t.Fatalf("after corrupting 10: %d %v", off, ok)
	}
	if fileExists(path10) || !strings.Contains(logs.String(), "ignoring unreadable producer state snapshot") {
		t.Fatalf("corrupt snapshot kept or not logged: %s", logs.String())
	}
	// A short file too.
	os.WriteFile(segmentPath(dir, 5, snapshotSuffix), []byte{0, 1, 2}, 0o644)
	if _, _, ok := l.LoadProducerSnapshot(0, 15); ok {
		t.Fatal("short snapshot loaded")
	}
	if err := l.TruncateTo(15); err != nil {
		t.Fatal(err)
	}
	if got := l.ProducerSnapshotOffsets(); len(got) != 0 {
		t.Fatalf("after truncation to 15: %v", got)
	}
	for _, o := range []int64{3, 8, 12} {
		if err := l.WriteProducerSnapshot(o, entries(o)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetStartOffset(8); err != nil {
		t.Fatal(err)
	}
	if got := l.ProducerSnapshotOffsets(); !slices.Equal(got, []int64{8, 12}) {
		t.Fatalf("after log start 8: %v", got)
	}
	// A crash: snapshots above the recovery point go at open.
	crash(l)
	l = openLog(t, dir, cfg, false, nil)
	if got := l.ProducerSnapshotOffsets(); len(got) != 0 && got[len(got)-1] > l.EndOffset() {
		t.Fatalf("after crash: %v", got)
	}
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if got := l.ProducerSnapshotOffsets(); len(got) != 0 {
		t.Fatalf("after full truncation: %v", got)
	}
	l.Close()
}

// Written at each roll, only the snapshots Kafka keeps stay: at or above
// the base of the segment before the active one (and of the recovery
// point's).
func TestProducerSnapshotRetention(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 200
	l := openLog(t, dir, cfg, true, nil)
	defer l.Close()
	a := newAppender(t, l)
	for i := 0; i < 40; i++ {
		before := l.ActiveSegmentBase()
		h := a.add(1, 40)
		if base := l.ActiveSegmentBase(); base != before {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := l.WriteProducerSnapshot(h.BaseOffset, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := l.ProducerSnapshotOffsets()
	n := len(l.segments)
	if n < 4 || !slices.Equal(got, []int64{l.segments[n-2].base, l.segments[n-1].base}) {
		t.Fatalf("snapshots %v with %d segments", got, n)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
