package txn

import (
	"context"
	"slices"
	"strings"
)

// Snapshots bound __transaction_state when the log cleaner is off (with
// log.cleaner.enable, the default, the broker turns them off and the
// cleaner compacts the topic, as Kafka's does). Every id's record is the whole of its
// state, so the live state of a partition is its last record per id: a
// snapshot writes those again, in batches, and then moves the log start to
// the first of them. A load then replays the snapshot and what followed.
//
// It holds the partition's writeMu exclusively from the moment it reads the
// states until the log start has moved: no other write is in flight
// (writes apply their state before releasing writeMu shared), so the
// states it writes are exactly the log's latest ones, and nothing lands
// between them. A crash in the middle leaves the old records before the
// snapshot's, which replay to the same states.

// snapshotBatchRecords bounds the records in one snapshot batch (about 100
// bytes each), well under message.max.bytes.
const snapshotBatchRecords = 2000

// maybeSnapshotLocked starts a snapshot of ps when enough was written since
// the last one. Called with mu held.
func (c *Coordinator) maybeSnapshotLocked(ps *partitionState) {
	if c.cfg.SnapshotBytes < 0 || ps.snapshotting || ps.sinceSnapshot <= max(c.cfg.SnapshotBytes, ps.lastSnapshot) {
		return
	}
	ps.snapshotting = true
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		c.snapshot(ps)
	}()
}

// snapshot writes the live state of ps's ids and moves its log start past
// everything older.
func (c *Coordinator) snapshot(ps *partitionState) {
	wmu := c.writeMuFor(ps.partition)
	wmu.Lock()
	defer wmu.Unlock()
	written, err := c.writeSnapshot(ps)
	c.mu.Lock()
	defer c.mu.Unlock()
	ps.snapshotting = false
	if err != nil {
		if ps.ctx.Err() == nil {
			c.logger.Warn("transaction state snapshot failed", "partition", ps.partition, "err", err)
		}
		return
	}
	ps.sinceSnapshot, ps.lastSnapshot = 0, written
}

// writeSnapshot does snapshot's writes; writeMu is held exclusively.
func (c *Coordinator) writeSnapshot(ps *partitionState) (int64, error) {
	c.mu.Lock()
	if c.partitions[ps.partition] != ps {
		c.mu.Unlock()
		return 0, context.Canceled
	}
	var live []Metadata
	for _, e := range ps.txns {
		if e.logged {
			live = append(live, e.meta)
		}
	}
	c.mu.Unlock()
	slices.SortFunc(live, func(a, b Metadata) int { return strings.Compare(a.TransactionalID, b.TransactionalID) })
	ctx, cancel := context.WithTimeout(ps.ctx, c.cfg.WriteTimeout)
	defer cancel()
	first := int64(-1)
	var written int64
	for chunk := range slices.Chunk(live, snapshotBatchRecords) {
		batch := buildBatch(chunk, c.nowMs())
		off, err := c.log.Append(ctx, ps.partition, batch)
		if err != nil {
			return 0, appendError(err)
		}
		if first < 0 {
			first = off
		}
		written += int64(len(batch))
	}
	if first < 0 {
		// No live id: there is no snapshot record to start the log at;
		// the next snapshot, with an id, trims it.
		return 0, nil
	}
	if err := c.log.DeleteBefore(ctx, ps.partition, first); err != nil {
		return 0, err
	}
	c.logger.Info("wrote transaction state snapshot", "partition", ps.partition, "transactional_ids", len(live), "bytes", written, "log_start", first)
	return written, nil
}
