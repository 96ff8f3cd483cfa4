package replica

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kbroker/kbroker/recordbatch"
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
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.batches) == 0 {
		return -1
	}
	return e.batches[len(e.batches)-1].lastSeq
}

// AbortedTxn is one aborted transaction of a partition: Kafka's AbortedTxn,
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
	aborted      []AbortedTxn   // LastOffset order
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
	if len(e.batches) == maxCachedBatches {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:maxCachedBatches-1]
	}
	e.batches = append(e.batches, cachedBatch{
		firstSeq:   h.BaseSequence,
		lastSeq:    h.LastSequence(),
		baseOffset: h.BaseOffset,
		timestamp:  logAppendTime,
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
// TRANSACTION_COORDINATOR_FENCED.
func (s *producerStates) checkMarker(producerID int64, epoch int16, coordinatorEpoch int32) error {
	e, ok := s.byID[producerID]
	if !ok {
		return nil
	}
	if epoch < e.epoch {
		return fmt.Errorf("%w: marker of producer %d at epoch %d, producer is at %d", kerr.InvalidProducerEpoch, producerID, epoch, e.epoch)
	}
	if coordinatorEpoch < e.coordinatorEpoch {
		return fmt.Errorf("%w: marker from coordinator epoch %d, last was %d", kerr.TransactionCoordinatorFenced, coordinatorEpoch, e.coordinatorEpoch)
	}
	return nil
}

// completeTxn records a marker written at h.BaseOffset (as leader, as
// follower, or while rebuilding from the log). An abort that ended an open
// transaction is remembered for read_committed fetches.
func (s *producerStates) completeTxn(h recordbatch.Header, c recordbatch.Control) {
	if h.ProducerID < 0 || (c.Type != recordbatch.ControlAbort && c.Type != recordbatch.ControlCommit) {
		return
	}
	e := s.entry(h.ProducerID, h.ProducerEpoch)
	e.lastTimestamp = h.MaxTimestamp
	e.coordinatorEpoch = c.CoordinatorEpoch
	if e.txnFirstOffset < 0 {
		return // a marker for a partition the transaction never wrote, or a retry
	}
	first := e.txnFirstOffset
	e.txnFirstOffset = -1
	delete(s.open, h.ProducerID)
	s.unreplicated = append(s.unreplicated, completedTxn{producerID: h.ProducerID, firstOffset: first, markerOffset: h.BaseOffset})
	if c.Type == recordbatch.ControlAbort {
		lso := h.BaseOffset + 1
		for _, f := range s.open {
			lso = min(lso, f)
		}
		s.aborted = append(s.aborted, AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: h.BaseOffset, LastStableOffset: lso})
	}
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

// abortedTxns returns the aborted transactions a read_committed fetch of
// [from, upTo) must know: those ending at or after from and starting
// before upTo. As Kafka, the search stops at the first transaction whose
// last stable offset reaches upTo: none after it can start below upTo.
func (s *producerStates) abortedTxns(from, upTo int64) []AbortedTxn {
	i, _ := slices.BinarySearchFunc(s.aborted, from, func(a AbortedTxn, off int64) int { return cmp.Compare(a.LastOffset, off) })
	var out []AbortedTxn
	for _, a := range s.aborted[i:] {
		if a.FirstOffset < upTo {
			out = append(out, a)
		}
		if a.LastStableOffset >= upTo {
			break
		}
	}
	return out
}

// truncateFrom forgets what the log held from offset on, when every
// marker at or above offset is still in unreplicated, which holds when
// offset is at or above the high watermark (markers leave unreplicated only
// once below it). Transactions whose marker is removed are open again from
// their first offset; those that began at or above offset are gone; cached
// batches and aborted transactions from offset on are dropped. (A producer
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
	i, _ := slices.BinarySearchFunc(s.aborted, offset, func(a AbortedTxn, off int64) int { return cmp.Compare(a.LastOffset, off) })
	s.aborted = s.aborted[:i]
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

// forgetBelow drops aborted transactions that end below the log start
// offset: no fetch can reach them any more.
func (s *producerStates) forgetBelow(logStart int64) {
	i, _ := slices.BinarySearchFunc(s.aborted, logStart, func(a AbortedTxn, off int64) int { return cmp.Compare(a.LastOffset, off) })
	s.aborted = slices.Delete(s.aborted, 0, i)
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
