package replica

import (
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
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.batches) == 0 {
		return -1
	}
	return e.batches[len(e.batches)-1].lastSeq
}

// producerStates tracks idempotent producers of one partition, as Kafka's
// ProducerStateManager. It is not safe for concurrent use: the partition's
// lock guards it.
type producerStates struct {
	byID map[int64]*producerEntry
}

func newProducerStates() *producerStates {
	return &producerStates{byID: make(map[int64]*producerEntry)}
}

// seqCheck is the outcome of checking one batch against producer state.
type seqCheck struct {
	duplicate *cachedBatch // set when the batch was already written
}

// check validates an idempotent batch's epoch and sequence before it is
// appended, following Kafka's ProducerAppendInfo.checkSequence and
// findDuplicateBatch. Batches without a producer id are always accepted.
func (s *producerStates) check(h recordbatch.Header) (seqCheck, error) {
	if h.ProducerID < 0 || h.BaseSequence < 0 {
		return seqCheck{}, nil
	}
	e, ok := s.byID[h.ProducerID]
	if !ok {
		// Unknown producer (new, or its state expired): since KIP-360 the
		// broker accepts any first sequence.
		return seqCheck{}, nil
	}
	if h.ProducerEpoch < e.epoch {
		return seqCheck{}, kerr.InvalidProducerEpoch
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
	e, ok := s.byID[h.ProducerID]
	if !ok {
		e = &producerEntry{epoch: h.ProducerEpoch}
		s.byID[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.epoch {
		e.epoch = h.ProducerEpoch
		e.batches = e.batches[:0]
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

// truncateFrom forgets batches at or above offset, after a log truncation.
func (s *producerStates) truncateFrom(offset int64) {
	for id, e := range s.byID {
		kept := e.batches[:0]
		for _, b := range e.batches {
			if b.baseOffset < offset {
				kept = append(kept, b)
			}
		}
		e.batches = kept
		if len(kept) == 0 {
			delete(s.byID, id)
		}
	}
}

// logAppendTime is the batch's log append time, or -1 for a CreateTime
// batch: what a duplicate's answer repeats.
func logAppendTime(h recordbatch.Header) int64 {
	if h.Attributes&recordbatch.TimestampTypeBit != 0 {
		return h.MaxTimestamp
	}
	return -1
}
