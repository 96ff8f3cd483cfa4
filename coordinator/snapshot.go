package coordinator

// Keeping __consumer_offsets bounded without log compaction: snapshots.
//
// Kafka compacts __consumer_offsets (cleanup.policy=compact) so that only the
// newest record per key survives, and so does kbroker's log cleaner when it
// runs (log.cleaner.enable, the default: the broker then turns snapshots
// off). With the cleaner off the coordinator bounds each partition itself
// (data directories written before the cleaner existed hold such
// snapshots, which load as ordinary records): when more than
// max(Config.SnapshotBytes, size of the previous snapshot) bytes were
// appended since the last snapshot, it appends a SNAPSHOT of the partition's
// durable state (for every group: its newest group metadata record, and one
// offset record per committed partition; deleted keys simply do not
// appear) as ordinary records, in batches bounded by MaxRecordBytes, and
// then raises the log start offset to the snapshot's first offset
// (OffsetsLog.DeleteBefore). Replaying from the new log start rebuilds
// exactly the state a replay of the whole log would have: every key live at
// the snapshot is rewritten with its newest value, every key not rewritten
// was deleted (or never durable), and records after the snapshot apply on
// top as before. The retained log is thus at most about twice the live
// state plus the threshold, and each snapshot's cost is paid for by at
// least as many bytes of new writes (amortised O(1) per write).
//
// CORRECTNESS (why a snapshot cannot lose a write). The danger is a record
// appended before the snapshot's first offset whose effect is not yet in
// the memory the snapshot copies: moving the log start past it would erase
// it. partLog.mu excludes that:
//   - every write holds partLog.mu shared from before its append until its
//     effect is applied in memory (writeGroup);
//   - a snapshot holds partLog.mu exclusively from before it reads the
//     groups until after DeleteBefore.
//
// So while a snapshot copies the state no write is between "appended" and
// "applied": every record below the snapshot's first offset was either
// applied before the copy (and is in it, or was superseded by a later
// applied record or tombstone that is also reflected in it) or failed. No
// write can be appended between the copy and the snapshot's own records,
// because none can start while the lock is held. Writes that wait for the
// lock wait only for the snapshot's appends; the snapshot never waits for a
// group's mu while a writer that holds that mu waits for the lock, because
// writers never hold a group's mu while acquiring partLog.mu.
//
// What is copied is the DURABLE state, not the live one: offsets are
// applied only after their append succeeds, so g.offsets is durable; group
// membership changes in memory long before it is written (only SyncGroup,
// becoming Empty and static member replacement store it), so the snapshot
// rewrites g.storedMeta, the bytes of the newest stored metadata record. A
// group being deleted (Dead, tombstones in flight) is copied as it is stored
// until the tombstones are durable. An append that failed ambiguously (its
// record may be in the log although the commit was answered with an error)
// is superseded by the snapshot: after it, the log agrees with what the
// coordinator served. Records this coordinator does not understand (newer
// key versions) are not carried over.
//
// OPEN TRANSACTIONS. Offsets of a transaction whose marker has not been
// applied (group.pendingTxn) are not rewritten: the log start moves at most
// to the first batch of the oldest open transaction of the partition, so
// their own batches stay, and a replay rebuilds them from there, followed
// by the snapshot, followed by the marker whenever it comes. We chose this
// over rewriting them as transactional batches of the same producer because
// a rewrite races with the marker: the WriteTxnMarkers handler appends the
// marker outside partLog.mu and applies it (CompleteTxn) afterwards, so a
// snapshot could copy a transaction as open after its marker was appended,
// rewrite its batch after the marker and move the log start past the
// marker, leaving an open transaction in the log that nothing ends (lost
// on reload, and a hanging transaction holding the partition's last stable
// offset). Holding the log start back is always safe: a replay of any
// suffix that starts at or before the first open batch and contains a
// complete snapshot rebuilds the same state. Its cost is a longer replay
// while a transaction is open, bounded by transaction.max.timeout.ms, after
// which the transaction coordinator aborts it.
//
// Offset order across a rewrite: a committed transaction replaces an offset
// only if its batch is newer (Kafka compares append offsets), so a
// snapshot's rewrite of an offset carries the offset of the batch that first
// stored it (records.go: appendOffsetHeader), and a replay compares that,
// not the rewrite's position. Otherwise an older plain commit, rewritten
// after an open transaction's batch, would win over the transaction when
// its marker comes.
//
// A snapshot interrupted after some of its batches were appended is
// harmless: it only rewrote current values, and the log start does not
// move. BecomeLeader takes partLog.mu exclusively once before loading, so a
// write or snapshot of an earlier tenure can never append into a replay.

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// snapshotTimeout bounds a snapshot, during which this partition's writes
// wait for partLog.mu.
const snapshotTimeout = 30 * time.Second

// partLog is the write side of one __consumer_offsets partition.
type partLog struct {
	// mu is held shared by each write from just before its append until its
	// effect is applied in memory, and exclusively by a snapshot.
	mu sync.RWMutex
	// written counts bytes appended since the last snapshot or load.
	written atomic.Int64
	// lastSnapshot is the size of the last snapshot (or the estimated live
	// state after a load): a snapshot is due when written exceeds it.
	lastSnapshot atomic.Int64
	running      atomic.Bool // a snapshot is scheduled or running
}

func (c *Coordinator) partLog(p int32) *partLog {
	c.plMu.Lock()
	defer c.plMu.Unlock()
	pl := c.partLogs[p]
	if pl == nil {
		pl = &partLog{}
		c.partLogs[p] = pl
	}
	return pl
}

// afterLoad resets the trigger after a replay: everything replayed beyond
// the estimated live state counts as written since a snapshot, so a long
// history is snapshotted right after loading.
func (pl *partLog) afterLoad(s loadStats) {
	pl.lastSnapshot.Store(s.live)
	pl.written.Store(max(s.replayed-s.live, 0))
}

// errNotOwned marks a write for a group this coordinator no longer owns
// (its partition resigned or reloaded, or the group was removed).
var errNotOwned = fmt.Errorf("group no longer owned by this coordinator: %w", kerr.NotCoordinator)

// ownsLocked reports whether g is the current group of its partition
// (which is loaded). Called with Coordinator.mu held.
func (c *Coordinator) ownsLocked(g *group) bool {
	ps := c.partitions[g.partition]
	return !c.closed && ps != nil && !ps.loading && ps.groups[g.id] == g
}

// writeGroup appends records for g as one plain batch and calls done with
// the result before other writes of the partition can be snapshotted (see
// CORRECTNESS above): done must apply the write's in-memory effect (taking
// g.mu itself) and must not block. The caller holds g's write token and not
// g.mu. A group that is no longer owned appends nothing and gets errNotOwned.
func (c *Coordinator) writeGroup(ctx context.Context, g *group, now time.Time, records []record, done func(err error)) {
	c.writeGroupBatch(ctx, g, buildBatch(records, now.UnixMilli()), func(_ int64, err error) { done(err) })
}

// writeGroupBatch is writeGroup for a batch built by the caller; done also
// gets the offset the log assigned to the batch.
func (c *Coordinator) writeGroupBatch(ctx context.Context, g *group, batch []byte, done func(base int64, err error)) {
	pl := c.partLog(g.partition)
	pl.mu.RLock()
	c.mu.Lock()
	owned := c.ownsLocked(g)
	c.mu.Unlock()
	base, err := int64(-1), errNotOwned
	if owned {
		base, err = c.appendBatch(ctx, g.partition, batch)
		if err == nil {
			pl.written.Add(int64(len(batch)))
		}
	}
	done(base, err)
	pl.mu.RUnlock()
	c.maybeSnapshot(g.partition, pl)
}

// appendBatch writes batch to partition and returns its base offset. A
// batch larger than MaxRecordBytes is refused as MESSAGE_TOO_LARGE without
// reaching the log. Use writeGroupBatch, which orders the write against
// snapshots.
func (c *Coordinator) appendBatch(ctx context.Context, partition int32, batch []byte) (int64, error) {
	if len(batch) > int(c.cfg.MaxRecordBytes) {
		return -1, errTooLarge
	}
	return c.log.Append(ctx, partition, batch)
}

// maybeSnapshot starts a background snapshot of partition p when enough was
// written since the last one and none is running.
func (c *Coordinator) maybeSnapshot(p int32, pl *partLog) {
	if c.cfg.SnapshotBytes < 0 {
		return
	}
	if pl.written.Load() <= max(c.cfg.SnapshotBytes, pl.lastSnapshot.Load()) {
		return
	}
	if !pl.running.CompareAndSwap(false, true) {
		return
	}
	c.goBackground(func(ctx context.Context) {
		defer pl.running.Store(false)
		if err := c.snapshot(ctx, p); err != nil {
			// Retry only after another threshold's worth of writes, so a
			// partition that cannot snapshot does not loop.
			pl.written.Store(0)
			c.logger.Warn("snapshot of __consumer_offsets partition failed", "partition", p, "err", err)
		}
	})
}

// snapshot rewrites partition p's durable state and moves its log start to
// the first record of the rewrite (see the comment at the top of the file).
func (c *Coordinator) snapshot(ctx context.Context, p int32) error {
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	pl := c.partLog(p)
	pl.mu.Lock()
	defer pl.mu.Unlock()

	c.mu.Lock()
	ps := c.partitions[p]
	if c.closed || ps == nil || ps.loading {
		c.mu.Unlock()
		return errNotOwned
	}
	groups := make([]*group, 0, len(ps.groups))
	for _, g := range ps.groups {
		groups = append(groups, g)
	}
	c.mu.Unlock()
	sort.Slice(groups, func(i, j int) bool { return groups[i].id < groups[j].id })

	var records []record
	openFrom := int64(-1) // first batch of the oldest open transaction
	for _, g := range groups {
		g.mu.Lock()
		if g.unloadCode != 0 {
			g.mu.Unlock()
			return errNotOwned
		}
		records = g.durableRecordsLocked(records)
		for _, txn := range g.pendingTxn {
			if openFrom < 0 || txn.first < openFrom {
				openFrom = txn.first
			}
		}
		g.mu.Unlock()
	}
	if len(records) == 0 {
		// Nothing is live: one no-op record (deleting a group that does not
		// exist) marks where the log may start.
		records = append(records, groupTombstone(""))
	}
	now := c.now()
	batches, err := packBatches(records, now.UnixMilli(), int(c.cfg.MaxRecordBytes))
	if err != nil {
		return err
	}
	first := int64(-1)
	var size int64
	for _, b := range batches {
		base, err := c.log.Append(ctx, p, b)
		if err != nil {
			return fmt.Errorf("append snapshot of __consumer_offsets-%d: %w", p, err)
		}
		if first < 0 {
			first = base
		}
		size += int64(len(b))
	}
	start := logStartAfterSnapshot(first, openFrom)
	if err := c.log.DeleteBefore(ctx, p, start); err != nil {
		return fmt.Errorf("move log start of __consumer_offsets-%d to %d: %w", p, start, err)
	}
	written := pl.written.Swap(0)
	pl.lastSnapshot.Store(size)
	c.logger.Info("snapshotted __consumer_offsets partition", "partition", p, "groups", len(groups),
		"records", len(records), "bytes", size, "log_start", start, "written_since_last", written,
		"took", c.now().Sub(now))
	return nil
}

// durableRecordsLocked appends the records that restore g's durable state:
// its newest stored metadata, then its offsets in order.
func (g *group) durableRecordsLocked(out []record) []record {
	if g.storedMeta != nil {
		out = append(out, record{key: groupKey(g.id), value: g.storedMeta})
	}
	if g.cg != nil {
		// A consumer group's state is published only once durable: the
		// live state is the durable one.
		out = append(out, cgStateRecords(g.id, g.cg)...)
	}
	out = append(out, g.shareStateRecordsLocked()...)
	out = append(out, g.groupConfigRecordsLocked()...)
	for _, tp := range sortedPartitions(g.offsets) {
		o := g.offsets[tp]
		r := offsetRecord(g.id, tp, o)
		r.origin, r.hasOrigin = o.appendOffset, true
		out = append(out, r)
	}
	return out
}

// logStartAfterSnapshot is where a snapshot whose first batch is at first
// may move the log start: there, or to the first batch of the oldest open
// transaction (openFrom, -1 if none) when that is earlier.
func logStartAfterSnapshot(first, openFrom int64) int64 {
	if openFrom >= 0 && openFrom < first {
		return openFrom
	}
	return first
}

// Upper bounds of a v2 batch's fixed header and of one record's framing
// (length, attributes, timestamp and offset deltas, key and value lengths,
// header count, as varints).
const (
	batchHeaderBytes = 61
	recordFrameBytes = 32
)

// packBatches encodes records, in order, as batches of at most maxBytes.
func packBatches(records []record, nowMillis int64, maxBytes int) ([][]byte, error) {
	var out [][]byte
	var cur []record
	size := batchHeaderBytes
	flush := func() error {
		b := buildBatch(cur, nowMillis)
		if len(b) > maxBytes {
			return fmt.Errorf("snapshot record of %d bytes: %w", len(b), errTooLarge)
		}
		out = append(out, b)
		cur, size = nil, batchHeaderBytes
		return nil
	}
	for _, r := range records {
		n := len(r.key) + len(r.value) + recordFrameBytes
		if len(cur) > 0 && size+n > maxBytes {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		cur = append(cur, r)
		size += n
	}
	if len(cur) > 0 {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
