// Package segment keeps the bytes of one partition directory on disk, in
// Kafka's layout: segments named by their 20-digit base offset, each a .log
// of v2 record batches stored byte for byte, a memory-mapped .index (batch
// last offset -> position of the batch start) and a memory-mapped
// .timeindex (max timestamp so far -> offset), plus checkpoint files for
// the leader epoch cache, the log start offset and the recovery point.
//
// A Log appends, reads, rolls, applies retention, truncates (both ends) and
// recovers after a crash. It knows nothing of high watermarks, ISR or acks.
package segment

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kbroker/kbroker/internal/atomicfile"
	"github.com/kbroker/kbroker/recordbatch"
)

var (
	// ErrOffsetOutOfRange is returned (wrapped) by Read when the offset is
	// below the log start offset or above the log end offset.
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrUnexpectedOffset is returned (wrapped) by Append when a batch's
	// base offset is not the log end offset.
	ErrUnexpectedOffset = errors.New("batch base offset is not the log end offset")
	// ErrClosed is returned (wrapped) by operations on a closed Log.
	ErrClosed = errors.New("log closed")
	// ErrTruncated: SyncTo's target is past a log truncated meanwhile
	// (a leader that became a follower): nothing to make durable there.
	ErrTruncated = errors.New("log truncated below the offset")
)

// Defaults used for zero or invalid Config values.
const (
	DefaultSegmentBytes  = 1 << 30
	DefaultMaxIndexBytes = 10 << 20
	minIndexBytes        = 4 * timeIndexEntrySize
)

// Config holds the topic-level log settings (Kafka's names in comments).
// Note that RetentionTime 0 means "delete as soon as possible"; use a
// negative value to keep data forever.
type Config struct {
	SegmentBytes       int64         // log.segment.bytes: roll when the active segment would exceed this
	RollAfter          time.Duration // log.roll.ms: roll when the new batch's max timestamp is this much newer than the segment's first batch's (or, without timestamps, the segment is this old); 0 = never
	RetentionTime      time.Duration // log.retention.ms; <0 = keep forever
	RetentionBytes     int64         // log.retention.bytes; <0 = unlimited
	IndexIntervalBytes int32         // log.index.interval.bytes (4096)
	MaxIndexBytes      int32         // log.index.size.max.bytes (10 MiB): the active segment's index files are sized (sparse) to this and trimmed on roll/close
	FlushMessages      int64         // fsync after this many messages since last flush; <=0 or math.MaxInt64 = leave to OS
	FlushInterval      time.Duration // fsync if this long since last flush (checked on append); 0 = never by time
}

func (c Config) normalized() Config {
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.IndexIntervalBytes < 0 {
		c.IndexIntervalBytes = 0
	}
	if c.MaxIndexBytes <= 0 {
		c.MaxIndexBytes = DefaultMaxIndexBytes
	}
	if c.IndexIntervalBytes > 0 {
		// The active segment's index files are sized (sparse) and
		// mapped to this, so never size them beyond what a full segment
		// can use: one entry per index interval, a few more for rolls
		// and closes, 12 bytes each (the time index's size; the offset
		// index's is smaller). It changes no roll (the index cannot
		// fill before the segment does) and keeps the mappings small.
		need := 12 * (c.SegmentBytes/int64(c.IndexIntervalBytes) + 4)
		if need < int64(c.MaxIndexBytes) {
			c.MaxIndexBytes = int32(need)
		}
	}
	c.MaxIndexBytes = max(c.MaxIndexBytes, minIndexBytes)
	return c
}

// Log is the set of segments of one partition directory.
//
// Lock order: Log.mu only; no other lock is taken while holding it. Writers
// (Append, roll, truncation, retention, Close) hold mu exclusively; Read,
// OffsetForTimestamp, ScanHeaders and the accessors hold it shared, so reads
// copy bytes with pread concurrently with each other but not with appends.
// fsync after a roll runs in a goroutine without mu.
type Log struct {
	dir    string
	logger *slog.Logger
	now    func() time.Time // the clock; tests may replace it right after Open
	// journal is the test-only sync journal (WithSyncJournal); nil: none.
	journal *SyncJournal

	// flushers counts roll-time flush goroutines; Close waits for them
	// without holding mu.
	flushers sync.WaitGroup

	// mu guards every field below, the segments' state and their files.
	mu            sync.RWMutex
	cfg           Config
	segments      []*segment // by base offset; never empty while open; the last is active
	startOffset   int64      // log start offset; segments[0].base <= startOffset <= end offset
	epochs        epochCache
	recoveryPoint int64     // offsets below it are fsynced
	persistedRP   int64     // recovery point last written to its checkpoint (-1 none)
	unflushed     int64     // messages appended since the last flush
	lastFlush     time.Time // time of the last flush
	truncations   uint64    // bumped by every truncation, so stale flushers do not advance recoveryPoint
	truncatedTo   int64     // lowest truncation target since TakeTruncatedTo; math.MaxInt64 none
	closed        bool
	// txnCompleteBelow: every abort marker below it has its .txnindex
	// entry (TxnIndexCompleteBelow).
	txnCompleteBelow int64
	// snapshots are the offsets of the producer state snapshot files in
	// the directory, ascending.
	snapshots []int64
	// unsyncedSnapshots are the snapshots written above the recovery
	// point and not fsynced yet (WriteProducerSnapshot); a flush that
	// moves the recovery point past one fsyncs it first.
	unsyncedSnapshots map[int64]bool
	// epochsUnsynced: an epoch assignment rewrote the leader epoch
	// checkpoint without fsync since the last durable write of it;
	// epochWrites counts those rewrites.
	epochsUnsynced bool
	epochWrites    uint64
	// durable is the group commit of durable appends (durable.go).
	durable durableState

	// syncMu guards durable.inFlight only: a sync round runs without mu.
	syncMu sync.Mutex
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// SetConfig changes the settings; they apply from the next append, roll,
// or retention run. A new MaxIndexBytes applies to segments created later.
func (l *Log) SetConfig(cfg Config) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = cfg.normalized()
}

// StartOffset is the log start offset.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.startOffset
}

// EndOffset is the log end offset (LEO), the next offset to be written.
func (l *Log) EndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.endOffsetLocked()
}

func (l *Log) endOffsetLocked() int64 { return l.activeLocked().next }

func (l *Log) activeLocked() *segment { return l.segments[len(l.segments)-1] }

// Size is the total size in bytes of all segments' .log files.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.sizeLocked()
}

func (l *Log) sizeLocked() int64 {
	var n int64
	for _, s := range l.segments {
		n += s.size
	}
	return n
}

// NumSegments is the number of segments (for tests and metrics).
func (l *Log) NumSegments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segments)
}

func (l *Log) errorf(format string, args ...any) error {
	return fmt.Errorf("segment %s: "+format, append([]any{l.dir}, args...)...)
}

// Append writes one whole, already validated v2 batch whose base offset must
// equal EndOffset(). It rolls first if needed, maintains the indexes, adds a
// leader epoch entry when the batch carries a newer epoch, and fsyncs when
// FlushMessages or FlushInterval say so.
func (l *Log) Append(batch []byte, h recordbatch.Header) error {
	return l.append(batch, h, nil)
}

// AppendAsFollower is Append for a batch copied from the leader, with the
// .txnindex entry of the transaction it aborts when abort is set. Its base
// offset may lie above the log end offset: where the leader's log cleaner
// removed batches (Kafka's appendAsFollower takes any increasing offsets).
// A segment rolled for such a batch starts at the batch's base offset.
func (l *Log) AppendAsFollower(batch []byte, h recordbatch.Header, abort *AbortedTxn) error {
	if abort != nil && abort.LastOffset != h.BaseOffset {
		return l.errorf("append abort marker at %d with an index entry for %d", h.BaseOffset, abort.LastOffset)
	}
	return l.appendChecked(batch, h, abort, true)
}

// append is Append, with the .txnindex entry of an abort marker when abort
// is set.
func (l *Log) append(batch []byte, h recordbatch.Header, abort *AbortedTxn) error {
	return l.appendChecked(batch, h, abort, false)
}

// appendChecked appends at the log end offset, or above it with gapOK.
func (l *Log) appendChecked(batch []byte, h recordbatch.Header, abort *AbortedTxn, gapOK bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.errorf("append: %w", ErrClosed)
	}
	if len(batch) != h.Size() {
		return l.errorf("append: batch is %d bytes, header says %d", len(batch), h.Size())
	}
	leo := l.endOffsetLocked()
	if h.BaseOffset != leo && !(gapOK && h.BaseOffset > leo) {
		return l.errorf("append at offset %d, log end offset %d: %w", h.BaseOffset, leo, ErrUnexpectedOffset)
	}
	now := l.now()
	if l.shouldRollLocked(h, now) {
		base := leo
		if gapOK {
			base = h.BaseOffset
		}
		if err := l.rollToLocked(now, base); err != nil {
			return err
		}
	}
	if err := l.activeLocked().append(batch, h, l.cfg.IndexIntervalBytes); err != nil {
		return l.errorf("append: %w", err)
	}
	if abort != nil {
		// A failure leaves the marker without its entry in a log that
		// goes on: the caller treats it as the storage failure it is.
		if err := l.activeLocked().txnIdx.append(*abort); err != nil {
			return l.errorf("append: %w", err)
		}
	}
	if e := h.PartitionLeaderEpoch; e >= 0 {
		if latest, ok := l.epochs.latest(); !ok || e > latest.Epoch {
			// The batch is in the log already, so a failed checkpoint
			// write does not fail the append: the cache in memory is
			// right, the file is rewritten on the next change, and
			// recovery re-derives the entry from the batch after a crash.
			if err := l.assignEpochLocked(e, h.BaseOffset); err != nil {
				l.logger.Warn("leader epoch cache update failed", "epoch", e, "offset", h.BaseOffset, "err", err)
			}
		}
	}
	l.unflushed += int64(h.RecordCount)
	fm := l.cfg.FlushMessages
	if (fm > 0 && fm != math.MaxInt64 && l.unflushed >= fm) ||
		(l.cfg.FlushInterval > 0 && now.Sub(l.lastFlush) >= l.cfg.FlushInterval) {
		return l.flushLocked(now)
	}
	return nil
}

// shouldRollLocked is Kafka's LogSegment.shouldRoll. An empty active
// segment is never rolled (the new one would have the same base offset).
func (l *Log) shouldRollLocked(h recordbatch.Header, now time.Time) bool {
	s := l.activeLocked()
	if s.size == 0 {
		return false
	}
	if s.size+int64(h.Size()) > l.cfg.SegmentBytes {
		return true
	}
	if l.cfg.RollAfter > 0 {
		var waited int64
		if ts := s.rollingTimestamp(); ts >= 0 {
			waited = h.MaxTimestamp - ts
		} else {
			waited = now.Sub(s.created).Milliseconds()
		}
		if waited > l.cfg.RollAfter.Milliseconds() {
			return true
		}
	}
	return s.offIdx.isFull() || s.timeIdx.isFull() || !s.canHold(h)
}

// rollLocked starts a new active segment at the log end offset. The old
// segment's index files are trimmed and its files are fsynced in the
// background; the recovery point advances once that is done.
func (l *Log) rollLocked(now time.Time) error {
	return l.rollToLocked(now, l.activeLocked().next)
}

// rollToLocked is rollLocked with the new segment's base offset, which may
// lie above the log end offset (a follower's batch after a cleaned gap).
func (l *Log) rollToLocked(now time.Time, base int64) error {
	old := l.activeLocked()
	seg, err := openSegment(l.dir, base, true, now, l.journal)
	if err != nil {
		return l.errorf("roll to %d: %w", base, err)
	}
	if err := seg.resizeIndexes(int64(l.cfg.MaxIndexBytes)); err != nil {
		seg.remove()
		return l.errorf("roll to %d: %w", base, err)
	}
	if err := old.deactivate(); err != nil {
		l.logger.Warn("trimming indexes of rolled segment failed", "file", old.name(), "err", err)
	}
	l.segments = append(l.segments, seg)
	l.logger.Debug("rolled segment", "base_offset", base, "previous_size", old.size)
	gen := l.truncations
	l.flushers.Add(1)
	go func() {
		defer l.flushers.Done()
		if err := l.flushUpTo(base, gen); err != nil {
			l.logger.Warn("flush after roll failed", "err", err)
		}
	}()
	return nil
}

// flushUpTo fsyncs, without holding mu, every segment that may hold offsets
// in [recoveryPoint, upTo), then advances the recovery point to upTo unless
// the log was truncated (gen changed) or closed meanwhile.
func (l *Log) flushUpTo(upTo int64, gen uint64) error {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return nil
	}
	segs := l.unflushedSegmentsLocked(upTo)
	snaps := l.unsyncedSnapshotsLocked(upTo)
	epochsUnsynced, epochWrites := l.epochsUnsynced, l.epochWrites
	l.mu.RUnlock()

	type failure struct {
		s   *segment
		err error
	}
	var failures []failure
	for _, s := range segs {
		if err := s.sync(); err != nil {
			failures = append(failures, failure{s, err})
		}
	}
	snapErr := errors.Join(l.syncSnapshots(snaps), l.syncEpochs(epochsUnsynced))
	dirErr := atomicfile.SyncDir(l.dir)

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.truncations != gen {
		return nil
	}
	for _, f := range failures {
		if !f.s.removed { // errors of segments deleted meanwhile do not matter
			return l.errorf("flush: %w", f.err)
		}
	}
	if snapErr != nil {
		return l.errorf("flush: %w", snapErr)
	}
	if dirErr != nil {
		return l.errorf("flush: fsync dir: %w", dirErr)
	}
	for _, o := range snaps {
		delete(l.unsyncedSnapshots, o)
	}
	if l.epochWrites == epochWrites {
		l.epochsUnsynced = false
	} else if err := errors.Join(l.syncEpochs(true), atomicfile.SyncDir(l.dir)); err != nil {
		// Rewritten while the segments were being fsynced: a small file,
		// so under the lock.
		return l.errorf("flush: %w", err)
	} else {
		l.epochsUnsynced = false
	}
	if late := l.unsyncedSnapshotsLocked(upTo); len(late) > 0 {
		// Written while the segments were being fsynced: rare, and
		// small files, so under the lock.
		if err := errors.Join(l.syncSnapshots(late), atomicfile.SyncDir(l.dir)); err != nil {
			return l.errorf("flush: %w", err)
		}
		for _, o := range late {
			delete(l.unsyncedSnapshots, o)
		}
	}
	if upTo > l.recoveryPoint {
		l.recoveryPoint = upTo
		l.persistRecoveryPointLocked()
	}
	return nil
}

// unflushedSegmentsLocked lists the segments that may hold offsets in
// [recoveryPoint, upTo).
func (l *Log) unflushedSegmentsLocked(upTo int64) []*segment {
	var out []*segment
	for i, s := range l.segments {
		if s.base >= upTo {
			break
		}
		if i+1 < len(l.segments) && l.segments[i+1].base <= l.recoveryPoint {
			continue
		}
		out = append(out, s)
	}
	return out
}

// flushLocked fsyncs all unflushed segments while holding mu and moves the
// recovery point to the log end offset.
func (l *Log) flushLocked(now time.Time) error {
	leo := l.endOffsetLocked()
	for _, s := range l.unflushedSegmentsLocked(math.MaxInt64) {
		if err := s.sync(); err != nil {
			return l.errorf("flush: %w", err)
		}
	}
	snaps := l.unsyncedSnapshotsLocked(leo)
	if err := errors.Join(l.syncSnapshots(snaps), l.syncEpochs(l.epochsUnsynced)); err != nil {
		return l.errorf("flush: %w", err)
	}
	if err := atomicfile.SyncDir(l.dir); err != nil {
		return l.errorf("flush: fsync dir: %w", err)
	}
	l.epochsUnsynced = false
	for _, o := range snaps {
		delete(l.unsyncedSnapshots, o)
	}
	l.unflushed, l.lastFlush = 0, now
	l.recoveryPoint = leo
	l.persistRecoveryPointLocked()
	return nil
}

// persistRecoveryPointLocked writes the recovery point checkpoint when the
// value there is stale in a way that matters: recovery works per segment,
// so it is rewritten when the recovery point moves into a later segment or
// moves back (truncation). A missing checkpoint recovers every segment, as
// one inside the first segment does, so a new log writes none until its
// recovery point reaches a second segment (two fsyncs fewer for every
// partition created).
func (l *Log) persistRecoveryPointLocked() {
	rp := l.recoveryPoint
	need := rp < l.persistedRP
	for i, s := range l.segments {
		if i == 0 && l.persistedRP < 0 {
			continue
		}
		if s.base > l.persistedRP && s.base <= rp {
			need = true
			break
		}
	}
	if !need {
		return
	}
	if err := writeOffsetCheckpoint(filepath.Join(l.dir, RecoveryPointCheckpointFile), rp); err != nil {
		l.logger.Warn("writing recovery point checkpoint failed", "err", err)
		return
	}
	l.persistedRP = rp
}

// Flush fsyncs everything appended so far and advances the recovery point.
// It holds mu exclusively while doing so.
func (l *Log) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.errorf("flush: %w", ErrClosed)
	}
	return l.flushLocked(l.now())
}

// Close flushes, writes the final time index entry of the active segment,
// trims the index files to their used size, unmaps and closes all files.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.flushers.Wait()

	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.flushLocked(l.now())
	if derr := l.activeLocked().deactivate(); derr != nil {
		err = errors.Join(err, l.errorf("close: %w", derr))
	}
	for _, s := range l.segments {
		if cerr := s.close(); cerr != nil {
			err = errors.Join(err, l.errorf("close %s: %w", s.name(), cerr))
		}
	}
	return err
}

// Delete closes the log and removes its directory (RemoveDir).
func (l *Log) Delete() error {
	cerr := l.Close()
	if err := RemoveDir(l.dir); err != nil {
		return errors.Join(cerr, l.errorf("delete: %w", err))
	}
	return nil
}

// DeleteSuffix ends the name of a log directory being deleted, as Kafka's
// "<topic>-<partition>.<id>-delete": no partition is ever opened from it.
const DeleteSuffix = "-delete"

// RemoveDir deletes a log directory as Kafka does: first an atomic rename
// to "<dir>.<random>-delete" (synced in the parent), then the removal. A
// crash or a failure part way never leaves a half-deleted directory under
// the partition's name, where a later topic of the same name could adopt
// its remaining segments; a leftover "-delete" directory is removed at the
// next start (RemoveDeleted). A dir that does not exist is no error.
func RemoveDir(dir string) error {
	var suffix [8]byte
	rand.Read(suffix[:])
	doomed := dir + "." + hex.EncodeToString(suffix[:]) + DeleteSuffix
	if err := os.Rename(dir, doomed); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("rename %s for deletion: %w", dir, err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(dir)); err != nil {
		return fmt.Errorf("rename %s for deletion: %w", dir, err)
	}
	if err := os.RemoveAll(doomed); err != nil {
		return fmt.Errorf("remove %s: %w", doomed, err)
	}
	return nil
}

// RemoveDeleted removes the "-delete" directories a deletion left in
// parent (a crash between the rename and the removal). It returns what it
// removed.
func RemoveDeleted(parent string) ([]string, error) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", parent, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), DeleteSuffix) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// AssignEpoch is Kafka's LeaderEpochFileCache.assign: (epoch, startOffset)
// is added unless the latest entry already has that epoch with a start
// offset <= startOffset; entries with epoch >= epoch or start offset >=
// startOffset are dropped first. The cache is persisted when it changes.
func (l *Log) AssignEpoch(epoch int32, startOffset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.errorf("assign epoch: %w", ErrClosed)
	}
	return l.assignEpochLocked(epoch, startOffset)
}

func (l *Log) assignEpochLocked(epoch int32, startOffset int64) error {
	changed, err := l.epochs.assign(epoch, startOffset)
	if err != nil {
		return l.errorf("%w", err)
	}
	if changed {
		// Not fsynced here: a broker becoming leader of thousands of
		// partitions would wait two fsyncs per partition (Kafka 3.7
		// likewise stopped fsyncing it on assignment, KAFKA-15046).
		// Flushes fsync it before the recovery point moves past the
		// epoch's start; before that, a crash either keeps the file or
		// leaves it unreadable, and Open rebuilds it from the batches.
		if err := writeCheckpointNoSync(filepath.Join(l.dir, EpochCheckpointFile), l.epochs.checkpointEntries()); err != nil {
			return l.errorf("write leader epoch checkpoint: %w", err)
		}
		l.epochWrites++
		l.epochsUnsynced = true
	}
	return nil
}

// syncEpochs fsyncs the leader epoch checkpoint when unsynced (an
// assignment rewrote it without). It takes no lock.
func (l *Log) syncEpochs(unsynced bool) error {
	if !unsynced {
		return nil
	}
	return syncFile(filepath.Join(l.dir, EpochCheckpointFile))
}

// writeEpochsLocked writes the leader epoch checkpoint durably (a
// truncation, a rebuild).
func (l *Log) writeEpochsLocked() error {
	l.epochsUnsynced = false
	if err := writeCheckpoint(filepath.Join(l.dir, EpochCheckpointFile), l.epochs.checkpointEntries()); err != nil {
		return l.errorf("write leader epoch checkpoint: %w", err)
	}
	return nil
}

// LatestEpoch is the newest leader epoch in the cache.
func (l *Log) LatestEpoch() (int32, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e, ok := l.epochs.latest()
	return e.Epoch, ok
}

// EpochEntries returns a copy of the leader epoch cache.
func (l *Log) EpochEntries() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]EpochEntry(nil), l.epochs.entries...)
}

// EndOffsetForEpoch is Kafka's LeaderEpochFileCache.endOffsetFor, used to
// answer OffsetForLeaderEpoch:
//   - epoch -1 (undefined), an empty cache, or an epoch above every known
//     epoch: (-1, -1);
//   - the latest epoch: (latest, EndOffset());
//   - an epoch below the first known one: (epoch, start offset of the first
//     known epoch) - Kafka's answer, which lets a follower truncate to where
//     the leader's surviving data begins;
//   - otherwise the largest known epoch <= epoch and the start offset of
//     the next higher known epoch.
func (l *Log) EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.endOffsetFor(epoch, l.endOffsetLocked())
}
