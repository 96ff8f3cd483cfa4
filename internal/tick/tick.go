// Package tick runs periodic work: the one loop the broker's background
// jobs (ISR checks, retention, checkpoints, coordinator sweeps, idle
// connections) share.
package tick

import (
	"context"
	"time"
)

// Every runs fn each interval, with the tick's time, until ctx ends.
func Every(ctx context.Context, interval time.Duration, fn func(now time.Time)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			fn(now)
		}
	}
}
