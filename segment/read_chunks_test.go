package segment

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/kbroker/kbroker/internal/sendfile"
	"github.com/kbroker/kbroker/recordbatch"
)

// ReadChunks returns what Read returns, whether the batches come back as
// file ranges or as bytes, for any offset and byte limit; the whole-batch
// cut found through the index matches a linear walk of the batches.
func TestReadChunksMatchesRead(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 700
	cfg.SegmentBytes = 20 << 10
	l := openLog(t, t.TempDir(), cfg, true, nil)
	defer l.Close()
	a := newAppender(t, l)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200; i++ {
		a.add(1+rng.IntN(5), rng.IntN(1500))
	}
	leo := l.EndOffset()
	for trial := 0; trial < 2000; trial++ {
		offset := rng.Int64N(leo + 1)
		maxBytes := rng.IntN(12 << 10)
		minOne := rng.IntN(2) == 0
		want, err := l.Read(offset, maxBytes, leo, minOne)
		if err != nil {
			t.Fatal(err)
		}
		// The linear reference: whole batches from the one holding offset
		// while they fit (the first one always with minOne).
		var ref []byte
		for i, h := range a.headers {
			if h.LastOffset() < offset {
				continue
			}
			b := a.batches[i]
			if len(ref)+len(b) > maxBytes && !(minOne && len(ref) == 0) {
				break
			}
			ref = append(ref, b...)
		}
		if !bytes.Equal(want, ref) {
			t.Fatalf("Read(%d, %d, minOne %v): %d bytes, reference %d", offset, maxBytes, minOne, len(want), len(ref))
		}
		// The offset after the last batch read, bounded from above.
		trueNext := offset
		if _, hs, err := recordbatch.Split(want); err == nil && len(hs) > 0 {
			trueNext = hs[len(hs)-1].NextOffset()
		}
		for _, fileMin := range []int{1, 1 << 30} {
			cs, upTo, err := l.ReadChunksUpTo(offset, maxBytes, leo, minOne, fileMin, nil)
			if err != nil {
				t.Fatal(err)
			}
			if upTo < trueNext || upTo > leo {
				t.Fatalf("ReadChunksUpTo(%d, %d): up to %d, the data ends at %d, log at %d", offset, maxBytes, upTo, trueNext, leo)
			}
			for _, c := range cs {
				if (c.File != nil) != (fileMin == 1) {
					t.Fatalf("fileMin %d: chunk with file %v", fileMin, c.File != nil)
				}
			}
			got, err := cs.AppendTo(nil)
			cs.Close()
			if err != nil || !bytes.Equal(got, want) || cs.Size() != len(want) {
				t.Fatalf("ReadChunks(%d, %d, minOne %v, fileMin %d): %d bytes (size %d), Read %d: %v",
					offset, maxBytes, minOne, fileMin, len(got), cs.Size(), len(want), err)
			}
		}
	}
}

// File chunks stay readable after their segments are deleted and the log
// is closed: a response being sent is not cut short by retention.
func TestReadChunksOutliveTheLog(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig(), true, nil)
	a := newAppender(t, l)
	for i := 0; i < 20; i++ {
		a.add(3, 1000)
	}
	cs, err := l.ReadChunks(0, 1<<20, l.EndOffset(), true, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	got, err := cs.AppendTo(nil)
	if err != nil || !bytes.Equal(got, a.from(0)) {
		t.Fatalf("after close and delete: %d bytes, want %d: %v", len(got), len(a.from(0)), err)
	}
}

// With its descriptor budget spent, a read returns bytes instead of file
// ranges, and closing the chunks gives the descriptors back.
func TestReadChunksKeepsToTheDescriptorBudget(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4 << 10
	l := openLog(t, t.TempDir(), cfg, true, nil)
	defer l.Close()
	a := newAppender(t, l)
	for i := 0; i < 10; i++ {
		a.add(1, 3000) // one batch per segment
	}
	budget := sendfile.NewBudget(3)
	cs, err := l.ReadChunks(0, 1<<20, l.EndOffset(), true, 1, budget)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, c := range cs {
		if c.File != nil {
			files++
		}
	}
	got, err := cs.AppendTo(nil)
	if err != nil || !bytes.Equal(got, a.from(0)) {
		t.Fatalf("read %d bytes, want %d: %v", len(got), len(a.from(0)), err)
	}
	if files != 3 || budget.Held() != 3 || len(cs) != 10 {
		t.Fatalf("%d file chunks of %d, %d descriptors held; want 3 of 10, 3 held", files, len(cs), budget.Held())
	}
	cs.Close()
	cs.Close()
	if budget.Held() != 0 {
		t.Fatalf("%d descriptors held after Close, want 0", budget.Held())
	}
}
