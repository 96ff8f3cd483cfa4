package server

import (
	"context"
	"io"
	"log/slog"
	"reflect"
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

func TestFirstFit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		free     []extent
		size     int64
		wantOff  int64
		wantRest []extent
		wantOK   bool
	}{
		{"empty arena", []extent{{0, 100}}, 30, 0, []extent{{30, 70}}, true},
		{"exact run removed", []extent{{0, 10}, {50, 30}}, 10, 0, []extent{{50, 30}}, true},
		{"first long enough", []extent{{0, 10}, {50, 30}, {90, 40}}, 20, 50, []extent{{0, 10}, {70, 10}, {90, 40}}, true},
		{"none long enough though enough in all", []extent{{0, 10}, {50, 10}}, 15, 0, []extent{{0, 10}, {50, 10}}, false},
		{"full", nil, 1, 0, nil, false},
	} {
		off, rest, ok := firstFit(append([]extent(nil), tc.free...), tc.size)
		if ok != tc.wantOK || (ok && off != tc.wantOff) || !reflect.DeepEqual(rest, tc.wantRest) {
			t.Errorf("%s: firstFit = %d, %v, %v; want %d, %v, %v", tc.name, off, rest, ok, tc.wantOff, tc.wantRest, tc.wantOK)
		}
	}
}

func TestFreeRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		free []extent
		run  extent
		want []extent
	}{
		{"into a full arena", nil, extent{10, 5}, []extent{{10, 5}}},
		{"joins the run after", []extent{{15, 5}}, extent{10, 5}, []extent{{10, 10}}},
		{"joins the run before", []extent{{0, 10}}, extent{10, 5}, []extent{{0, 15}}},
		{"joins both", []extent{{0, 10}, {15, 85}}, extent{10, 5}, []extent{{0, 100}}},
		{"between, apart", []extent{{0, 5}, {50, 10}}, extent{20, 5}, []extent{{0, 5}, {20, 5}, {50, 10}}},
		{"last", []extent{{0, 5}}, extent{90, 10}, []extent{{0, 5}, {90, 10}}},
	} {
		if got := freeRun(append([]extent(nil), tc.free...), tc.run); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: freeRun = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// 200 requests of 10 MiB at once through a 64 MiB pool, produce requests
// (arena) and others (heap) mixed: never more than 64 MiB taken, arena
// buffers never overlap (each is filled with its own byte and checked),
// every request gets through, and the arena is whole again after.
func TestRequestPoolBounds(t *testing.T) {
	const size, limit = 10<<20 + 123, 64 << 20
	p := newRequestPool(limit, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if p.arena == nil {
		t.Fatal("no arena mapped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var held, peak atomic.Int64
	var done, inArena atomic.Int32
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pb, ok := p.acquire(ctx, size, i%4 != 0)
			if !ok {
				return
			}
			if cap(pb.buf) != size || len(pb.buf) != 0 {
				t.Errorf("buffer len %d cap %d, want 0 and %d", len(pb.buf), cap(pb.buf), size)
			}
			if pb.off >= 0 {
				inArena.Add(1)
			}
			n := held.Add(size)
			for {
				old := peak.Load()
				if n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
			buf := pb.buf[:size]
			mark := byte(i)
			for j := 0; j < len(buf); j += 4096 {
				buf[j] = mark
			}
			time.Sleep(time.Millisecond) // let others run meanwhile
			for j := 0; j < len(buf); j += 4096 {
				if buf[j] != mark {
					t.Errorf("request %d: its buffer was overwritten at %d", i, j)
					break
				}
			}
			held.Add(-size)
			p.release(pb)
			done.Add(1)
		}()
	}
	wg.Wait()
	if done.Load() != 200 {
		t.Fatalf("%d of 200 requests admitted", done.Load())
	}
	if inArena.Load() != 150 {
		t.Fatalf("%d of the 150 produce requests in the arena", inArena.Load())
	}
	if peak.Load() > limit {
		t.Fatalf("peak %d bytes held, bound %d", peak.Load(), limit)
	}
	if p.inUse != 0 || !reflect.DeepEqual(p.free, []extent{{0, limit}}) {
		t.Fatalf("after: %d bytes taken, free runs %v", p.inUse, p.free)
	}
	if p.touched != 0 {
		t.Fatalf("arena emptied after %d bytes used, pages not given back", p.touched)
	}
}

// A request larger than the bound is admitted alone, from the heap.
func TestRequestPoolOversized(t *testing.T) {
	p := newRequestPool(1<<20, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	small, _ := p.acquire(ctx, 100, true)
	got := make(chan poolBuf, 1)
	go func() {
		big, _ := p.acquire(ctx, 2<<20, true)
		got <- big
	}()
	select {
	case <-got:
		t.Fatal("oversized request admitted beside another")
	case <-time.After(50 * time.Millisecond):
	}
	p.release(small)
	big := <-got
	if big.off != -1 || cap(big.buf) != 2<<20 {
		t.Fatalf("oversized request: off %d cap %d; want heap, 2 MiB", big.off, cap(big.buf))
	}
	p.release(big)
}

// Unbounded, the pool hands out no buffer: the connection keeps its own.
func TestRequestPoolUnbounded(t *testing.T) {
	p := newRequestPool(-1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	pb, ok := p.acquire(context.Background(), 10<<20, true)
	if !ok || pb.buf != nil || p.arena != nil {
		t.Fatalf("unbounded pool: %v, buf %v, arena %d bytes", ok, pb.buf != nil, len(p.arena))
	}
	p.release(pb)
}
