package server

import (
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/replthrottle"
	"github.com/kbroker/kbroker/replica"
)

// Replication throttles (Kafka's KIP-73): a topic names the replicas whose
// replication is throttled (leader.replication.throttled.replicas and
// follower.replication.throttled.replicas, "partition:broker,..." or "*"),
// and each broker's dynamic configs bound the bytes per second of that
// traffic (leader.replication.throttled.rate, follower.replication.
// throttled.rate, per broker or cluster-wide). A reassignment sets both so
// that copying to new replicas does not starve clients. Only replicas out
// of the ISR are held back; in-sync ones always replicate.

const (
	leaderThrottledRate   = "leader.replication.throttled.rate"
	followerThrottledRate = "follower.replication.throttled.rate"
)

// replicationThrottle is this broker's two replication quotas and which of
// its replicas they apply to, from the latest view.
type replicationThrottle struct {
	leader, follower replthrottle.Quota
	sets             atomic.Pointer[throttledSets]
	// fetchedBytes is every record byte this broker's followers fetched,
	// throttled or not (Record sees them all): Kafka's
	// ReplicationBytesInPerSec (ops_metrics.go).
	fetchedBytes atomic.Int64
}

// throttledSets are the partitions a view throttles on this broker.
type throttledSets struct {
	// leader: partitions whose replica here is listed in
	// leader.replication.throttled.replicas.
	leader map[replica.TopicPartition]bool
	// follower: listed in follower.replication.throttled.replicas;
	// followerHeld: those of them whose replica here is out of the ISR.
	follower     map[replica.TopicPartition]bool
	followerHeld map[replica.TopicPartition]bool
}

// throttledSetsFor computes the partitions md throttles on broker self.
func throttledSetsFor(self int32, md *controller.Metadata) *throttledSets {
	s := &throttledSets{}
	for _, t := range md.Topics {
		lv, fv := t.Configs["leader.replication.throttled.replicas"], t.Configs["follower.replication.throttled.replicas"]
		if lv == "" && fv == "" {
			continue
		}
		for p, ps := range t.Partitions {
			tp := replica.TopicPartition{Topic: t.Name, Partition: int32(p)}
			if replthrottle.Listed(lv, int32(p), self) {
				if s.leader == nil {
					s.leader = map[replica.TopicPartition]bool{}
				}
				s.leader[tp] = true
			}
			if replthrottle.Listed(fv, int32(p), self) {
				if s.follower == nil {
					s.follower, s.followerHeld = map[replica.TopicPartition]bool{}, map[replica.TopicPartition]bool{}
				}
				s.follower[tp] = true
				if !slices.Contains(ps.ISR, self) {
					s.followerHeld[tp] = true
				}
			}
		}
	}
	return s
}

// rateOf is a dynamic rate config of broker self in md, unlimited when
// unset or unreadable.
func rateOf(md *controller.Metadata, self int32, key string) int64 {
	v, ok := md.DynamicBrokerConfig(self, key)
	if !ok {
		return math.MaxInt64
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return math.MaxInt64
	}
	return n
}

// update installs a new view's throttles.
func (r *replicationThrottle) update(self int32, md *controller.Metadata) {
	r.leader.SetBound(rateOf(md, self, leaderThrottledRate))
	r.follower.SetBound(rateOf(md, self, followerThrottledRate))
	r.sets.Store(throttledSetsFor(self, md))
}

func (r *replicationThrottle) current() *throttledSets {
	if s := r.sets.Load(); s != nil {
		return s
	}
	return &throttledSets{}
}

// leaderHolds reports whether, as leader, this broker sends nothing of tp
// to a follower now: tp is leader-throttled here, the follower is out of
// the ISR, and the leader rate is over its bound (Kafka's
// shouldLeaderThrottle).
func (r *replicationThrottle) leaderHolds(tp replica.TopicPartition, followerInSync bool, now time.Time) bool {
	return r.current().leader[tp] && !followerInSync && r.leader.Exceeded(now)
}

// leaderThrottlesAny reports whether any partition is leader-throttled
// here, so that follower fetches skip the accounting when none is.
func (r *replicationThrottle) leaderThrottlesAny() bool {
	return len(r.current().leader) > 0
}

// leaderThrottled reports whether tp's bytes sent to followers count
// towards the leader rate.
func (r *replicationThrottle) leaderThrottled(tp replica.TopicPartition) bool {
	return r.current().leader[tp]
}

// Hold is replica.FollowerThrottle's: tp is follower-throttled here, this
// replica is out of the ISR, and the follower rate is over its bound.
func (r *replicationThrottle) Hold(tp replica.TopicPartition) bool {
	return r.current().followerHeld[tp] && r.follower.Exceeded(time.Now())
}

// Record is replica.FollowerThrottle's: bytes fetched for a throttled
// partition count towards the follower rate.
func (r *replicationThrottle) Record(tp replica.TopicPartition, bytes int) {
	r.fetchedBytes.Add(int64(bytes))
	if r.current().follower[tp] {
		r.follower.Record(bytes, time.Now())
	}
}
