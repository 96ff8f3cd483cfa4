package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"sync/atomic"

	"github.com/kbroker/kbroker/recordbatch"
)

// AbortedTxn is one aborted transaction of a partition, Kafka's AbortedTxn:
// what a read_committed Fetch returns so consumers skip its records.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64 // the transaction's first record on this partition
	LastOffset  int64 // the abort marker
	// LastStableOffset is the partition's last stable offset right after
	// the abort: no later aborted transaction starts below it, which lets
	// a search stop (Kafka's TransactionIndex.collectAbortedTxns).
	LastStableOffset int64
}

// The .txnindex file of a segment is Kafka's TransactionIndex: one entry per
// abort marker in the segment, in offset order, each AbortedTxn's 34 bytes,
// big-endian:
//
//	version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64
//
// The file exists only once the segment holds an abort marker. Entries are
// written under the Log's lock together with the marker, so a flush that
// moves the recovery point past a marker has its entry too; recovery trims
// the entries at or above the recovery point of the segments it rescans and
// the caller re-adds them from the markers (see TxnIndexCompleteBelow).
const (
	txnIndexSuffix    = ".txnindex"
	abortedTxnSize    = 34
	abortedTxnVersion = 0
)

func (a AbortedTxn) encode(b []byte) {
	binary.BigEndian.PutUint16(b[0:], abortedTxnVersion)
	binary.BigEndian.PutUint64(b[2:], uint64(a.ProducerID))
	binary.BigEndian.PutUint64(b[10:], uint64(a.FirstOffset))
	binary.BigEndian.PutUint64(b[18:], uint64(a.LastOffset))
	binary.BigEndian.PutUint64(b[26:], uint64(a.LastStableOffset))
}

func decodeAbortedTxn(b []byte) (AbortedTxn, error) {
	if v := int16(binary.BigEndian.Uint16(b)); v != abortedTxnVersion {
		return AbortedTxn{}, fmt.Errorf("aborted transaction entry version %d, want %d", v, abortedTxnVersion)
	}
	return AbortedTxn{
		ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
		FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
		LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
		LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
	}, nil
}

// txnIndex is one segment's .txnindex. Appends and truncation run under the
// Log's write lock, reads (pread) under its read lock.
type txnIndex struct {
	path string
	// f is nil while the file does not exist. Atomic: the background
	// flush of a rolled segment syncs it without the Log's lock, while a
	// truncation may close it.
	f       atomic.Pointer[os.File]
	entries int64
	last    int64 // LastOffset of the last entry; -1 when empty
}

// openTxnIndex opens the index at path if the file exists. A torn last
// entry (a crash mid-write) is cut off.
func openTxnIndex(path string) (*txnIndex, error) {
	x := &txnIndex{path: path, last: -1}
	f, size, err := openSized(path, os.O_RDWR)
	if errors.Is(err, os.ErrNotExist) {
		return x, nil
	}
	if err != nil {
		return nil, err
	}
	x.f.Store(f)
	x.entries = size / abortedTxnSize
	if size%abortedTxnSize != 0 {
		if err := f.Truncate(x.entries * abortedTxnSize); err != nil {
			f.Close()
			return nil, fmt.Errorf("truncate torn %s: %w", path, err)
		}
	}
	if x.entries > 0 {
		a, err := x.at(x.entries - 1)
		if err != nil {
			x.last = -1
			return x, nil // check reports it
		}
		x.last = a.LastOffset
	}
	return x, nil
}

func (x *txnIndex) at(i int64) (AbortedTxn, error) {
	var b [abortedTxnSize]byte
	if _, err := x.f.Load().ReadAt(b[:], i*abortedTxnSize); err != nil {
		return AbortedTxn{}, fmt.Errorf("read %s: %w", x.path, err)
	}
	return decodeAbortedTxn(b[:])
}

// append adds a at the end; its LastOffset must be above every entry's.
func (x *txnIndex) append(a AbortedTxn) error {
	if a.LastOffset <= x.last {
		return fmt.Errorf("%s: aborted transaction at %d is not after the last entry at %d", x.path, a.LastOffset, x.last)
	}
	if x.f.Load() == nil {
		f, err := os.OpenFile(x.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		x.f.Store(f)
	}
	var b [abortedTxnSize]byte
	a.encode(b[:])
	if _, err := x.f.Load().WriteAt(b[:], x.entries*abortedTxnSize); err != nil {
		_ = x.f.Load().Truncate(x.entries * abortedTxnSize)
		return fmt.Errorf("write %s: %w", x.path, err)
	}
	x.entries++
	x.last = a.LastOffset
	return nil
}

// firstAtOrAfter is the index of the first entry whose LastOffset >=
// offset (entries when none): entries are in LastOffset order.
func (x *txnIndex) firstAtOrAfter(offset int64) (int64, error) {
	var readErr error
	i := sort.Search(int(x.entries), func(i int) bool {
		a, err := x.at(int64(i))
		if err != nil {
			readErr = err
			return true
		}
		return a.LastOffset >= offset
	})
	return int64(i), readErr
}

// truncateTo removes the entries with LastOffset >= offset (Kafka's
// TransactionIndex.truncateTo).
func (x *txnIndex) truncateTo(offset int64) error {
	if x.entries == 0 || x.last < offset && x.last >= 0 {
		return nil
	}
	i, err := x.firstAtOrAfter(offset)
	if err != nil {
		return err
	}
	return x.truncateEntries(i)
}

func (x *txnIndex) truncateEntries(n int64) error {
	if x.f.Load() == nil || n >= x.entries {
		return nil
	}
	if err := x.f.Load().Truncate(n * abortedTxnSize); err != nil {
		return fmt.Errorf("truncate %s: %w", x.path, err)
	}
	x.entries, x.last = n, -1
	if n > 0 {
		a, err := x.at(n - 1)
		if err != nil {
			return err
		}
		x.last = a.LastOffset
	}
	return nil
}

// collect is Kafka's collectAbortedTxns over this index: the entries that
// end at or after from and start before upTo; complete reports that an
// entry's last stable offset reached upTo, so no later segment can add
// one. Entries ending before from are skipped by a binary search (one of
// them reaching upTo with its last stable offset implies every later entry
// starts at or after upTo, so the result is the same as Kafka's scan).
func (x *txnIndex) collect(from, upTo int64, out []AbortedTxn) ([]AbortedTxn, bool, error) {
	if x.entries == 0 {
		return out, false, nil
	}
	i, err := x.firstAtOrAfter(from)
	if err != nil {
		return out, true, err
	}
	buf := make([]byte, min(x.entries-i, 128)*abortedTxnSize)
	for i < x.entries {
		n := min(x.entries-i, int64(len(buf)/abortedTxnSize))
		chunk := buf[:n*abortedTxnSize]
		if _, err := x.f.Load().ReadAt(chunk, i*abortedTxnSize); err != nil && !errors.Is(err, io.EOF) {
			return out, true, fmt.Errorf("read %s: %w", x.path, err)
		}
		for k := int64(0); k < n; k++ {
			a, err := decodeAbortedTxn(chunk[k*abortedTxnSize:])
			if err != nil {
				return out, true, fmt.Errorf("%s: %w", x.path, err)
			}
			if a.FirstOffset < upTo {
				out = append(out, a)
			}
			if a.LastStableOffset >= upTo {
				return out, true, nil
			}
		}
		i += n
	}
	return out, false, nil
}

// all returns every entry (one read of the whole file).
func (x *txnIndex) all() ([]AbortedTxn, error) {
	if x.entries == 0 {
		return nil, nil
	}
	b := make([]byte, x.entries*abortedTxnSize)
	if _, err := x.f.Load().ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("read %s: %w", x.path, err)
	}
	out := make([]AbortedTxn, 0, x.entries)
	for i := int64(0); i < x.entries; i++ {
		a, err := decodeAbortedTxn(b[i*abortedTxnSize:])
		if err != nil {
			return nil, fmt.Errorf("%s: entry %d: %w", x.path, i, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// check is Kafka's TransactionIndex.sanityCheck, stricter: every entry
// has version 0, increasing last offsets inside [base, next), and a first
// offset not after its last.
func (x *txnIndex) check(base, next int64) error {
	all, err := x.all()
	if err != nil {
		return err
	}
	prev := int64(-1)
	for i, a := range all {
		if a.LastOffset < base || a.LastOffset >= next || a.LastOffset <= prev || a.FirstOffset > a.LastOffset {
			return fmt.Errorf("%s: entry %d %+v out of order or outside the segment [%d, %d)", x.path, i, a, base, next)
		}
		prev = a.LastOffset
	}
	return nil
}

func (x *txnIndex) sync() error {
	f := x.f.Load()
	if f == nil {
		return nil
	}
	return f.Sync()
}

func (x *txnIndex) close() error {
	f := x.f.Swap(nil)
	if f == nil {
		return nil
	}
	return f.Close()
}

// CollectAbortedTxns returns the aborted transactions a read_committed
// fetch of [from, upTo) must know (Kafka's collectAbortedTransactions):
// from the segment holding from onwards, those whose abort marker is at or
// after from and whose first offset is before upTo, stopping at the first
// entry whose last stable offset reaches upTo. It holds mu shared.
func (l *Log) CollectAbortedTxns(from, upTo int64) ([]AbortedTxn, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, l.errorf("collect aborted transactions: %w", ErrClosed)
	}
	var out []AbortedTxn
	for i := l.segmentIndexLocked(from); i < len(l.segments); i++ {
		var done bool
		var err error
		out, done, err = l.segments[i].txnIdx.collect(from, upTo, out)
		if err != nil {
			return nil, l.errorf("collect aborted transactions: %w", err)
		}
		if done {
			break
		}
	}
	return out, nil
}

// AppendAbortMarker is Append for an abort marker: the .txnindex entry of
// the transaction it ends (a.LastOffset must be h.BaseOffset) is written
// to the marker's segment under the same lock hold, before any flush the
// append may trigger, so a recovery point past the marker implies the
// entry is on disk too.
func (l *Log) AppendAbortMarker(batch []byte, h recordbatch.Header, a AbortedTxn) error {
	if a.LastOffset != h.BaseOffset {
		return l.errorf("append abort marker at %d with an index entry for %d", h.BaseOffset, a.LastOffset)
	}
	return l.append(batch, h, &a)
}

// RepairTxnIndex adds the entries of aborts (in offset order, as found by
// scanning the markers of the log) that their segments' .txnindex files
// lack: after a crash recovery trimmed them, or for a log written before
// these files existed. Entries already present are skipped.
func (l *Log) RepairTxnIndex(aborts []AbortedTxn) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.errorf("repair transaction index: %w", ErrClosed)
	}
	added := 0
	for _, a := range aborts {
		if a.LastOffset < l.segments[0].base || a.LastOffset >= l.endOffsetLocked() {
			continue
		}
		s := l.segments[l.segmentIndexLocked(a.LastOffset)]
		if a.LastOffset <= s.txnIdx.last {
			continue
		}
		if err := s.txnIdx.append(a); err != nil {
			return l.errorf("repair transaction index: %w", err)
		}
		added++
	}
	if added > 0 {
		l.logger.Info("re-added aborted transactions to the transaction index", "entries", added)
	}
	l.txnCompleteBelow = math.MaxInt64
	return nil
}

// TxnIndexCompleteBelow is the offset below which every abort marker has
// its .txnindex entry. After a crash it is the recovery point: recovery
// trims the entries at or above it (the markers there may be gone, or
// their entries torn), and the caller re-adds them with RepairTxnIndex from
// a scan that starts at or below it. Otherwise math.MaxInt64.
func (l *Log) TxnIndexCompleteBelow() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.txnCompleteBelow
}

// AbortedTxnsOfSegments returns every .txnindex entry, oldest first (for
// tests and tools).
func (l *Log) AbortedTxnsOfSegments() ([]AbortedTxn, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []AbortedTxn
	for _, s := range l.segments {
		all, err := s.txnIdx.all()
		if err != nil {
			return nil, l.errorf("%w", err)
		}
		out = append(out, all...)
	}
	return out, nil
}

// ActiveSegmentBase is the base offset of the active segment: a caller
// that sees it change across its Append knows the append rolled.
func (l *Log) ActiveSegmentBase() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.activeLocked().base
}
