package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kbroker/kbroker/internal/ratelog"
	"github.com/kbroker/kbroker/internal/sendfile"
	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// PartitionConfig is the per-topic configuration a partition acts on.
type PartitionConfig struct {
	Log                segment.Config
	MinInsyncReplicas  int32
	LogAppendTime      bool // message.timestamp.type=LogAppendTime
	MaxMessageBytes    int32
	UncleanLeaderElect bool
	// Compacted: cleanup.policy has compact, so every record needs a key
	// and the log cleaner compacts the log.
	Compacted bool
	// The cleaner's topic settings: min.cleanable.dirty.ratio,
	// min.compaction.lag.ms, max.compaction.lag.ms (0: none) and
	// delete.retention.ms.
	MinCleanableRatio                  float64
	MinCompactionLag, MaxCompactionLag time.Duration
	DeleteRetention                    time.Duration
	// TimestampBeforeMax and TimestampAfterMax bound how far a CreateTime
	// record's timestamp may lie before or after the broker's clock
	// (message.timestamp.before.max.ms / after.max.ms, else
	// message.timestamp.difference.max.ms); negative: no bound.
	TimestampBeforeMax, TimestampAfterMax time.Duration
	RetentionCheckEvery                   time.Duration
	// AcksFsync is kbroker.acks.fsync: acknowledge writes only once they
	// are on stable storage (durable.go).
	AcksFsync bool
}

// Partition is one partition replica on this broker.
//
// Lock order: Partition.mu before the segment.Log's own lock. Reads of the
// log happen without mu (the log has its own lock); only the bounds
// (high watermark) are taken under mu.
type Partition struct {
	tp      TopicPartition
	topicID [16]byte
	self    int32 // this broker's id
	// logPtr is the partition's log. It is replaced only when the replica
	// moves to another log dir (AlterReplicaLogDirs), under mu; reads that
	// run without mu load it once and may find it closed by such a move
	// (they answer as after a leader change, and the client retries).
	logPtr atomic.Pointer[segment.Log]
	logger *slog.Logger
	isrs   ISRWriter
	stats  *Stats
	// sendFiles is the manager's budget of descriptors for sendfile.
	sendFiles *sendfile.Budget
	// logDirFailed reports an operation on the log in dir that failed
	// (a full or failed disk): the dir goes offline, with every replica
	// in it (logdir_failure.go).
	logDirFailed func(dir string, err error)
	// truncated reports a follower truncation that dropped records
	// (Config.OnTruncation); nil: none.
	truncated func(Truncation)
	// descriptorLog, shared by the manager's partitions, rate-limits the
	// lines about appends failing for want of file descriptors.
	descriptorLog *ratelog.Limiter

	// mu guards every field below.
	mu  sync.Mutex
	cfg PartitionConfig
	// offline: the log's dir failed; the log is closed and the replica
	// serves nothing until the broker restarts.
	offline     bool
	isLeader    bool
	leaderEpoch int32
	isr         []int32
	// partitionEpoch is the version of the partition's state the
	// controller last wrote (Kafka's partition epoch); ISR change requests
	// are conditional on it.
	partitionEpoch int32
	// followers is what the leader knows of each other replica's fetches.
	followers map[int32]*followerState
	// isrChangeInFlight: an ISR change request is with the controller;
	// no second one is sent meanwhile.
	isrChangeInFlight bool
	// pendingISR is the ISR an in-flight change asks for. While an
	// expansion is pending, the high watermark waits for the joining
	// follower too (Kafka's maximal ISR, KIP-497), so nothing commits
	// without a replica that may lead once the change lands.
	pendingISR []int32
	// leaderID is the leader this replica follows (-1 when leading or
	// when there is none).
	leaderID      int32
	highWatermark int64
	producers     *producerStates
	// loadedFrom is the offset the last rebuild of producers started
	// reading the log at (a snapshot's, or the log start).
	loadedFrom int64
	// verifying holds, per producer id, the guard of a transaction
	// verification in flight (KIP-890 part 1): a client's transactional
	// batch that would open a transaction is appended only with the
	// guard of a verification that no marker has overtaken since.
	verifying map[int64]*TxnVerification
	// syncing: the durable sync loop runs (durable.go).
	syncing bool
	// changed is closed and replaced whenever the log end or the high
	// watermark moves, so waiters never miss a wake-up: they take the
	// channel under mu, release mu, then select on it.
	changed chan struct{}
}

// TopicPartition returns the partition's name.
func (p *Partition) TopicPartition() TopicPartition { return p.tp }

// TopicID returns the topic's UUID.
func (p *Partition) TopicID() [16]byte { return p.topicID }

// Log returns the partition's log (for reads that need no partition state).
func (p *Partition) Log() *segment.Log { return p.log() }

// log is the partition's current log.
func (p *Partition) log() *segment.Log { return p.logPtr.Load() }

// notifyLocked wakes every waiter on the partition.
func (p *Partition) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Changed returns a channel closed at the next change of the log end offset
// or the high watermark.
func (p *Partition) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// State is a consistent snapshot of the partition's offsets and role.
type State struct {
	IsLeader       bool
	LeaderEpoch    int32
	HighWatermark  int64
	LogStartOffset int64
	LogEndOffset   int64
	// LastStableOffset is where read_committed consumers stop: the first
	// offset of the earliest undecided transaction, else the high
	// watermark.
	LastStableOffset int64
}

// State returns the partition's offsets and role.
func (p *Partition) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stateLocked()
}

func (p *Partition) stateLocked() State {
	return State{
		IsLeader:       p.isLeader,
		LeaderEpoch:    p.leaderEpoch,
		HighWatermark:  p.highWatermark,
		LogStartOffset: p.log().StartOffset(),
		LogEndOffset:   p.log().EndOffset(),
		// Clamped to the log start: an open transaction may begin in
		// records already deleted (DeleteRecords, retention).
		LastStableOffset: max(p.producers.lastStableOffset(p.highWatermark), p.log().StartOffset()),
	}
}

// SetConfig applies changed topic configuration.
func (p *Partition) SetConfig(cfg PartitionConfig) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg = cfg
	p.log().SetConfig(cfg.Log)
}

// CheckLeaderEpoch validates a client's current leader epoch (-1 = not
// sent) against this leader's, as Kafka's KIP-320 fencing.
func (p *Partition) CheckLeaderEpoch(clientEpoch int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checkLeaderLocked(clientEpoch)
}

func (p *Partition) checkLeaderLocked(clientEpoch int32) error {
	if !p.isLeader {
		return kerr.NotLeaderForPartition
	}
	switch {
	case clientEpoch < 0 || clientEpoch == p.leaderEpoch:
		return nil
	case clientEpoch < p.leaderEpoch:
		return kerr.FencedLeaderEpoch
	default:
		return kerr.UnknownLeaderEpoch
	}
}

// AppendResult is what a leader append reports to the producer.
type AppendResult struct {
	BaseOffset     int64
	LastOffset     int64
	LogAppendTime  int64 // -1 unless the topic uses LogAppendTime
	LogStartOffset int64
	// LeaderEpoch is the epoch this broker led in when it appended: the
	// write counts only while that leadership lasts.
	LeaderEpoch int32
}

// AppendAsLeader appends validated batches from a producer: it checks
// leadership, min.insync.replicas for acks=all, idempotent sequences; assigns
// offsets and the leader epoch; writes the log; and advances the high
// watermark as far as the ISR allows. It does not wait for replication: use
// WaitForHighWatermark for acks=all.
func (p *Partition) AppendAsLeader(batches [][]byte, headers []recordbatch.Header, requiredAcks int16, now time.Time) (AppendResult, error) {
	return p.appendAsLeader(batches, headers, requiredAcks, now, false, nil)
}

// AppendFromClient is AppendAsLeader for a producer's batches: a
// transactional batch that opens a transaction on this partition needs
// verified, the guard of a verification (StartTxnVerification) that the
// coordinator confirmed, or it gets INVALID_TXN_STATE, as Kafka's
// UnifiedLog with transaction.partition.verification.enable.
func (p *Partition) AppendFromClient(batches [][]byte, headers []recordbatch.Header, requiredAcks int16, now time.Time, verified *TxnVerification) (AppendResult, error) {
	return p.appendAsLeader(batches, headers, requiredAcks, now, true, verified)
}

// TxnVerification is the guard of one transaction verification of a
// producer on a partition (Kafka's VerificationGuard): compared by
// identity.
type TxnVerification struct {
	producerID int64
	epoch      int16
	// leaderEpoch is the partition's leader epoch when the verification
	// started: leadership that moved away and came back (markers may have
	// arrived by replication meanwhile) voids it.
	leaderEpoch int32
	// v2: a transactions v2 producer (Produce v12+, TxnOffsetCommit v5+),
	// whose transactions end with markers one epoch above their batches.
	v2 bool
}

// voidedBy reports whether a marker of the producer at markerEpoch ends the
// transaction g verified (or fences it), so that g no longer lets a batch
// open a transaction. Under transactions v2 the marker that ends the
// previous transaction carries g's epoch, and the coordinator adds the
// partition to the next one only after that marker is written: it must
// not void g.
func (g *TxnVerification) voidedBy(markerEpoch int16) bool {
	return markerEpoch > g.epoch || (markerEpoch == g.epoch && !g.v2)
}

// StartTxnVerification returns the guard for verifying, with the
// transaction coordinator, that producerID's transaction includes this
// partition before its batch is appended; nil when the producer already
// has a transaction open here at epoch (nothing to verify). v2 is a
// transactions v2 producer (TxnVerification.v2).
func (p *Partition) StartTxnVerification(producerID int64, epoch int16, v2 bool) *TxnVerification {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.producers.hasOpenTxn(producerID, epoch) {
		return nil
	}
	if g, ok := p.verifying[producerID]; ok && g.epoch == epoch && g.leaderEpoch == p.leaderEpoch {
		return g
	}
	g := &TxnVerification{producerID: producerID, epoch: epoch, leaderEpoch: p.leaderEpoch, v2: v2}
	if p.verifying == nil {
		p.verifying = make(map[int64]*TxnVerification)
	}
	p.verifying[producerID] = g
	return g
}

// DropTxnVerification forgets g when its verification failed: the
// producer's next batch starts a new one.
func (p *Partition) DropTxnVerification(g *TxnVerification) {
	if g == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.verifying[g.producerID] == g {
		delete(p.verifying, g.producerID)
	}
}

func (p *Partition) appendAsLeader(batches [][]byte, headers []recordbatch.Header, requiredAcks int16, now time.Time, fromClient bool, verified *TxnVerification) (AppendResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.isLeader {
		return AppendResult{}, kerr.NotLeaderForPartition
	}
	if requiredAcks == -1 && int32(len(p.isr)) < p.cfg.MinInsyncReplicas {
		return AppendResult{}, kerr.NotEnoughReplicas
	}
	res := AppendResult{BaseOffset: -1, LogAppendTime: -1, LeaderEpoch: p.leaderEpoch}
	// Kafka checks every batch before writing any, so a bad sequence in a
	// later batch appends nothing.
	for i, h := range headers {
		if h.IsControl() {
			// Only the coordinator writes markers, through AppendTxnMarker.
			return AppendResult{}, fmt.Errorf("%w: control batches are written by transaction coordinators only", kerr.InvalidRecord)
		}
		c, err := p.producers.check(h)
		if err != nil {
			return AppendResult{}, err
		}
		if fromClient && h.IsTransactional() && c.duplicate == nil && !p.producers.hasOpenTxn(h.ProducerID, h.ProducerEpoch) {
			if g := p.verifying[h.ProducerID]; verified == nil || g != verified || g.epoch != h.ProducerEpoch || g.leaderEpoch != p.leaderEpoch {
				return AppendResult{}, fmt.Errorf("%w: producer %d's batch is not part of a verified ongoing transaction", kerr.InvalidTxnState, h.ProducerID)
			}
		}
		if c.duplicate != nil {
			if len(headers) != 1 {
				return AppendResult{}, fmt.Errorf("%w: duplicate batch %d of %d in one request", kerr.DuplicateSequenceNumber, i, len(headers))
			}
			res.BaseOffset = c.duplicate.baseOffset
			res.LastOffset = c.duplicate.baseOffset + int64(h.LastOffsetDelta)
			res.LogAppendTime = c.duplicate.timestamp
			res.LogStartOffset = p.log().StartOffset()
			return res, nil
		}
	}
	if p.cfg.LogAppendTime {
		res.LogAppendTime = now.UnixMilli()
	}
	for i, batch := range batches {
		h := headers[i]
		h.BaseOffset = p.log().EndOffset()
		h.PartitionLeaderEpoch = p.leaderEpoch
		recordbatch.SetBaseOffset(batch, h.BaseOffset)
		recordbatch.SetPartitionLeaderEpoch(batch, h.PartitionLeaderEpoch)
		if p.cfg.LogAppendTime {
			recordbatch.SetLogAppendTime(batch, res.LogAppendTime)
			h.MaxTimestamp = res.LogAppendTime
		}
		if err := p.appendLocked(batch, h, nil, false); err != nil {
			return AppendResult{}, p.storageFailed(fmt.Errorf("append to %s: %w", p.tp, err))
		}
		p.producers.update(h, res.LogAppendTime)
		if h.IsTransactional() {
			delete(p.verifying, h.ProducerID) // the transaction is open now
		}
		if i == 0 {
			res.BaseOffset = h.BaseOffset
		}
		res.LastOffset = h.LastOffset()
	}
	p.maybeIncrementHighWatermarkLocked()
	p.notifyLocked()
	res.LogStartOffset = p.log().StartOffset()
	return res, nil
}

// maybeIncrementHighWatermarkLocked moves the high watermark to the smallest
// log end offset among ISR members (only forward). It reports whether it
// moved.
func (p *Partition) maybeIncrementHighWatermarkLocked() bool {
	isr := p.isr
	if len(p.pendingISR) > 0 {
		isr = union(p.isr, p.pendingISR)
	}
	hw := highWatermarkFor(p.self, p.leaderEndForHWLocked(), p.highWatermark, isr, p.followers)
	p.startDurableSyncLocked()
	if hw > p.highWatermark {
		p.highWatermark = hw
		return true
	}
	return false
}

// WaitForHighWatermark blocks until the high watermark passes the append's
// last offset (acks=all), the leadership the append was made under ends,
// or ctx ends. Leadership that moved away and came back counts as ended:
// the write may have been truncated in between, so it is not confirmed.
func (p *Partition) WaitForHighWatermark(ctx context.Context, res AppendResult) error {
	offset := res.LastOffset
	for {
		p.mu.Lock()
		if !p.isLeader || p.leaderEpoch != res.LeaderEpoch {
			p.mu.Unlock()
			return kerr.NotLeaderForPartition
		}
		// As Kafka's checkEnoughReplicasReachOffset, the high watermark
		// counts only with min.insync.replicas in sync: an ISR shrunk to
		// the leader alone moves it to the leader's log end at once.
		if int32(len(p.isr)) < p.cfg.MinInsyncReplicas {
			p.mu.Unlock()
			return kerr.NotEnoughReplicasAfterAppend
		}
		if p.highWatermark > offset {
			p.mu.Unlock()
			return nil
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return kerr.RequestTimedOut
		}
	}
}

// ReadResult is what a fetch of one partition returns.
type ReadResult struct {
	// Records are whole batches; runs of at least SendfileMinBytes are
	// ranges of the segment files (for sendfile). The caller closes them.
	Records sendfile.Chunks
	// AbortedTxns are the aborted transactions in a read_committed read.
	AbortedTxns []AbortedTxn
	State
}

// SendfileMinBytes is the smallest run of batches a read returns as a range
// of its segment file rather than as bytes: below it, copying costs less
// than the extra descriptor and system call.
const SendfileMinBytes = 64 << 10

// sendfileMaxDescriptors bounds the segment file descriptors held by reads
// in flight (each file range holds one until it is sent); past it, reads
// return bytes.
const sendfileMaxDescriptors = 1024

// Read reads batches from offset for a consumer: below the high watermark,
// or for read_committed below the last stable offset, with the aborted
// transactions the consumer must skip. maxBytes bounds the result, except
// that the first batch is returned whole when minOneBatch is set.
func (p *Partition) Read(offset int64, maxBytes int, minOneBatch bool, clientEpoch int32, readCommitted bool) (ReadResult, error) {
	p.mu.Lock()
	if err := p.checkLeaderLocked(clientEpoch); err != nil {
		p.mu.Unlock()
		return ReadResult{}, err
	}
	st := p.stateLocked()
	bound := st.HighWatermark
	if readCommitted {
		bound = st.LastStableOffset
	}
	p.mu.Unlock()
	res := ReadResult{State: st}
	if offset < st.LogStartOffset || offset > st.LogEndOffset {
		return res, kerr.OffsetOutOfRange
	}
	if offset >= bound {
		return res, nil
	}
	recs, upTo, err := p.log().ReadChunksUpTo(offset, maxBytes, bound, minOneBatch, SendfileMinBytes, p.sendFiles)
	if err != nil {
		return res, p.readFailed(fmt.Errorf("read %s at %d: %w", p.tp, offset, err))
	}
	res.Records = recs
	if readCommitted && upTo > offset {
		// The aborted transactions of what was read only, as Kafka's
		// fetchUpperBoundOffset: not of everything up to the LSO, which
		// a consumer far behind would otherwise get (and the broker
		// search) with every fetch. They come from the .txnindex files.
		aborted, err := p.log().CollectAbortedTxns(offset, upTo)
		if err != nil {
			res.Records.Close()
			return ReadResult{State: st}, p.readFailed(fmt.Errorf("read %s at %d: %w", p.tp, offset, err))
		}
		res.AbortedTxns = aborted
	}
	return res, nil
}

// AppendTxnMarker writes the control batch that commits or aborts
// producerID's transaction on this partition, as leader (WriteTxnMarkers).
// As AppendAsLeader it does not wait for replication.
func (p *Partition) AppendTxnMarker(producerID int64, epoch int16, commit bool, coordinatorEpoch int32, v2 bool, now time.Time) (AppendResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.isLeader {
		return AppendResult{}, kerr.NotLeaderForPartition
	}
	// Markers are written with acks=all (Kafka's appendRecordsToLeader
	// checks min.insync.replicas before appending): a marker is never
	// appended, and so never retried into a second copy, while it could
	// not be confirmed.
	if int32(len(p.isr)) < p.cfg.MinInsyncReplicas {
		return AppendResult{}, fmt.Errorf("%w: ISR %v below min.insync.replicas %d", kerr.NotEnoughReplicas, p.isr, p.cfg.MinInsyncReplicas)
	}
	if err := p.producers.checkMarker(producerID, epoch, coordinatorEpoch, v2); err != nil {
		return AppendResult{}, err
	}
	ts := now.UnixMilli()
	batch := recordbatch.BuildTxnMarker(producerID, epoch, commit, coordinatorEpoch, ts)
	h, err := recordbatch.ParseHeader(batch)
	if err != nil {
		return AppendResult{}, fmt.Errorf("marker for %s: %w", p.tp, err)
	}
	h.BaseOffset = p.log().EndOffset()
	h.PartitionLeaderEpoch = p.leaderEpoch
	recordbatch.SetBaseOffset(batch, h.BaseOffset)
	recordbatch.SetPartitionLeaderEpoch(batch, h.PartitionLeaderEpoch)
	c := recordbatch.Control{Type: recordbatch.ControlAbort, CoordinatorEpoch: coordinatorEpoch}
	if commit {
		c.Type = recordbatch.ControlCommit
	}
	var abort *AbortedTxn
	if a, ok := p.producers.abortFor(h, c); ok {
		abort = &a
	}
	if err := p.appendLocked(batch, h, abort, false); err != nil {
		return AppendResult{}, p.storageFailed(fmt.Errorf("append marker to %s: %w", p.tp, err))
	}
	p.producers.completeTxn(h, c)
	// A verification that a marker overtook is void: the transaction it
	// verified has ended.
	if g := p.verifying[producerID]; g != nil && g.voidedBy(epoch) {
		delete(p.verifying, producerID)
	}
	p.maybeIncrementHighWatermarkLocked()
	p.notifyLocked()
	return AppendResult{BaseOffset: h.BaseOffset, LastOffset: h.BaseOffset, LogAppendTime: -1, LogStartOffset: p.log().StartOffset(), LeaderEpoch: p.leaderEpoch}, nil
}

// Producers lists the producers this partition knows (DescribeProducers).
func (p *Partition) Producers() []ProducerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producers.list()
}

// appendLocked writes one batch whose offsets are set, with the .txnindex
// entry of the transaction it aborts (abort, for an abort marker). When the
// append rolled to a new segment, a producer snapshot is taken at its base
// (Kafka's roll): the state before this batch, which the caller applies
// after. A follower (asFollower) appends what the leader sent, which may
// start above the log end where the leader's cleaner removed batches.
func (p *Partition) appendLocked(batch []byte, h recordbatch.Header, abort *AbortedTxn, asFollower bool) error {
	active := p.log().ActiveSegmentBase()
	leo := p.log().EndOffset()
	var err error
	switch {
	case asFollower:
		err = p.log().AppendAsFollower(batch, h, abort)
	case abort != nil:
		err = p.log().AppendAbortMarker(batch, h, *abort)
	default:
		err = p.log().Append(batch, h)
	}
	if err != nil {
		if outOfDescriptors(err) && p.log().EndOffset() == leo {
			// A roll could not open the new segment's files: nothing
			// was written, and the same append can succeed later.
			return fmt.Errorf("%w: %w", errOutOfDescriptors, err)
		}
		return err
	}
	if base := p.log().ActiveSegmentBase(); base != active && base == h.BaseOffset {
		p.snapshotLocked(base)
	}
	return nil
}

// snapshotLocked writes the producer state as of offset (the log end
// offset, before any later batch is applied) to a snapshot file. A failure
// is logged: snapshots only shorten the next load.
func (p *Partition) snapshotLocked(offset int64) {
	if err := p.log().WriteProducerSnapshot(offset, p.producers.snapshot()); err != nil {
		p.logger.Warn("writing producer state snapshot failed", "offset", offset, "err", err)
	}
}

// controlOf parses a control batch's marker (control is the batch's
// bytes); ok is false for other batches and unreadable markers.
func (p *Partition) controlOf(h recordbatch.Header, control []byte) (recordbatch.Control, bool) {
	if !h.IsControl() {
		return recordbatch.Control{}, false
	}
	c, err := recordbatch.ParseControl(control)
	if err != nil {
		// Kafka's replicas would fail on it too; skipping keeps the
		// partition readable, and the log line names the batch.
		p.logger.Warn("unreadable control batch: ignoring it", "offset", h.BaseOffset, "err", err)
		return recordbatch.Control{}, false
	}
	return c, true
}

// abortOfLocked is the .txnindex entry of batch h (bytes control) when it
// is an abort marker that ends an open transaction; nil otherwise.
func (p *Partition) abortOfLocked(h recordbatch.Header, control []byte) *AbortedTxn {
	if !h.IsControl() {
		return nil
	}
	c, ok := p.controlOf(h, control)
	if !ok {
		return nil
	}
	if a, ok := p.producers.abortFor(h, c); ok {
		return &a
	}
	return nil
}

// applyBatchLocked updates producer and transaction state for a batch
// already in the log (control is the batch's bytes when it is a control
// batch): as follower, and while rebuilding from the log.
func (p *Partition) applyBatchLocked(h recordbatch.Header, control []byte) {
	if h.IsTransactional() {
		// As Kafka's UnifiedLog.updateProducers for every origin: a
		// transaction that opened or ended voids a verification.
		delete(p.verifying, h.ProducerID)
	}
	if !h.IsControl() {
		p.producers.update(h, logAppendTime(h))
		return
	}
	if c, ok := p.controlOf(h, control); ok {
		p.producers.completeTxn(h, c)
	}
}

// rebuildProducersLocked rebuilds producer and transaction state from the
// log, at open and after a truncation below the high watermark (which may
// have removed markers that closed transactions), as Kafka's
// loadProducerState: from the newest producer snapshot at or below the
// log end offset, the high watermark (markers at or above it must be seen
// to be known as unreplicated) and, after a crash, the recovery point
// (TxnIndexCompleteBelow), then by reading the batch headers after it. The
// abort markers read re-add any .txnindex entries a crash recovery
// trimmed. Without a usable snapshot the whole log is read.
func (p *Partition) rebuildProducersLocked() error {
	p.producers = newProducerStates()
	clear(p.verifying)
	from := p.log().StartOffset()
	limit := min(p.log().EndOffset(), p.highWatermark, p.log().TxnIndexCompleteBelow())
	if off, entries, ok := p.log().LoadProducerSnapshot(from, limit); ok {
		p.producers.restore(entries, p.cfg.LogAppendTime)
		from = off
	}
	p.loadedFrom = from
	var aborts []AbortedTxn
	err := p.log().ScanWithControl(from, func(h recordbatch.Header, control []byte) bool {
		if a := p.abortOfLocked(h, control); a != nil {
			aborts = append(aborts, *a)
		}
		p.applyBatchLocked(h, control)
		return true
	})
	if err != nil {
		return fmt.Errorf("rebuild producer state of %s: %w", p.tp, err)
	}
	if err := p.log().RepairTxnIndex(aborts); err != nil {
		return fmt.Errorf("rebuild producer state of %s: %w", p.tp, err)
	}
	// Only the transactions with markers at or above the high watermark
	// are unreplicated.
	p.producers.lastStableOffset(p.highWatermark)
	return nil
}

// ReadToLogEnd reads from offset up to the log end offset, for the
// leader's own use (loading group state), not for clients.
func (p *Partition) ReadToLogEnd(offset int64, maxBytes int) ([]byte, error) {
	st := p.State()
	if offset >= st.LogEndOffset {
		return nil, nil
	}
	recs, err := p.log().Read(offset, maxBytes, st.LogEndOffset, true)
	if err != nil {
		return nil, closedAsNotLeader(fmt.Errorf("read %s at %d: %w", p.tp, offset, err))
	}
	return recs, nil
}

// DeleteRecordsBefore raises the log start offset (DeleteRecords). offset -1
// means the high watermark.
func (p *Partition) DeleteRecordsBefore(offset int64) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.isLeader {
		return -1, kerr.NotLeaderForPartition
	}
	if offset == -1 {
		offset = p.highWatermark
	}
	if offset < 0 || offset > p.highWatermark {
		return -1, kerr.OffsetOutOfRange
	}
	if offset > p.log().StartOffset() {
		if err := p.log().SetStartOffset(offset); err != nil {
			return -1, closedAsNotLeader(fmt.Errorf("delete records of %s before %d: %w", p.tp, offset, err))
		}
	}
	return p.log().StartOffset(), nil
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch for this leader.
func (p *Partition) EndOffsetForEpoch(clientEpoch, epoch int32) (int32, int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkLeaderLocked(clientEpoch); err != nil {
		return -1, -1, err
	}
	e, off := p.log().EndOffsetForEpoch(epoch)
	return e, off, nil
}

// enforceRetention deletes segments past retention, never above the high
// watermark.
func (p *Partition) enforceRetention(now time.Time) error {
	p.mu.Lock()
	hw := p.highWatermark
	p.mu.Unlock()
	_, err := p.log().DeleteOldSegments(now, hw)
	return err
}

// expireProducers drops the state of producers idle since before
// (producer.id.expiration.ms).
func (p *Partition) expireProducers(before time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.producers.expire(before.UnixMilli())
}

// Compacted reports whether the topic is compacted (every record needs a
// key).
func (p *Partition) Compacted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.Compacted
}

// TimestampBounds returns the topic's CreateTime timestamp bounds (negative:
// none) and whether it uses LogAppendTime (then they do not apply).
func (p *Partition) TimestampBounds() (before, after time.Duration, logAppendTime bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.TimestampBeforeMax, p.cfg.TimestampAfterMax, p.cfg.LogAppendTime
}

// MaxMessageBytes is the topic's max.message.bytes.
func (p *Partition) MaxMessageBytes() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.MaxMessageBytes
}

// storageFailed reports a failed log write to the broker and returns it as
// KAFKA_STORAGE_ERROR, which clients retry elsewhere. The batch was not
// acknowledged; the log's dir goes offline, with every replica in it, so
// that other replicas take over (the broker serves the other dirs).
func (p *Partition) storageFailed(err error) error {
	if errors.Is(err, segment.ErrUnexpectedOffset) {
		return err
	}
	if errors.Is(err, errOutOfDescriptors) {
		// Not a disk failure: the partition stays usable and the
		// client retries (REQUEST_TIMED_OUT is retriable, and the batch
		// was not written); a follower fetches the same offset again.
		if ok, suppressed := p.descriptorLog.Allow(time.Now()); ok {
			p.logger.Warn("append failed: out of file descriptors; answering a retriable error", "err", err, "failures_not_logged", suppressed)
		}
		return fmt.Errorf("%w: %v", kerr.RequestTimedOut, err)
	}
	if errors.Is(err, segment.ErrClosed) {
		return closedAsNotLeader(err)
	}
	if p.logDirFailed != nil {
		p.logDirFailed(filepath.Dir(p.log().Dir()), err)
	}
	return fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
}

// closedAsNotLeader turns an operation on a log closed under it (the
// partition was deleted or replaced by a new incarnation meanwhile) into
// NOT_LEADER_OR_FOLLOWER, which clients retry after refreshing metadata:
// an ordinary event, never a storage failure.
func closedAsNotLeader(err error) error {
	if err != nil && errors.Is(err, segment.ErrClosed) {
		return fmt.Errorf("%w: %v", kerr.NotLeaderForPartition, err)
	}
	return err
}

// union is a ∪ b, in a's order then b's.
func union(a, b []int32) []int32 {
	out := slices.Clone(a)
	for _, id := range b {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// errOutOfDescriptors marks an append that failed, without writing
// anything, because the process or the system ran out of file
// descriptors (EMFILE, ENFILE): a retriable condition, not a storage
// failure, so it neither fails the partition nor stops the broker.
var errOutOfDescriptors = errors.New("out of file descriptors")

// outOfDescriptors tells whether err is EMFILE or ENFILE.
func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
