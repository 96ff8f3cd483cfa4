package server

import "time"

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
