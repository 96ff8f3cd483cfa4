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
	// answer to an epoch bump retry it (KIP-360). LastProducerID is stored
	// (as PreviousProducerId) only in transactions v2 records, as Kafka 4
	// does; LastProducerEpoch never is.
	LastProducerID    int64
	ProducerEpoch     int16
	LastProducerEpoch int16
	// NextProducerID is the producer id a transactions v2 EndTxn handed
	// out when the current one ran out of epochs: it becomes ProducerID
	// (at epoch 0) when the transaction completes. -1 when none.
	NextProducerID int64
	// TxnVersion is Kafka's clientTransactionVersion: 2 when the current
	// (or last) transaction runs under transactions v2 (KIP-890 part 2:
	// partitions added by Produce v12+ and TxnOffsetCommit v5+, the epoch
	// bumped by every EndTxn v5+), else 0.
	TxnVersion int16
	TimeoutMs  int32
	State      State
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
		NextProducerID:    noProducerID,
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
	// The fenced producer's EndTxn must find its epoch gone, not a v2
	// "retry of the bump" (Kafka bumps a v2 fence twice for the same
	// effect): PRODUCER_FENCED either way.
	next.TxnVersion = 0
	next.UpdateMs = nowMs
	return next, nil
}

// planAddPartitions is handleAddPartitionsToTransaction's decision. write is
// false when nothing changes (the partitions are already in the ongoing
// transaction): answer at once. v2 is a transactions v2 add (Produce v12+,
// TxnOffsetCommit v5+): the transaction it starts is a v2 one.
func planAddPartitions(cur Metadata, pending bool, producerID int64, epoch int16, parts []TopicPartition, v2 bool, nowMs int64) (next Metadata, write bool, err error) {
	switch {
	case awaitsNextProducerID(cur, pending, producerID, epoch):
		return Metadata{}, false, kerr.ConcurrentTransactions
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
		next.TxnVersion = 0
	}
	if v2 {
		next.TxnVersion = txnV2
	}
	next.State = Ongoing
	next.Partitions = union(cur.Partitions, parts)
	next.UpdateMs = nowMs
	return next, true, nil
}

// awaitsNextProducerID: the request (an add, or the next EndTxn) comes from
// a producer that a v2 EndTxn moved to a new producer id (its epochs ran
// out) while that transaction is still completing; it is told to wait, as
// any request during a completion, instead of being refused as an unknown
// producer (fatal to the client).
func awaitsNextProducerID(cur Metadata, pending bool, producerID int64, epoch int16) bool {
	return cur.NextProducerID >= 0 && producerID == cur.NextProducerID && epoch == 0 &&
		(pending || cur.State == PrepareCommit || cur.State == PrepareAbort)
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

// txnV2 is TransactionVersion.TV_2 (KIP-890 part 2).
const txnV2 int16 = 2

// endPlan is what EndTxn does.
type endPlan struct {
	next  Metadata
	write bool // false: answer at once (a retry of an ended transaction)
	// answer is the producer id and epoch EndTxn v5+ returns: the ones the
	// producer uses from now on.
	answer ProducerIDAndEpoch
}

// planEndTxn is endTransaction's decision for a client's EndTxn; v2 is an
// EndTxn v5+ (transactions v2), which bumps the epoch: the markers carry
// the bumped epoch, so a late write of the ended transaction is fenced on
// every partition, and the producer gets it for its next transaction (or,
// once the epochs run out, newID at epoch 0: with newID < 0 it returns
// errNeedProducerID). Under v2 an abort with no transaction is legal (the
// producer cannot know whether a failed Produce added a partition) and
// bumps the epoch too.
func planEndTxn(cur Metadata, pending bool, producerID int64, epoch int16, commit, v2 bool, newID int64, nowMs int64) (endPlan, error) {
	curV2 := cur.TxnVersion >= txnV2
	// The retries of a v2 EndTxn whose answer was lost: the epoch it bumped
	// (or the producer id it rotated) is the one stored.
	retryOnBump := curV2 && int32(cur.ProducerEpoch) == int32(epoch)+1
	retryOnRotation := curV2 && producerID != cur.ProducerID && producerID == cur.LastProducerID &&
		epoch == math.MaxInt16-1 && cur.ProducerEpoch == 0
	isRetry := retryOnBump || retryOnRotation
	validEpoch := epoch == cur.ProducerEpoch
	if curV2 {
		switch cur.State {
		case PrepareCommit, PrepareAbort:
			// Kafka 4 accepts only a retry's epoch here; the bumped
			// epoch is accepted too, so that the producer's next
			// EndTxn (an abort of nothing) waits for the completion
			// instead of being fenced by its own new epoch.
			validEpoch = validEpoch || retryOnBump
		case CompleteCommit, CompleteAbort:
			validEpoch = validEpoch || isRetry
		}
	}
	switch {
	case awaitsNextProducerID(cur, pending, producerID, epoch):
		return endPlan{}, kerr.ConcurrentTransactions
	case cur.ProducerID != producerID && !retryOnRotation:
		return endPlan{}, kerr.InvalidProducerIDMapping
	case !validEpoch:
		return endPlan{}, kerr.ProducerFenced
	case pending:
		return endPlan{}, kerr.ConcurrentTransactions
	}
	prepare, complete := PrepareAbort, CompleteAbort
	if commit {
		prepare, complete = PrepareCommit, CompleteCommit
	}
	invalid := func() (endPlan, error) {
		return endPlan{}, fmt.Errorf("%w: transactional id %q is %s, cannot %s",
			kerr.InvalidTxnState, cur.TransactionalID, cur.State, map[bool]string{true: "commit", false: "abort"}[commit])
	}
	current := endPlan{next: cur, answer: ProducerIDAndEpoch{ID: cur.ProducerID, Epoch: cur.ProducerEpoch}}
	switch cur.State {
	case Ongoing:
		return prepareEnd(cur, prepare, v2, newID, nowMs)
	case CompleteCommit, CompleteAbort:
		switch {
		case isRetry && cur.State == complete:
			return current, nil
		case isRetry:
			return invalid()
		case v2 && !commit:
			return prepareEnd(cur, PrepareAbort, v2, newID, nowMs)
		case !curV2 && cur.State == complete:
			return current, nil // a v1 retry: same epoch
		}
		return invalid()
	case Empty:
		if v2 && !commit {
			return prepareEnd(cur, PrepareAbort, v2, newID, nowMs)
		}
		return invalid()
	case prepare:
		return endPlan{}, kerr.ConcurrentTransactions
	case PrepareCommit, PrepareAbort:
		return invalid()
	}
	return endPlan{}, errIllegalState(cur, prepare)
}

// prepareEnd is prepareAbortOrCommit: cur (Ongoing, or with no transaction
// for a v2 abort) becomes prepare.
func prepareEnd(cur Metadata, prepare State, v2 bool, newID int64, nowMs int64) (endPlan, error) {
	next := cur
	next.State = prepare
	next.UpdateMs = nowMs
	next.TxnVersion = 0
	if cur.State != Ongoing {
		next.Partitions = nil
		next.StartMs = nowMs
	}
	answer := ProducerIDAndEpoch{ID: cur.ProducerID, Epoch: cur.ProducerEpoch}
	if v2 {
		if cur.ProducerEpoch == math.MaxInt16 {
			return endPlan{}, fmt.Errorf("%w: producer id %d has no epoch left to bump", kerr.UnknownServerError, cur.ProducerID)
		}
		next.TxnVersion = txnV2
		next.ProducerEpoch, next.LastProducerEpoch = cur.ProducerEpoch+1, cur.ProducerEpoch
		answer.Epoch = next.ProducerEpoch
		if epochExhausted(cur.ProducerEpoch) {
			// The markers take the last epoch; the producer continues
			// under a new id.
			if newID < 0 {
				return endPlan{}, errNeedProducerID
			}
			next.NextProducerID = newID
			answer = ProducerIDAndEpoch{ID: newID, Epoch: 0}
		}
	}
	return endPlan{next: next, write: true, answer: answer}, nil
}

// completed is prepareComplete: the markers are written, the transaction is
// over. A v2 transaction that rotated the producer id moves to it here.
func completed(cur Metadata, nowMs int64) Metadata {
	next := cur
	next.State = CompleteAbort
	if cur.State == PrepareCommit {
		next.State = CompleteCommit
	}
	if cur.TxnVersion >= txnV2 && cur.NextProducerID >= 0 {
		next.LastProducerID, next.ProducerID = cur.ProducerID, cur.NextProducerID
		next.LastProducerEpoch, next.ProducerEpoch = cur.ProducerEpoch, 0
		next.NextProducerID = noProducerID
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
