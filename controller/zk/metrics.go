package zk

import (
	"sync/atomic"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// LatencyBuckets are the upper bounds of RequestStats' histogram buckets
// (Kafka's ZooKeeperRequestLatencyMs, in milliseconds).
var LatencyBuckets = [...]float64{0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000}

// RequestStats is a latency histogram of the Store's ZooKeeper requests
// (each attempt, as Kafka's ZooKeeperClient measures them), kept with
// atomics so the metrics endpoint reads it without a lock.
type RequestStats struct {
	buckets [len(LatencyBuckets)]atomic.Int64 // not cumulative
	count   atomic.Int64
	sumNs   atomic.Int64
}

func (r *RequestStats) observe(d time.Duration) {
	ms := float64(d) / float64(time.Millisecond)
	for i, le := range LatencyBuckets {
		if ms <= le {
			r.buckets[i].Add(1)
			break
		}
	}
	r.count.Add(1)
	r.sumNs.Add(int64(d))
}

// Snapshot returns the request count, the summed latency in milliseconds
// and the cumulative count per LatencyBuckets bound, as a Prometheus
// histogram wants them.
func (r *RequestStats) Snapshot() (count uint64, sumMs float64, cumulative map[float64]uint64) {
	cumulative = make(map[float64]uint64, len(LatencyBuckets))
	var run uint64
	for i, le := range LatencyBuckets {
		run += uint64(r.buckets[i].Load())
		cumulative[le] = run
	}
	return uint64(r.count.Load()), float64(r.sumNs.Load()) / float64(time.Millisecond), cumulative
}

// RequestStats is the Store's request latency histogram.
func (s *Store) RequestStats() *RequestStats { return &s.requestStats }

// SessionExpiries is how many of the Store's sessions were found expired
// (Kafka's ZooKeeperExpiresPerSec counts the same events).
func (s *Store) SessionExpiries() int64 { return s.expiries.Load() }

// SessionState names the connection's state as Kafka's SessionState
// gauge does (CONNECTED, CONNECTING, EXPIRED, CLOSED, ...).
func (s *Store) SessionState() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sessionStateName(s.state)
}

func sessionStateName(st gozk.State) string {
	switch st {
	case gozk.StateHasSession, gozk.StateConnected:
		return "CONNECTED"
	case gozk.StateConnecting, gozk.StateDisconnected:
		return "CONNECTING"
	case gozk.StateExpired:
		return "EXPIRED"
	case gozk.StateAuthFailed:
		return "AUTH_FAILED"
	default:
		return "NOT_CONNECTED"
	}
}
