package replica

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// maxCachedBatches is how many recent batches per producer the broker
// remembers for duplicate detection; Kafka's clients keep at most 5
// in flight per partition.
const maxCachedBatches = 5

// cachedBatch remembers where one idempotent batch was written.
type cachedBatch struct {
	firstSeq, lastSeq int32
	baseOffset        int64
	offsetDelta       int32 // last offset - base offset
	timestamp         int64 // log append time or -1
}

// producerEntry is one producer's state on one partition.
type producerEntry struct {
	epoch   int16
	batches []cachedBatch // oldest first, at most maxCachedBatches
	// txnFirstOffset is the first offset of the producer's open
	// transaction on this partition, -1 when none is open.
	txnFirstOffset int64
	// coordinatorEpoch is the epoch of the transaction coordinator that
	// wrote the producer's last marker (-1 before any): markers from an
	// older coordinator are fenced.
	coordinatorEpoch int32
	lastTimestamp    int64 // max timestamp of the producer's last batch
	// sequenceReset: a marker raised the epoch (transactions v2: every
	// transaction ends with a marker one epoch up) and no batch came
	// since, so the next batch must start at sequence 0, as Kafka's
	// checkSequence requires of an epoch with no sequence yet.
	sequenceReset bool
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.batches) == 0 {
		return -1
	}
	return e.batches[len(e.batches)-1].lastSeq
}

// AbortedTxn is one aborted transaction of a partition (Kafka's
// AbortedTxn), kept in the segments' .txnindex files.
type AbortedTxn = segment.AbortedTxn

// completedTxn is a transaction whose marker is written but not yet below
// the high watermark (Kafka's unreplicatedTxns): until it is, the last
// stable offset stays at its first offset.
type completedTxn struct {
	producerID, firstOffset, markerOffset int64
}

// producerStates tracks the idempotent and transactional producers of one
// partition, as Kafka's ProducerStateManager. It is not safe for concurrent
// use: the partition's lock guards it.
type producerStates struct {
	byID map[int64]*producerEntry
	// open maps producer id -> first offset of each open transaction
	// (the same as its entry's txnFirstOffset), kept apart so that the
	// last stable offset costs the open transactions, not every producer.
	open         map[int64]int64
	unreplicated []completedTxn // marker offset order
}

func newProducerStates() *producerStates {
	return &producerStates{byID: make(map[int64]*producerEntry), open: make(map[int64]int64)}
}

// seqCheck is the outcome of checking one batch against producer state.
type seqCheck struct {
	duplicate *cachedBatch // set when the batch was already written
}

// check validates an idempotent batch's epoch and sequence before it is
// appended, following Kafka's ProducerAppendInfo.checkSequence and
// findDuplicateBatch. Batches without a producer id are always accepted.
func (s *producerStates) check(h recordbatch.Header) (seqCheck, error) {
	if h.ProducerID < 0 {
		if h.IsTransactional() {
			return seqCheck{}, fmt.Errorf("%w: transactional batch without a producer id", kerr.InvalidRecord)
		}
		return seqCheck{}, nil
	}
	e, ok := s.byID[h.ProducerID]
	if !ok {
		// Unknown producer (new, or its state expired): since KIP-360 the
		// broker accepts any first sequence.
		return seqCheck{}, nil
	}
	// As Kafka's ProducerAppendInfo: the epoch is checked for every
	// batch, the coordinator's (sequence -1: TxnOffsetCommit) included,
	// so a fenced producer writes nothing; then an open transaction takes
	// only transactional writes until its marker; then sequences.
	if h.ProducerEpoch < e.epoch {
		return seqCheck{}, fmt.Errorf("%w: producer %d at epoch %d, partition has %d", kerr.InvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	if e.txnFirstOffset >= 0 && !h.IsTransactional() {
		return seqCheck{}, fmt.Errorf("%w: producer %d has an open transaction", kerr.InvalidTxnState, h.ProducerID)
	}
	if h.BaseSequence < 0 {
		return seqCheck{}, nil
	}
	if h.ProducerEpoch > e.epoch {
		// A bumped epoch restarts sequences at zero.
		if h.BaseSequence != 0 {
			return seqCheck{}, kerr.OutOfOrderSequenceNumber
		}
		return seqCheck{}, nil
	}
	last := h.LastSequence()
	for i := range e.batches {
		if e.batches[i].firstSeq == h.BaseSequence && e.batches[i].lastSeq == last {
			return seqCheck{duplicate: &e.batches[i]}, nil
		}
	}
	if e.sequenceReset && h.BaseSequence != 0 {
		return seqCheck{}, fmt.Errorf("%w: producer %d's first batch at epoch %d has sequence %d, not 0", kerr.OutOfOrderSequenceNumber, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	}
	if !inSequence(e.lastSeq(), h.BaseSequence) {
		return seqCheck{}, kerr.OutOfOrderSequenceNumber
	}
	return seqCheck{}, nil
}

// inSequence reports whether next directly follows last, with Kafka's
// wrap-around at MaxInt32.
func inSequence(last, next int32) bool {
	if last < 0 {
		return true
	}
	return next == last+1 || (last == 1<<31-1 && next == 0)
}

// update records a written batch (as leader, as follower, or while
// rebuilding state from the log).
func (s *producerStates) update(h recordbatch.Header, logAppendTime int64) {
	if h.ProducerID < 0 {
		return
	}
	e := s.entry(h.ProducerID, h.ProducerEpoch)
	e.lastTimestamp = h.MaxTimestamp
	if h.IsTransactional() && e.txnFirstOffset < 0 {
		e.txnFirstOffset = h.BaseOffset
		s.open[h.ProducerID] = h.BaseOffset
	}
	if h.BaseSequence < 0 {
		return
	}
	e.sequenceReset = false
	if len(e.batches) == maxCachedBatches {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:maxCachedBatches-1]
	}
	e.batches = append(e.batches, cachedBatch{
		firstSeq:    h.BaseSequence,
		lastSeq:     h.LastSequence(),
		baseOffset:  h.BaseOffset,
		offsetDelta: h.LastOffsetDelta,
		timestamp:   logAppendTime,
	})
}

// entry returns the producer's entry, created when new, at epoch: a new
// epoch forgets the cached batches (sequences restart at 0).
func (s *producerStates) entry(id int64, epoch int16) *producerEntry {
	e, ok := s.byID[id]
	if !ok {
		e = &producerEntry{epoch: epoch, txnFirstOffset: -1, coordinatorEpoch: -1, lastTimestamp: -1}
		s.byID[id] = e
	}
	if epoch != e.epoch {
		e.epoch = epoch
		e.batches = e.batches[:0]
	}
	return e
}

// hasOpenTxn reports whether the producer has a transaction open on the
// partition at epoch.
func (s *producerStates) hasOpenTxn(producerID int64, epoch int16) bool {
	e, ok := s.byID[producerID]
	return ok && e.txnFirstOffset >= 0 && e.epoch == epoch
}

// checkMarker validates a transaction marker before a leader appends it
// (Kafka's ProducerAppendInfo.appendEndTxnMarker): a marker of an older
// producer epoch is INVALID_PRODUCER_EPOCH, one from an older coordinator
// TRANSACTION_COORDINATOR_FENCED. A transactions v2 marker (v2) carries
// the epoch above its transaction's batches, so one at or below the epoch
// of a transaction open here is a stale copy of the previous
// transaction's marker (a request that outlived its retry) and must not
// end this one: INVALID_PRODUCER_EPOCH too (KIP-1228's check).
func (s *producerStates) checkMarker(producerID int64, epoch int16, coordinatorEpoch int32, v2 bool) error {
	e, ok := s.byID[producerID]
	if !ok {
		return nil
	}
	if epoch < e.epoch {
		return fmt.Errorf("%w: marker of producer %d at epoch %d, producer is at %d", kerr.InvalidProducerEpoch, producerID, epoch, e.epoch)
	}
	if v2 && e.txnFirstOffset >= 0 && epoch <= e.epoch {
		return fmt.Errorf("%w: transactions v2 marker of producer %d at epoch %d cannot end its transaction opened at epoch %d", kerr.InvalidProducerEpoch, producerID, epoch, e.epoch)
	}
	if coordinatorEpoch < e.coordinatorEpoch {
		return fmt.Errorf("%w: marker from coordinator epoch %d, last was %d", kerr.TransactionCoordinatorFenced, coordinatorEpoch, e.coordinatorEpoch)
	}
	return nil
}

// abortFor is the .txnindex entry of the marker h (control c) about to be
// written, when it aborts an open transaction: its last stable offset is
// the partition's right after the abort (Kafka's
// ProducerStateManager.lastStableOffset(completedTxn)). It changes nothing.
func (s *producerStates) abortFor(h recordbatch.Header, c recordbatch.Control) (AbortedTxn, bool) {
	if h.ProducerID < 0 || c.Type != recordbatch.ControlAbort {
		return AbortedTxn{}, false
	}
	e, ok := s.byID[h.ProducerID]
	if !ok || e.txnFirstOffset < 0 {
		return AbortedTxn{}, false
	}
	lso := h.BaseOffset + 1
	for id, f := range s.open {
		if id != h.ProducerID {
			lso = min(lso, f)
		}
	}
	return AbortedTxn{ProducerID: h.ProducerID, FirstOffset: e.txnFirstOffset, LastOffset: h.BaseOffset, LastStableOffset: lso}, true
}

// completeTxn records a marker written at h.BaseOffset (as leader, as
// follower, or while rebuilding from the log). The transaction it ends
// stays unreplicated until the marker is below the high watermark; an
// abort's .txnindex entry (abortFor) is written with the marker.
func (s *producerStates) completeTxn(h recordbatch.Header, c recordbatch.Control) {
	if h.ProducerID < 0 || (c.Type != recordbatch.ControlAbort && c.Type != recordbatch.ControlCommit) {
		return
	}
	prev, known := s.byID[h.ProducerID]
	raised := known && h.ProducerEpoch > prev.epoch
	e := s.entry(h.ProducerID, h.ProducerEpoch)
	e.lastTimestamp = h.MaxTimestamp
	e.coordinatorEpoch = c.CoordinatorEpoch
	if raised {
		e.sequenceReset = true
	}
	if e.txnFirstOffset < 0 {
		return // a marker for a partition the transaction never wrote, or a retry
	}
	first := e.txnFirstOffset
	e.txnFirstOffset = -1
	delete(s.open, h.ProducerID)
	s.unreplicated = append(s.unreplicated, completedTxn{producerID: h.ProducerID, firstOffset: first, markerOffset: h.BaseOffset})
}

// lastStableOffset is Kafka's last stable offset under high watermark hw:
// the first offset of the earliest transaction that is open, or completed
// with its marker not yet replicated below hw; hw when there is none.
// Transactions whose marker is below hw are dropped from unreplicated.
func (s *producerStates) lastStableOffset(hw int64) int64 {
	kept := s.unreplicated[:0]
	for _, t := range s.unreplicated {
		if t.markerOffset >= hw {
			kept = append(kept, t)
		}
	}
	clear(s.unreplicated[len(kept):])
	s.unreplicated = kept
	lso := hw
	for _, f := range s.open {
		lso = min(lso, f)
	}
	for _, t := range s.unreplicated {
		lso = min(lso, t.firstOffset)
	}
	return lso
}

// truncateFrom forgets what the log held from offset on, when every
// marker at or above offset is still in unreplicated, which holds when
// offset is at or above the high watermark (markers leave unreplicated only
// once below it). Transactions whose marker is removed are open again from
// their first offset; those that began at or above offset are gone; cached
// batches from offset on are dropped (the log trims its .txnindex). (A producer
// epoch raised by a removed marker stays raised: that fences more, not
// less, and the coordinator writes the marker again.) Below the high
// watermark the caller rebuilds from the log instead.
func (s *producerStates) truncateFrom(offset int64) {
	kept := s.unreplicated[:0]
	for _, t := range s.unreplicated {
		if t.markerOffset < offset {
			kept = append(kept, t)
			continue
		}
		if t.firstOffset < offset {
			e := s.entry(t.producerID, s.epochOf(t.producerID))
			e.txnFirstOffset = t.firstOffset
			s.open[t.producerID] = t.firstOffset
		}
	}
	clear(s.unreplicated[len(kept):])
	s.unreplicated = kept
	for id, e := range s.byID {
		if e.txnFirstOffset >= offset {
			e.txnFirstOffset = -1
			delete(s.open, id)
		}
		batches := e.batches[:0]
		for _, b := range e.batches {
			if b.baseOffset < offset {
				batches = append(batches, b)
			}
		}
		e.batches = batches
		if len(batches) == 0 && e.txnFirstOffset < 0 && e.coordinatorEpoch < 0 {
			delete(s.byID, id) // known only from what was removed
		}
	}
}

// epochOf is the producer's current epoch, or -1 when unknown.
func (s *producerStates) epochOf(id int64) int16 {
	if e, ok := s.byID[id]; ok {
		return e.epoch
	}
	return -1
}

// expire drops the producers whose last batch is older than before
// (milliseconds) and that have no open transaction, as Kafka's
// removeExpiredProducers: their retries can no longer be told from new
// writes, which Kafka accepts too.
func (s *producerStates) expire(beforeMs int64) {
	for id, e := range s.byID {
		if e.txnFirstOffset < 0 && e.lastTimestamp < beforeMs {
			delete(s.byID, id)
		}
	}
}

// snapshot is the state to write to a producer snapshot file (Kafka's v1
// entries, by producer id): of the cached batches only the last is kept.
func (s *producerStates) snapshot() []segment.ProducerSnapshotEntry {
	out := make([]segment.ProducerSnapshotEntry, 0, len(s.byID))
	for id, e := range s.byID {
		se := segment.ProducerSnapshotEntry{
			ProducerID: id, Epoch: e.epoch, LastSequence: -1, LastOffset: -1,
			Timestamp: e.lastTimestamp, CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnFirstOffset: e.txnFirstOffset,
		}
		if n := len(e.batches); n > 0 {
			b := e.batches[n-1]
			se.LastSequence, se.LastOffset, se.OffsetDelta = b.lastSeq, b.baseOffset+int64(b.offsetDelta), b.offsetDelta
			for _, x := range e.batches[:n-1] {
				se.Earlier = append(se.Earlier, segment.SnapshotBatch{FirstSequence: x.firstSeq, LastSequence: x.lastSeq,
					BaseOffset: x.baseOffset, OffsetDelta: x.offsetDelta, Timestamp: x.timestamp})
			}
		}
		out = append(out, se)
	}
	slices.SortFunc(out, func(a, b segment.ProducerSnapshotEntry) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

// restore loads the entries of a snapshot into empty state. Each producer
// comes back with its last batch, as in Kafka, and the earlier batches of
// its duplicate-detection window that kbroker's snapshots keep too (the
// retry of any batch still in flight then finds its first answer);
// logAppendTime says whether the last batch's timestamp is its log append
// time (the topic's message.timestamp.type), which a duplicate's answer
// repeats.
func (s *producerStates) restore(entries []segment.ProducerSnapshotEntry, logAppendTime bool) {
	for _, se := range entries {
		e := &producerEntry{epoch: se.Epoch, txnFirstOffset: se.CurrentTxnFirstOffset, coordinatorEpoch: se.CoordinatorEpoch, lastTimestamp: se.Timestamp}
		if se.LastOffset >= 0 && se.LastSequence >= 0 && se.OffsetDelta >= 0 {
			ts := int64(-1)
			if logAppendTime {
				ts = se.Timestamp
			}
			for _, x := range se.Earlier[max(0, len(se.Earlier)-(maxCachedBatches-1)):] {
				e.batches = append(e.batches, cachedBatch{firstSeq: x.FirstSequence, lastSeq: x.LastSequence,
					baseOffset: x.BaseOffset, offsetDelta: x.OffsetDelta, timestamp: x.Timestamp})
			}
			e.batches = append(e.batches, cachedBatch{
				firstSeq:    decrementSequence(se.LastSequence, se.OffsetDelta),
				lastSeq:     se.LastSequence,
				baseOffset:  se.LastOffset - int64(se.OffsetDelta),
				offsetDelta: se.OffsetDelta,
				timestamp:   ts,
			})
		}
		if e.txnFirstOffset < 0 {
			e.txnFirstOffset = -1
		} else {
			s.open[se.ProducerID] = e.txnFirstOffset
		}
		s.byID[se.ProducerID] = e
	}
}

// decrementSequence is Kafka's DefaultRecordBatch.decrementSequence:
// sequences wrap from MaxInt32 to 0.
func decrementSequence(seq, by int32) int32 {
	if seq < by {
		return 1<<31 - 1 - (by - seq) + 1
	}
	return seq - by
}

// ProducerInfo is one producer's state on a partition (DescribeProducers).
type ProducerInfo struct {
	ProducerID       int64
	ProducerEpoch    int16
	LastSequence     int32
	LastTimestamp    int64
	CoordinatorEpoch int32
	TxnStartOffset   int64 // -1 without an open transaction
}

func (s *producerStates) list() []ProducerInfo {
	out := make([]ProducerInfo, 0, len(s.byID))
	for id, e := range s.byID {
		out = append(out, ProducerInfo{
			ProducerID: id, ProducerEpoch: e.epoch, LastSequence: e.lastSeq(), LastTimestamp: e.lastTimestamp,
			CoordinatorEpoch: e.coordinatorEpoch, TxnStartOffset: e.txnFirstOffset,
		})
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

// logAppendTime is the batch's log append time, or -1 for a CreateTime
// batch: what a duplicate's answer repeats.
func logAppendTime(h recordbatch.Header) int64 {
	if h.Attributes&recordbatch.TimestampTypeBit != 0 {
		return h.MaxTimestamp
	}
	return -1
}
