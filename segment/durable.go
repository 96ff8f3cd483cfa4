package segment

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kbroker/kbroker/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// Durable appends (kbroker.acks.fsync): a write is acknowledged only once
// it is on stable storage. SyncTo is a group commit: one caller at a time
// runs an fdatasync round that covers everything appended when the round
// began, and callers arriving meanwhile wait for it and then, if it did not
// cover their offset, share the next round. Under load each round covers
// every append that arrived during the previous one, so the number of
// fsyncs per second stays bounded by the disk's fsync latency rather than
// growing with the request rate.
//
// Only the .log data is synced: the indexes above the recovery point are
// rebuilt from the .log by crash recovery (Open), so the recovery point
// itself does not move here (it moves on roll, Flush and Close, which sync
// the indexes too). A segment created since the last round also needs its
// directory entry synced, or the file could vanish with the power; and the
// first round of a Log syncs the log dir, which holds the partition
// directory's own entry.

// durableState is the group commit's bookkeeping, guarded by Log.mu except
// inFlight, which has its own lock (a round runs without Log.mu).
type durableState struct {
	// end: offsets below it were fdatasynced in a round that began at
	// truncation generation gen; a truncation since makes it void.
	end int64
	gen uint64
	// dirBase and dirGen: the directory entry of every segment with a
	// base offset at or below dirBase, created at truncation generation
	// dirGen or earlier, is known synced.
	dirBase int64
	dirGen  uint64
	// parentSynced: the partition directory's own entry in its log dir
	// was synced by a round of this Log (Open creates the directory; a
	// durable first record must not vanish with it).
	parentSynced bool
	// rounds counts the sync rounds that completed.
	rounds uint64
	// inFlight is closed when the running round ends; nil when none runs.
	inFlight chan struct{}
}

// SyncRounds returns how many durable sync rounds (each one fdatasync per
// segment file it covered) have completed: with group commit, far fewer
// than the SyncTo calls under concurrent load.
func (l *Log) SyncRounds() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.durable.rounds
}

// DurableEnd returns the offset below which every appended record is known
// to be on stable storage: the end of the last sync round, or the recovery
// point, whichever is higher.
func (l *Log) DurableEnd() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.durableEndLocked()
}

func (l *Log) durableEndLocked() int64 {
	end := l.recoveryPoint
	if l.durable.gen == l.truncations {
		end = max(end, l.durable.end)
	}
	return min(end, l.endOffsetLocked())
}

// SyncTo returns once every offset below offset is on stable storage
// (DurableEnd() >= offset), running or joining fdatasync rounds as needed.
// It fails when ctx ends, when a sync fails, or when the log no longer
// reaches offset (truncated meanwhile).
func (l *Log) SyncTo(ctx context.Context, offset int64) error {
	for {
		l.mu.RLock()
		closed, durable, leo := l.closed, l.durableEndLocked(), l.endOffsetLocked()
		l.mu.RUnlock()
		switch {
		case closed:
			return l.errorf("sync to %d: %w", offset, ErrClosed)
		case durable >= offset:
			return nil
		case leo < offset:
			return l.errorf("sync to %d: the log ends at %d: %w", offset, leo, ErrTruncated)
		}
		l.syncMu.Lock()
		if ch := l.durable.inFlight; ch != nil {
			l.syncMu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return l.errorf("sync to %d: %w", offset, ctx.Err())
			}
		}
		ch := make(chan struct{})
		l.durable.inFlight = ch
		l.syncMu.Unlock()

		err := l.syncRound()

		l.syncMu.Lock()
		l.durable.inFlight = nil
		l.syncMu.Unlock()
		close(ch)
		if err != nil {
			return err
		}
	}
}

// syncRound fdatasyncs, without holding mu, the .log files that may hold
// offsets between the durable end and the log end offset as of its start,
// and the directory when a segment was created since the last round; then
// moves the durable end unless the log was truncated or closed meanwhile.
func (l *Log) syncRound() error {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return l.errorf("sync: %w", ErrClosed)
	}
	from, upTo, gen := l.durableEndLocked(), l.endOffsetLocked(), l.truncations
	var files []*os.File
	var segs []*segment
	for i, s := range l.segments {
		if s.base >= upTo && i > 0 {
			break
		}
		if i+1 < len(l.segments) && l.segments[i+1].base <= from {
			continue
		}
		segs = append(segs, s)
	}
	active := l.activeLocked().base
	needDir := l.durable.dirGen != gen || active > l.durable.dirBase
	needParent := !l.durable.parentSynced
	for _, s := range segs {
		// A duplicate descriptor: a concurrent truncation or retention may
		// close the segment's own while the round runs without mu.
		f, err := s.dupLog()
		if err != nil {
			l.mu.RUnlock()
			closeAll(files)
			return l.errorf("sync: %w", err)
		}
		files = append(files, f)
	}
	l.mu.RUnlock()
	if from >= upTo && !needDir && !needParent {
		closeAll(files)
		return nil
	}

	var syncErr error
	for _, f := range files {
		if err := l.journal.syncFile(f, fdatasync); err != nil && syncErr == nil {
			syncErr = fmt.Errorf("fdatasync %s: %w", f.Name(), err)
		}
	}
	closeAll(files)
	if syncErr == nil && needDir {
		if err := atomicfile.SyncDir(l.dir); err != nil {
			syncErr = fmt.Errorf("fsync dir: %w", err)
		}
	}
	if syncErr == nil && needParent {
		if err := atomicfile.SyncDir(filepath.Dir(l.dir)); err != nil {
			syncErr = fmt.Errorf("fsync log dir: %w", err)
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.truncations != gen {
		// The round's files may be gone; its result says nothing about
		// the log now. Callers loop and run another round.
		return nil
	}
	if syncErr != nil {
		return l.errorf("sync: %w", syncErr)
	}
	l.durable.rounds++
	if l.durable.gen != gen || upTo > l.durable.end {
		l.durable.end, l.durable.gen = upTo, gen
	}
	if needDir {
		l.durable.dirBase, l.durable.dirGen = active, gen
	}
	if needParent {
		l.durable.parentSynced = true
	}
	return nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// fdatasync flushes f's data and the metadata needed to read it back (its
// size), not its timestamps.
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var syncErr error
	if err := rc.Control(func(fd uintptr) {
		for {
			syncErr = unix.Fdatasync(int(fd))
			if syncErr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return syncErr
}
