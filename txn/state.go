package txn

// The transaction state machine, after Kafka's TransactionMetadata.scala:
// every decision is a pure function of the current metadata and the request,
// returning the metadata to write (and then apply) or the Kafka error to
// answer. The Coordinator only adds locking, the log and the markers.

import (
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// State is a transaction's state: Kafka's TransactionState, with its ids
// (TransactionLogValue.TransactionStatus) and names (DescribeTransactions,
// ListTransactions).
type State int8

// Kafka's transaction states, by their stored ids.
const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7

	// none marks an entry with no pending transition; never stored.
	none State = -1
)

// String is the state's name as Kafka reports it.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case Ongoing:
		return "Ongoing"
	case PrepareCommit:
		return "PrepareCommit"
	case PrepareAbort:
		return "PrepareAbort"
	case CompleteCommit:
		return "CompleteCommit"
	case CompleteAbort:
		return "CompleteAbort"
	case Dead:
		return "Dead"
	case PrepareEpochFence:
		return "PrepareEpochFence"
	case none:
		return "None"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// ParseState is Kafka's TransactionState.fromName.
func ParseState(name string) (State, bool) {
	for s := Empty; s <= PrepareEpochFence; s++ {
		if s.String() == name {
			return s, true
		}
	}
	return none, false
}

// validFrom is Kafka's validPreviousStates: whether a transaction in prev
// may move to s.
func (s State) validFrom(prev State) bool {
	switch s {
	case Empty:
		return prev == Empty || prev == CompleteCommit || prev == CompleteAbort
	case Ongoing:
		return prev == Ongoing || prev == Empty || prev == CompleteCommit || prev == CompleteAbort
	case PrepareCommit:
		return prev == Ongoing
	case PrepareAbort:
		return prev == Ongoing || prev == PrepareEpochFence
	case CompleteCommit:
		return prev == PrepareCommit
	case CompleteAbort:
		return prev == PrepareAbort
	case Dead:
		return prev == Empty || prev == CompleteAbort || prev == CompleteCommit
	case PrepareEpochFence:
		return prev == Ongoing
	}
	return false
}

// expirationAllowed: only a transactional id with no transaction in flight
// may expire.
func (s State) expirationAllowed() bool {
	return s == Empty || s == CompleteCommit || s == CompleteAbort
}

// Kafka's RecordBatch.NO_PRODUCER_ID / NO_PRODUCER_EPOCH.
const (
	noProducerID    int64 = -1
	noProducerEpoch int16 = -1
)

// epochExhausted is TransactionMetadata.isEpochExhausted: the last epoch is
// kept back so that the coordinator can always fence the producer once more.
func epochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// Metadata is one transactional id's state (Kafka's TransactionMetadata). A
// value: decisions return a new one, never modify their input.
type Metadata struct {
	TransactionalID string
	ProducerID      int64
	// LastProducerID and LastProducerEpoch let a producer that lost the
	// answer to an epoch bump retry it (KIP-360). As in Kafka 3.9 they are
	// not stored in the log.
	LastProducerID    int64
	ProducerEpoch     int16
	LastProducerEpoch int16
	TimeoutMs         int32
	State             State
	// Partitions is sorted and without duplicates.
	Partitions []TopicPartition
	StartMs    int64 // when the transaction began (first partition added); -1 none
	UpdateMs   int64 // last change, for expiration
}

// ProducerIDAndEpoch is what a KIP-360 producer sends with InitProducerId.
type ProducerIDAndEpoch struct {
	ID    int64
	Epoch int16
}

// newMetadata is a transactional id seen for the first time: epoch -1, so
// its first InitProducerId bumps it to 0.
func newMetadata(id string, producerID int64, timeoutMs int32, nowMs int64) Metadata {
	return Metadata{
		TransactionalID:   id,
		ProducerID:        producerID,
		LastProducerID:    noProducerID,
		ProducerEpoch:     noProducerEpoch,
		LastProducerEpoch: noProducerEpoch,
		TimeoutMs:         timeoutMs,
		State:             Empty,
		StartMs:           -1,
		UpdateMs:          nowMs,
	}
}

// errIllegalState is a transition Kafka treats as a bug
// (IllegalStateException): answered UNKNOWN_SERVER_ERROR.
func errIllegalState(m Metadata, to State) error {
	return fmt.Errorf("%w: transactional id %q: illegal transition from %s to %s",
		kerr.UnknownServerError, m.TransactionalID, m.State, to)
}

// transition is Kafka's prepareTransitionTo check: to must be reachable from
// m.State.
func transition(m Metadata, to State) error {
	if !to.validFrom(m.State) {
		return errIllegalState(m, to)
	}
	return nil
}

// errNeedProducerID asks the caller of planInit to allocate a producer id
// and call again: allocation may block (a controller write), so it never
// happens under the coordinator's lock.
var errNeedProducerID = fmt.Errorf("%w: a new producer id is needed", kerr.UnknownServerError)

// initPlan is what InitProducerId does for a known transactional id.
type initPlan struct {
	next Metadata
	// fence: next is PrepareAbort of the ongoing transaction with a bumped
	// epoch; the client is answered CONCURRENT_TRANSACTIONS and retries.
	fence bool
}

// planInit is TransactionCoordinator.prepareInitProducerIdTransit. newID is
// a freshly allocated producer id, or -1: when the epoch is exhausted and
// newID is -1, it returns errNeedProducerID.
func planInit(cur Metadata, pending bool, timeoutMs int32, expected *ProducerIDAndEpoch, newID int64, nowMs int64) (initPlan, error) {
	if pending {
		return initPlan{}, kerr.ConcurrentTransactions
	}
	if expected != nil && !validExpectedProducer(cur, *expected) {
		return initPlan{}, kerr.ProducerFenced
	}
	switch cur.State {
	case PrepareAbort, PrepareCommit:
		return initPlan{}, kerr.ConcurrentTransactions
	case CompleteAbort, CompleteCommit, Empty:
		if epochExhausted(cur.ProducerEpoch) && (expected == nil || expected.Epoch == cur.ProducerEpoch) {
			if newID < 0 {
				return initPlan{}, errNeedProducerID
			}
			return initPlan{next: rotateProducerID(cur, newID, timeoutMs, expected != nil, nowMs)}, nil
		}
		var expectedEpoch *int16
		if expected != nil {
			expectedEpoch = &expected.Epoch
		}
		next, err := bumpEpoch(cur, timeoutMs, expectedEpoch, nowMs)
		return initPlan{next: next}, err
	case Ongoing:
		// Abort the ongoing transaction under a bumped epoch (never
		// returned to anyone); the retry bumps it again, or rotates the
		// producer id if that exhausted the epochs.
		next, err := planFence(cur, false, nowMs)
		return initPlan{next: next, fence: true}, err
	}
	return initPlan{}, errIllegalState(cur, Empty)
}

// validExpectedProducer is prepareInitProducerIdTransit's isValidProducerId:
// a KIP-360 producer may continue when the metadata is new (epoch -1), when
// it names the current producer id (its epoch is checked by bumpEpoch), or
// when it names the previous id with an exhausted epoch (a retry of a
// rotation whose answer was lost).
func validExpectedProducer(cur Metadata, expected ProducerIDAndEpoch) bool {
	return cur.ProducerEpoch == noProducerEpoch ||
		expected.ID == cur.ProducerID ||
		(expected.ID == cur.LastProducerID && epochExhausted(expected.Epoch))
}

// bumpEpoch is prepareIncrementProducerEpoch.
func bumpEpoch(cur Metadata, timeoutMs int32, expectedEpoch *int16, nowMs int64) (Metadata, error) {
	if epochExhausted(cur.ProducerEpoch) {
		return Metadata{}, fmt.Errorf("%w: producer id %d has no epochs left", kerr.UnknownServerError, cur.ProducerID)
	}
	if err := transition(cur, Empty); err != nil {
		return Metadata{}, err
	}
	bumped := cur.ProducerEpoch + 1
	epoch, last := bumped, noProducerEpoch
	if expectedEpoch != nil {
		switch {
		case cur.ProducerEpoch == noProducerEpoch || *expectedEpoch == cur.ProducerEpoch:
			// The producer continues after an error and nobody else
			// initialised meanwhile.
			epoch, last = bumped, cur.ProducerEpoch
		case *expectedEpoch == cur.LastProducerEpoch:
			// A retry of a bump that succeeded: answer the same epoch.
			epoch, last = cur.ProducerEpoch, cur.LastProducerEpoch
		default:
			return Metadata{}, kerr.ProducerFenced
		}
	}
	next := cur
	next.LastProducerID = cur.ProducerID
	next.ProducerEpoch, next.LastProducerEpoch = epoch, last
	next.TimeoutMs = timeoutMs
	next.State = Empty
	next.Partitions = nil
	next.StartMs = -1
	next.UpdateMs = nowMs
	return next, nil
}

// rotateProducerID is prepareProducerIdRotation: a new producer id at epoch
// 0 once the old one's epochs are used up.
func rotateProducerID(cur Metadata, newID int64, timeoutMs int32, recordLastEpoch bool, nowMs int64) Metadata {
	next := cur
	next.ProducerID, next.LastProducerID = newID, cur.ProducerID
	next.ProducerEpoch, next.LastProducerEpoch = 0, noProducerEpoch
	if recordLastEpoch {
		next.LastProducerEpoch = cur.ProducerEpoch
	}
	next.TimeoutMs = timeoutMs
	next.State = Empty
	next.Partitions = nil
	next.StartMs = -1
	next.UpdateMs = nowMs
	return next
}

// planFence is prepareFenceProducerEpoch followed by the abort that
// endTransaction makes of it (Kafka passes through the in-memory
// PrepareEpochFence): the ongoing transaction becomes PrepareAbort under
// epoch+1, which fences the producer at the coordinator and, through the
// markers, at every partition. Kafka bumps its in-memory epoch before the
// write and keeps a hasFailedEpochFence flag so that a failed write is not
// bumped twice; here a failed write changes nothing, so the next fence
// bumps from the same stored epoch to the same (never handed out) epoch.
func planFence(cur Metadata, pending bool, nowMs int64) (Metadata, error) {
	if pending {
		return Metadata{}, kerr.ConcurrentTransactions
	}
	if err := transition(cur, PrepareEpochFence); err != nil {
		return Metadata{}, err
	}
	if cur.ProducerEpoch == math.MaxInt16 {
		return Metadata{}, fmt.Errorf("%w: cannot fence producer id %d at epoch %d", kerr.UnknownServerError, cur.ProducerID, cur.ProducerEpoch)
	}
	next := cur
	next.ProducerEpoch++
	next.LastProducerEpoch = noProducerEpoch
	next.State = PrepareAbort
	next.UpdateMs = nowMs
	return next, nil
}

// planAddPartitions is handleAddPartitionsToTransaction's decision. write is
// false when nothing changes (the partitions are already in the ongoing
// transaction): answer at once.
func planAddPartitions(cur Metadata, pending bool, producerID int64, epoch int16, parts []TopicPartition, nowMs int64) (next Metadata, write bool, err error) {
	switch {
	case cur.ProducerID != producerID:
		return Metadata{}, false, kerr.InvalidProducerIDMapping
	case cur.ProducerEpoch != epoch:
		return Metadata{}, false, kerr.ProducerFenced
	case pending, cur.State == PrepareCommit, cur.State == PrepareAbort:
		return Metadata{}, false, kerr.ConcurrentTransactions
	case cur.State == Ongoing && containsAll(cur.Partitions, parts):
		return cur, false, nil
	}
	if err := transition(cur, Ongoing); err != nil {
		return Metadata{}, false, err
	}
	next = cur
	if cur.State != Ongoing {
		next.StartMs = nowMs
	}
	next.State = Ongoing
	next.Partitions = union(cur.Partitions, parts)
	next.UpdateMs = nowMs
	return next, true, nil
}

// verifyPartitions is handleVerifyPartitionsInTransaction (KIP-890 part 1):
// per partition, nil when it is in the ongoing transaction, else
// INVALID_TXN_STATE; or one error for all of them.
func verifyPartitions(cur Metadata, producerID int64, epoch int16, parts []TopicPartition) ([]error, error) {
	switch {
	case cur.ProducerID != producerID:
		return nil, kerr.InvalidProducerIDMapping
	case cur.ProducerEpoch != epoch:
		return nil, kerr.ProducerFenced
	case cur.State == PrepareCommit || cur.State == PrepareAbort:
		return nil, kerr.ConcurrentTransactions
	}
	out := make([]error, len(parts))
	for i, tp := range parts {
		if cur.State != Ongoing || !containsAll(cur.Partitions, []TopicPartition{tp}) {
			out[i] = kerr.InvalidTxnState
		}
	}
	return out, nil
}

// planEndTxn is endTransaction's decision for a client's EndTxn. write is
// false with a nil error when the transaction already ended the same way (a
// retry after the answer was lost).
func planEndTxn(cur Metadata, pending bool, producerID int64, epoch int16, commit bool, nowMs int64) (next Metadata, write bool, err error) {
	switch {
	case cur.ProducerID != producerID:
		return Metadata{}, false, kerr.InvalidProducerIDMapping
	case epoch != cur.ProducerEpoch:
		return Metadata{}, false, kerr.ProducerFenced
	case pending:
		return Metadata{}, false, kerr.ConcurrentTransactions
	}
	prepare, complete := PrepareAbort, CompleteAbort
	if commit {
		prepare, complete = PrepareCommit, CompleteCommit
	}
	switch cur.State {
	case Ongoing:
		next = cur
		next.State = prepare
		next.UpdateMs = nowMs
		return next, true, nil
	case complete:
		return cur, false, nil
	case prepare:
		return Metadata{}, false, kerr.ConcurrentTransactions
	case Empty, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort:
		return Metadata{}, false, fmt.Errorf("%w: transactional id %q is %s, cannot %s",
			kerr.InvalidTxnState, cur.TransactionalID, cur.State, map[bool]string{true: "commit", false: "abort"}[commit])
	}
	return Metadata{}, false, errIllegalState(cur, prepare)
}

// completed is prepareComplete: the markers are written, the transaction is
// over.
func completed(cur Metadata, nowMs int64) Metadata {
	next := cur
	next.State = CompleteAbort
	if cur.State == PrepareCommit {
		next.State = CompleteCommit
	}
	next.Partitions = nil
	next.UpdateMs = nowMs
	return next
}

// timedOut is TransactionStateManager.timedOutTransactions' test.
func timedOut(m Metadata, pending bool, nowMs int64) bool {
	return m.State == Ongoing && !pending && m.StartMs+int64(m.TimeoutMs) < nowMs
}

// expired is the test of Kafka's removeExpiredTransactionalIds.
func expired(m Metadata, pending bool, nowMs, expirationMs int64) bool {
	return m.State.expirationAllowed() && !pending && m.UpdateMs <= nowMs-expirationMs
}

// validTimeout is validateTransactionTimeoutMs.
func validTimeout(timeoutMs int32, maxMs int64) bool {
	return timeoutMs > 0 && int64(timeoutMs) <= maxMs
}

func compareTP(a, b TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

// containsAll: every tp of parts is in set (sorted).
func containsAll(set, parts []TopicPartition) bool {
	for _, tp := range parts {
		if _, ok := slices.BinarySearchFunc(set, tp, compareTP); !ok {
			return false
		}
	}
	return true
}

// union returns the sorted, duplicate-free union of a (sorted) and b.
func union(a, b []TopicPartition) []TopicPartition {
	out := make([]TopicPartition, 0, len(a)+len(b))
	out = append(out, a...)
	out = append(out, b...)
	slices.SortFunc(out, compareTP)
	return slices.Compact(out)
}

// ByTopic calls fn once per topic of parts, in the order topics first
// appear, with that topic's partitions in their order: the shape of
// Kafka's topic -> partitions arrays (records, requests and responses).
func ByTopic(parts []TopicPartition, fn func(topic string, partitions []int32)) {
	var topics []string
	byTopic := map[string][]int32{}
	for _, tp := range parts {
		if _, ok := byTopic[tp.Topic]; !ok {
			topics = append(topics, tp.Topic)
		}
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	for _, t := range topics {
		fn(t, byTopic[t])
	}
}
