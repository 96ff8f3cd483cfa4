package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ISRWriter asks the controller to change a partition's ISR, as Kafka's
// AlterPartition: the change is conditional on the leader epoch and the
// partition epoch the leader knows, so a deposed leader cannot change it.
// It returns the ISR and partition epoch the controller stored.
type ISRWriter interface {
	AlterISR(ctx context.Context, tp TopicPartition, topicID [16]byte, leaderEpoch, partitionEpoch int32, isr []int32) (newISR []int32, newPartitionEpoch int32, err error)
}

// isrWriteTimeout bounds one ISR change request.
const isrWriteTimeout = 10 * time.Second

// ReadForFollower serves a follower's fetch from offset: it records the
// follower's progress (which may advance the high watermark and add the
// follower back to the ISR), then reads up to the log end (not the high
// watermark: followers copy everything).
func (p *Partition) ReadForFollower(replicaID int32, offset int64, maxBytes int, clientEpoch int32, now time.Time) (ReadResult, error) {
	p.mu.Lock()
	if err := p.checkLeaderLocked(clientEpoch); err != nil {
		p.mu.Unlock()
		return ReadResult{}, err
	}
	leo := p.log().EndOffset()
	if offset > leo || offset < p.log().StartOffset() {
		st := p.stateLocked()
		p.mu.Unlock()
		return ReadResult{State: st}, kerr.OffsetOutOfRange
	}
	f := p.followers[replicaID]
	if f == nil {
		f = &followerState{logEndOffset: -1}
		p.followers[replicaID] = f
	}
	f.updateFetch(offset, leo, now)
	if p.maybeIncrementHighWatermarkLocked() {
		p.notifyLocked()
	}
	p.maybeExpandISRLocked(replicaID, f, now)
	st := p.stateLocked()
	p.mu.Unlock()

	res := ReadResult{State: st}
	if offset == st.LogEndOffset {
		return res, nil
	}
	recs, err := p.log().ReadChunks(offset, maxBytes, st.LogEndOffset, true, SendfileMinBytes, p.sendFiles)
	if err != nil {
		return res, p.readFailed(fmt.Errorf("read %s at %d for replica %d: %w", p.tp, offset, replicaID, err))
	}
	res.Records = recs
	return res, nil
}

// maybeExpandISRLocked asks the controller to add a caught-up follower
// back to the ISR.
func (p *Partition) maybeExpandISRLocked(id int32, f *followerState, now time.Time) {
	if p.isrs == nil || p.isrChangeInFlight || !p.isLeader {
		return
	}
	epochStart := p.leaderEpochStartLocked()
	if !canJoinISR(p.isr, id, f, p.highWatermark, epochStart, now) {
		return
	}
	next := append(slices.Clone(p.isr), id)
	slices.Sort(next)
	p.logger.Info("ISR expanding", "replica", id, "isr", p.isr, "new_isr", next)
	p.alterISRLocked(next, "expand")
}

// leaderEpochStartLocked is where the current leader epoch begins in the
// log: a follower below it may still hold a diverged suffix.
func (p *Partition) leaderEpochStartLocked() int64 {
	e, end := p.log().EndOffsetForEpoch(p.leaderEpoch - 1)
	if e < 0 {
		return p.log().StartOffset()
	}
	return end
}

// MaybeShrinkISR removes followers that have not caught up within lagMax
// from the ISR (through the controller). Called periodically.
func (p *Partition) MaybeShrinkISR(now time.Time, lagMax time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.isLeader || p.isrs == nil || p.isrChangeInFlight {
		return
	}
	out := outOfSync(p.self, p.isr, p.followers, p.log().EndOffset(), now, lagMax)
	if len(out) == 0 {
		return
	}
	next := slices.DeleteFunc(slices.Clone(p.isr), func(id int32) bool { return slices.Contains(out, id) })
	p.logger.Warn("ISR shrinking: followers not caught up within replica.lag.time.max.ms", "out_of_sync", out, "isr", p.isr, "new_isr", next, "lag_max", lagMax)
	p.alterISRLocked(next, "shrink")
}

// alterISRLocked sends an ISR change to the controller in the background
// and applies what the controller stored.
func (p *Partition) alterISRLocked(next []int32, kind string) {
	p.isrChangeInFlight = true
	p.pendingISR = next
	epoch, partitionEpoch := p.leaderEpoch, p.partitionEpoch
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), isrWriteTimeout)
		defer cancel()
		isr, newEpoch, err := p.isrs.AlterISR(ctx, p.tp, p.topicID, epoch, partitionEpoch, next)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.leaderEpoch != epoch {
			return // a new leadership reset the in-flight state
		}
		p.isrChangeInFlight = false
		p.pendingISR = nil
		if err != nil {
			p.logger.Warn("ISR change refused", "kind", kind, "new_isr", next, "err", err)
			if errors.Is(err, kerr.IneligibleReplica) {
				for _, id := range next {
					if f := p.followers[id]; f != nil && !slices.Contains(p.isr, id) {
						f.ineligibleUntil = time.Now().Add(ineligibleBackoff)
					}
				}
			}
			return
		}
		if p.leaderEpoch != epoch || !p.isLeader {
			return
		}
		p.applyISRLocked(isr, newEpoch, kind)
	}()
}

// applyISRLocked installs an ISR the controller stored.
func (p *Partition) applyISRLocked(isr []int32, partitionEpoch int32, kind string) {
	if partitionEpoch < p.partitionEpoch {
		return
	}
	if !slices.Equal(isr, p.isr) {
		p.isrEvents(kind, len(isr) < len(p.isr))
	}
	p.isr = slices.Clone(isr)
	p.partitionEpoch = partitionEpoch
	p.maybeIncrementHighWatermarkLocked()
	// Waiting acks=all produces re-check the ISR size too.
	p.notifyLocked()
}

// isrEvents counts ISR shrinks and expands for metrics.
func (p *Partition) isrEvents(_ string, shrink bool) {
	if shrink {
		p.stats.ISRShrinks.Add(1)
	} else {
		p.stats.ISRExpands.Add(1)
	}
}

// ReplicaStatus is a partition's replication state, for metrics.
type ReplicaStatus struct {
	State
	ISR []int32
	// FollowerLag is, on a leader, each follower's distance in offsets
	// from the leader's log end (-1 when the follower has not fetched).
	FollowerLag map[int32]int64
}

// ReplicaStatus returns the partition's replication state.
func (p *Partition) ReplicaStatus() ReplicaStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := ReplicaStatus{State: p.stateLocked(), ISR: slices.Clone(p.isr)}
	if p.isLeader && len(p.followers) > 0 {
		rs.FollowerLag = make(map[int32]int64, len(p.followers))
		leo := p.log().EndOffset()
		for id, f := range p.followers {
			lag := int64(-1)
			if f.logEndOffset >= 0 {
				lag = leo - f.logEndOffset
			}
			rs.FollowerLag[id] = lag
		}
	}
	return rs
}
