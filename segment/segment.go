package segment

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"golang.org/x/sys/unix"
)

// File name suffixes, as in Kafka.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
)

// findScanBuf is the read-ahead used when looking for one batch from an
// index position (the gap is about IndexIntervalBytes).
const findScanBuf = 8 << 10

// findBufs recycles the read-ahead buffers of find and lastBoundary: a
// fetch finds twice per partition, and allocating them was most of the
// bytes a small fetch request allocated (12 x 8 KiB for 6 partitions). A
// pool holds no state: any buffer serves any scan, and none outlives its
// scan (the headers it yields are copies).
var findBufs = sync.Pool{New: func() any { b := make([]byte, 0, findScanBuf); return &b }}

func getFindBuf() []byte { return (*findBufs.Get().(*[]byte))[:0] }

func putFindBuf(b []byte) {
	if cap(b) != findScanBuf {
		return // grown for a batch bigger than the read-ahead: let it go
	}
	b = b[:0]
	findBufs.Put(&b)
}

// segmentPath is <dir>/<20-digit zero-padded base offset><suffix>.
func segmentPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

// segment is one .log file with its .index and .timeindex. Batches are
// stored byte for byte as received (v2 format). A segment is not safe for
// concurrent use; the owning Log's mu serialises access (appends and
// truncation under the write lock, reads under the read lock).
type segment struct {
	dir     string
	base    int64
	log     *os.File
	size    int64 // bytes of .log
	next    int64 // offset after the last batch; base when empty
	offIdx  *offsetIndex
	timeIdx *timeIndex
	txnIdx  *txnIndex // aborted transactions whose markers are in this segment

	maxTs       int64 // largest batch max timestamp; -1 if none
	maxTsOffset int64 // last offset of the first batch with maxTs; -1 if none

	firstTs      int64 // max timestamp of the first batch (Kafka's rollingBasedTimestamp)
	firstTsKnown bool
	created      time.Time // when this segment was opened or emptied

	bytesSinceIndex int64 // bytes appended since the last offset-index entry
	removed         bool  // files deleted; set under Log.mu

	journal *SyncJournal // test-only record of what reached stable storage; nil: none
}

// openSegment opens the files of the segment at base; with create it starts
// a new empty segment (removing any stale files with the same name). j is
// the Log's test-only sync journal (nil: none).
func openSegment(dir string, base int64, create bool, now time.Time, j *SyncJournal) (*segment, error) {
	logPath := segmentPath(dir, base, logSuffix)
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE | os.O_TRUNC
		for _, sfx := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			if err := os.Remove(segmentPath(dir, base, sfx)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		}
	}
	f, size, err := openSized(logPath, flags)
	if err != nil {
		return nil, err
	}
	if create {
		j.created(logPath)
	}
	s := &segment{dir: dir, base: base, log: f, size: size, next: base,
		maxTs: -1, maxTsOffset: -1, created: now, journal: j}
	if s.offIdx, err = openOffsetIndex(segmentPath(dir, base, indexSuffix), base); err != nil {
		f.Close()
		return nil, err
	}
	if s.timeIdx, err = openTimeIndex(segmentPath(dir, base, timeIndexSuffix), base); err != nil {
		s.offIdx.close()
		f.Close()
		return nil, err
	}
	if s.txnIdx, err = openTxnIndex(segmentPath(dir, base, txnIndexSuffix)); err != nil {
		s.timeIdx.close()
		s.offIdx.close()
		f.Close()
		return nil, err
	}
	return s, nil
}

func (s *segment) name() string { return s.log.Name() }

// openSized opens path with flag and returns its size.
func openSized(path string, flag int) (*os.File, int64, error) {
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// resizeIndexes sets both index files to the full (sparse) size (active
// segment) or, with maxBytes 0, trims them to their entries.
func (s *segment) resizeIndexes(maxBytes int64) error {
	if err := s.offIdx.resize(maxBytes); err != nil {
		return fmt.Errorf("resize %s: %w", s.offIdx.path, err)
	}
	if err := s.timeIdx.resize(maxBytes); err != nil {
		return fmt.Errorf("resize %s: %w", s.timeIdx.path, err)
	}
	return nil
}

// resetIndexes empties both index files and sizes them for a rebuild from
// the batches (mmapFile.reset).
func (s *segment) resetIndexes(maxBytes int64) error {
	if err := s.offIdx.reset(maxBytes); err != nil {
		return fmt.Errorf("reset %s: %w", s.offIdx.path, err)
	}
	if err := s.timeIdx.reset(maxBytes); err != nil {
		return fmt.Errorf("reset %s: %w", s.timeIdx.path, err)
	}
	return nil
}

// canHold reports whether a batch fits this segment's relative offsets and
// int32 positions.
func (s *segment) canHold(h recordbatch.Header) bool {
	return h.LastOffset()-s.base <= math.MaxInt32 && s.size+int64(h.Size()) <= math.MaxInt32
}

// append writes one batch at the end and updates the indexes as Kafka's
// LogSegment.append does.
func (s *segment) append(batch []byte, h recordbatch.Header, indexInterval int32) error {
	pos := s.size
	if _, err := s.log.WriteAt(batch, pos); err != nil {
		// Drop whatever part was written so the file ends on a batch.
		_ = s.log.Truncate(pos)
		s.journal.truncated(s.name(), pos)
		return fmt.Errorf("write %s: %w", s.name(), err)
	}
	if pos == 0 {
		s.firstTs, s.firstTsKnown = h.MaxTimestamp, true
	}
	if h.MaxTimestamp > s.maxTs {
		s.maxTs, s.maxTsOffset = h.MaxTimestamp, h.LastOffset()
	}
	if s.bytesSinceIndex > int64(indexInterval) {
		// Roll checks keep the indexes from being full and offsets are
		// increasing, so these fail only when no block can be reserved
		// (disk full): the entry is skipped, as an index is only a hint.
		if !s.offIdx.isFull() {
			_ = s.offIdx.append(h.LastOffset(), int32(pos))
		}
		if !s.timeIdx.isFull() {
			_ = s.timeIdx.maybeAppend(s.maxTs, s.maxTsOffset, false)
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += int64(len(batch))
	s.size += int64(len(batch))
	s.next = h.NextOffset()
	return nil
}

// rollingTimestamp is the first batch's max timestamp (-1 when unknown or
// the segment is empty); Kafka bases time rolls on it.
func (s *segment) rollingTimestamp() int64 {
	if s.size == 0 {
		return -1
	}
	if !s.firstTsKnown {
		sc := newBatchScanner(s.log, 0, s.size, false)
		if !sc.next() {
			return -1
		}
		s.firstTs, s.firstTsKnown = sc.h.MaxTimestamp, true
	}
	return s.firstTs
}

// largestTimestamp is Kafka's LogSegment.largestTimestamp: the max batch
// timestamp, or the file's modification time when no batch has one.
func (s *segment) largestTimestamp() int64 {
	if s.maxTs >= 0 {
		return s.maxTs
	}
	st, err := s.log.Stat()
	if err != nil {
		return -1
	}
	return st.ModTime().UnixMilli()
}

// find returns the position and header of the first batch whose last offset
// is >= target (the batch containing target), using the offset index and a
// short scan. ok is false when no batch of the segment reaches target.
func (s *segment) find(target int64) (pos int64, h recordbatch.Header, ok bool, err error) {
	_, p := s.offIdx.lookup(target)
	sc := newBatchScanner(s.log, int64(p), s.size, false)
	sc.readAhead = findScanBuf
	sc.buf = getFindBuf()
	defer putFindBuf(sc.buf)
	for sc.next() {
		if sc.h.LastOffset() >= target {
			return sc.pos, sc.h, true, nil
		}
	}
	if sc.err != nil {
		return 0, h, false, fmt.Errorf("%s: %w", s.name(), sc.err)
	}
	return s.size, h, false, nil
}

// span finds the bytes of this segment's whole batches that a read from
// offset returns: starting with the batch that contains offset, stopping
// before the first batch whose NextOffset exceeds maxOffset, and at most
// maxBytes long (the first batch is exempt when minOne). n == 0 means none.
// done reports that later segments cannot add anything (maxOffset or
// maxBytes reached). next is an upper bound of the offset after the last
// batch returned (what Kafka's fetchUpperBoundOffset gives). Only batch
// headers are read, not the data.
func (s *segment) span(offset, maxOffset int64, maxBytes int, minOne bool) (pos, n, next int64, done bool, err error) {
	startPos, first, ok, err := s.find(offset)
	if err != nil {
		return 0, 0, 0, true, err
	}
	if !ok {
		return 0, 0, 0, false, nil
	}
	if first.NextOffset() > maxOffset {
		return 0, 0, 0, true, nil
	}
	endPos := s.size
	if maxOffset < s.next {
		p, _, ok, err := s.find(maxOffset)
		if err != nil {
			return 0, 0, 0, true, err
		}
		if ok {
			endPos = p
		}
		done = true
	}
	avail := endPos - startPos
	maxBytes = max(maxBytes, 0)
	if int64(maxBytes) >= avail {
		next = s.next
		if done {
			next = min(maxOffset, s.next)
		}
		return startPos, avail, next, done, nil
	}
	if first.Size() > maxBytes {
		if !minOne {
			return 0, 0, 0, true, nil
		}
		return startPos, int64(first.Size()), first.NextOffset(), true, nil
	}
	end, next, err := s.lastBoundary(startPos, startPos+int64(maxBytes))
	if err != nil {
		return 0, 0, 0, true, err
	}
	if next < 0 {
		next = s.next // an upper bound
	}
	return startPos, end - startPos, next, true, nil
}

// lastBoundary is the end of the last whole batch between from (a batch
// start) and limit, or from when the first batch there ends past limit. The
// offset index jumps close to limit, so only the batch headers of about one
// index interval are read.
func (s *segment) lastBoundary(from, limit int64) (end, next int64, err error) {
	start := max(from, s.offIdx.floorPosition(limit))
	end, next = start, -1
	sc := newBatchScanner(s.log, start, s.size, false)
	sc.readAhead = findScanBuf
	sc.buf = getFindBuf()
	defer putFindBuf(sc.buf)
	for sc.next() && sc.nextP <= limit {
		end, next = sc.nextP, sc.h.NextOffset()
	}
	if sc.err != nil {
		return 0, 0, fmt.Errorf("%s: %w", s.name(), sc.err)
	}
	return end, next, nil
}

// dupLog opens a second descriptor of the .log file, which stays readable
// after the segment is closed, truncated away or deleted.
func (s *segment) dupLog() (*os.File, error) {
	rc, err := s.log.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("dup %s: %w", s.name(), err)
	}
	fd, dupErr := -1, error(nil)
	if err := rc.Control(func(old uintptr) { fd, dupErr = unix.FcntlInt(old, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, fmt.Errorf("dup %s: %w", s.name(), err)
	}
	if dupErr != nil {
		return nil, fmt.Errorf("dup %s: %w", s.name(), dupErr)
	}
	return os.NewFile(uintptr(fd), s.log.Name()), nil
}

// loadTail recomputes next and the max timestamp from the last index
// entries plus a scan of the batches after them (Kafka's readNextOffset and
// readLargestTimestamp). An error means the batches there are damaged.
func (s *segment) loadTail() error {
	s.maxTs, s.maxTsOffset = -1, -1
	var start int64
	if s.offIdx.entries > 0 {
		_, p := s.offIdx.at(s.offIdx.entries - 1)
		start = int64(p)
	}
	if s.timeIdx.entries > 0 {
		ts, off := s.timeIdx.lastEntry()
		s.maxTs, s.maxTsOffset = ts, off
		_, p := s.offIdx.lookup(off)
		start = min(start, int64(p))
	}
	next := s.base
	sc := newBatchScanner(s.log, start, s.size, false)
	for sc.next() {
		h := sc.h
		if h.BaseOffset < next || h.LastOffset()-s.base > math.MaxInt32 {
			return fmt.Errorf("%s: batch at position %d has offsets %d..%d, expected from %d",
				s.name(), sc.pos, h.BaseOffset, h.LastOffset(), next)
		}
		if h.MaxTimestamp > s.maxTs {
			s.maxTs, s.maxTsOffset = h.MaxTimestamp, h.LastOffset()
		}
		next = h.NextOffset()
	}
	if sc.err != nil {
		return fmt.Errorf("%s: %w", s.name(), sc.err)
	}
	if s.offIdx.lastOffset() >= next && s.offIdx.entries > 0 {
		return fmt.Errorf("%w: %s last entry offset %d is beyond the log end %d", errIndexCorrupt, s.offIdx.path, s.offIdx.lastOffset(), next)
	}
	if _, off := s.timeIdx.lastEntry(); off >= next && s.timeIdx.entries > 0 {
		return fmt.Errorf("%w: %s last entry offset %d is beyond the log end %d", errIndexCorrupt, s.timeIdx.path, off, next)
	}
	s.next = next
	return nil
}

// rebuild re-creates both indexes (and next, max timestamp) from the
// batches, as Kafka's LogSegment.recover does. With validate every batch's
// CRC is checked. The file is truncated after the last good batch; dropped
// is how many bytes went and reason why. onBatch sees every good header.
// The indexes must be sized for the rebuild (resizeIndexes, or
// resetIndexes which also drops the old entries at no cost) beforehand.
func (s *segment) rebuild(validate bool, indexInterval int32, onBatch func(recordbatch.Header)) (dropped int64, reason error, err error) {
	s.offIdx.truncateEntries(0)
	s.timeIdx.truncateEntries(0)
	s.maxTs, s.maxTsOffset = -1, -1
	s.firstTsKnown = false
	next, valid, lastIndexPos := s.base, int64(0), int64(0)
	sc := newBatchScanner(s.log, 0, s.size, validate)
	for sc.next() {
		h := sc.h
		if h.BaseOffset < next || h.LastOffset()-s.base > math.MaxInt32 || sc.nextP > math.MaxInt32 {
			reason = fmt.Errorf("batch at position %d has offsets %d..%d, expected from %d within segment range",
				sc.pos, h.BaseOffset, h.LastOffset(), next)
			break
		}
		if sc.pos == 0 {
			s.firstTs, s.firstTsKnown = h.MaxTimestamp, true
		}
		if h.MaxTimestamp > s.maxTs {
			s.maxTs, s.maxTsOffset = h.MaxTimestamp, h.LastOffset()
		}
		if sc.pos-lastIndexPos > int64(indexInterval) {
			if !s.offIdx.isFull() {
				_ = s.offIdx.append(h.LastOffset(), int32(sc.pos))
			}
			if !s.timeIdx.isFull() {
				_ = s.timeIdx.maybeAppend(s.maxTs, s.maxTsOffset, false)
			}
			lastIndexPos = sc.pos
		}
		if onBatch != nil {
			onBatch(h)
		}
		next, valid = h.NextOffset(), sc.nextP
	}
	if reason == nil {
		reason = sc.err
	}
	s.next = next
	s.bytesSinceIndex = valid - lastIndexPos
	if valid < s.size {
		err := s.log.Truncate(valid)
		s.journal.truncated(s.name(), valid)
		if err != nil {
			return 0, reason, fmt.Errorf("truncate %s: %w", s.name(), err)
		}
		dropped, s.size = s.size-valid, valid
	}
	return dropped, reason, nil
}

// truncateTo removes the batch containing offset and everything after it,
// and makes the segment ready to be the active one (indexes sized to
// maxIndexBytes).
func (s *segment) truncateTo(offset int64, maxIndexBytes int64, now time.Time) error {
	pos, _, ok, err := s.find(offset)
	if err != nil {
		return err
	}
	s.offIdx.truncateTo(offset)
	s.timeIdx.truncateTo(offset)
	if err := s.txnIdx.truncateTo(offset); err != nil {
		return err
	}
	if err := s.resizeIndexes(maxIndexBytes); err != nil {
		return err
	}
	if ok && pos < s.size {
		err := s.log.Truncate(pos)
		s.journal.truncated(s.name(), pos)
		if err != nil {
			return fmt.Errorf("truncate %s: %w", s.name(), err)
		}
		s.size = pos
	}
	if s.size == 0 {
		s.created, s.firstTsKnown = now, false
	}
	s.bytesSinceIndex = 0
	return s.loadTail()
}

// deactivate is Kafka's onBecomeInactiveSegment: record the final max
// timestamp in the time index and trim both index files.
func (s *segment) deactivate() error {
	if s.maxTs >= 0 {
		_ = s.timeIdx.maybeAppend(s.maxTs, s.maxTsOffset, true)
	}
	return s.resizeIndexes(0)
}

func (s *segment) sync() error {
	if err := s.journal.syncFile(s.log, fileSync); err != nil {
		return fmt.Errorf("fsync %s: %w", s.name(), err)
	}
	if err := s.offIdx.sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", s.offIdx.path, err)
	}
	if err := s.timeIdx.sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", s.timeIdx.path, err)
	}
	if err := s.txnIdx.sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", s.txnIdx.path, err)
	}
	return nil
}

// close unmaps and closes the files (without trimming).
func (s *segment) close() error {
	err := errors.Join(s.offIdx.close(), s.timeIdx.close(), s.txnIdx.close())
	if cerr := s.log.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return err
}

// remove closes the segment and deletes its files.
func (s *segment) remove() error {
	err := s.close()
	s.removed = true
	for _, p := range []string{s.offIdx.path, s.timeIdx.path, s.txnIdx.path, s.name()} {
		if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		} else {
			s.journal.removed(p)
		}
	}
	return err
}
