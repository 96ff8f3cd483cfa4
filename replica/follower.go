package replica

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/segment"
)

// MakeFollower makes this broker a follower of tp under leaderID at
// leaderEpoch: it stops serving clients, and a fetcher copies the leader's
// log after truncating whatever this replica has that the leader does not
// (KIP-101/279: by leader epoch, never simply to the high watermark).
func (m *Manager) MakeFollower(tp TopicPartition, topicID [16]byte, leaderID, leaderEpoch int32, leaderAddr string, cfg PartitionConfig) (*Partition, error) {
	p, err := m.open(tp, topicID, cfg)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.offline {
		p.mu.Unlock()
		// Stopped by a failure of its log dir meanwhile.
		dir := filepath.Dir(p.log().Dir())
		return nil, offlineReplicaError(tp, dir, m.failures.err(dir))
	}
	if leaderEpoch < p.leaderEpoch {
		p.mu.Unlock()
		return nil, fmt.Errorf("make %s follower at epoch %d: already at epoch %d", tp, leaderEpoch, p.leaderEpoch)
	}
	changed := p.isLeader || p.leaderID != leaderID || p.leaderEpoch != leaderEpoch
	wasLeader := p.isLeader
	p.cfg = cfg
	p.log().SetConfig(cfg.Log)
	p.isLeader = false
	p.leaderID = leaderID
	p.leaderEpoch = leaderEpoch
	p.followers = map[int32]*followerState{}
	p.notifyLocked()
	p.mu.Unlock()
	if changed {
		if wasLeader {
			p.logger.Info("became follower", "leader", leaderID, "leader_epoch", leaderEpoch)
		}
		m.fetchers.add(p, leaderID, leaderAddr)
	}
	return p, nil
}

// Following reports whether this replica follows a leader.
func (p *Partition) Following() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.isLeader && p.leaderID >= 0
}

// leaderRef names the leader (and its epoch) a follower request was sent
// to: its answer applies only while the replica still follows that leader
// at that epoch.
type leaderRef struct {
	id    int32
	epoch int32
}

func (p *Partition) followsLocked(l leaderRef) bool {
	return !p.isLeader && p.leaderID == l.id && p.leaderEpoch == l.epoch
}

// followerFetchPosition is what the fetcher asks the leader for.
func (p *Partition) followerFetchPosition() (fetchOffset, logStart int64, leader leaderRef, lastFetchedEpoch int32, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isLeader || p.leaderID < 0 {
		return 0, 0, leaderRef{}, 0, false
	}
	last, has := p.log().LatestEpoch()
	if !has {
		last = -1
	}
	return p.log().EndOffset(), p.log().StartOffset(), leaderRef{p.leaderID, p.leaderEpoch}, last, true
}

// truncateToLeader cuts the log where it diverges from the leader's:
// leaderEnd is the leader's end offset for leaderEpochFound, the latest
// epoch both know (OffsetForLeaderEpoch). Whatever this replica has beyond
// is a suffix the leader never had; it is logged and removed.
func (p *Partition) truncateToLeader(leader leaderRef, localEpoch, leaderEpochFound int32, leaderEnd int64) (done bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.followsLocked(leader) {
		return true, nil // the answer is from a leader we no longer follow
	}
	leo := p.log().EndOffset()
	target := leo
	done = true
	switch {
	case leaderEpochFound < 0 || leaderEnd < 0:
		// The leader knows none of our epochs: keep what is committed.
		target = min(p.highWatermark, leo)
	case leaderEpochFound == localEpoch:
		target = min(leaderEnd, leo)
	default:
		// The leader's latest common epoch is older than ours: our end
		// for that epoch bounds it too. If we do not have that very
		// epoch, the logs may diverge earlier still: cut here and ask
		// again with our new latest epoch (Kafka iterates the same way).
		foundLocal, localEnd := p.log().EndOffsetForEpoch(leaderEpochFound)
		if localEnd < 0 {
			localEnd = leo
		}
		target = min(leaderEnd, localEnd, leo)
		done = foundLocal == leaderEpochFound
	}
	if target >= leo {
		return done, nil
	}
	p.logger.Warn("truncating the suffix the leader does not have", "from", target, "to", leo, "records_dropped", leo-target, "leader", p.leaderID)
	return done, p.truncateReportedLocked(leader, target)
}

// truncateAbove cuts the log back to offset, for a follower ahead of what
// its leader has committed.
func (p *Partition) truncateAbove(leader leaderRef, offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.followsLocked(leader) || offset >= p.log().EndOffset() {
		return nil
	}
	p.logger.Warn("follower is ahead of its leader: truncating", "from", offset, "to", p.log().EndOffset())
	return p.truncateReportedLocked(leader, offset)
}

// Truncation is a follower's truncation that dropped the offsets
// [From, To) of its log to follow Leader at LeaderEpoch. Offsets below
// HighWatermark (the replica's, before) were committed: after an unclean
// election, those are the records the cluster lost.
type Truncation struct {
	TopicPartition
	From, To      int64
	HighWatermark int64
	Leader        int32
	LeaderEpoch   int32
}

// truncateReportedLocked is truncateLocked for a follower, telling
// Config.OnTruncation what it dropped.
func (p *Partition) truncateReportedLocked(leader leaderRef, target int64) error {
	leo, hw := p.log().EndOffset(), p.highWatermark
	if err := p.truncateLocked(target); err != nil {
		return err
	}
	if p.truncated != nil && target < leo {
		p.truncated(Truncation{TopicPartition: p.tp, From: target, To: leo, HighWatermark: hw, Leader: leader.id, LeaderEpoch: leader.epoch})
	}
	return nil
}

// truncateLocked removes everything from target on, with the producer
// state and high watermark that depended on it.
func (p *Partition) truncateLocked(target int64) error {
	if err := p.log().TruncateTo(target); err != nil {
		return fmt.Errorf("truncate %s to %d: %w", p.tp, target, err)
	}
	end := p.log().EndOffset()
	if end >= p.highWatermark {
		// Only uncommitted records went: the state is trimmed, as
		// every marker removed is still known (truncateFrom).
		p.producers.truncateFrom(end)
		clear(p.verifying)
	} else {
		// Below the high watermark (an unclean election): the state is
		// rebuilt from the log, which reads it all.
		p.highWatermark = end
		if err := p.rebuildProducersLocked(); err != nil {
			return err
		}
	}
	p.notifyLocked()
	return nil
}

// restartAt empties the log and starts it at offset, for a follower whose
// position the leader no longer has.
func (p *Partition) restartAt(leader leaderRef, offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.followsLocked(leader) {
		return nil
	}
	p.logger.Warn("follower is below the leader's log start: restarting the log there", "offset", offset)
	if err := p.log().TruncateFullyAndStartAt(offset); err != nil {
		return fmt.Errorf("restart %s at %d: %w", p.tp, offset, err)
	}
	p.producers = newProducerStates()
	clear(p.verifying)
	p.highWatermark = offset
	p.notifyLocked()
	return nil
}

// appendAsFollower appends batches copied from the leader as they are
// (offsets and epochs already set), then takes the leader's high watermark
// and log start offset.
func (p *Partition) appendAsFollower(leader leaderRef, records []byte, leaderHW, leaderLogStart int64) (int, error) {
	batches, headers, err := recordbatch.Split(records)
	if err != nil {
		// A fetch response may end with a partial batch when the leader
		// cut at its byte limit: keep the whole ones.
		batches, headers = splitWhole(records)
		if len(batches) == 0 {
			return 0, fmt.Errorf("records from leader for %s: %w", p.tp, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.followsLocked(leader) {
		return 0, nil // fetched from a leader we no longer follow: drop it
	}
	appended := 0
	for i, batch := range batches {
		h := headers[i]
		leo := p.log().EndOffset()
		if h.NextOffset() <= leo {
			continue // already have it (the fetch started mid-batch)
		}
		if h.BaseOffset < leo {
			return appended, fmt.Errorf("leader sent %s batch at %d, log ends at %d: %w", p.tp, h.BaseOffset, leo, segment.ErrUnexpectedOffset)
		}
		// A batch above the log end follows a gap the leader's log
		// cleaner made: offsets are never rewritten, so a compacted
		// log is copied with its holes, as Kafka's followers do.
		if err := p.appendLocked(batch, h, p.abortOfLocked(h, batch), true); err != nil {
			return appended, p.storageFailed(fmt.Errorf("append to follower %s: %w", p.tp, err))
		}
		p.applyBatchLocked(h, batch)
		appended++
	}
	if leaderLogStart > p.log().StartOffset() && leaderLogStart <= p.log().EndOffset() {
		if err := p.log().SetStartOffset(leaderLogStart); err != nil {
			p.logger.Warn("following the leader's log start offset failed", "offset", leaderLogStart, "err", err)
		}
	}
	p.highWatermark = max(p.highWatermark, min(leaderHW, p.log().EndOffset()))
	p.notifyLocked()
	return appended, nil
}

// splitWhole returns the whole, valid batches at the start of records.
func splitWhole(records []byte) ([][]byte, []recordbatch.Header) {
	var batches [][]byte
	var headers []recordbatch.Header
	for len(records) > 0 {
		h, err := recordbatch.Validate(records)
		if err != nil {
			break
		}
		batches = append(batches, records[:h.Size()])
		headers = append(headers, h)
		records = records[h.Size():]
	}
	return batches, headers
}

// Follower retry backoff: a fetch that failed is retried after
// minFollowerBackoff, doubling with each further failure up to
// followerBackoff. The common failure, a leader that has not applied the
// controller's latest view yet (a new topic, an election), clears within
// milliseconds; a leader that is down should not be hammered.
const (
	minFollowerBackoff = 10 * time.Millisecond
	followerBackoff    = 200 * time.Millisecond
)

// retryBackoff is the wait before the next retry after consecutive
// failures.
type retryBackoff struct{ last time.Duration }

// next returns the wait after one more failure.
func (b *retryBackoff) next() time.Duration {
	b.last = min(max(2*b.last, minFollowerBackoff), followerBackoff)
	return b.last
}

// reset starts over after a success.
func (b *retryBackoff) reset() { b.last = 0 }
