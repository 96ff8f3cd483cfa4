package quota

import (
	"context"
	"sync/atomic"
	"time"
)

// A request quota (request_percentage) charges the time a request keeps
// the broker busy. Kafka charges its request handler thread's time, which
// excludes waits in purgatory (a fetch's long poll, a JoinGroup waiting
// for the rebalance). kbroker's handlers wait in their own goroutine, so
// the waits say so: each adds the time it parked to the request's
// ParkClock, and the handler's time minus that is what is charged.

// ParkClock sums the time one request spent parked.
type ParkClock struct{ nanos atomic.Int64 }

type parkKey struct{}

// WithParkClock returns ctx carrying a new ParkClock, for one request.
func WithParkClock(ctx context.Context) (context.Context, *ParkClock) {
	p := &ParkClock{}
	return context.WithValue(ctx, parkKey{}, p), p
}

// Parked adds the time since since to ctx's ParkClock, if it has one:
// call it as `defer quota.Parked(ctx, time.Now())` around a wait.
func Parked(ctx context.Context, since time.Time) {
	if p, ok := ctx.Value(parkKey{}).(*ParkClock); ok {
		p.nanos.Add(int64(time.Since(since)))
	}
}

// Total is the time parked so far.
func (p *ParkClock) Total() time.Duration {
	if p == nil {
		return 0
	}
	return time.Duration(p.nanos.Load())
}
