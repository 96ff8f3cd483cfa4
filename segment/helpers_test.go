package segment

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
)

// makeBatch builds a valid v2 batch of n records (offsets base..base+n-1)
// with timestamps ts..ts+n-1, the given leader epoch, and values of
// valueSize bytes.
func makeBatch(base int64, n int, ts int64, epoch int32, valueSize int) []byte {
	b := make([]byte, recordbatch.HeaderSize, recordbatch.HeaderSize+n*(valueSize+16))
	for i := 0; i < n; i++ {
		var rec []byte
		rec = append(rec, 0)                     // attributes
		rec = binary.AppendVarint(rec, int64(i)) // timestamp delta
		rec = binary.AppendVarint(rec, int64(i)) // offset delta
		rec = binary.AppendVarint(rec, -1)       // key length (null)
		rec = binary.AppendVarint(rec, int64(valueSize))
		for j := 0; j < valueSize; j++ {
			rec = append(rec, byte(base+int64(i)+int64(j)))
		}
		rec = binary.AppendVarint(rec, 0) // headers
		b = binary.AppendVarint(b, int64(len(rec)))
		b = append(b, rec...)
	}
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(base))
	be.PutUint32(b[8:], uint32(len(b)-recordbatch.LogOverhead))
	be.PutUint32(b[12:], uint32(epoch))
	b[16] = 2
	be.PutUint16(b[21:], 0)
	be.PutUint32(b[23:], uint32(n-1))
	be.PutUint64(b[27:], uint64(ts))
	be.PutUint64(b[35:], uint64(ts+int64(n)-1))
	be.PutUint64(b[43:], ^uint64(0)) // producer id -1
	be.PutUint16(b[51:], ^uint16(0)) // producer epoch -1
	be.PutUint32(b[53:], ^uint32(0)) // base sequence -1
	be.PutUint32(b[57:], uint32(n))
	recordbatch.SetCRC(b)
	return b
}

func header(t testing.TB, b []byte) recordbatch.Header {
	t.Helper()
	h, err := recordbatch.Validate(b)
	if err != nil {
		t.Fatalf("invalid test batch: %v", err)
	}
	return h
}

// logBuf collects slog output for assertions.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testLogger(w io.Writer) *slog.Logger {
	if w == nil {
		w = io.Discard
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func testConfig() Config {
	return Config{
		SegmentBytes:       1 << 20,
		RetentionTime:      -1,
		RetentionBytes:     -1,
		IndexIntervalBytes: 4096,
		MaxIndexBytes:      10 << 20,
		FlushMessages:      -1,
	}
}

func openLog(t testing.TB, dir string, cfg Config, clean bool, w io.Writer) *Log {
	t.Helper()
	l, err := Open(dir, cfg, clean, testLogger(w))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

// appender appends batches with consecutive offsets and remembers them.
type appender struct {
	t       testing.TB
	l       *Log
	batches [][]byte
	headers []recordbatch.Header
	ts      int64
	epoch   int32
}

func newAppender(t testing.TB, l *Log) *appender {
	return &appender{t: t, l: l, ts: 1_000_000}
}

func (a *appender) add(records, valueSize int) recordbatch.Header {
	a.t.Helper()
	b := makeBatch(a.l.EndOffset(), records, a.ts, a.epoch, valueSize)
	h := header(a.t, b)
	if err := a.l.Append(b, h); err != nil {
		a.t.Fatalf("Append at %d: %v", h.BaseOffset, err)
	}
	a.ts += int64(records)
	a.batches = append(a.batches, b)
	a.headers = append(a.headers, h)
	return h
}

// from returns the concatenation of the remembered batches from index i.
func (a *appender) from(i int) []byte {
	var out []byte
	for _, b := range a.batches[i:] {
		out = append(out, b...)
	}
	return out
}

// crash closes the log's files the way a crash would leave them: no
// flush, no trimming of index files, no final time index entry.
func crash(l *Log) {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.flushers.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.segments {
		s.close()
	}
}

// fixedClock is a settable clock for Log.now.
type fixedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fixedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fixedClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// splitBatches cuts Read output into headers, failing on partial batches.
func splitBatches(t testing.TB, b []byte) []recordbatch.Header {
	t.Helper()
	_, hs, err := recordbatch.Split(b)
	if err != nil {
		t.Fatalf("Read returned invalid batches: %v", err)
	}
	return hs
}

func splitBatchesErr(b []byte) []recordbatch.Header {
	_, hs, err := recordbatch.Split(b)
	if err != nil {
		return nil
	}
	return hs
}
