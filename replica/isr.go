package replica

import (
	"slices"
	"time"
)

// followerState is what the leader knows of one follower from its fetches,
// as Kafka's Replica (updateFetchState): the follower's log end offset and
// the last time it was caught up with the leader's log end.
type followerState struct {
	logEndOffset int64
	// lastCaughtUp is the last time the follower had fetched up to the
	// leader's log end as it was at that time.
	lastCaughtUp time.Time
	// The leader's log end offset and the time of the previous fetch:
	// a follower that reaches that offset was caught up at that time.
	lastFetchLeaderLEO int64
	lastFetchTime      time.Time
	// ineligibleUntil: the controller refused this follower into the ISR
	// as INELIGIBLE_REPLICA (not live to it yet, as a broker that has just
	// registered again): no new proposal before then. Kafka's leader asks
	// its metadata cache first; without the pause every fetch proposed it
	// again, thousands of refused AlterPartitions a second in kverify.
	ineligibleUntil time.Time
}

// ineligibleBackoff is how long a leader waits before proposing again a
// follower the controller found ineligible.
const ineligibleBackoff = 200 * time.Millisecond

// updateFetch records a fetch at fetchOffset when the leader's log ended at
// leaderLEO, following Kafka's Replica.updateFetchState: a follower is
// caught up now if it fetched from the leader's current end, and was caught
// up at the previous fetch if it reached the end the leader had then.
func (f *followerState) updateFetch(fetchOffset, leaderLEO int64, now time.Time) {
	switch {
	case fetchOffset >= leaderLEO:
		if now.After(f.lastCaughtUp) {
			f.lastCaughtUp = now
		}
	case fetchOffset >= f.lastFetchLeaderLEO && f.lastFetchTime.After(f.lastCaughtUp):
		f.lastCaughtUp = f.lastFetchTime
	}
	f.logEndOffset = fetchOffset
	f.lastFetchLeaderLEO = leaderLEO
	f.lastFetchTime = now
}

// highWatermarkFor is the smallest log end offset among the ISR members,
// so every ISR member has every record below it. An ISR member the leader
// has not heard from yet holds the high watermark where it is (current);
// the high watermark never goes back.
func highWatermarkFor(self int32, leaderLEO, current int64, isr []int32, followers map[int32]*followerState) int64 {
	hw := leaderLEO
	for _, id := range isr {
		if id == self {
			continue
		}
		f, ok := followers[id]
		if !ok {
			return current
		}
		hw = min(hw, f.logEndOffset)
	}
	return max(hw, current)
}

// outOfSync lists the ISR followers that are not caught up at now, as
// Kafka's ReplicaState.isCaughtUp: a follower is caught up while its log end
// equals the leader's (leaderLEO), however long ago it last fetched (an
// idle partition keeps its ISR), or when it was last caught up within
// lagMax (replica.lag.time.max.ms): lag is measured in time, not messages.
// A follower the leader has not heard from is not caught up. The leader
// itself is never out of sync.
func outOfSync(self int32, isr []int32, followers map[int32]*followerState, leaderLEO int64, now time.Time, lagMax time.Duration) []int32 {
	var out []int32
	for _, id := range isr {
		if id == self {
			continue
		}
		f, ok := followers[id]
		if !ok || (f.logEndOffset != leaderLEO && now.Sub(f.lastCaughtUp) > lagMax) {
			out = append(out, id)
		}
	}
	return out
}

// canJoinISR reports whether a follower outside the ISR has caught up
// enough to be added back: its log end reached the high watermark and the
// start of the leader's current epoch (so it holds this leader's log, not
// a diverged one), as Kafka's isFollowerInSync, and the controller did not
// just refuse it (ineligibleUntil).
func canJoinISR(isr []int32, id int32, f *followerState, highWatermark, leaderEpochStart int64, now time.Time) bool {
	if slices.Contains(isr, id) || f == nil || now.Before(f.ineligibleUntil) {
		return false
	}
	return f.logEndOffset >= highWatermark && f.logEndOffset >= leaderEpochStart
}
