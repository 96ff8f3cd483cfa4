package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kbroker/kbroker/internal/atomicfile"
	"github.com/kbroker/kbroker/recordbatch"
)

// Suffixes of files left behind by an interrupted operation (Kafka's
// .deleted/.cleaned/.swap, the cleaner's .swapend and kbroker's checkpoint
// temp files); Open removes them once completeSwaps has finished any
// cleaner swap that had begun.
var straySuffixes = []string{deletedSuffix, cleanedSuffix, swapSuffix, swapEndSuffix, atomicfile.TmpSuffix}

// Open loads the partition directory dir, creating it (with one empty
// segment at offset 0) if needed.
//
// Every open first completes a log cleaner swap that had begun (see
// Log.Clean and completeSwaps), then removes stray files and orphan index
// files, drops the zero tail of untrimmed index files, sanity-checks
// each index (size a
// multiple of the entry size, entries increasing, positions inside the log)
// and rebuilds a missing or damaged one from the batch headers, with a log
// line. A missing or unreadable leader-epoch-checkpoint is rebuilt from the
// batches' PartitionLeaderEpoch.
//
// Crash recovery (cleanShutdown false) follows Kafka's recovery point: every
// segment that may hold offsets at or above the recovery point read from
// recovery-point-offset-checkpoint (all segments if it is missing) is
// scanned with recordbatch.Validate (length, magic, CRC) and increasing
// offsets; the file is cut after the last good batch (logged with slog.Warn
// naming the file and the bytes dropped), its indexes are rebuilt, and any
// later segment is deleted, as Kafka does. The recovery point advances when
// a rolled segment has been fsynced in the background, on Flush and on
// Close, so normally only the active segment is scanned. A rescan that
// finds nothing to cut changes nothing on disk and leaves the recovery
// point at the checkpoint (no fsync); one that cuts fsyncs the result and
// starts from the log end.
func Open(dir string, cfg Config, cleanShutdown bool, logger *slog.Logger, opts ...OpenOption) (*Log, error) {
	if logger == nil {
		logger = slog.Default()
	}
	l := &Log{
		dir:         dir,
		logger:      logger.With("dir", dir),
		now:         time.Now,
		cfg:         cfg.normalized(),
		persistedRP: -1,
		truncatedTo: math.MaxInt64,
		durable:     durableState{dirBase: -1},

		txnCompleteBelow: math.MaxInt64,
	}
	for _, o := range opts {
		o(l)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, l.errorf("open: %w", err)
	}
	if err := l.load(cleanShutdown); err != nil {
		for _, s := range l.segments {
			s.close()
		}
		return nil, err
	}
	return l, nil
}

// load runs during Open, before the Log is shared; it holds no lock.
func (l *Log) load(clean bool) error {
	now := l.now()
	bases, err := l.scanDir()
	if err != nil {
		return l.errorf("open: %w", err)
	}
	ckptStart, err := readOffsetCheckpoint(filepath.Join(l.dir, StartOffsetCheckpointFile))
	if err != nil {
		if !errors.Is(err, errCheckpointMissing) {
			l.logger.Warn("ignoring unreadable log start offset checkpoint", "err", err)
		}
		ckptStart = 0
	}
	rp, err := readOffsetCheckpoint(filepath.Join(l.dir, RecoveryPointCheckpointFile))
	if err != nil {
		if !errors.Is(err, errCheckpointMissing) {
			l.logger.Warn("ignoring unreadable recovery point checkpoint", "err", err)
		}
		rp = -1
	}
	l.persistedRP = rp
	epochs, err := loadEpochCheckpoint(filepath.Join(l.dir, EpochCheckpointFile))
	rebuildEpochs := err != nil
	if err != nil && !errors.Is(err, errCheckpointMissing) {
		l.logger.Warn("leader epoch checkpoint unreadable; rebuilding it from batch headers", "err", err)
	}
	l.epochs = epochs

	if len(bases) == 0 {
		s, err := openSegment(l.dir, max(ckptStart, 0), true, now, l.journal)
		if err != nil {
			return l.errorf("open: create first segment: %w", err)
		}
		l.segments = []*segment{s}
	}
	maxIdx := int64(l.cfg.MaxIndexBytes)
	// recovered: some segment was rescanned for damage (crash recovery);
	// cut: damage was found and cut off (bytes dropped, later segments
	// deleted).
	recovered, cut := false, false
	for i, base := range bases {
		missingIndex, emptyIndex := indexState(l.dir, base)
		s, err := openSegment(l.dir, base, false, now, l.journal)
		if err != nil {
			return l.errorf("open segment %d: %w", base, err)
		}
		l.segments = append(l.segments, s)
		last := i == len(bases)-1
		nextBase := int64(-1)
		if !last {
			nextBase = bases[i+1]
		}
		// A segment that may hold unflushed offsets is rescanned and its
		// indexes rebuilt from nothing (resetIndexes), so their old
		// entries are not even looked at.
		unflushed := !clean && (last || nextBase > rp)
		if !unflushed {
			s.offIdx.dropTrailingZeros()
			s.timeIdx.dropTrailingZeros()
		}

		var dropped int64
		switch {
		case unflushed:
			dropped, err = l.recoverSegment(s, true, maxIdx)
			recovered = true
		case missingIndex || emptyIndex:
			// An empty index of a non-empty log is normal for a small
			// segment, so only a missing one is worth an Info line.
			level := slog.LevelDebug
			if missingIndex {
				level = slog.LevelInfo
			}
			l.logger.Log(context.Background(), level, "index file missing or empty; rebuilding", "file", s.name())
			dropped, err = l.recoverSegment(s, false, maxIdx)
		default:
			if cerr := errors.Join(s.offIdx.check(s.size), s.timeIdx.check(nextBase)); cerr != nil {
				l.logger.Warn("damaged index; rebuilding", "file", s.name(), "err", cerr)
				dropped, err = l.recoverSegment(s, false, maxIdx)
			} else if terr := s.loadTail(); errors.Is(terr, errIndexCorrupt) {
				l.logger.Warn("damaged index; rebuilding", "file", s.name(), "err", terr)
				dropped, err = l.recoverSegment(s, false, maxIdx)
			} else if terr != nil {
				l.logger.Warn("damaged batches at segment end; recovering segment", "file", s.name(), "err", terr)
				dropped, err = l.recoverSegment(s, true, maxIdx)
				recovered = true
			}
		}
		if err != nil {
			return err
		}
		cut = cut || dropped > 0
		if err := l.loadTxnIndex(s, unflushed, rp); err != nil {
			return err
		}
		if !last && dropped > 0 {
			// Kafka: segments after a corrupted one are unflushed garbage.
			for _, b := range bases[i+1:] {
				l.logger.Warn("deleting segment after a damaged one", "base_offset", b)
				if err := removeSegmentFiles(l.dir, b); err != nil {
					return l.errorf("open: %w", err)
				}
			}
			break
		}
		if !last && s.next > nextBase {
			return l.errorf("open: segment %d ends at offset %d, beyond next segment base %d", base, s.next, nextBase)
		}
		if !last {
			if err := s.resizeIndexes(0); err != nil {
				return l.errorf("open: %w", err)
			}
		}
	}
	active := l.activeLocked()
	if err := active.resizeIndexes(maxIdx); err != nil {
		return l.errorf("open: %w", err)
	}
	leo := active.next
	l.startOffset = min(max(ckptStart, l.segments[0].base), leo)

	if rebuildEpochs {
		l.epochs = epochCache{}
		l.rebuildEpochsLocked()
	}
	changed := l.epochs.truncateFromEnd(leo)
	changed = l.epochs.truncateFromStart(l.startOffset) || changed
	if changed || (rebuildEpochs && len(l.epochs.entries) > 0) {
		if err := l.writeEpochsLocked(); err != nil {
			return err
		}
	}

	// Kafka's truncateAndReload at load: a snapshot past the log end
	// describes batches that are gone. After a crash, one past the
	// recovery point may describe batches a truncation removed just
	// before (its unlink not yet durable), so it goes too.
	snapLimit := leo
	if !clean {
		snapLimit = min(leo, max(rp, l.segments[0].base))
	}
	if err := l.deleteSnapshotsLocked(func(o int64) bool { return o > snapLimit }); err != nil {
		return l.errorf("open: %w", err)
	}

	l.lastFlush = now
	l.recoveryPoint = leo
	switch {
	case cut:
		// Make the cuts durable before anything is appended where the
		// damage was, then start from the log end.
		l.recoveryPoint = max(rp, 0)
		if err := l.flushLocked(now); err != nil {
			return err
		}
	case recovered:
		// The rescan found the unflushed segments intact: nothing on
		// disk changed but the rebuilt index files, hints the next
		// recovery rebuilds anyway. As Kafka's LogLoader, the recovery
		// point stays at the checkpoint (the batches after it are still
		// only in the page cache, a kill -9 does not lose them but a
		// power failure may), and no fsync is spent on them: that was
		// 4 fsyncs per partition on every restart after a kill -9.
		l.recoveryPoint = min(max(rp, 0), leo)
	}
	l.persistRecoveryPointLocked()
	return nil
}

// loadTxnIndex makes s's .txnindex agree with its batches. A segment that
// crash recovery rescanned (recovered) keeps only the entries below the
// recovery point rp, which were fsynced before rp was; the markers from rp
// on may be gone or their entries torn, so TxnIndexCompleteBelow drops to
// rp and the caller re-adds them from a scan. Any segment's entries must
// be ordered and lie inside it; a damaged index is emptied (with a log
// line) and re-added from the segment's base likewise.
func (l *Log) loadTxnIndex(s *segment, recovered bool, rp int64) error {
	x := s.txnIdx
	if recovered {
		from := max(rp, s.base)
		if err := x.truncateTo(from); err != nil {
			return l.errorf("open: %w", err)
		}
		l.txnCompleteBelow = min(l.txnCompleteBelow, from)
	}
	if err := x.check(s.base, s.next); err != nil {
		l.logger.Warn("damaged transaction index; re-adding its entries from the markers", "file", x.path, "err", err)
		if err := x.truncateEntries(0); err != nil {
			return l.errorf("open: %w", err)
		}
		l.txnCompleteBelow = min(l.txnCompleteBelow, s.base)
	}
	return nil
}

// recoverSegment rebuilds s's indexes from its batches (validating CRCs
// when validate), logging any bytes cut from the end.
func (l *Log) recoverSegment(s *segment, validate bool, maxIdx int64) (int64, error) {
	if err := s.resetIndexes(maxIdx); err != nil {
		return 0, l.errorf("recover: %w", err)
	}
	var assign func(recordbatch.Header)
	if validate {
		// Kafka's LogSegment.recover also feeds the epoch cache.
		assign = func(h recordbatch.Header) {
			if e := h.PartitionLeaderEpoch; e >= 0 {
				if latest, ok := l.epochs.latest(); !ok || e > latest.Epoch {
					_, _ = l.epochs.assign(e, h.BaseOffset)
				}
			}
		}
	}
	dropped, reason, err := s.rebuild(validate, l.cfg.IndexIntervalBytes, assign)
	if err != nil {
		return 0, l.errorf("recover: %w", err)
	}
	if dropped > 0 {
		l.logger.Warn("truncated damaged log tail", "file", s.name(),
			"bytes_dropped", dropped, "valid_bytes", s.size, "next_offset", s.next, "reason", reason)
	}
	return dropped, nil
}

// rebuildEpochsLocked fills the epoch cache from every batch header.
func (l *Log) rebuildEpochsLocked() {
	n := 0
	for _, s := range l.segments {
		sc := newBatchScanner(s.log, 0, s.size, false)
		for sc.next() {
			n++
			if e := sc.h.PartitionLeaderEpoch; e >= 0 {
				if latest, ok := l.epochs.latest(); !ok || e > latest.Epoch {
					_, _ = l.epochs.assign(e, sc.h.BaseOffset)
				}
			}
		}
	}
	if n > 0 {
		l.logger.Info("rebuilt leader epoch cache from batch headers", "batches", n, "entries", len(l.epochs.entries))
	}
}

// parseBase parses a 20-digit segment file name stem.
func parseBase(name, suffix string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(stem, 10, 64)
	return v, err == nil && v >= 0
}

// scanDir completes interrupted cleaner swaps, removes stray and orphan
// files and returns the base offsets of
// the segments, ascending. Empty .log files other than the last are
// removed with their indexes (they hold nothing).
func (l *Log) scanDir() ([]int64, error) {
	if err := l.completeSwaps(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	logs := map[int64]bool{}
	var bases []int64
	type idxFile struct {
		name string
		base int64
	}
	var indexes []idxFile
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if slices.ContainsFunc(straySuffixes, func(s string) bool { return strings.HasSuffix(name, s) }) {
			l.logger.Info("removing stray file", "file", name)
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return nil, err
			}
			continue
		}
		if b, ok := parseBase(name, logSuffix); ok {
			logs[b] = true
			bases = append(bases, b)
			continue
		}
		if b, ok := parseBase(name, snapshotSuffix); ok {
			l.snapshots = append(l.snapshots, b)
			continue
		}
		for _, sfx := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			if b, ok := parseBase(name, sfx); ok {
				indexes = append(indexes, idxFile{name, b})
			}
		}
	}
	for _, f := range indexes {
		if !logs[f.base] {
			l.logger.Info("removing orphan index file", "file", f.name)
			if err := os.Remove(filepath.Join(l.dir, f.name)); err != nil {
				return nil, err
			}
		}
	}
	slices.Sort(bases)
	slices.Sort(l.snapshots)
	kept := bases[:0]
	for i, b := range bases {
		// The first segment stays even when empty (the cleaner empties
		// one whose records were all superseded): its base is the log
		// start when no checkpoint says otherwise, and cleaning must not
		// move the log start (Kafka: only retention and DeleteRecords do).
		if i > 0 && i < len(bases)-1 {
			if st, err := os.Stat(segmentPath(l.dir, b, logSuffix)); err == nil && st.Size() == 0 {
				l.logger.Info("removing empty segment", "base_offset", b)
				if err := removeSegmentFiles(l.dir, b); err != nil {
					return nil, err
				}
				continue
			}
		}
		kept = append(kept, b)
	}
	return kept, nil
}

// indexState reports whether an index file of the segment is absent, or
// empty while the log is not.
func indexState(dir string, base int64) (missing, empty bool) {
	logSt, err := os.Stat(segmentPath(dir, base, logSuffix))
	if err != nil {
		return true, false
	}
	for _, sfx := range []string{indexSuffix, timeIndexSuffix} {
		st, err := os.Stat(segmentPath(dir, base, sfx))
		if err != nil {
			missing = true
		} else if st.Size() == 0 && logSt.Size() > 0 {
			empty = true
		}
	}
	return missing, empty
}

func removeSegmentFiles(dir string, base int64) error {
	for _, sfx := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
		if err := os.Remove(segmentPath(dir, base, sfx)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove segment %d: %w", base, err)
		}
	}
	return nil
}
