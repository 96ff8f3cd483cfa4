package segment

import (
	"testing"

	"github.com/kbroker/kbroker/recordbatch"
)

// BenchmarkAppend appends 1 KiB batches (default index interval, 64 MiB
// segments, flushing left to the OS).
func BenchmarkAppend(b *testing.B) {
	cfg := testConfig()
	cfg.SegmentBytes = 64 << 20
	l := openLog(b, b.TempDir(), cfg, true, nil)
	defer l.Close()
	batch := makeBatch(0, 1, 1000, 0, 1024-recordbatch.HeaderSize-8)
	h := header(b, batch)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.BaseOffset = int64(i)
		recordbatch.SetBaseOffset(batch, h.BaseOffset)
		if err := l.Append(batch, h); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead reads 64 KiB (about 64 batches of 1 KiB) from random
// offsets of a 32 MiB log spread over several segments.
func BenchmarkRead(b *testing.B) {
	cfg := testConfig()
	cfg.SegmentBytes = 8 << 20
	l := openLog(b, b.TempDir(), cfg, true, nil)
	defer l.Close()
	batch := makeBatch(0, 1, 1000, 0, 1024-recordbatch.HeaderSize-8)
	h := header(b, batch)
	const n = 32 << 10
	for i := 0; i < n; i++ {
		h.BaseOffset = int64(i)
		recordbatch.SetBaseOffset(batch, h.BaseOffset)
		if err := l.Append(batch, h); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(64 << 10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		off := int64(i*7919) % (n - 100)
		out, err := l.Read(off, 64<<10, n, true)
		if err != nil || len(out) == 0 {
			b.Fatal(err, len(out))
		}
	}
}
