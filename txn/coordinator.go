package txn

// The Coordinator: Kafka's TransactionCoordinator and
// TransactionStateManager over the __transaction_state partitions this
// broker leads.
//
// Locking: Coordinator.mu guards the partition table and every entry in it
// (entries are small; no lock is held while blocked). A transition is taken
// in three steps: decide and mark the entry pending under mu; append the new
// record (acks=all) without mu; re-take mu, check that the partition's
// tenure is unchanged, and apply. The pending mark serialises transitions of
// one transactional id, so no two writes for the same id are ever in flight.
// Each partition also has a writeMu (RWMutex, never removed): appends hold
// it shared, and BecomeLeader takes it exclusively once before replaying, so
// a write of an earlier tenure is in the log before the replay reads it, or
// fails its tenure check and is never appended.
// Lock order: writeMu, then mu.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kbroker/kbroker/internal/kafkahash"
	"github.com/kbroker/kbroker/internal/tick"
)

// TopicName is Kafka's internal topic of transaction state.
const TopicName = "__transaction_state"

// Config holds the transaction coordinator's settings (Kafka property names
// in comments). A zero field takes Kafka's default.
type Config struct {
	NumPartitions int32         // transaction.state.log.num.partitions (50)
	MaxTimeout    time.Duration // transaction.max.timeout.ms (15 min)
	IDExpiration  time.Duration // transactional.id.expiration.ms (7 days)
	// AbortInterval is transaction.abort.timed.out.transaction.cleanup.interval.ms
	// (10 s): how often ongoing transactions past their timeout are
	// aborted. Negative disables the loop (tests drive it by hand).
	AbortInterval time.Duration
	// ExpireInterval is transaction.remove.expired.transaction.cleanup.interval.ms
	// (1 h): how often idle transactional ids are expired. Negative
	// disables the loop.
	ExpireInterval time.Duration
	// RetryBackoff is the wait before writing a transaction's completion
	// again after the log was unavailable (100 ms).
	RetryBackoff time.Duration
	// WriteTimeout bounds one acks=all write to __transaction_state
	// (Kafka uses request.timeout.ms, 30 s).
	WriteTimeout time.Duration
	// SnapshotBytes bounds __transaction_state when the log cleaner does
	// not (the broker passes -1 with log.cleaner.enable): once more than max(SnapshotBytes, size of the last snapshot) bytes
	// were written to a partition since its last snapshot, the
	// coordinator writes the live state of every id again and moves the
	// log start past everything older (snapshot.go). 0 means 16 MiB;
	// negative disables.
	SnapshotBytes int64
	// CompletionWait is how long a request that finds the previous
	// transaction still completing waits for it before answering
	// CONCURRENT_TRANSACTIONS (waitCompletion). 0 means 1 s.
	CompletionWait time.Duration
}

func (c *Config) defaults() {
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = 15 * time.Minute
	}
	if c.IDExpiration <= 0 {
		c.IDExpiration = 7 * 24 * time.Hour
	}
	if c.AbortInterval == 0 {
		c.AbortInterval = 10 * time.Second
	}
	if c.ExpireInterval == 0 {
		c.ExpireInterval = time.Hour
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.SnapshotBytes == 0 {
		c.SnapshotBytes = 16 << 20
	}
	if c.CompletionWait <= 0 {
		c.CompletionWait = time.Second
	}
}

// Log is how the coordinator stores and loads its records in
// __transaction_state; the server implements it on the replica layer.
// Append errors are mapped to Kafka's answers by errors.Is against kerr
// values, as Kafka's appendTransactionToLog does (appendError), so an
// implementation should wrap the kerr error it would answer a producer.
type Log interface {
	// Append writes one v2 record batch (base offset 0) to the partition
	// and returns once it is committed (acks=all).
	Append(ctx context.Context, partition int32, batch []byte) (baseOffset int64, err error)
	// ReadAll calls fn with every batch of the partition from its log
	// start, in order.
	ReadAll(ctx context.Context, partition int32, fn func(batch []byte) error) error
	// DeleteBefore raises the partition's log start offset to offset (a
	// committed offset returned by Append): ReadAll no longer returns the
	// records before it.
	DeleteBefore(ctx context.Context, partition int32, offset int64) error
}

// ErrClosed is returned by BecomeLeader after Close.
var ErrClosed = errors.New("transaction coordinator closed")

// errResigned is returned by BecomeLeader when Resign (or a newer
// BecomeLeader) overtook the load.
var errResigned = errors.New("transaction coordinator partition resigned during load")

// Coordinator owns the transactional ids whose __transaction_state
// partition this broker leads.
type Coordinator struct {
	cfg       Config
	log       Log
	markers   MarkerWriter
	producers func() (int64, error)
	logger    *slog.Logger
	now       func() time.Time

	// bgCtx ends at Close; bg counts every goroutine Close waits for.
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup

	mu         sync.Mutex
	partitions map[int32]*partitionState // guarded by mu: led or loading partitions
	writeMus   map[int32]*sync.RWMutex   // guarded by mu: created on first use, never removed
	closed     bool                      // guarded by mu
}

// partitionState is one led __transaction_state partition; its fields and
// entries are guarded by Coordinator.mu. A new tenure (BecomeLeader) is a
// new partitionState, so a pointer comparison tells whether a write still
// belongs to the current one.
type partitionState struct {
	partition int32
	// epoch is the coordinator epoch: the partition's leader epoch, sent
	// with every marker.
	epoch   int32
	loading bool
	txns    map[string]*entry
	// ctx ends when the tenure does (Resign, a newer BecomeLeader, Close):
	// marker writes and completions of this tenure stop with it.
	ctx    context.Context
	cancel context.CancelFunc
	// sinceSnapshot counts the bytes written since the last snapshot (or
	// the load), lastSnapshot the size of that snapshot; snapshotting is
	// set while one is being written.
	sinceSnapshot, lastSnapshot int64
	snapshotting                bool
}

// entry is one transactional id's metadata and its transition in flight.
type entry struct {
	meta Metadata
	// pending is the state being written (Kafka's pendingState), none
	// when idle. While set, other transitions answer
	// CONCURRENT_TRANSACTIONS.
	pending State
	// completed is closed when the entry's transaction completion
	// (markers, then Complete*) ends, written or given up; nil when none
	// was started. Requests that would answer CONCURRENT_TRANSACTIONS
	// wait on it for a while first (waitCompletion).
	completed chan struct{}
	// logged: meta is in the log (loaded, or written since). A new id's
	// entry exists before its first write (Kafka's
	// putTransactionStateIfNotExists); snapshots leave it out until then.
	logged bool
}

// New returns a coordinator that owns no partition yet. producers allocates
// producer ids (the controller's blocks); markers delivers transaction
// markers. It starts the timeout and expiration loops; Close stops them.
func New(cfg Config, log Log, markers MarkerWriter, producers func() (int64, error), logger *slog.Logger) *Coordinator {
	cfg.defaults()
	if logger == nil {
		logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{
		cfg:        cfg,
		log:        log,
		markers:    markers,
		producers:  producers,
		logger:     logger,
		now:        time.Now,
		bgCtx:      ctx,
		bgCancel:   cancel,
		partitions: make(map[int32]*partitionState),
		writeMus:   make(map[int32]*sync.RWMutex),
	}
	if cfg.AbortInterval > 0 {
		c.bg.Add(1)
		go c.every(cfg.AbortInterval, c.AbortTimedOut)
	}
	if cfg.ExpireInterval > 0 {
		c.bg.Add(1)
		go c.every(cfg.ExpireInterval, c.ExpireTransactionalIDs)
	}
	return c
}

// every runs fn every interval until Close.
func (c *Coordinator) every(interval time.Duration, fn func(ctx context.Context)) {
	defer c.bg.Done()
	tick.Every(c.bgCtx, interval, func(time.Time) { fn(c.bgCtx) })
}

// PartitionFor is the __transaction_state partition of a transactional id,
// by Kafka's hash.
func (c *Coordinator) PartitionFor(transactionalID string) int32 {
	return kafkahash.PartitionFor(transactionalID, c.cfg.NumPartitions)
}

func (c *Coordinator) nowMs() int64 { return c.now().UnixMilli() }

// BecomeLeader loads partition p, led at coordinator epoch epoch (its
// leader epoch); until it returns, requests for its ids get
// COORDINATOR_LOAD_IN_PROGRESS. Transactions found in PrepareCommit or
// PrepareAbort are completed: markers sent again, Complete* written.
// Calling it again for the epoch already loaded (or loading), or an older
// one, is a no-op; a newer epoch reloads. It is BeginLoad and the load.
func (c *Coordinator) BecomeLeader(ctx context.Context, p int32, epoch int32) error {
	load, err := c.BeginLoad(p, epoch)
	if err != nil || load == nil {
		return err
	}
	return load(ctx)
}

// BeginLoad registers partition p as loading at epoch and returns the load
// to run (nil when p is loaded or loading at epoch or a newer one). The
// server calls it where it applies leadership changes, in their order, and
// runs the load in the background: a Resign applied after it makes the load
// fail (errResigned) instead of installing a tenure this broker no longer
// has, as Kafka's loadingPartitions does.
func (c *Coordinator) BeginLoad(p int32, epoch int32) (func(ctx context.Context) error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if old := c.partitions[p]; old != nil {
		if old.epoch >= epoch {
			return nil, nil
		}
		old.cancel()
	}
	pctx, cancel := context.WithCancel(c.bgCtx)
	ps := &partitionState{partition: p, epoch: epoch, loading: true, txns: map[string]*entry{}, ctx: pctx, cancel: cancel}
	c.partitions[p] = ps
	return func(ctx context.Context) error { return c.load(ctx, ps) }, nil
}

// load replays ps's partition and installs it, unless its tenure ended
// meanwhile.
func (c *Coordinator) load(ctx context.Context, ps *partitionState) error {
	p, epoch := ps.partition, ps.epoch
	// The load stops with the tenure too.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(ps.ctx, stop)()
	wmu := c.writeMuFor(p)
	// The barrier: writes of an earlier tenure are in the log, or will
	// fail their tenure check.
	wmu.Lock()
	//lint:ignore SA2001 the empty critical section is the barrier
	wmu.Unlock()

	start := c.now()
	txns, err := c.replay(ctx, p)

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.partitions[p] != ps {
		if err == nil {
			err = errResigned
		}
		return fmt.Errorf("load %s-%d: %w", TopicName, p, err)
	}
	if err != nil {
		delete(c.partitions, p)
		ps.cancel()
		return fmt.Errorf("load %s-%d: %w", TopicName, p, err)
	}
	ps.loading = false
	completing := 0
	for id, m := range txns {
		e := &entry{meta: m, pending: none, logged: true}
		ps.txns[id] = e
		if m.State == PrepareCommit || m.State == PrepareAbort {
			c.completeLocked(ps, id, e)
			completing++
		}
	}
	c.logger.Info("loaded transaction state partition", "partition", p, "coordinator_epoch", epoch,
		"transactional_ids", len(txns), "completing", completing, "took", c.now().Sub(start))
	return nil
}

// Done is closed when the coordinator is closed.
func (c *Coordinator) Done() <-chan struct{} { return c.bgCtx.Done() }

// IsResigned reports whether err is a load that lost its tenure (Resign
// or a newer epoch overtook it), which is no failure to retry.
func IsResigned(err error) bool { return errors.Is(err, errResigned) || errors.Is(err, ErrClosed) }

// replay reads partition p: the last value of each key, tombstones delete.
func (c *Coordinator) replay(ctx context.Context, p int32) (map[string]Metadata, error) {
	txns := map[string]Metadata{}
	err := c.log.ReadAll(ctx, p, func(batch []byte) error {
		recs, err := decodeBatch(batch)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if r.meta == nil {
				delete(txns, r.id)
			} else {
				txns[r.id] = *r.meta
			}
		}
		return nil
	})
	return txns, err
}

// Resign drops partition p's state: its requests get NOT_COORDINATOR, and
// its marker writes and completions stop (the next leader redoes them).
func (c *Coordinator) Resign(p int32) {
	c.mu.Lock()
	ps := c.partitions[p]
	delete(c.partitions, p)
	c.mu.Unlock()
	if ps == nil {
		return
	}
	ps.cancel()
	c.logger.Info("resigned transaction state partition", "partition", p, "coordinator_epoch", ps.epoch)
}

// Close stops the loops and every partition's background work, and waits
// for them.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.partitions = map[int32]*partitionState{}
	c.mu.Unlock()
	c.bgCancel()
	c.bg.Wait()
}

func (c *Coordinator) writeMuLocked(p int32) *sync.RWMutex {
	m := c.writeMus[p]
	if m == nil {
		m = new(sync.RWMutex)
		c.writeMus[p] = m
	}
	return m
}

// Serving reports whether this coordinator has partition loaded (see
// coordinator.Coordinator.Serving).
func (c *Coordinator) Serving(partition int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.partitions[partition]
	return ok && !ps.loading && !c.closed
}

// partitionLocked finds the loaded partition of id: Kafka's
// getTransactionState errors otherwise.
func (c *Coordinator) partitionLocked(id string) (*partitionState, error) {
	if c.closed {
		return nil, kerr.CoordinatorNotAvailable
	}
	ps := c.partitions[c.PartitionFor(id)]
	switch {
	case ps == nil:
		return nil, kerr.NotCoordinator
	case ps.loading:
		return nil, kerr.CoordinatorLoadInProgress
	}
	return ps, nil
}

// write appends next (a tombstone when Dead) for the ids' entries, which
// the caller marked pending, and applies it when the tenure is unchanged:
// then runs under mu for each entry. On failure the entries' pending marks
// are cleared unless keepPending (a completion that will be retried).
func (c *Coordinator) write(ctx context.Context, ps *partitionState, next []Metadata, keepPending bool, then func(e *entry)) error {
	wmu := c.writeMuFor(ps.partition)
	// writeMu is held shared until the write is applied, so a snapshot
	// (which holds it exclusively) sees every appended state applied.
	wmu.RLock()
	defer wmu.RUnlock()
	c.mu.Lock()
	current := c.partitions[ps.partition] == ps
	c.mu.Unlock()
	var err error
	batch := buildBatch(next, c.nowMs())
	if !current {
		err = kerr.NotCoordinator
	} else {
		wctx, cancel := context.WithTimeout(ctx, c.cfg.WriteTimeout)
		_, err = c.log.Append(wctx, ps.partition, batch)
		cancel()
		if err != nil {
			err = appendError(err)
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.partitions[ps.partition] != ps {
		// Resigned meanwhile: the entries are gone with the tenure.
		return fmt.Errorf("%w: %s-%d changed leadership during the write", kerr.NotCoordinator, TopicName, ps.partition)
	}
	for _, m := range next {
		e := ps.txns[m.TransactionalID]
		if e == nil {
			continue
		}
		if err != nil {
			if !keepPending {
				e.pending = none
			}
			continue
		}
		e.pending = none
		if m.State == Dead {
			delete(ps.txns, m.TransactionalID)
			continue
		}
		e.meta = m
		e.logged = true
		if then != nil {
			then(e)
		}
	}
	if err == nil {
		ps.sinceSnapshot += int64(len(batch))
		c.maybeSnapshotLocked(ps)
	}
	return err
}

func (c *Coordinator) writeMuFor(p int32) *sync.RWMutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeMuLocked(p)
}

// appendError is appendTransactionToLog's mapping of append errors.
func appendError(err error) error {
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.NotEnoughReplicas),
		errors.Is(err, kerr.NotEnoughReplicasAfterAppend), errors.Is(err, kerr.RequestTimedOut),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: writing %s: %v", kerr.CoordinatorNotAvailable, TopicName, err)
	case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.KafkaStorageError):
		return fmt.Errorf("%w: writing %s: %v", kerr.NotCoordinator, TopicName, err)
	}
	return fmt.Errorf("%w: writing %s: %v", kerr.UnknownServerError, TopicName, err)
}

// completeLocked starts the second phase of a transaction in Prepare*:
// markers to every partition, then Complete*. The entry is pending until
// that is written, so the producer's next request waits
// (CONCURRENT_TRANSACTIONS). Called with mu held.
func (c *Coordinator) completeLocked(ps *partitionState, id string, e *entry) {
	prepared := e.meta
	e.pending = CompleteAbort
	if prepared.State == PrepareCommit {
		e.pending = CompleteCommit
	}
	done := make(chan struct{})
	e.completed = done
	m := Markers{
		ProducerID:       prepared.ProducerID,
		ProducerEpoch:    prepared.ProducerEpoch,
		Commit:           prepared.State == PrepareCommit,
		CoordinatorEpoch: ps.epoch,
		Partitions:       prepared.Partitions,
		TxnV2:            prepared.TxnVersion >= txnV2,
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		defer close(done)
		c.finish(ps, id, m, prepared)
	}()
}

// finish writes the markers and then the completion, retrying the latter
// while the log is unavailable, for as long as the tenure lasts.
func (c *Coordinator) finish(ps *partitionState, id string, m Markers, prepared Metadata) {
	ctx := ps.ctx
	if len(m.Partitions) > 0 {
		if err := c.markers.WriteMarkers(ctx, m); err != nil {
			// The tenure ended or a newer coordinator fenced us: the
			// next coordinator completes the transaction after loading.
			c.logger.Warn("transaction markers not written", "transactional_id", id, "producer_id", m.ProducerID,
				"commit", m.Commit, "err", err)
			return
		}
	}
	for {
		done := completed(prepared, c.nowMs())
		err := c.write(ctx, ps, []Metadata{done}, true, nil)
		switch {
		case err == nil:
			return
		case errors.Is(err, kerr.CoordinatorNotAvailable) && ctx.Err() == nil:
			c.logger.Warn("writing transaction completion failed; retrying", "transactional_id", id, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(c.cfg.RetryBackoff):
			}
		default:
			// NOT_COORDINATOR: the next coordinator completes it.
			// Anything else is a bug; the id stays pending (Kafka
			// throws here) until the partition is reloaded.
			if ctx.Err() == nil && !errors.Is(err, kerr.NotCoordinator) {
				c.logger.Error("writing transaction completion failed", "transactional_id", id, "err", err)
			}
			return
		}
	}
}
