package replica

// Moving a replica between log dirs (AlterReplicaLogDirs), as Kafka's
// future replicas (KIP-113): the log is copied, batch by batch with its
// offsets, epochs and aborted-transaction entries, into
// "<topic>-<partition>.<id>-future" in the destination dir while the
// partition goes on serving; once the copy has caught up, the partition's
// lock is taken (appends wait), the rest is copied, and the future log
// replaces the current one.
//
// Crash safety of the swap: the future log is closed (flushed) first, then
// the current directory is renamed to "-delete" (synced), then the future
// directory to "<topic>-<partition>" (synced). At start, a future log with
// no current log anywhere is a swap that got past its first rename and is
// completed; a future log next to a current one is a move that had not
// finished: it is dropped, and the move starts again when the partition
// opens. So at every point exactly one whole copy of the log is taken.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/kbroker/kbroker/internal/atomicfile"
	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrReplicaNotHosted: AlterLogDir named a partition with no replica on
// this broker (the caller tells REPLICA_NOT_AVAILABLE from
// UNKNOWN_TOPIC_OR_PARTITION by the cluster view).
var ErrReplicaNotHosted = errors.New("no replica of the partition on this broker")

// moveReadBytes bounds one read of the current log while copying it.
const moveReadBytes = 1 << 20

// logMove is one replica being moved to another log dir.
type logMove struct {
	tp   TopicPartition
	dest string // the destination log dir
	// cancel stops the copy; the future log is deleted unless keep.
	cancel context.CancelFunc
	done   chan struct{}

	// mu guards future and keep.
	mu     sync.Mutex
	future *segment.Log
	keep   bool
}

func (mv *logMove) futureLog() *segment.Log {
	mv.mu.Lock()
	defer mv.mu.Unlock()
	return mv.future
}

// scanFutures lists the future logs in dir by partition.
func scanFutures(dir string) (map[TopicPartition]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list log dir %s: %w", dir, err)
	}
	out := map[TopicPartition]string{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if tp, ok := parseFutureDir(e.Name()); ok {
			if prev, dup := out[tp]; dup {
				return nil, fmt.Errorf("duplicate future log directories for %s: %s and %s", tp, prev, filepath.Join(dir, e.Name()))
			}
			out[tp] = filepath.Join(dir, e.Name())
		}
	}
	return out, nil
}

// futureAction is what Open does with a future log found at start.
type futureAction int

const (
	// futureResume: the current log is still there, the move had not
	// finished: drop the future log and move again.
	futureResume futureAction = iota
	// futurePromote: the current log was already renamed for deletion:
	// the future log is the partition's log.
	futurePromote
	// futureConflict: more than one future log and no current one:
	// which is whole cannot be told.
	futureConflict
)

// decideFuture is the start-up decision for a partition's future logs.
func decideFuture(hasCurrent bool, futures int) futureAction {
	switch {
	case hasCurrent:
		return futureResume
	case futures == 1:
		return futurePromote
	}
	return futureConflict
}

// settleFutures applies decideFuture to the future logs found at Open,
// before any partition opens.
func (m *Manager) settleFutures(futures map[TopicPartition][]string) error {
	for tp, paths := range futures {
		_, hasCurrent := m.location[tp]
		switch decideFuture(hasCurrent, len(paths)) {
		case futureResume:
			for _, path := range paths {
				if err := segment.RemoveDir(path); err != nil {
					return fmt.Errorf("remove unfinished future log %s: %w", path, err)
				}
			}
			m.resumeMoves[tp] = filepath.Dir(paths[0])
			m.logger.Info("dropped the future log of an unfinished move between log dirs; it starts again when the partition opens",
				"partition", tp.String(), "from", m.location[tp], "to", filepath.Dir(paths[0]))
		case futurePromote:
			dir := filepath.Dir(paths[0])
			current := filepath.Join(dir, tp.String())
			if err := os.Rename(paths[0], current); err != nil {
				return fmt.Errorf("complete the move of %s to %s: %w", tp, dir, err)
			}
			if err := atomicfile.SyncDir(dir); err != nil {
				return fmt.Errorf("complete the move of %s to %s: %w", tp, dir, err)
			}
			id, _, _ := readPartitionTopicID(current)
			m.stored[tp] = id
			m.location[tp] = dir
			m.logger.Info("completed the move of a replica between log dirs that a restart interrupted", "partition", tp.String(), "log_dir", dir)
		default:
			return fmt.Errorf("several future logs of %s and no current one: %v; keep the newest and delete the others", tp, paths)
		}
	}
	return nil
}

// AlterLogDir moves tp's replica to log dir dir (AlterReplicaLogDirs), as
// Kafka's ReplicaManager.alterReplicaLogDirs: dir must be a configured log
// dir as DescribeLogDirs names it (else LOG_DIR_NOT_FOUND) and online
// (else KAFKA_STORAGE_ERROR). A replica not on this broker gets
// ErrReplicaNotHosted, and dir is remembered for when it is created. A
// move to another dir in progress is abandoned; a replica already in dir,
// or already moving there, is left alone. The move itself runs in the
// background.
func (m *Manager) AlterLogDir(tp TopicPartition, dir string) error {
	if futureDirNameLength(tp) > maxLogDirNameLength {
		return fmt.Errorf("%w: the topic name is too long to move %s", kerr.InvalidTopicException, tp)
	}
	if !slices.Contains(m.dirs, dir) {
		return fmt.Errorf("%w: log dir %s is not found in the config", kerr.LogDirNotFound, dir)
	}
	if err := m.dirError(dir); err != nil {
		return fmt.Errorf("%w: log directory %s is offline: %v", kerr.KafkaStorageError, dir, err)
	}
	for {
		m.mu.Lock()
		if mark, opening := m.opening[tp]; opening {
			// Moved once open, from wherever it was opened.
			m.mu.Unlock()
			<-mark.done
			continue
		}
		p, ok := m.partitions[tp]
		if !ok {
			if _, stored := m.stored[tp]; !stored {
				m.preferred[tp] = dir
			}
			m.mu.Unlock()
			return ErrReplicaNotHosted
		}
		if mv := m.moves[tp]; mv != nil {
			if mv.dest == dir {
				m.mu.Unlock()
				return nil
			}
			m.mu.Unlock()
			mv.cancel()
			<-mv.done
			continue
		}
		if filepath.Dir(p.log().Dir()) != dir {
			m.startMoveLocked(p, dir)
		}
		m.mu.Unlock()
		return nil
	}
}

// cancelMove stops a move of tp, deleting its future log, and waits for it.
func (m *Manager) cancelMove(tp TopicPartition) {
	m.mu.RLock()
	mv := m.moves[tp]
	m.mu.RUnlock()
	if mv != nil {
		mv.cancel()
		<-mv.done
	}
}

// startMoveLocked starts moving p to dest.
func (m *Manager) startMoveLocked(p *Partition, dest string) {
	ctx, cancel := context.WithCancel(m.moveCtx)
	mv := &logMove{tp: p.tp, dest: dest, cancel: cancel, done: make(chan struct{})}
	m.moves[p.tp] = mv
	m.moveWG.Add(1)
	go func() {
		defer m.moveWG.Done()
		defer close(mv.done)
		defer cancel()
		m.runMove(ctx, p, mv)
		m.mu.Lock()
		if m.moves[p.tp] == mv {
			delete(m.moves, p.tp)
		}
		m.mu.Unlock()
	}()
}

// runMove copies p's log into a future log in mv.dest and swaps it in.
func (m *Manager) runMove(ctx context.Context, p *Partition, mv *logMove) {
	var id [16]byte
	rand.Read(id[:])
	path := filepath.Join(mv.dest, futureDirName(p.tp, hex.EncodeToString(id[:])))
	logger := m.logger.With("partition", p.tp.String(), "to", mv.dest)
	logger.Info("moving replica to another log dir", "from", filepath.Dir(p.log().Dir()))
	err := m.copyAndSwap(ctx, p, mv, path)
	if err == nil {
		return
	}
	future := mv.futureLog()
	if future != nil {
		if cerr := future.Close(); cerr != nil {
			logger.Warn("closing the future log failed", "err", cerr)
		}
	}
	mv.mu.Lock()
	keep := mv.keep
	mv.mu.Unlock()
	if keep {
		// The swap failed past its first rename: the future log may be
		// the only whole copy. The next start settles it.
		logger.Error("replica move failed during the swap; the next start completes it", "err", err)
		return
	}
	if ctx.Err() != nil && m.moveCtx.Err() != nil {
		// The broker is shutting down: the future log stays and the
		// move starts again with the next run.
		logger.Info("replica move stopped by shutdown; it starts again with the next run")
		return
	}
	if rerr := segment.RemoveDir(path); rerr != nil {
		logger.Warn("deleting the future log failed", "path", path, "err", rerr)
	}
	if ctx.Err() != nil {
		logger.Info("replica move abandoned", "reason", context.Cause(ctx))
		return
	}
	logger.Error("replica move failed; the replica stays where it is", "err", err)
}

// copyAndSwap is the move: copy while the partition serves, then swap
// under its lock.
func (m *Manager) copyAndSwap(ctx context.Context, p *Partition, mv *logMove, path string) error {
	p.mu.Lock()
	cfg, topicID := p.cfg, p.topicID
	p.mu.Unlock()
	future, err := segment.Open(path, cfg.Log, true, p.logger.With("future", true))
	if err != nil {
		return fmt.Errorf("create future log: %w", err)
	}
	mv.mu.Lock()
	mv.future = future
	mv.mu.Unlock()
	if topicID != ([16]byte{}) {
		if err := writePartitionTopicID(path, topicID); err != nil {
			return fmt.Errorf("write partition.metadata of the future log: %w", err)
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		cur := p.log()
		caughtUp, err := copyLogTail(cur, future, moveReadBytes)
		if err != nil {
			if errors.Is(err, segment.ErrClosed) && ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if !caughtUp {
			continue
		}
		swapped, err := m.trySwap(ctx, p, mv, future, path)
		if err != nil || swapped {
			return err
		}
		// Appends came between the catch-up and the lock, or the
		// partition is going: copy on (ctx tells the latter).
	}
}

// trySwap takes p's lock and, if the future log is still caught up (the
// few batches appended meanwhile are copied under the lock), makes it the
// partition's log. It reports whether it swapped.
func (m *Manager) trySwap(ctx context.Context, p *Partition, mv *logMove, future *segment.Log, path string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	cur := p.log()
	// Only appends take the lock's place in the queue meanwhile: what is
	// left is small. Retention may still raise the start offset.
	for range 64 {
		caughtUp, err := copyLogTail(cur, future, moveReadBytes)
		if err != nil {
			return false, err
		}
		if caughtUp {
			break
		}
	}
	if future.EndOffset() != cur.EndOffset() {
		return false, nil
	}
	if err := syncLogBounds(cur, future); err != nil {
		return false, err
	}
	tp := p.tp
	src := cur.Dir()
	dst := filepath.Join(mv.dest, tp.String())
	if err := future.Close(); err != nil {
		return false, fmt.Errorf("close future log: %w", err)
	}
	// From here the partition's log is closed: any failure is a storage
	// failure of the partition.
	fail := func(err error) (bool, error) {
		mv.mu.Lock()
		mv.keep = true
		mv.mu.Unlock()
		err = fmt.Errorf("swap in the moved log of %s: %w", tp, err)
		if p.logDirFailed != nil {
			p.logDirFailed(filepath.Dir(src), err)
		}
		return false, err
	}
	if err := cur.Close(); err != nil {
		return fail(fmt.Errorf("close current log: %w", err))
	}
	var suffix [8]byte
	rand.Read(suffix[:])
	doomed := src + "." + hex.EncodeToString(suffix[:]) + segment.DeleteSuffix
	if err := os.Rename(src, doomed); err != nil {
		return fail(err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(src)); err != nil {
		return fail(err)
	}
	if err := os.Rename(path, dst); err != nil {
		return fail(err)
	}
	if err := atomicfile.SyncDir(mv.dest); err != nil {
		return fail(err)
	}
	moved, err := segment.Open(dst, p.cfg.Log, true, p.logger)
	if err != nil {
		return fail(err)
	}
	p.logPtr.Store(moved)
	mv.mu.Lock()
	mv.future = nil
	mv.mu.Unlock()
	p.snapshotLocked(moved.EndOffset())
	p.notifyLocked()
	p.logger.Info("replica moved to another log dir", "from", filepath.Dir(src), "to", mv.dest,
		"log_end_offset", moved.EndOffset(), "size", moved.Size())
	// Both counted in moveWG (the move holds a count, so adding is
	// safe), so that Close waits for them: they write in the log dirs.
	m.moveWG.Add(2)
	go func() {
		defer m.moveWG.Done()
		if err := os.RemoveAll(doomed); err != nil {
			p.logger.Warn("deleting the moved replica's old log failed (removed at the next start)", "path", doomed, "err", err)
		}
	}()
	// Done under p.mu: Manager.mu is never taken while holding it, so the
	// location is updated by the caller's goroutine after.
	go func() {
		defer m.moveWG.Done()
		m.afterMove(tp, mv.dest)
	}()
	return true, nil
}

// afterMove records tp's new log dir and rewrites the checkpoints.
func (m *Manager) afterMove(tp TopicPartition, dest string) {
	m.mu.Lock()
	if _, ok := m.partitions[tp]; ok {
		m.location[tp] = dest
	}
	m.mu.Unlock()
	if err := m.writeHWCheckpoint(); err != nil {
		m.logger.Warn("writing the high watermark checkpoint after a move failed", "partition", tp.String(), "err", err)
	}
}

// copyLogTail copies into future the batches cur has beyond future's end
// (at most maxBytes of them), first making future a prefix of cur again if
// cur changed under it: a truncation (found by leader epochs, as Kafka's
// future replicas do) or a log start raised past what was copied starts
// the copy over at cur's log start. It reports whether future has caught
// up with cur's end.
func copyLogTail(cur, future *segment.Log, maxBytes int) (bool, error) {
	if !futureConsistent(cur, future) || cur.StartOffset() > future.EndOffset() {
		if err := future.TruncateFullyAndStartAt(cur.StartOffset()); err != nil {
			return false, fmt.Errorf("restart the future log: %w", err)
		}
	}
	if err := raiseStart(cur, future); err != nil {
		return false, err
	}
	from, end := future.EndOffset(), cur.EndOffset()
	if from >= end {
		return true, nil
	}
	data, err := cur.Read(from, maxBytes, end, true)
	if err != nil {
		if errors.Is(err, segment.ErrOffsetOutOfRange) {
			return false, nil // retention moved the start: the next round restarts there
		}
		return false, fmt.Errorf("read the current log at %d: %w", from, err)
	}
	batches, headers, err := recordbatch.Split(data)
	if err != nil {
		return false, fmt.Errorf("read the current log at %d: %w", from, err)
	}
	if len(batches) == 0 {
		// Nothing complete below the end: the log ends in offsets no
		// batch holds (a compacted tail). The future log cannot end
		// there too without a batch; the move cannot complete.
		return false, fmt.Errorf("the current log ends at %d with no batch from %d", end, from)
	}
	last := headers[len(headers)-1].NextOffset()
	aborts, err := cur.CollectAbortedTxns(from, last)
	if err != nil {
		return false, fmt.Errorf("read aborted transactions of the current log: %w", err)
	}
	for i, batch := range batches {
		h := headers[i]
		if h.NextOffset() <= future.EndOffset() {
			continue
		}
		if fEnd := future.EndOffset(); h.BaseOffset < fEnd {
			if fEnd != future.StartOffset() {
				// A batch across the future log's end: the logs
				// differ (cur was rewritten meanwhile). Start over
				// next round.
				return false, future.TruncateFullyAndStartAt(cur.StartOffset())
			}
			// The log start is inside this batch (DeleteRecords): the
			// empty future log starts at the batch, as Kafka's
			// appendRecordsToFollowerOrFutureReplica does, and its
			// start is raised after.
			if err := future.TruncateFullyAndStartAt(h.BaseOffset); err != nil {
				return false, fmt.Errorf("restart the future log: %w", err)
			}
		}
		var abort *segment.AbortedTxn
		for j := range aborts {
			if aborts[j].LastOffset == h.BaseOffset {
				abort = &aborts[j]
				break
			}
		}
		if err := future.AppendAsFollower(batch, h, abort); err != nil {
			return false, fmt.Errorf("append to the future log: %w", err)
		}
	}
	if err := raiseStart(cur, future); err != nil {
		return false, err
	}
	return future.EndOffset() >= cur.EndOffset(), nil
}

// raiseStart raises future's log start to cur's as far as future's end
// allows.
func raiseStart(cur, future *segment.Log) error {
	if s := cur.StartOffset(); s > future.StartOffset() && s <= future.EndOffset() {
		if err := future.SetStartOffset(s); err != nil {
			return fmt.Errorf("raise the future log's start: %w", err)
		}
	}
	return nil
}

// futureConsistent tells whether future is still a prefix of cur, by
// Kafka's leader epoch rule: records of the same epoch at the same offset
// are the same records. The future log's latest epoch must end, in cur,
// no earlier than the future log does.
func futureConsistent(cur, future *segment.Log) bool {
	fEnd := future.EndOffset()
	if fEnd > cur.EndOffset() {
		return false
	}
	if fEnd == future.StartOffset() {
		return true
	}
	epoch, ok := future.LatestEpoch()
	if !ok {
		return true // batches without epochs: nothing to compare by
	}
	found, end := cur.EndOffsetForEpoch(epoch)
	return found == epoch && end >= fEnd
}

// syncLogBounds gives future, caught up with cur, cur's log start offset
// and the leader epochs cur recorded with no batch yet (a leader elected
// since the last append).
func syncLogBounds(cur, future *segment.Log) error {
	if err := raiseStart(cur, future); err != nil {
		return err
	}
	for _, e := range cur.EpochEntries() {
		latest, ok := future.LatestEpoch()
		if ok && latest >= e.Epoch {
			continue
		}
		if err := future.AssignEpoch(e.Epoch, e.StartOffset); err != nil {
			return fmt.Errorf("copy leader epoch %d to the future log: %w", e.Epoch, err)
		}
	}
	return future.Flush()
}
