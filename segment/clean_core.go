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

// AbortedRanges answers whether a data batch belongs to an aborted
// transaction: per producer, the [first offset, marker offset) ranges of
// its aborted transactions, from the .txnindex entries (Kafka's
// CleanedTransactionMetadata does the same from collectAbortedTransactions).
// The cleaner uses it, and so does a read_committed share fetch, which
// archives aborted records rather than deliver them.
type AbortedRanges map[int64][]AbortedTxn

// NewAbortedRanges indexes txns (a read's or the cleaned range's aborted
// transactions) by producer; none gives a nil index (no allocation for
// every read_uncommitted share fetch), which answers like an empty one.
func NewAbortedRanges(txns []AbortedTxn) AbortedRanges {
	if len(txns) == 0 {
		return nil
	}
	r := AbortedRanges{}
	for _, t := range txns {
		r[t.ProducerID] = append(r[t.ProducerID], t)
	}
	return r
}

// endsAbort reports whether the control batch h is the marker of an
// aborted transaction the index lists.
func (r AbortedRanges) endsAbort(h recordbatch.Header) bool {
	for _, t := range r[h.ProducerID] {
		if t.LastOffset == h.BaseOffset {
			return true
		}
	}
	return false
}

// Aborted reports whether the data batch h belongs to one of the aborted
// transactions (a control batch never does).
func (r AbortedRanges) Aborted(h recordbatch.Header) bool {
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
func mapBatch(m *offsetMap, batch []byte, h recordbatch.Header, start int64, aborts AbortedRanges) (bool, error) {
	if !h.IsControl() && !aborts.Aborted(h) {
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

// producerTail is what the cleaner keeps of one producer so its state
// survives cleaning (Kafka's lastRecordsOfActiveProducers), from a header
// scan of the whole log.
type producerTail struct {
	// lastData is the last offset of the producer's last data batch, -1
	// when the log holds none; dataEpoch is that batch's epoch.
	lastData  int64
	dataEpoch int16
	// epoch is the epoch of the producer's last batch of any kind: an
	// abort written by the coordinator with a bumped epoch (a timed-out or
	// fenced transaction) is later than every data batch.
	epoch int16
}

// producerTails maps a producer id to its tail.
type producerTails map[int64]producerTail

// observe records one batch of the header scan, in offset order.
func (p producerTails) observe(h recordbatch.Header) {
	if h.ProducerID < 0 {
		return
	}
	t, ok := p[h.ProducerID]
	if !ok {
		t = producerTail{lastData: -1}
	}
	t.epoch = h.ProducerEpoch
	if !h.IsControl() {
		t.lastData, t.dataEpoch = h.LastOffset(), h.ProducerEpoch
	}
	p[h.ProducerID] = t
}

// keeps reports whether batch h must stay for its producer's state, as
// Kafka's isBatchLastRecordOfProducer: a data batch that is the producer's
// last one (its epoch and last sequence), or a control batch of the
// producer's latest epoch when no data batch has that epoch (the marker
// is then the only batch that carries the epoch, which fences zombies).
func (p producerTails) keeps(h recordbatch.Header) bool {
	if h.ProducerID < 0 {
		return false
	}
	t, ok := p[h.ProducerID]
	if !ok {
		return false
	}
	if !h.IsControl() {
		return t.lastData == h.LastOffset()
	}
	noDataAtEpoch := t.lastData < 0 || t.dataEpoch != t.epoch
	return noDataAtEpoch && h.ProducerEpoch == t.epoch
}

// txnMarkers is Kafka's CleanedTransactionMetadata for one cleaning: it
// follows the batches in offset order, from the log's first segment, and
// says of each transaction marker whether a batch of its transaction was
// read before it. A transaction's batches on a partition all come between
// the producer's previous marker and its own (a producer writes nothing
// else while its transaction is open), so "a transactional data batch of
// the producer since its previous marker" is exactly "a batch of this
// marker's transaction", whether it committed or aborted. (Kafka tracks
// aborted transactions by their .txnindex ranges and committed ones by
// producer; the answer is the same with a complete index, and this one
// keeps a marker also when an index entry is missing.)
//
// Batches are counted as read when the cleaning reads them, even if it
// drops them: a marker then stays one more cleaning, which is what makes
// its removal safe whatever group of this cleaning a crash interrupts.
type txnMarkers struct {
	// dataSinceMarker holds the producers with a transactional data batch
	// read since their last marker.
	dataSinceMarker map[int64]bool
}

func newTxnMarkers() *txnMarkers { return &txnMarkers{dataSinceMarker: map[int64]bool{}} }

// onData records a data batch.
func (t *txnMarkers) onData(h recordbatch.Header) {
	if h.IsTransactional() && h.ProducerID >= 0 {
		t.dataSinceMarker[h.ProducerID] = true
	}
}

// onControl records a control batch and reports whether it is a
// transaction marker with no batch of its transaction left before it
// (Kafka's onControlBatchRead): only such a marker may be removed, once
// its delete horizon passed. A control batch without records (Kafka's
// cleaner writes those) was emptied by an earlier cleaning and may go;
// control batches of other types stay.
func (t *txnMarkers) onControl(batch []byte, h recordbatch.Header) (removable bool) {
	if h.RecordCount == 0 {
		return true
	}
	c, err := recordbatch.ParseControl(batch)
	if err != nil || (c.Type != recordbatch.ControlAbort && c.Type != recordbatch.ControlCommit) || h.ProducerID < 0 {
		return false
	}
	hadData := t.dataSinceMarker[h.ProducerID]
	delete(t.dataSinceMarker, h.ProducerID)
	return !hadData
}

// cleanFilter holds what decides, for the batches of one cleaning, which
// records a cleaning keeps (Kafka's LogCleaner.cleanInto filter). Its
// batches must be given to filterBatch in offset order, from the log's
// first segment.
type cleanFilter struct {
	offsets *offsetMap
	aborts  AbortedRanges
	// nowMs and deleteRetentionMs decide tombstones and removable
	// transaction markers as Kafka 3.x does for v2 batches (KIP-534): a
	// batch whose tombstones (or whose removable marker) a cleaning keeps
	// for the first time gets a delete horizon nowMs+deleteRetentionMs; a
	// later cleaning from that time on drops them. (Kafka's older rule,
	// by the last clean segment's modification time, never drops them
	// when the cleaned segments keep being regrouped with new ones.)
	nowMs, deleteRetentionMs int64
	// producers keeps each producer's last batch, empty if need be, so the
	// producer's epoch and last sequence survive (Kafka's RETAIN_EMPTY
	// for the active producers' last batches).
	producers producerTails
	// txns follows the transactions to decide their markers; nil: every
	// marker is kept (as before markers could be removed).
	txns *txnMarkers
	// keptAborts collects the offsets of the abort markers kept with
	// batches of their transaction still read before them: their
	// .txnindex entries go to the cleaned segment, the others' do not
	// (Kafka's cleanedIndex), there being nothing left for them to hide.
	keptAborts map[int64]bool
	// uncleanable is the cleaning's first uncleanable offset (the last
	// stable offset at most): a marker at or above it stays as it is,
	// so no marker leaves before it is below the high watermark. (Kafka
	// decides markers of the whole last segment; this is stricter.)
	uncleanable int64
	// removedMarkers collects the markers this cleaning removed.
	removedMarkers []removedMarker
}

// removedMarker is a transaction marker a cleaning removed.
type removedMarker struct {
	producerID, offset int64
}

// batchOutcome says what filterBatch did with a batch (for stats and tests).
type batchOutcome int

const (
	batchKept      batchOutcome = iota // written as it was
	batchRewritten                     // some records removed, or a delete horizon set
	batchEmptied                       // no records kept, header kept for the producer
	batchDropped                       // removed
)

// filterBatch is Kafka's MemoryRecords.filterTo for one batch with the
// cleaner's filter: it returns the bytes to write (the original batch, a
// rebuilt one, an empty header, or nil) and what it did.
//
// Records: kept when past the map's latest offset (beyond what this
// cleaning mapped), or keyed, at or after their key's latest offset, and
// either with a value or a tombstone before the batch's delete horizon
// (or in a batch without one). Records of aborted transactions and
// records without a key are removed. A batch that keeps a tombstone and
// has no delete horizon is rewritten with one. A batch left without
// records is dropped unless it is the last data batch of its producer
// (kept as an empty header). Control batches: see filterControl.
func filterBatch(batch []byte, h recordbatch.Header, f *cleanFilter) ([]byte, batchOutcome, error) {
	if h.IsControl() {
		return filterControl(batch, h, f)
	}
	if f.txns != nil {
		f.txns.onData(h)
	}
	discard := f.aborts.Aborted(h)
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
	case f.producers.keeps(h):
		if h.RecordCount == 0 {
			return batch, batchKept, nil
		}
		return recordbatch.BuildEmpty(h), batchEmptied, nil
	default:
		return nil, batchDropped, nil
	}
}

// filterControl decides a control batch as Kafka's cleaner does (KIP-98,
// KIP-534): a transaction marker stays while a batch of its transaction
// was read before it in this cleaning; once none is, the first cleaning
// that keeps it gives it a delete horizon (nowMs + delete.retention.ms,
// as a tombstone), and the first cleaning at or after that horizon
// removes it: consumers that read the transaction's batches within
// delete.retention.ms still see its end. A marker that is its producer's
// last batch of the producer's latest epoch stays whatever its horizon
// (producerTails.keeps). Unlike Kafka, which empties such a marker
// (RETAIN_EMPTY), it stays whole: its record is a few bytes, and every
// reader, this broker's state rebuild included, then still sees which
// marker it is.
func filterControl(batch []byte, h recordbatch.Header, f *cleanFilter) ([]byte, batchOutcome, error) {
	if f.txns == nil {
		return batch, batchKept, nil
	}
	removable := f.txns.onControl(batch, h)
	if !removable || h.BaseOffset >= f.uncleanable {
		if h.RecordCount > 0 && f.aborts.endsAbort(h) {
			f.keptAborts[h.BaseOffset] = true
		}
		return batch, batchKept, nil
	}
	horizon := h.DeleteHorizon()
	keep := f.producers.keeps(h)
	switch {
	case !keep && (h.RecordCount == 0 || (horizon >= 0 && horizon <= f.nowMs)):
		f.removedMarkers = append(f.removedMarkers, removedMarker{producerID: h.ProducerID, offset: h.BaseOffset})
		return nil, batchDropped, nil
	case horizon >= 0 || h.RecordCount == 0:
		return batch, batchKept, nil
	}
	var recs []kmsg.Record
	if err := recordbatch.ForEachRecord(batch, func(r kmsg.Record) error {
		recs = append(recs, r)
		return nil
	}); err != nil {
		return nil, 0, fmt.Errorf("control batch at offset %d: %w", h.BaseOffset, err)
	}
	return recordbatch.BuildRetained(h, recs, f.nowMs+f.deleteRetentionMs), batchRewritten, nil
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
