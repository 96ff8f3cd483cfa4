package segment

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The pure decisions of the log cleaner (Kafka's LogCleaner.scala): the
// bounded key -> latest offset map, which records and batches a cleaning
// keeps, and how cleaned segments are grouped. Log.Clean does the I/O.

// Kafka's SkimpyOffsetMap stores an MD5 hash of the key (16 bytes) and an
// 8-byte offset per slot, in one buffer of log.cleaner.dedupe.buffer.size
// (per thread), and the cleaner fills it to a load factor of 0.9
// (log.cleaner.io.buffer.load.factor). offsetMap is the same table (open
// addressing, linear probing) in one byte slice, so the cleaner's memory
// is bounded by its buffer setting as Kafka's is; unlike Kafka it starts
// small and doubles as keys come, up to the buffer's slots, so a small log
// does not cost the whole buffer (while it doubles, the old table lives
// beside the new one: at most 1.5x the buffer). The entry limit is
// Kafka's, so a given buffer cleans the same dirty range as in Kafka.
const (
	offsetMapHashSize   = md5.Size
	offsetMapEntryBytes = offsetMapHashSize + 8
	offsetMapLoadFactor = 0.9
	// offsetMapInitialSlots is the table's first size (24 KiB).
	offsetMapInitialSlots = 1024
)

// offsetMap is the cleaner's key -> latest offset map of one cleaning.
type offsetMap struct {
	// table holds slots of offsetMapEntryBytes: the key's MD5, then its
	// offset + 1 big endian (0: an empty slot).
	table      []byte
	entries    int
	maxSlots   int   // the buffer's slots: the table never grows past them
	maxEntries int   // Kafka's maxDesiredMapSize: maxSlots * load factor
	latest     int64 // the last offset mapped (Kafka's latestOffset); -1 when none
}

// newOffsetMap sizes the map for bufferBytes of Kafka's dedupe buffer (one
// cleaner thread's share of log.cleaner.dedupe.buffer.size).
func newOffsetMap(bufferBytes int64) *offsetMap {
	slots := int(bufferBytes / offsetMapEntryBytes)
	m := &offsetMap{maxSlots: slots, maxEntries: int(float64(slots) * offsetMapLoadFactor), latest: -1}
	m.table = make([]byte, min(slots, offsetMapInitialSlots)*offsetMapEntryBytes)
	return m
}

func (m *offsetMap) slots() int { return len(m.table) / offsetMapEntryBytes }

// find is the slot holding hash, or the empty slot where it goes.
func (m *offsetMap) find(hash *[offsetMapHashSize]byte) (slot int, found bool) {
	n := m.slots()
	i := int(binary.BigEndian.Uint64(hash[:8]) % uint64(n))
	for {
		e := m.table[i*offsetMapEntryBytes : (i+1)*offsetMapEntryBytes]
		if binary.BigEndian.Uint64(e[offsetMapHashSize:]) == 0 {
			return i, false
		}
		if [offsetMapHashSize]byte(e[:offsetMapHashSize]) == *hash {
			return i, true
		}
		if i++; i == n {
			i = 0
		}
	}
}

func (m *offsetMap) set(slot int, hash *[offsetMapHashSize]byte, offset int64) {
	e := m.table[slot*offsetMapEntryBytes : (slot+1)*offsetMapEntryBytes]
	copy(e, hash[:])
	binary.BigEndian.PutUint64(e[offsetMapHashSize:], uint64(offset+1))
}

// grow doubles the table (up to maxSlots) and rehashes it.
func (m *offsetMap) grow() {
	old := m.table
	m.table = make([]byte, min(2*m.slots(), m.maxSlots)*offsetMapEntryBytes)
	for e := old; len(e) > 0; e = e[offsetMapEntryBytes:] {
		if o := binary.BigEndian.Uint64(e[offsetMapHashSize:offsetMapEntryBytes]); o != 0 {
			hash := [offsetMapHashSize]byte(e[:offsetMapHashSize])
			slot, _ := m.find(&hash)
			m.set(slot, &hash, int64(o)-1)
		}
	}
}

// put records offset as key's latest. Like Kafka's buildOffsetMapForSegment
// it refuses (false) once the map holds maxEntries keys, even for a key
// already present, so the mapped range always ends on a whole record.
func (m *offsetMap) put(key []byte, offset int64) bool {
	if m.entries >= m.maxEntries {
		return false
	}
	if m.slots() < m.maxSlots && float64(m.entries+1) > float64(m.slots())*offsetMapLoadFactor {
		m.grow()
	}
	hash := md5.Sum(key)
	slot, found := m.find(&hash)
	if !found {
		m.entries++
	}
	m.set(slot, &hash, offset)
	return true
}

// get is the latest offset of key, or -1 when it is not mapped.
func (m *offsetMap) get(key []byte) int64 {
	if m.entries == 0 {
		return -1
	}
	hash := md5.Sum(key)
	slot, found := m.find(&hash)
	if !found {
		return -1
	}
	return int64(binary.BigEndian.Uint64(m.table[slot*offsetMapEntryBytes+offsetMapHashSize:])) - 1
}

// abortedRanges answers whether a data batch belongs to an aborted
// transaction: per producer, the [first offset, marker offset) ranges of
// its aborted transactions, from the .txnindex entries (Kafka's
// CleanedTransactionMetadata does the same from collectAbortedTransactions).
type abortedRanges map[int64][]AbortedTxn

func newAbortedRanges(txns []AbortedTxn) abortedRanges {
	r := abortedRanges{}
	for _, t := range txns {
		r[t.ProducerID] = append(r[t.ProducerID], t)
	}
	return r
}

func (r abortedRanges) aborted(h recordbatch.Header) bool {
	if !h.IsTransactional() || h.IsControl() {
		return false
	}
	for _, t := range r[h.ProducerID] {
		if t.FirstOffset <= h.BaseOffset && h.BaseOffset < t.LastOffset {
			return true
		}
	}
	return false
}

// mapBatch adds the records of one batch read from the dirty range to m,
// as Kafka's buildOffsetMapForSegment: control batches and aborted
// transactional batches are skipped (an aborted value must never win over
// a committed one), records below start (already clean) and without a key
// are not mapped. It returns false when the map filled before the batch
// ended; then latest stays at the previous batch's last offset and the
// cleaning ends there.
func mapBatch(m *offsetMap, batch []byte, h recordbatch.Header, start int64, aborts abortedRanges) (bool, error) {
	if !h.IsControl() && !aborts.aborted(h) {
		full := false
		err := recordbatch.ForEachRecord(batch, func(r kmsg.Record) error {
			off := h.BaseOffset + int64(r.OffsetDelta)
			if r.Key == nil || off < start {
				return nil
			}
			if !m.put(r.Key, off) {
				full = true
				return errMapFull
			}
			return nil
		})
		if full {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	if h.LastOffset() >= start {
		m.latest = max(m.latest, h.LastOffset())
	}
	return true, nil
}

// errMapFull stops the record walk of mapBatch; it never leaves mapBatch.
var errMapFull = fmt.Errorf("offset map full")

// cleanFilter holds what decides, for one source segment, which records
// of its batches a cleaning keeps (Kafka's LogCleaner.cleanInto filter).
type cleanFilter struct {
	offsets *offsetMap
	aborts  abortedRanges
	// nowMs and deleteRetentionMs decide tombstones as Kafka 3.x does for
	// v2 batches (KIP-534): a batch whose tombstones a cleaning keeps for
	// the first time gets a delete horizon nowMs+deleteRetentionMs; a
	// later cleaning from that time on drops them. (Kafka's older rule,
	// by the last clean segment's modification time, never drops them
	// when the cleaned segments keep being regrouped with new ones.)
	nowMs, deleteRetentionMs int64
	// lastData maps a producer id to the last offset of its last data
	// batch in the log; that batch is kept, empty if need be, so the
	// producer's epoch and last sequence survive (Kafka's RETAIN_EMPTY
	// for the active producers' last batches).
	lastData map[int64]int64
}

// batchOutcome says what filterBatch did with a batch (for stats and tests).
type batchOutcome int

const (
	batchKept      batchOutcome = iota // written as it was
	batchRewritten                     // some records removed
	batchEmptied                       // no records kept, header kept for the producer
	batchDropped                       // removed
)

// filterBatch is Kafka's MemoryRecords.filterTo for one batch with the
// cleaner's filter: it returns the bytes to write (the original batch, a
// rebuilt one, an empty header, or nil) and what it did.
//
// Kept as they are: control batches (transaction markers are never removed
// here, unlike Kafka which drops them after delete.retention.ms once the
// transaction's data is gone; keeping them is always correct, only less
// compact). Records: kept when past the map's latest offset (beyond what
// this cleaning mapped), or keyed, at or after their key's latest offset,
// and either with a value or a tombstone before the batch's delete
// horizon (or in a batch without one). Records of aborted transactions
// and records without a key are removed. A batch that keeps a tombstone
// and has no delete horizon is rewritten with one. A batch left without
// records is dropped unless it is the last data batch of its producer
// (kept as an empty header).
func filterBatch(batch []byte, h recordbatch.Header, f *cleanFilter) ([]byte, batchOutcome, error) {
	if h.IsControl() {
		return batch, batchKept, nil
	}
	discard := f.aborts.aborted(h)
	var kept []kmsg.Record
	total, tombstones := 0, false
	horizon := h.DeleteHorizon()
	if !discard {
		err := recordbatch.ForEachRecord(batch, func(r kmsg.Record) error {
			total++
			if retainRecord(f, h.BaseOffset+int64(r.OffsetDelta), r, horizon) {
				kept = append(kept, r)
				tombstones = tombstones || r.Value == nil
			}
			return nil
		})
		if err != nil {
			return nil, 0, fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	needHorizon := tombstones && horizon < 0
	if needHorizon {
		horizon = f.nowMs + f.deleteRetentionMs
	}
	switch {
	case len(kept) > 0 && len(kept) == total && !needHorizon:
		return batch, batchKept, nil
	case len(kept) > 0:
		return recordbatch.BuildRetained(h, kept, horizon), batchRewritten, nil
	case h.ProducerID >= 0 && f.lastData[h.ProducerID] == h.LastOffset():
		if h.RecordCount == 0 {
			return batch, batchKept, nil
		}
		return recordbatch.BuildEmpty(h), batchEmptied, nil
	default:
		return nil, batchDropped, nil
	}
}

// retainRecord is Kafka's shouldRetainRecord for v2 batches: horizon is
// the batch's delete horizon (-1 none).
func retainRecord(f *cleanFilter, offset int64, r kmsg.Record, horizon int64) bool {
	if offset > f.offsets.latest {
		return true
	}
	if r.Key == nil {
		return false
	}
	latestForKey := offset >= f.offsets.get(r.Key)
	retainDeletes := horizon < 0 || f.nowMs < horizon
	return latestForKey && (r.Value != nil || retainDeletes)
}

// segmentInfo is what grouping needs of one segment.
type segmentInfo struct {
	base           int64
	size           int64 // .log bytes
	offsetIdxBytes int64
	timeIdxBytes   int64
}

// groupSegmentsBySize is Kafka's LogCleaner.groupSegmentsBySize: it cuts
// the segments to clean into runs that each become one cleaned segment,
// no larger than maxSize (segment.bytes) in log bytes, maxIndexSize
// (segment.index.bytes) in either index, and with offsets that fit the
// 32-bit relative offsets of one segment. firstUncleanable bounds the last
// segment's offsets. It returns the runs as index ranges [from, to).
func groupSegmentsBySize(segs []segmentInfo, maxSize, maxIndexSize, firstUncleanable int64) [][2]int {
	var groups [][2]int
	for i := 0; i < len(segs); {
		from := i
		logSize, idxSize, timeSize := segs[i].size, segs[i].offsetIdxBytes, segs[i].timeIdxBytes
		i++
		for i < len(segs) &&
			logSize+segs[i].size <= maxSize &&
			idxSize+segs[i].offsetIdxBytes <= maxIndexSize &&
			timeSize+segs[i].timeIdxBytes <= maxIndexSize &&
			(segs[i].size == 0 || lastOffsetOf(segs, i, firstUncleanable)-segs[from].base <= math.MaxInt32) {
			logSize += segs[i].size
			idxSize += segs[i].offsetIdxBytes
			timeSize += segs[i].timeIdxBytes
			i++
		}
		groups = append(groups, [2]int{from, i})
	}
	return groups
}

// lastOffsetOf is the largest offset segment i may hold: up to the next
// segment's base, or the first uncleanable offset for the last one.
func lastOffsetOf(segs []segmentInfo, i int, firstUncleanable int64) int64 {
	if i+1 < len(segs) {
		return segs[i+1].base - 1
	}
	return firstUncleanable - 1
}
