package server

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/kbroker/kbroker/internal/tick"
)

// connState is what the broker tracks of one client connection besides
// the connection itself.
type connState struct {
	listener string // the listener's name, upper case
	// id is unique among the broker's connections (0 in handler tests):
	// share sessions belong to the connection that opened them.
	id uint64
	// lastActive is when a request was last read or a response last
	// written (UnixNano); inFlight counts requests read and not yet
	// answered (a long-poll fetch, a produce waiting for replication).
	lastActive atomic.Int64
	inFlight   atomic.Int32
}

// touch records activity at now.
func (s *connState) touch(now time.Time) { s.lastActive.Store(now.UnixNano()) }

// requestRead records a request read at now.
func (s *connState) requestRead(now time.Time) {
	s.inFlight.Add(1)
	s.touch(now)
}

// requestDone records a request answered (or, for acks=0, handled) at now.
func (s *connState) requestDone(now time.Time) {
	s.inFlight.Add(-1)
	s.touch(now)
}

// idleExpired is connections.max.idle.ms's rule, as Kafka's Selector
// applies it: a connection with nothing in flight and no request read or
// response written for longer than maxIdle is closed. A negative maxIdle
// never closes one.
func idleExpired(lastActive, now time.Time, inFlight int32, maxIdle time.Duration) bool {
	return maxIdle >= 0 && inFlight == 0 && now.Sub(lastActive) > maxIdle
}

// idleCheckEvery is how often idle connections are looked for: a tenth
// of the idle time, between 50 ms and 1 s, so a connection is closed at
// most that much after it expired.
func idleCheckEvery(maxIdle time.Duration) time.Duration {
	return min(max(maxIdle/10, 50*time.Millisecond), time.Second)
}

// closeIdleConns closes expired connections until ctx ends.
func (b *Broker) closeIdleConns(ctx context.Context) {
	maxIdle := b.cfg.ConnectionsMaxIdle
	if maxIdle < 0 {
		return
	}
	tick.Every(ctx, idleCheckEvery(maxIdle), func(now time.Time) {
		var idle []net.Conn
		b.connsMu.Lock()
		for c, st := range b.conns {
			if idleExpired(time.Unix(0, st.lastActive.Load()), now, st.inFlight.Load(), maxIdle) {
				idle = append(idle, c)
			}
		}
		b.connsMu.Unlock()
		for _, c := range idle {
			b.logger.Debug("closing idle connection", "remote", c.RemoteAddr().String(), "connections.max.idle.ms", maxIdle.Milliseconds())
			b.connsClosedIdle.Add(1)
			c.Close()
		}
	})
}
