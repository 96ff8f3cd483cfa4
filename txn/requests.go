package txn

// The coordinator's requests: InitProducerId, AddPartitionsToTxn (and its
// KIP-890 verification), AddOffsetsToTxn (a partition add), EndTxn,
// DescribeTransactions, ListTransactions. Errors are kerr values (wrapped);
// the server turns them into codes, and maps PRODUCER_FENCED to
// INVALID_PRODUCER_EPOCH for old versions.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// InitProducerID is InitProducerId with a (non-null) transactional id: a new
// id gets a new producer id at epoch 0; a known one gets its epoch bumped,
// fencing the previous producer (or a new producer id once the epochs run
// out). An ongoing transaction is aborted first, under a bumped epoch, and
// the answer is CONCURRENT_TRANSACTIONS so that the client retries.
// expected is the producer id and epoch of a KIP-360 request, nil if none.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeoutMs int32, expected *ProducerIDAndEpoch) (ProducerIDAndEpoch, error) {
	fail := ProducerIDAndEpoch{ID: noProducerID, Epoch: noProducerEpoch}
	if id == "" {
		// As the producer client: an empty id is not a transactional id.
		return fail, fmt.Errorf("%w: empty transactional id", kerr.InvalidRequest)
	}
	if !validTimeout(timeoutMs, c.cfg.MaxTimeout.Milliseconds()) {
		return fail, fmt.Errorf("%w: %d ms (transaction.max.timeout.ms is %d)", kerr.InvalidTransactionTimeout,
			timeoutMs, c.cfg.MaxTimeout.Milliseconds())
	}
	var out ProducerIDAndEpoch
	err := c.withProducerID(func(newID int64) error {
		ps, plan, err := c.planInitLocking(id, timeoutMs, expected, newID)
		if err != nil {
			return err
		}
		if plan.fence {
			if err := c.writeFence(ctx, ps, plan.next); err != nil {
				return err
			}
			return fmt.Errorf("%w: aborting the ongoing transaction of %q", kerr.ConcurrentTransactions, id)
		}
		if err := c.write(ctx, ps, []Metadata{plan.next}, false, nil); err != nil {
			return err
		}
		c.logger.Info("initialized transactional id", "transactional_id", id, "producer_id", plan.next.ProducerID,
			"producer_epoch", plan.next.ProducerEpoch, "partition", ps.partition)
		out = ProducerIDAndEpoch{ID: plan.next.ProducerID, Epoch: plan.next.ProducerEpoch}
		return nil
	})
	if err != nil {
		return fail, err
	}
	return out, nil
}

// withProducerID calls try with no producer id (-1) and, each time it
// answers errNeedProducerID (a decision that needs a new producer id: the
// epochs of the current one ran out), again with a newly allocated one.
// Allocation may block (a controller write), so it never happens under the
// coordinator's lock, which try takes.
func (c *Coordinator) withProducerID(try func(newID int64) error) error {
	newID := noProducerID
	for {
		err := try(newID)
		if !errors.Is(err, errNeedProducerID) {
			return err
		}
		if newID, err = c.producers(); err != nil {
			return fmt.Errorf("allocating a producer id: %w", err)
		}
	}
}

// planInitLocking finds (or, given newID, creates) the id's entry, decides,
// and marks the entry pending when there is something to write.
func (c *Coordinator) planInitLocking(id string, timeoutMs int32, expected *ProducerIDAndEpoch, newID int64) (*partitionState, initPlan, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, err := c.partitionLocked(id)
	if err != nil {
		return nil, initPlan{}, err
	}
	e := ps.txns[id]
	if e == nil {
		if newID < 0 {
			return nil, initPlan{}, errNeedProducerID
		}
		// As Kafka's putTransactionStateIfNotExists: the entry exists
		// from now on, even if the write below fails.
		e = &entry{meta: newMetadata(id, newID, timeoutMs, c.nowMs()), pending: none}
		ps.txns[id] = e
		newID = noProducerID
	}
	plan, err := planInit(e.meta, e.pending != none, timeoutMs, expected, newID, c.nowMs())
	if err != nil {
		return nil, initPlan{}, err
	}
	e.pending = plan.next.State
	return ps, plan, nil
}

// entryLocked finds the entry of an id that must exist (a producer that
// calls InitProducerId first): INVALID_PRODUCER_ID_MAPPING when unknown.
func (c *Coordinator) entryLocked(id string) (*partitionState, *entry, error) {
	ps, err := c.partitionLocked(id)
	if err != nil {
		return nil, nil, err
	}
	e := ps.txns[id]
	if e == nil {
		return nil, nil, kerr.InvalidProducerIDMapping
	}
	return ps, e, nil
}

// writeFence writes the PrepareAbort of a fence (an InitProducerId over an
// ongoing transaction, or its timeout) and starts the markers.
func (c *Coordinator) writeFence(ctx context.Context, ps *partitionState, next Metadata) error {
	return c.write(ctx, ps, []Metadata{next}, false, func(e *entry) { c.completeLocked(ps, next.TransactionalID, e) })
}

// AddPartitions is AddPartitionsToTxn for one transaction (and
// AddOffsetsToTxn, with the group's __consumer_offsets partition): the
// partitions join the transaction, which becomes Ongoing. v2 is the
// implicit add of transactions v2 (a Produce v12+ or TxnOffsetCommit v5+
// on a partition not yet in the transaction, asked by its leader). With
// wait, a request that finds the previous transaction still completing
// waits for it (waitCompletion); without, it gets CONCURRENT_TRANSACTIONS
// at once, for a broker asking over a connection that should not be held
// meanwhile (it retries itself).
func (c *Coordinator) AddPartitions(ctx context.Context, id string, producerID int64, epoch int16, parts []TopicPartition, v2, wait bool) error {
	parts = union(nil, parts)
	return c.transit(ctx, id, wait, func(cur Metadata, pending bool, nowMs int64) (Metadata, bool, error) {
		return planAddPartitions(cur, pending, producerID, epoch, parts, v2, nowMs)
	}, nil)
}

// transit is a client's transition of a known id: decide under mu, mark the
// entry pending, write, apply; then runs under mu once applied.
func (c *Coordinator) transit(ctx context.Context, id string, wait bool, plan func(cur Metadata, pending bool, nowMs int64) (Metadata, bool, error), then func(ps *partitionState, e *entry)) error {
	if id == "" {
		return fmt.Errorf("%w: empty transactional id", kerr.InvalidRequest)
	}
	// A real-time bound (not c.now, which tests move by hand).
	waitUntil := time.Now().Add(c.cfg.CompletionWait)
	var waited chan struct{}
	for {
		c.mu.Lock()
		ps, e, err := c.entryLocked(id)
		if err != nil {
			c.mu.Unlock()
			return err
		}
		next, write, err := plan(e.meta, e.pending != none, c.nowMs())
		if wait && errors.Is(err, kerr.ConcurrentTransactions) && e.completed != nil && e.completed != waited {
			// Each completion is waited for once: one that ended without
			// clearing the entry (given up) answers at once next time.
			waited = e.completed
			c.mu.Unlock()
			if waitCompletion(ctx, waited, waitUntil) {
				continue
			}
			return err
		}
		if err != nil || !write {
			c.mu.Unlock()
			return err
		}
		e.pending = next.State
		c.mu.Unlock()
		var apply func(e *entry)
		if then != nil {
			apply = func(e *entry) { then(ps, e) }
		}
		return c.write(ctx, ps, []Metadata{next}, false, apply)
	}
}

// waitCompletion waits until done is closed (true), or until the wall
// clock passes until or ctx ends (false).
//
// A request that finds the previous transaction still completing (its
// markers being written) waits for it up to Config.CompletionWait before
// answering CONCURRENT_TRANSACTIONS. Kafka answers at once and the client
// retries after a backoff (20 ms in franz-go, and in the Java client for
// AddPartitionsToTxn): with markers written in well under a millisecond
// on a healthy cluster, that backoff was most of the time of a short
// transaction. A completion stuck on an unavailable partition leader
// still gets CONCURRENT_TRANSACTIONS, after the wait.
func waitCompletion(ctx context.Context, done <-chan struct{}, until time.Time) bool {
	timer := time.NewTimer(max(time.Until(until), 0))
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// VerifyPartitions answers, per partition, whether it is in the id's
// ongoing transaction (nil) or not (INVALID_TXN_STATE): the broker-side
// check of KIP-890 part 1 before a transactional produce is appended. A
// non-nil error applies to every partition.
func (c *Coordinator) VerifyPartitions(id string, producerID int64, epoch int16, parts []TopicPartition) ([]error, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: empty transactional id", kerr.InvalidRequest)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, e, err := c.entryLocked(id)
	if err != nil {
		return nil, err
	}
	return verifyPartitions(e.meta, producerID, epoch, parts)
}

// EndTxn commits or aborts the id's ongoing transaction: PrepareCommit or
// PrepareAbort is written (acks=all) before answering; the markers and the
// completion follow in the background. A retry of an EndTxn that already
// completed the same way succeeds. v2 is an EndTxn v5+ (transactions v2):
// the epoch is bumped (planEndTxn). It returns the producer id and epoch
// the producer continues with.
func (c *Coordinator) EndTxn(ctx context.Context, id string, producerID int64, epoch int16, commit, v2 bool) (ProducerIDAndEpoch, error) {
	var answer ProducerIDAndEpoch
	err := c.withProducerID(func(newID int64) error {
		return c.transit(ctx, id, true, func(cur Metadata, pending bool, nowMs int64) (Metadata, bool, error) {
			plan, err := planEndTxn(cur, pending, producerID, epoch, commit, v2, newID, nowMs)
			answer = plan.answer
			return plan.next, plan.write, err
		}, func(ps *partitionState, e *entry) { c.completeLocked(ps, id, e) })
	})
	if err != nil {
		return ProducerIDAndEpoch{ID: noProducerID, Epoch: noProducerEpoch}, err
	}
	return answer, nil
}

// Describe is DescribeTransactions for one id:
// TRANSACTIONAL_ID_NOT_FOUND when unknown (or being expired).
func (c *Coordinator) Describe(id string) (Metadata, error) {
	if id == "" {
		return Metadata{}, fmt.Errorf("%w: empty transactional id", kerr.InvalidRequest)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, err := c.partitionLocked(id)
	if err != nil {
		return Metadata{}, err
	}
	e := ps.txns[id]
	if e == nil || e.meta.State == Dead || e.pending == Dead {
		return Metadata{}, kerr.TransactionalIDNotFound
	}
	return e.meta, nil
}

// ListFilter selects the transactions ListTransactions reports; zero
// values select everything.
type ListFilter struct {
	States      []string // state names; unknown ones are returned apart
	ProducerIDs []int64
	// MinDurationMs (v1): only transactions running longer than this;
	// negative: all.
	MinDurationMs int64
}

// List is ListTransactions over the partitions this broker leads: the
// matching transactions (sorted by id), and the state names it did not
// know. While a partition loads it answers COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) List(f ListFilter) (txns []Metadata, unknownStates []string, err error) {
	states := map[State]bool{}
	for _, name := range f.States {
		if s, ok := ParseState(name); ok {
			states[s] = true
		} else {
			unknownStates = append(unknownStates, name)
		}
	}
	pids := map[int64]bool{}
	for _, id := range f.ProducerIDs {
		pids[id] = true
	}
	nowMs := c.nowMs()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, kerr.CoordinatorNotAvailable
	}
	for _, ps := range c.partitions {
		if ps.loading {
			return nil, nil, kerr.CoordinatorLoadInProgress
		}
	}
	for _, ps := range c.partitions {
		for _, e := range ps.txns {
			m := e.meta
			switch {
			case m.State == Dead || e.pending == Dead:
			case len(pids) > 0 && !pids[m.ProducerID]:
			case len(f.States) > 0 && !states[m.State]:
			case f.MinDurationMs >= 0 && nowMs-m.StartMs <= f.MinDurationMs:
			default:
				txns = append(txns, m)
			}
		}
	}
	sort.Slice(txns, func(i, j int) bool { return txns[i].TransactionalID < txns[j].TransactionalID })
	return txns, unknownStates, nil
}

// AbortTimedOut aborts every ongoing transaction older than its timeout
// (Kafka's abortTimedOutTransactions): the epoch is bumped, which fences
// the producer, then PrepareAbort, markers, CompleteAbort. It returns once
// the PrepareAbort records are written; the loop calls it every
// AbortInterval.
func (c *Coordinator) AbortTimedOut(ctx context.Context) {
	fences := c.sweep(func(e *entry, nowMs int64) (Metadata, bool) {
		if !timedOut(e.meta, e.pending != none, nowMs) {
			return Metadata{}, false
		}
		next, err := planFence(e.meta, false, nowMs)
		if err != nil {
			c.logger.Error("cannot abort timed out transaction", "transactional_id", e.meta.TransactionalID, "err", err)
			return Metadata{}, false
		}
		return next, true
	})
	for ps, nexts := range fences {
		for _, next := range nexts {
			c.logger.Info("aborting timed out transaction", "transactional_id", next.TransactionalID,
				"producer_id", next.ProducerID, "bumped_epoch", next.ProducerEpoch)
			if err := c.writeFence(ps.ctx, ps, next); err != nil {
				c.logger.Warn("aborting timed out transaction failed", "transactional_id", next.TransactionalID, "err", err)
			}
		}
	}
}

// ExpireTransactionalIDs removes the ids idle for transactional.id.expiration.ms
// with no transaction in flight (Kafka's removeExpiredTransactionalIds):
// one batch of tombstones per partition, written acks=all.
func (c *Coordinator) ExpireTransactionalIDs(ctx context.Context) {
	expiration := c.cfg.IDExpiration.Milliseconds()
	byPartition := c.sweep(func(e *entry, nowMs int64) (Metadata, bool) {
		if !expired(e.meta, e.pending != none, nowMs, expiration) || transition(e.meta, Dead) != nil {
			return Metadata{}, false
		}
		dead := e.meta
		dead.State = Dead
		return dead, true
	})
	for ps, dead := range byPartition {
		if err := c.write(ctx, ps, dead, false, nil); err != nil {
			c.logger.Warn("expiring transactional ids failed", "partition", ps.partition, "ids", len(dead), "err", err)
			continue
		}
		c.logger.Info("expired transactional ids", "partition", ps.partition, "ids", len(dead))
	}
}

// sweep offers every entry of every loaded partition to pick, and marks
// the ones it picks pending (their next state), by partition.
func (c *Coordinator) sweep(pick func(e *entry, nowMs int64) (next Metadata, ok bool)) map[*partitionState][]Metadata {
	nowMs := c.nowMs()
	out := map[*partitionState][]Metadata{}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	for _, ps := range c.partitions {
		if ps.loading {
			continue
		}
		for _, e := range ps.txns {
			if next, ok := pick(e, nowMs); ok {
				e.pending = next.State
				out[ps] = append(out[ps], next)
			}
		}
	}
	return out
}
