package segment

import (
	"fmt"
	"slices"
	"sort"

	"github.com/kbroker/kbroker/internal/sendfile"

	"github.com/kbroker/kbroker/recordbatch"
)

// segmentIndexLocked is the index of the segment whose range holds offset
// (the last segment with base <= offset), or 0.
func (l *Log) segmentIndexLocked(offset int64) int {
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].base > offset })
	return max(i-1, 0)
}

// Read returns whole batches starting with the batch that contains offset
// (which may be mid-batch; clients skip the earlier records), only batches
// with NextOffset() <= maxOffset, and at most maxBytes in all, except that
// with minOneBatch the first batch is returned whole even if larger
// (KIP-74). Reading continues into later segments while room is left.
// offset == EndOffset(), or nothing complete below maxOffset, gives an empty
// slice. The bytes are copied with pread into a new slice, which stays
// valid whatever happens to the log later. Read holds mu shared.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64, minOneBatch bool) ([]byte, error) {
	out := []byte{}
	err := l.spans(offset, maxBytes, maxOffset, minOneBatch, func(s *segment, pos, n, _ int64) error {
		k := len(out)
		out = slices.Grow(out, int(n))[:k+int(n)]
		if _, err := s.log.ReadAt(out[k:], pos); err != nil {
			return fmt.Errorf("read %s at %d: %w", s.name(), pos, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadChunks is Read for sending to a connection: a run of batches of at
// least fileMin bytes (fileMin > 0) comes back as a range of a second
// descriptor of its segment file, for sendfile, instead of being copied
// into memory, while files (which may be nil: no limit) has a descriptor
// to spare. The caller closes the chunks.
func (l *Log) ReadChunks(offset int64, maxBytes int, maxOffset int64, minOneBatch bool, fileMin int, files *sendfile.Budget) (sendfile.Chunks, error) {
	out, _, err := l.ReadChunksUpTo(offset, maxBytes, maxOffset, minOneBatch, fileMin, files)
	return out, err
}

// ReadChunksUpTo is ReadChunks that also returns an upper bound of the
// offset after the last batch read (offset when nothing was read): how far
// a read_committed fetch needs the aborted transactions.
func (l *Log) ReadChunksUpTo(offset int64, maxBytes int, maxOffset int64, minOneBatch bool, fileMin int, files *sendfile.Budget) (sendfile.Chunks, int64, error) {
	var out sendfile.Chunks
	upTo := offset
	err := l.spans(offset, maxBytes, maxOffset, minOneBatch, func(s *segment, pos, n, next int64) error {
		upTo = max(upTo, next)
		if fileMin > 0 && n >= int64(fileMin) && (files == nil || files.Take()) {
			f, err := s.dupLog()
			if err != nil {
				if files != nil {
					files.Give()
				}
				return err
			}
			out = append(out, sendfile.FileChunk(f, pos, int(n), files))
			return nil
		}
		b := make([]byte, n)
		if _, err := s.log.ReadAt(b, pos); err != nil {
			return fmt.Errorf("read %s at %d: %w", s.name(), pos, err)
		}
		out = append(out, sendfile.Chunk{Data: b})
		return nil
	})
	if err != nil {
		out.Close()
		return nil, offset, err
	}
	return out, upTo, nil
}

// spans calls read, in order, for each segment's byte range that Read
// returns, holding mu shared.
func (l *Log) spans(offset int64, maxBytes int, maxOffset int64, minOneBatch bool, read func(s *segment, pos, n, next int64) error) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return l.errorf("read: %w", ErrClosed)
	}
	leo := l.endOffsetLocked()
	if offset < l.startOffset || offset > leo {
		return l.errorf("read offset %d, log has [%d, %d]: %w", offset, l.startOffset, leo, ErrOffsetOutOfRange)
	}
	maxOffset = min(maxOffset, leo)
	total := 0
	for i := l.segmentIndexLocked(offset); i < len(l.segments); i++ {
		room := maxBytes - total
		minOne := minOneBatch && total == 0
		if room <= 0 && !minOne {
			break
		}
		s := l.segments[i]
		pos, n, next, done, err := s.span(offset, maxOffset, room, minOne)
		if err == nil && n > 0 {
			err = read(s, pos, n, next)
			total += int(n)
		}
		if err != nil {
			return l.errorf("read offset %d: %w", offset, err)
		}
		if done {
			break
		}
	}
	return nil
}

// OffsetForTimestamp answers ListOffsets by timestamp at batch precision:
// the first batch (at or after the log start offset) whose max timestamp
// is >= ts. It returns max(batch base offset, StartOffset()) and the
// batch's max timestamp; ok is false when there is no such batch. The
// segment is found by its largest timestamp, the position within it with
// the .timeindex and .index.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return -1, -1, false
	}
	for i := l.segmentIndexLocked(l.startOffset); i < len(l.segments); i++ {
		s := l.segments[i]
		if s.maxTs < ts {
			continue
		}
		_, tsOff := s.timeIdx.lookup(ts)
		_, pos := s.offIdx.lookup(max(tsOff, l.startOffset))
		sc := newBatchScanner(s.log, int64(pos), s.size, false)
		for sc.next() {
			h := sc.h
			if h.NextOffset() <= l.startOffset {
				continue
			}
			if h.MaxTimestamp >= ts {
				return max(h.BaseOffset, l.startOffset), h.MaxTimestamp, true
			}
		}
		if sc.err != nil {
			l.logger.Warn("reading batches for timestamp lookup failed", "file", s.name(), "err", sc.err)
			return -1, -1, false
		}
	}
	return -1, -1, false
}

// MaxTimestamp is the largest batch max timestamp in the log and the last
// offset of the first batch carrying it (ListOffsets MAX_TIMESTAMP at batch
// precision), or (-1, -1) when the log holds no timestamp.
func (l *Log) MaxTimestamp() (timestamp int64, offset int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	timestamp, offset = -1, -1
	if l.closed {
		return
	}
	for _, s := range l.segments {
		if s.maxTs > timestamp {
			timestamp, offset = s.maxTs, s.maxTsOffset
		}
	}
	if timestamp < 0 {
		return -1, -1
	}
	return
}

// ScanHeaders calls fn for every batch header with NextOffset() > from, in
// order, until fn returns false. It holds mu shared while running, so fn
// must not call methods of the Log that take mu exclusively.
func (l *Log) ScanHeaders(from int64, fn func(h recordbatch.Header) bool) error {
	return l.ScanWithControl(from, func(h recordbatch.Header, _ []byte) bool { return fn(h) })
}

// ScanWithControl is ScanHeaders that also hands over the whole bytes of
// every control batch (transaction markers, a few dozen bytes each; nil for
// other batches), valid only during the call: what rebuilding producer and
// transaction state needs.
func (l *Log) ScanWithControl(from int64, fn func(h recordbatch.Header, control []byte) bool) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return l.errorf("scan: %w", ErrClosed)
	}
	for i := l.segmentIndexLocked(from); i < len(l.segments); i++ {
		s := l.segments[i]
		_, pos := s.offIdx.lookup(from)
		sc := newBatchScanner(s.log, int64(pos), s.size, false)
		for sc.next() {
			if sc.h.NextOffset() <= from {
				continue
			}
			var control []byte
			if sc.h.IsControl() {
				b, err := sc.bytesAt(sc.pos, sc.h.Size())
				if err != nil {
					return l.errorf("scan %s: %w", s.name(), err)
				}
				control = b
			}
			if !fn(sc.h, control) {
				return nil
			}
		}
		if sc.err != nil {
			return l.errorf("scan %s: %w", s.name(), sc.err)
		}
	}
	return nil
}
