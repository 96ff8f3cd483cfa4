// Package ratelog decides when a line that may repeat very often (an
// accept loop out of descriptors, a file open failing on every request)
// may be logged again: at most one line per interval, carrying the count
// of the lines held back since the previous one.
package ratelog

import (
	"sync"
	"time"
)

// Limiter allows one line per interval. The zero value, and a nil
// Limiter, allow every line.
type Limiter struct {
	every time.Duration

	// mu guards last and suppressed.
	mu         sync.Mutex
	last       time.Time // when the last allowed line was; zero: none yet
	suppressed int       // lines held back since then
}

// New returns a Limiter allowing a line at most every interval.
func New(every time.Duration) *Limiter { return &Limiter{every: every} }

// Allow tells whether a line may be written at now. When it may,
// suppressed is how many were held back since the previous allowed line
// (to be logged with it).
func (l *Limiter) Allow(now time.Time) (ok bool, suppressed int) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !due(l.last, now, l.every) {
		l.suppressed++
		return false, 0
	}
	suppressed, l.suppressed, l.last = l.suppressed, 0, now
	return true, suppressed
}

// due is the rule: the first line, and any line an interval or more after
// the last allowed one (or after a clock step back), is written.
func due(last, now time.Time, every time.Duration) bool {
	if last.IsZero() {
		return true
	}
	d := now.Sub(last)
	return d >= every || d < 0
}
