package server

import (
	"context"
	"sync"
)

// requestPool is Kafka's memory pool for queued.max.request.bytes: the
// bytes of the requests read and not yet handled, across every
// connection. A connection reads a request's size first and takes that
// many bytes from the pool before reading its body; while the pool has
// not enough left it waits (Kafka mutes the channel), so many clients
// sending large requests at once hold at most the bound. A request is
// admitted alone when it is larger than the whole bound, so it cannot wait
// forever. Kafka's pool for the broker is not strict (it admits a request
// while any memory is left, so it may overshoot by one request); this one
// is, but for that case.
type requestPool struct {
	limit int64 // <= 0: no bound

	// mu guards inUse and freed.
	mu    sync.Mutex
	inUse int64
	// freed is closed and replaced whenever bytes are returned.
	freed chan struct{}
}

func newRequestPool(limit int64) *requestPool {
	return &requestPool{limit: limit, freed: make(chan struct{})}
}

// poolAdmits is the rule: a request of size bytes may be read now.
func poolAdmits(inUse, size, limit int64) bool {
	return limit <= 0 || inUse == 0 || inUse+size <= limit
}

// bounded tells whether the pool limits anything.
func (p *requestPool) bounded() bool { return p.limit > 0 }

// acquire waits until size bytes may be taken and takes them; false if
// ctx ended first.
func (p *requestPool) acquire(ctx context.Context, size int64) bool {
	if !p.bounded() {
		return true
	}
	for {
		p.mu.Lock()
		if poolAdmits(p.inUse, size, p.limit) {
			p.inUse += size
			p.mu.Unlock()
			return true
		}
		freed := p.freed
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-freed:
		}
	}
}

// release returns size bytes taken by acquire.
func (p *requestPool) release(size int64) {
	if !p.bounded() || size == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inUse -= size
	close(p.freed)
	p.freed = make(chan struct{})
}
