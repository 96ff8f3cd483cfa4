package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPoolAdmits(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		inUse, size, limit int64
		want               bool
	}{
		{0, 10 * mib, -1, true},
		{1 << 40, 10 * mib, 0, true},
		{0, 10 * mib, 64 * mib, true},
		{60 * mib, 4 * mib, 64 * mib, true},
		{60 * mib, 10 * mib, 64 * mib, false},
		{0, 100 * mib, 64 * mib, true}, // larger than the bound: alone
		{1, 100 * mib, 64 * mib, false},
	} {
		if got := poolAdmits(tc.inUse, tc.size, tc.limit); got != tc.want {
			t.Errorf("poolAdmits(%d, %d, %d) = %v", tc.inUse, tc.size, tc.limit, got)
		}
	}
}

// 200 requests of 10 MiB at once through a 64 MiB pool: never more than
// 64 MiB taken, and every one gets through.
func TestRequestPoolBounds(t *testing.T) {
	const size, limit = 10 << 20, 64 << 20
	p := newRequestPool(limit)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var held, peak atomic.Int64
	var done atomic.Int32
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !p.acquire(ctx, size) {
				return
			}
			n := held.Add(size)
			for {
				old := peak.Load()
				if n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
			held.Add(-size)
			p.release(size)
			done.Add(1)
		}()
	}
	wg.Wait()
	if done.Load() != 200 {
		t.Fatalf("%d of 200 requests admitted", done.Load())
	}
	if peak.Load() > limit {
		t.Fatalf("peak %d bytes held, bound %d", peak.Load(), limit)
	}
	if p.inUse != 0 {
		t.Fatalf("%d bytes still taken", p.inUse)
	}
}
