package server

import (
	"context"
	"log/slog"
	"sync"

	"golang.org/x/sys/unix"
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
//
// Counting bytes is not enough to bound memory in Go: a request buffer
// given back to the collector stays in the heap until a collection, and
// the collector lets the heap grow to twice what is live (GOGC=100), so
// 64 MiB of requests in flight made the broker's resident set grow by
// ~150 MiB. Produce requests, nearly all of the bytes, therefore take
// their buffer from an arena of exactly the bound, mapped outside the Go
// heap: a buffer is reusable the moment its request is handled (the
// produce handler keeps nothing of the request's bytes once it returns:
// the batches are written to the log and only their headers kept), so the
// memory behind requests in flight never exceeds the bound, with no
// garbage and no collector involved. A request waits until both the bytes
// and a contiguous run of the arena are free. The arena's pages become
// resident as requests use them and are given back to the kernel when the
// arena empties after holding more than arenaReleaseMin. Other requests
// (small, and their handlers may keep slices of them: group metadata)
// are counted the same but allocated on the heap. A larger-than-bound
// request, or a broker whose arena could not be mapped, uses the heap too.
//
// debug.SetMemoryLimit derived from the bound would also hold the heap
// down, but it is process-wide: the collector would run whenever anything
// (fetch sessions, group state, the cleaner's buffers) neared a limit set
// for requests, and GOMEMLIMIT is the operator's setting, not this one's.
type requestPool struct {
	limit int64 // <= 0: no bound
	// arena holds produce request bodies: limit bytes mapped at start
	// (nil when unbounded or the mapping failed).
	arena []byte

	// mu guards inUse, free, touched and freed.
	mu    sync.Mutex
	inUse int64
	// free lists the arena's unused runs by offset, adjacent runs joined.
	free []extent
	// touched is the end of the highest run handed out since the arena's
	// pages were last given back.
	touched int64
	// freed is closed and replaced whenever bytes are returned.
	freed chan struct{}
}

// arenaReleaseMin is how much of the arena must have been used for its
// pages to be given back when it empties: below it, a quiet broker's few
// resident pages are not worth a system call per request.
const arenaReleaseMin = 4 << 20

// maxArena bounds the address space mapped for the arena; a larger bound
// is enforced by counting alone, with heap buffers.
const maxArena = 1 << 40

// extent is a run of the arena: off and len in bytes.
type extent struct{ off, len int64 }

// poolBuf is what a request took from the pool: size bytes, and with a
// bound the buffer to read its body into (len 0, cap size), at off in the
// arena or on the heap (off -1).
type poolBuf struct {
	size int64
	buf  []byte
	off  int64
}

func newRequestPool(limit int64, logger *slog.Logger) *requestPool {
	p := &requestPool{limit: limit, freed: make(chan struct{})}
	if limit <= 0 || limit > maxArena {
		return p
	}
	arena, err := unix.Mmap(-1, 0, int(limit), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		logger.Warn("queued.max.request.bytes: cannot map the request arena; produce requests use the heap, which may hold up to twice the bound", "bytes", limit, "err", err)
		return p
	}
	p.arena = arena
	p.free = []extent{{0, limit}}
	return p
}

// poolAdmits is the byte rule: a request of size bytes may be read now.
func poolAdmits(inUse, size, limit int64) bool {
	return limit <= 0 || inUse == 0 || inUse+size <= limit
}

// firstFit finds the first free run of at least size bytes and takes size
// bytes from its start; ok is false when no run is long enough.
func firstFit(free []extent, size int64) (off int64, rest []extent, ok bool) {
	for i, e := range free {
		if e.len < size {
			continue
		}
		if e.len == size {
			return e.off, append(free[:i], free[i+1:]...), true
		}
		free[i] = extent{e.off + size, e.len - size}
		return e.off, free, true
	}
	return 0, free, false
}

// freeRun returns run e to free, kept sorted by offset with adjacent runs
// joined.
func freeRun(free []extent, e extent) []extent {
	i := 0
	for i < len(free) && free[i].off < e.off {
		i++
	}
	free = append(free, extent{})
	copy(free[i+1:], free[i:])
	free[i] = e
	if i+1 < len(free) && free[i].off+free[i].len == free[i+1].off {
		free[i].len += free[i+1].len
		free = append(free[:i+1], free[i+2:]...)
	}
	if i > 0 && free[i-1].off+free[i-1].len == free[i].off {
		free[i-1].len += free[i].len
		free = append(free[:i], free[i+1:]...)
	}
	return free
}

// bounded tells whether the pool limits anything.
func (p *requestPool) bounded() bool { return p.limit > 0 }

// acquire waits until size bytes may be taken and takes them; false if
// ctx ended first. With a bound it returns the buffer to read the request
// into: from the arena when reusable (the handler keeps nothing of the
// request once it returns) and the arena has it, else from the heap.
func (p *requestPool) acquire(ctx context.Context, size int64, reusable bool) (poolBuf, bool) {
	if !p.bounded() {
		return poolBuf{off: -1}, true
	}
	useArena := reusable && p.arena != nil && size > 0 && size <= p.limit
	for {
		p.mu.Lock()
		if poolAdmits(p.inUse, size, p.limit) {
			if !useArena {
				p.inUse += size
				p.mu.Unlock()
				return poolBuf{size: size, buf: make([]byte, 0, size), off: -1}, true
			}
			off, rest, ok := firstFit(p.free, size)
			if ok {
				p.free = rest
				p.inUse += size
				p.touched = max(p.touched, off+size)
				p.mu.Unlock()
				return poolBuf{size: size, buf: p.arena[off : off : off+size], off: off}, true
			}
		}
		freed := p.freed
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return poolBuf{}, false
		case <-freed:
		}
	}
}

// release returns what acquire took; the buffer must not be used after.
func (p *requestPool) release(b poolBuf) {
	if !p.bounded() || b.size == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inUse -= b.size
	if b.off >= 0 {
		p.free = freeRun(p.free, extent{b.off, b.size})
		if len(p.free) == 1 && p.free[0].len == p.limit && p.touched >= arenaReleaseMin {
			// Empty: give the pages back (they read as zeros if used
			// again).
			_ = unix.Madvise(p.arena[:p.touched], unix.MADV_DONTNEED)
			p.touched = 0
		}
	}
	close(p.freed)
	p.freed = make(chan struct{})
}
