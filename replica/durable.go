package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kbroker/kbroker/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Durable acknowledgements (kbroker.acks.fsync). With them on:
//   - the leader's own contribution to the high watermark is its log's
//     durable end (fdatasynced), not its log end, so acks=all confirms a
//     write only once it is on stable storage on the leader and on every
//     ISR follower;
//   - a follower fdatasyncs what it appended before its next fetch, whose
//     offset tells the leader how far it has the log (followerSync);
//   - acks=1 waits for the leader's durable end (WaitDurable).
// A leader with appends not yet durable runs one background sync loop
// (syncDurable), a group commit: each round covers every append that
// arrived during the previous one.

// durableSyncTimeout bounds one wait of the sync loop behind another
// caller's round (the fdatasync itself cannot be interrupted).
const durableSyncTimeout = 30 * time.Second

// leaderEndForHWLocked is the leader's log end as the high watermark
// counts it.
func (p *Partition) leaderEndForHWLocked() int64 {
	if p.cfg.AcksFsync {
		return p.log().DurableEnd()
	}
	return p.log().EndOffset()
}

// startDurableSyncLocked starts the sync loop unless it runs already or
// nothing needs it.
func (p *Partition) startDurableSyncLocked() {
	if !p.cfg.AcksFsync || !p.isLeader || p.syncing || p.offline {
		return
	}
	if p.log().DurableEnd() >= p.log().EndOffset() {
		return
	}
	p.syncing = true
	go p.syncDurable()
}

// syncDurable makes the leader's appends durable, round after round, and
// moves the high watermark after each, until nothing is left to sync or
// the partition stops leading with durable acknowledgements on.
func (p *Partition) syncDurable() {
	for {
		log := p.log()
		ctx, cancel := context.WithTimeout(context.Background(), durableSyncTimeout)
		err := log.SyncTo(ctx, log.EndOffset())
		cancel()

		p.mu.Lock()
		if err != nil {
			p.syncing = false
			if errors.Is(err, segment.ErrTruncated) {
				// Truncated meanwhile (leadership lost and found again,
				// say): start over against the log as it is now.
				p.startDurableSyncLocked()
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			if !errors.Is(err, segment.ErrClosed) && !errors.Is(err, context.DeadlineExceeded) && p.log() == log {
				_ = p.storageFailed(fmt.Errorf("sync %s for durable acknowledgements: %w", p.tp, err))
			}
			return
		}
		p.maybeIncrementHighWatermarkLocked()
		p.notifyLocked() // acks=1 waiters look at the durable end
		if !p.isLeader || !p.cfg.AcksFsync || p.log().DurableEnd() >= p.log().EndOffset() {
			p.syncing = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// DurableAcks reports whether kbroker.acks.fsync is on for the partition.
func (p *Partition) DurableAcks() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.AcksFsync
}

// WaitDurable blocks, for an acks=1 append, until it is on stable storage
// when durable acknowledgements are on (at once otherwise), the leadership
// it was made under ends, or ctx ends.
func (p *Partition) WaitDurable(ctx context.Context, res AppendResult) error {
	for {
		p.mu.Lock()
		if !p.cfg.AcksFsync {
			p.mu.Unlock()
			return nil
		}
		if !p.isLeader || p.leaderEpoch != res.LeaderEpoch {
			p.mu.Unlock()
			return kerr.NotLeaderForPartition
		}
		if p.log().DurableEnd() > res.LastOffset {
			p.mu.Unlock()
			return nil
		}
		p.startDurableSyncLocked()
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return kerr.RequestTimedOut
		}
	}
}

// followerSyncNeeded reports whether the follower's log holds records
// beyond its durable end with durable acknowledgements on.
func (p *Partition) followerSyncNeeded() bool {
	p.mu.Lock()
	on := p.cfg.AcksFsync && !p.offline
	p.mu.Unlock()
	if !on {
		return false
	}
	log := p.log()
	return log.DurableEnd() < log.EndOffset()
}

// followerSync makes a follower's log durable to its end before its next
// fetch reports that end to the leader.
func (p *Partition) followerSync(ctx context.Context) error {
	log := p.log()
	if err := log.SyncTo(ctx, log.EndOffset()); err != nil {
		if errors.Is(err, segment.ErrTruncated) {
			return err // the next fetch syncs the log as it is then
		}
		if errors.Is(err, segment.ErrClosed) || ctx.Err() != nil {
			return closedAsNotLeader(err)
		}
		return p.storageFailed(fmt.Errorf("sync follower %s: %w", p.tp, err))
	}
	return nil
}

// syncFollowers runs followerSync for the partitions a fetch appended to,
// concurrently (the disk merges fdatasyncs of different files), and
// returns the first error.
func syncFollowers(ctx context.Context, parts []*Partition) error {
	switch len(parts) {
	case 0:
		return nil
	case 1:
		return parts[0].followerSync(ctx)
	}
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() { errs[i] = p.followerSync(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
