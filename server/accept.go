package server

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/kbroker/kbroker/internal/ratelog"
)

// Accept errors (EMFILE and ENFILE when descriptors run out, ENOBUFS,
// ECONNABORTED, ...) are retried after a pause, as Go's net/http server
// does: 5 ms, doubling up to 1 s, back to 5 ms after an accept succeeds.
// Without it, a process out of descriptors spins on accept (the pending
// connection stays in the backlog, so accept fails again at once) and
// writes a log line per attempt.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
	// acceptLogEvery bounds accept-failure log lines: one per interval,
	// with the count of failures not logged since the previous one.
	acceptLogEvery = 5 * time.Second
)

// acceptBackoff is the pause before the next accept after a failure.
type acceptBackoff struct {
	delay time.Duration // the last pause; 0 after a success
}

// failed returns how long to wait before accepting again.
func (a *acceptBackoff) failed() time.Duration {
	a.delay = nextAcceptDelay(a.delay)
	return a.delay
}

// succeeded resets the pause.
func (a *acceptBackoff) succeeded() { a.delay = 0 }

// nextAcceptDelay is net/http's rule: 5 ms, then double, at most 1 s.
func nextAcceptDelay(prev time.Duration) time.Duration {
	if prev <= 0 {
		return acceptBackoffMin
	}
	return min(2*prev, acceptBackoffMax)
}

// acceptLoop accepts connections on listener l until ln is closed. A
// failed accept (out of descriptors, most often) is retried after a
// growing pause (see acceptBackoff), logged at most once per
// acceptLogEvery. Connection limits and creation rates are connQuotas':
// the loop waits for a slot before accepting and, once it has accepted,
// for the throttle the creation rates impose before it serves the
// connection and accepts the next.
func (b *Broker) acceptLoop(ctx context.Context, ln net.Listener, l *listener, wg *sync.WaitGroup) {
	name := l.name
	var backoff acceptBackoff
	logLimit := ratelog.New(acceptLogEvery)
	refusedLog := ratelog.New(acceptLogEvery)
	lruLog := ratelog.New(acceptLogEvery)
	for {
		if !b.quotas.waitSlot(ctx, name) {
			return
		}
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			wait := backoff.failed()
			if ok, suppressed := logLimit.Allow(time.Now()); ok {
				b.logger.Warn("accept failed; retrying after a pause", "addr", ln.Addr().String(), "err", err,
					"pause", wait, "failures_not_logged", suppressed)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			continue
		}
		backoff.succeeded()
		addr := remoteAddr(c)
		withinIP, ok := b.quotas.admit(ctx, name, addr)
		if !ok {
			c.Close()
			return
		}
		if !withinIP {
			b.quotas.release(name, addr)
			b.connsRefused.Add(1)
			if ok, suppressed := refusedLog.Allow(time.Now()); ok {
				b.logger.Info("closing connection: max.connections.per.ip reached", "remote", c.RemoteAddr().String(),
					"refused_not_logged", suppressed)
			}
			c.Close()
			continue
		}
		if name == b.quotas.protected && b.quotas.overLimit() {
			if lru := b.leastRecentlyActiveConn(name); lru != nil {
				if ok, suppressed := lruLog.Allow(time.Now()); ok {
					b.logger.Info("closing the least recently active connection: max.connections reached and the inter-broker listener takes one more",
						"remote", lru.RemoteAddr().String(), "closed_not_logged", suppressed)
				}
				lru.Close()
			}
		}
		st := &connState{listener: name, id: b.connIDs.Add(1)}
		st.touch(time.Now())
		b.connsMu.Lock()
		b.conns[c] = st
		b.connsMu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				b.connsMu.Lock()
				delete(b.conns, c)
				b.connsMu.Unlock()
				c.Close()
				b.quotas.release(name, addr)
				b.shareConnClosed(st.id)
			}()
			b.serveConn(ctx, c, st, l)
		}()
	}
}

// leastRecentlyActiveConn returns the open connection, on another listener
// than except, whose last request or response is the oldest (Kafka's LRU
// channel), or nil.
func (b *Broker) leastRecentlyActiveConn(except string) net.Conn {
	b.connsMu.Lock()
	defer b.connsMu.Unlock()
	var lru net.Conn
	var oldest int64
	for c, st := range b.conns {
		if st.listener == except {
			continue
		}
		if at := st.lastActive.Load(); lru == nil || at < oldest {
			lru, oldest = c, at
		}
	}
	return lru
}
