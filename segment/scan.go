package segment

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kbroker/kbroker/recordbatch"
)

// scanBufSize is how much a batchScanner reads ahead with one pread.
const scanBufSize = 64 << 10

// batchScanner walks the batches of a segment file from a position, reading
// ahead in scanBufSize chunks with ReadAt so that walking many small batches
// costs few system calls.
//
//	s := newBatchScanner(f, pos, end, false)
//	for s.next() { use s.h, s.pos }
//	if s.err != nil { ... damaged at s.pos ... }
type batchScanner struct {
	f         *os.File
	end       int64 // the scan stops here (the file size)
	whole     bool  // read and Validate whole batches (CRC), not just headers
	readAhead int   // bytes to read at once

	buf      []byte
	bufStart int64 // file position of buf[0]

	pos   int64              // position of the current batch (after next)
	nextP int64              // position of the batch after the current one
	h     recordbatch.Header // current batch header
	batch []byte             // current batch bytes (whole mode only)
	err   error              // why the scan stopped early; nil at a clean end
}

func newBatchScanner(f *os.File, from, end int64, whole bool) *batchScanner {
	return &batchScanner{f: f, end: end, whole: whole, readAhead: scanBufSize, nextP: from, pos: from, bufStart: from}
}

// bytesAt returns n bytes at file position p, reading ahead when needed.
// It returns fewer bytes only when the file ends (at s.end) first.
func (s *batchScanner) bytesAt(p int64, n int) ([]byte, error) {
	if avail := s.end - p; int64(n) > avail {
		n = int(max(avail, 0))
	}
	if p >= s.bufStart && p+int64(n) <= s.bufStart+int64(len(s.buf)) {
		off := p - s.bufStart
		return s.buf[off : off+int64(n)], nil
	}
	want := max(n, s.readAhead)
	if avail := s.end - p; int64(want) > avail {
		want = int(avail)
	}
	if cap(s.buf) < want {
		s.buf = make([]byte, want)
	}
	s.buf = s.buf[:want]
	got, err := s.f.ReadAt(s.buf, p)
	if err != nil && !(errors.Is(err, io.EOF) && got == want) {
		s.buf = s.buf[:0]
		return nil, fmt.Errorf("read %s at %d: %w", s.f.Name(), p, err)
	}
	s.bufStart = p
	return s.buf[:n], nil
}

// next advances to the following batch. It returns false at the end or on
// damage (then err says why and pos is where the bad batch starts).
func (s *batchScanner) next() bool {
	s.pos = s.nextP
	if s.err != nil || s.pos >= s.end {
		return false
	}
	b, err := s.bytesAt(s.pos, recordbatch.HeaderSize)
	if err != nil {
		s.err = err
		return false
	}
	h, err := recordbatch.ParseHeader(b)
	if err != nil {
		s.err = fmt.Errorf("batch at position %d: %w", s.pos, err)
		return false
	}
	if int64(h.Size()) > s.end-s.pos {
		s.err = fmt.Errorf("batch at position %d: size %d runs past end of file %d: %w", s.pos, h.Size(), s.end, recordbatch.ErrShort)
		return false
	}
	if s.whole {
		b, err := s.bytesAt(s.pos, h.Size())
		if err != nil {
			s.err = err
			return false
		}
		if _, err := recordbatch.Validate(b); err != nil {
			s.err = fmt.Errorf("batch at position %d: %w", s.pos, err)
			return false
		}
		s.batch = b
	}
	s.h = h
	s.nextP = s.pos + int64(h.Size())
	return true
}
