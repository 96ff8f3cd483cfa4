// Package replthrottle is Kafka's replication throttling (KIP-73,
// ReplicationQuotaManager): which replicas a topic throttles
// ({leader,follower}.replication.throttled.replicas) and one side's byte
// rate bound ({leader,follower}.replication.throttled.rate). A leader
// sends nothing for a throttled partition to a follower outside the ISR
// while its rate is over the bound, and a follower outside the ISR leaves
// such a partition out of its fetches; in-sync replicas are never held
// back, and every throttled partition's bytes count towards the rate.
package replthrottle

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kbroker/kbroker/internal/quota"
)

// Listed reports whether a topic's throttled-replicas value (Kafka's
// ThrottledReplicaListValidator form: "*", or "partition:broker,...")
// names partition on broker.
func Listed(value string, partition, broker int32) bool {
	value = strings.TrimSpace(value)
	if value == "" {
		return false
	}
	if value == "*" {
		return true
	}
	for _, item := range strings.Split(value, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			continue
		}
		pi, err1 := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		bi, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
		if err1 == nil && err2 == nil && int32(pi) == partition && int32(bi) == broker {
			return true
		}
	}
	return false
}

// Quota is one side's replication quota: the bytes of throttled
// partitions over Kafka's replication quota windows (11 samples of 1 s,
// replication.quota.window.num and .size.seconds), against a bound in
// bytes per second. The zero bound and Kafka's default, Long.MaxValue,
// never throttle. Safe for concurrent use.
type Quota struct {
	mu    sync.Mutex
	bound float64
	rate  quota.Rate
}

// window is Kafka's replication quota sampling.
var window = quota.Config{Samples: 11, Window: time.Second}

// SetBound sets the rate bound in bytes per second; <= 0 or
// math.MaxInt64 removes it.
func (q *Quota) SetBound(bytesPerSecond int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if bytesPerSecond <= 0 || bytesPerSecond == math.MaxInt64 {
		q.bound = 0
		return
	}
	q.bound = float64(bytesPerSecond)
}

// Bound is the bound in bytes per second, 0 for none.
func (q *Quota) Bound() float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bound
}

// Exceeded reports whether the rate is over the bound at now (Kafka's
// isQuotaExceeded); never without a bound.
func (q *Quota) Exceeded(now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.bound == 0 {
		return false
	}
	return q.rate.Measure(window, now.UnixMilli()) > q.bound
}

// Record counts bytes of throttled partitions moved at now.
func (q *Quota) Record(bytes int, now time.Time) {
	if bytes <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rate.Record(window, float64(bytes), now.UnixMilli())
}
