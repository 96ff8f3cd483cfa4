package segment

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/kbroker/kbroker/internal/atomicfile"
)

// Suffixes of the cleaner's swap protocol (Kafka's CleanedFileSuffix and
// SwapFileSuffix), and kbroker's swap range file.
const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
	deletedSuffix = ".deleted"
	// swapEndSuffix names <base>.swapend, written before a cleaned segment
	// becomes a .swap: the end of the offset range the swap replaces (the
	// base of the segment after the cleaned group). Kafka derives that
	// range from the swap's last batch, which misses an old segment of
	// the group whose records were all removed; with the range written
	// down, recovery removes every old segment the swap replaces, so the
	// log is never a mix of old and new.
	swapEndSuffix = ".swapend"
)

// ErrCleaningAborted is returned (wrapped) by Clean when the log was
// truncated, had segments deleted or was closed while it was being
// cleaned: nothing was replaced and the cleaner checkpoint must not move.
var ErrCleaningAborted = errors.New("cleaning aborted")

// CleanOptions are the inputs of one cleaning of a compacted log.
type CleanOptions struct {
	// FirstDirty is the cleaner checkpoint: offsets below it were cleaned
	// before. Below the log start offset it counts as the log start.
	FirstDirty int64
	// FirstUncleanable bounds what may be cleaned: the caller's minimum
	// of the last stable offset and the base of the first segment within
	// min.compaction.lag.ms. The active segment is never cleaned, whatever
	// this says.
	FirstUncleanable int64
	// DedupeBufferBytes is this cleaning's share of
	// log.cleaner.dedupe.buffer.size: it bounds the key map and so how
	// much of the dirty range one cleaning covers.
	DedupeBufferBytes int64
	// DeleteRetention is delete.retention.ms: how long tombstones are
	// kept after the cleaning that first kept them (KIP-534).
	DeleteRetention time.Duration
	// Now is the time of the cleaning (delete horizons); zero: time.Now().
	Now time.Time
	// Throttle, if set, is called with the bytes read or written since
	// the previous call (log.cleaner.io.max.bytes.per.second); it may
	// sleep. It is never called with the log's lock held.
	Throttle func(bytes int64)

	// Stop, if set, ends the cleaning (ErrCleaningAborted) when it is
	// closed, between batches: a broker shutting down does not wait for
	// a long cleaning (Kafka's checkDone). Nothing is replaced then.
	Stop <-chan struct{}

	// Hook, for crash tests only, is called at each point of the swap
	// protocol with the number of points this cleaning passed so far; an
	// error stops the cleaning there and leaves the files as a crash
	// would (a test may also kill the process there).
	Hook func(point int) error
}

// CleanResult says what one cleaning did.
type CleanResult struct {
	// EndOffset is the new cleaner checkpoint: every offset below it is
	// clean. It equals the first dirty offset when nothing was cleaned.
	EndOffset                   int64
	Groups                      int // cleaned segments written
	SegmentsBefore              int // segments replaced
	BytesRead, BytesWritten     int64
	Kept, Rewritten             int   // batches written as they were, rebuilt
	Emptied, Dropped            int   // batches kept as empty headers, removed
	MapEntries                  int   // keys in the offset map
	MarkersRemoved              int   // transaction markers removed (part of Dropped)
	MappedFrom, MappedUpToFirst int64 // the dirty range mapped, [from, to)
}

// cleanSource is a segment being cleaned, read through its own descriptor
// so the cleaning reads without holding the Log's lock.
type cleanSource struct {
	seg   *segment
	f     *os.File
	size  int64
	mtime time.Time
	info  segmentInfo
	txns  []AbortedTxn
}

// Clean is one cleaning of a compacted log (Kafka's Cleaner.doClean): it
// maps keys to their latest offsets over the dirty range [FirstDirty,
// first uncleanable) until the map is full, then rewrites every segment
// from the first up to the end of the mapped range, in groups of at most
// segment.bytes (groupSegmentsBySize), keeping the records filterBatch
// keeps, and swaps each group's cleaned segment in with Kafka's
// .cleaned -> .swap -> rename protocol (see swapInLocked). Offsets never
// change. Reading and writing happen without the lock; only the swap
// takes it exclusively, and it gives up (ErrCleaningAborted) if the log
// was truncated or lost a segment meanwhile.
func (l *Log) Clean(opts CleanOptions) (CleanResult, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return CleanResult{}, l.errorf("clean: %w", ErrClosed)
	}
	start := max(opts.FirstDirty, l.startOffset)
	active := l.activeLocked()
	uncleanable := min(opts.FirstUncleanable, active.base)
	res := CleanResult{EndOffset: start, MappedFrom: start}
	if start >= uncleanable {
		l.mu.RUnlock()
		return res, nil
	}
	gen := l.truncations
	var srcs []*cleanSource
	var all []AbortedTxn
	var err error
	for _, s := range l.segments {
		var txns []AbortedTxn
		if txns, err = s.txnIdx.all(); err != nil {
			break
		}
		all = append(all, txns...)
		var f *os.File
		if f, err = s.dupLog(); err != nil {
			break
		}
		var st os.FileInfo
		if st, err = f.Stat(); err != nil {
			f.Close()
			break
		}
		srcs = append(srcs, &cleanSource{seg: s, f: f, size: s.size, mtime: st.ModTime(), txns: txns,
			info: segmentInfo{base: s.base, size: s.size,
				offsetIdxBytes: int64(s.offIdx.entries) * offsetIndexEntrySize,
				timeIdxBytes:   int64(s.timeIdx.entries) * timeIndexEntrySize}})
	}
	cfg := l.cfg
	l.mu.RUnlock()
	defer func() {
		for _, s := range srcs {
			s.f.Close()
		}
	}()
	if err != nil {
		return res, l.errorf("clean: %w", err)
	}

	// The last batches of each producer (Kafka reads them from the
	// producer state; a header scan gives the same for the producers the
	// log still holds, and keeping them for an expired producer is
	// harmless).
	tails := producerTails{}
	for _, s := range srcs {
		sc := newBatchScanner(s.f, 0, s.size, false)
		for sc.next() {
			tails.observe(sc.h)
		}
		if sc.err != nil {
			return res, l.readFailed(gen, s, sc.err)
		}
		l.throttle(opts, s.size/16) // headers only; a rough share of the bytes
	}

	aborts := NewAbortedRanges(all)
	m, err := l.buildOffsetMap(opts, srcs, start, uncleanable, aborts, gen, &res)
	if err != nil {
		return res, err
	}
	if m.latest < start {
		return res, nil
	}
	end := m.latest + 1
	res.MapEntries = m.entries
	res.MappedUpToFirst = end

	var toClean []*cleanSource
	for _, s := range srcs {
		if s.seg.base < end && s.seg != active {
			toClean = append(toClean, s)
		}
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	infos := make([]segmentInfo, len(toClean))
	for i, s := range toClean {
		infos[i] = s.info
	}
	point := 0
	// One filter for the whole cleaning: the groups are read in offset
	// order from the log's first segment, so the transaction markers are
	// decided knowing every batch before them.
	f := &cleanFilter{offsets: m, aborts: aborts, producers: tails, txns: newTxnMarkers(), keptAborts: map[int64]bool{},
		uncleanable: uncleanable, nowMs: now.UnixMilli(), deleteRetentionMs: opts.DeleteRetention.Milliseconds()}
	for _, g := range groupSegmentsBySize(infos, cfg.SegmentBytes, int64(cfg.MaxIndexBytes), uncleanable) {
		group := toClean[g[0]:g[1]]
		groupEnd := end
		if g[1] < len(srcs) {
			groupEnd = srcs[g[1]].seg.base
		}
		if err := l.cleanGroup(opts, group, groupEnd, f, gen, &point, &res); err != nil {
			return res, err
		}
		res.Groups++
		res.SegmentsBefore += len(group)
	}
	res.EndOffset = end
	res.MarkersRemoved = len(f.removedMarkers)
	l.logger.Info("cleaned log", "first_dirty", start, "end_offset", end, "groups", res.Groups,
		"segments", res.SegmentsBefore, "bytes_read", res.BytesRead, "bytes_written", res.BytesWritten,
		"batches_kept", res.Kept, "batches_rewritten", res.Rewritten, "batches_emptied", res.Emptied,
		"batches_dropped", res.Dropped, "markers_removed", res.MarkersRemoved, "map_entries", res.MapEntries)
	return res, nil
}

// readFailed is the error for a failed read of a segment being cleaned:
// ErrCleaningAborted when the log was truncated or the segment deleted
// meanwhile (its descriptor then reads a shorter file), a read error
// otherwise.
func (l *Log) readFailed(gen uint64, s *cleanSource, err error) error {
	l.mu.RLock()
	changed := l.closed || l.truncations != gen || s.seg.removed
	l.mu.RUnlock()
	if changed {
		return l.errorf("clean: %s changed while cleaning: %w", s.seg.name(), ErrCleaningAborted)
	}
	return l.errorf("clean: read %s: %w", s.seg.name(), err)
}

// stopped reports whether stop is closed (never for nil).
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

func (l *Log) throttle(opts CleanOptions, n int64) {
	if opts.Throttle != nil && n > 0 {
		opts.Throttle(n)
	}
}

// buildOffsetMap is Kafka's buildOffsetMap over the dirty segments: batches
// from start up to the first uncleanable offset, until the map is full.
func (l *Log) buildOffsetMap(opts CleanOptions, srcs []*cleanSource, start, uncleanable int64, aborts AbortedRanges, gen uint64, res *CleanResult) (*offsetMap, error) {
	m := newOffsetMap(opts.DedupeBufferBytes)
	for i, s := range srcs {
		if s.seg.base >= uncleanable {
			break
		}
		if i+1 < len(srcs) && srcs[i+1].seg.base <= start {
			continue
		}
		sc := newBatchScanner(s.f, 0, s.size, true)
		for sc.next() {
			if stopped(opts.Stop) {
				return nil, l.errorf("clean: stopped: %w", ErrCleaningAborted)
			}
			if sc.h.NextOffset() <= start {
				continue
			}
			if sc.h.LastOffset() >= uncleanable {
				return m, nil
			}
			ok, err := mapBatch(m, sc.batch, sc.h, start, aborts)
			if err != nil {
				return nil, l.errorf("clean: map %s: %w", s.seg.name(), err)
			}
			if !ok {
				l.logger.Debug("cleaner offset map full", "segment", s.seg.base, "latest_offset", m.latest)
				return m, nil
			}
		}
		if sc.err != nil {
			return nil, l.readFailed(gen, s, sc.err)
		}
		res.BytesRead += s.size
		l.throttle(opts, s.size)
	}
	return m, nil
}

// cleanGroup writes the cleaned segment of one group as <base>.log.cleaned
// (and <base>.txnindex.cleaned when the group has aborted transactions),
// then swaps it in.
func (l *Log) cleanGroup(opts CleanOptions, group []*cleanSource, groupEnd int64, f *cleanFilter, gen uint64, point *int, res *CleanResult) error {
	base := group[0].seg.base
	logPath := segmentPath(l.dir, base, logSuffix+cleanedSuffix)
	txnPath := segmentPath(l.dir, base, txnIndexSuffix+cleanedSuffix)
	out, err := os.OpenFile(logPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return l.errorf("clean: %w", err)
	}
	l.journal.created(logPath)
	removeCleaned := func() {
		out.Close()
		_ = os.Remove(logPath)
		_ = os.Remove(txnPath)
	}
	w := bufio.NewWriterSize(out, 256<<10)
	var written int64
	var mtime time.Time
	removedBefore := len(f.removedMarkers)
	for _, s := range group {
		if s.mtime.After(mtime) {
			mtime = s.mtime
		}
		sc := newBatchScanner(s.f, 0, s.size, true)
		for sc.next() {
			if stopped(opts.Stop) {
				removeCleaned()
				return l.errorf("clean: stopped: %w", ErrCleaningAborted)
			}
			b, outcome, err := filterBatch(sc.batch, sc.h, f)
			if err != nil {
				removeCleaned()
				return l.errorf("clean %s: %w", s.seg.name(), err)
			}
			switch outcome {
			case batchKept:
				res.Kept++
			case batchRewritten:
				res.Rewritten++
			case batchEmptied:
				res.Emptied++
			case batchDropped:
				res.Dropped++
			}
			if b != nil {
				if _, err := w.Write(b); err != nil {
					removeCleaned()
					return l.errorf("clean: write %s: %w", logPath, err)
				}
				written += int64(len(b))
			}
		}
		if sc.err != nil {
			removeCleaned()
			return l.readFailed(gen, s, sc.err)
		}
		res.BytesRead += s.size
		l.throttle(opts, s.size)
	}
	// The group's .txnindex entries are those of the abort markers kept
	// with batches of their transaction before them (filterControl).
	var txns []AbortedTxn
	for _, s := range group {
		for _, t := range s.txns {
			if f.keptAborts[t.LastOffset] {
				txns = append(txns, t)
			}
		}
	}
	err = w.Flush()
	if err == nil {
		err = l.journal.syncFile(out, fileSync)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && len(txns) > 0 {
		err = writeTxnEntries(txnPath, txns)
	}
	if err == nil {
		// Kafka keeps the group's newest modification time, so time
		// retention of batches without timestamps sees the data's age,
		// not the cleaning's.
		err = os.Chtimes(logPath, mtime, mtime)
	}
	if err != nil {
		_ = os.Remove(logPath)
		_ = os.Remove(txnPath)
		return l.errorf("clean: write %s: %w", logPath, err)
	}
	res.BytesWritten += written
	l.throttle(opts, written)

	l.mu.Lock()
	defer l.mu.Unlock()
	return l.swapInLocked(group, base, groupEnd, len(txns) > 0, f.removedMarkers[removedBefore:], gen, point, opts.Hook)
}

// writeTxnEntries writes a .txnindex file holding entries, fsynced.
func writeTxnEntries(path string, txns []AbortedTxn) error {
	b := make([]byte, len(txns)*abortedTxnSize)
	for i, t := range txns {
		t.encode(b[i*abortedTxnSize:])
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// swapInLocked replaces the group's segments with the cleaned one, in
// Kafka's order (LocalLog.replaceSegments), each step durable before the
// next:
//
//  0. when the group removes transaction markers, the producer snapshots
//     that hold one of their transactions open are deleted
//     (snapshotsClosedByLocked), so no load replays from them;
//  1. <base>.swapend records groupEnd, the end of the range replaced;
//  2. the .cleaned files are renamed to .swap (the .log last): from here
//     on recovery completes the swap instead of discarding it;
//  3. every file of every old segment is renamed to .deleted;
//  4. the .swap files are renamed to their final names (.log last);
//  5. .swapend and the .deleted files are removed.
//
// Open (completeSwaps) finishes a swap whose <base>.log.swap exists and
// discards .cleaned files, so a crash at any point leaves the old segments
// or the new one, never both. The new segment's offset and time indexes
// are rebuilt from its batches after the swap (Open does the same when
// they are missing).
func (l *Log) swapInLocked(group []*cleanSource, base, groupEnd int64, hasTxn bool, removed []removedMarker, gen uint64, point *int, crashAt func(int) error) error {
	cleanedLog := segmentPath(l.dir, base, logSuffix+cleanedSuffix)
	cleanedTxn := segmentPath(l.dir, base, txnIndexSuffix+cleanedSuffix)
	first := -1
	for i, s := range l.segments {
		if s == group[0].seg {
			first = i
			break
		}
	}
	intact := !l.closed && l.truncations == gen && first >= 0 && first+len(group) < len(l.segments)
	for k := 0; intact && k < len(group); k++ {
		intact = l.segments[first+k] == group[k].seg && !group[k].seg.removed
	}
	if !intact {
		_ = os.Remove(cleanedLog)
		_ = os.Remove(cleanedTxn)
		return l.errorf("clean: segment %d changed while cleaning: %w", base, ErrCleaningAborted)
	}
	step := func(what string, fn func() error) error {
		if crashAt != nil {
			if err := crashAt(*point); err != nil {
				return err
			}
		}
		*point++
		if err := fn(); err != nil {
			return l.errorf("clean: swap segment %d: %s: %w", base, what, err)
		}
		return nil
	}
	syncDir := func() error { return atomicfile.SyncDir(l.dir) }
	rename := func(from, to string) func() error {
		return func() error { return l.journal.rename(from, to) }
	}

	if stale := l.snapshotsClosedByLocked(removed); len(stale) > 0 {
		if err := step("delete producer snapshots", func() error {
			return l.deleteSnapshotsLocked(func(o int64) bool { return slices.Contains(stale, o) })
		}); err != nil {
			return err
		}
		if err := step("sync dir", syncDir); err != nil {
			return err
		}
	}
	if err := step("write swap end", func() error {
		return writeOffsetCheckpoint(segmentPath(l.dir, base, swapEndSuffix), groupEnd)
	}); err != nil {
		return err
	}
	if hasTxn {
		if err := step("rename txn index to swap", rename(cleanedTxn, segmentPath(l.dir, base, txnIndexSuffix+swapSuffix))); err != nil {
			return err
		}
	}
	if err := step("rename log to swap", rename(cleanedLog, segmentPath(l.dir, base, logSuffix+swapSuffix))); err != nil {
		return err
	}
	if err := step("sync dir", syncDir); err != nil {
		return err
	}
	var doomed []string
	for _, src := range group {
		s := src.seg
		for _, p := range []string{s.offIdx.path, s.timeIdx.path, s.txnIdx.path, s.name()} {
			if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
				continue // a .txnindex exists only once the segment has an abort marker
			}
			if err := step("rename old segment to deleted", rename(p, p+deletedSuffix)); err != nil {
				return err
			}
			doomed = append(doomed, p+deletedSuffix)
		}
	}
	if err := step("sync dir", syncDir); err != nil {
		return err
	}
	if hasTxn {
		if err := step("rename txn index swap", rename(segmentPath(l.dir, base, txnIndexSuffix+swapSuffix), segmentPath(l.dir, base, txnIndexSuffix))); err != nil {
			return err
		}
	}
	if err := step("rename log swap", rename(segmentPath(l.dir, base, logSuffix+swapSuffix), segmentPath(l.dir, base, logSuffix))); err != nil {
		return err
	}
	if err := step("sync dir", syncDir); err != nil {
		return err
	}
	if err := step("remove swap end", func() error { return os.Remove(segmentPath(l.dir, base, swapEndSuffix)) }); err != nil {
		return err
	}
	for _, src := range group {
		src.seg.removed = true
		if err := src.seg.close(); err != nil {
			l.logger.Warn("closing cleaned-away segment failed", "file", src.seg.name(), "err", err)
		}
	}
	for _, p := range doomed {
		if err := os.Remove(p); err != nil {
			l.logger.Warn("removing cleaned-away segment file failed", "file", p, "err", err)
		}
	}

	seg, err := openSegment(l.dir, base, false, l.now(), l.journal)
	if err != nil {
		return l.errorf("clean: open cleaned segment %d: %w", base, err)
	}
	if err := seg.resizeIndexes(int64(l.cfg.MaxIndexBytes)); err != nil {
		seg.close()
		return l.errorf("clean: %w", err)
	}
	if _, reason, err := seg.rebuild(false, l.cfg.IndexIntervalBytes, nil); err != nil || reason != nil {
		seg.close()
		return l.errorf("clean: index cleaned segment %d: %w", base, errors.Join(err, reason))
	}
	if err := seg.deactivate(); err != nil {
		seg.close()
		return l.errorf("clean: %w", err)
	}
	// The indexes are hints Open checks and rebuilds when damaged, so a
	// failed fsync here only costs a rebuild after a crash.
	if err := seg.sync(); err != nil {
		l.logger.Warn("fsync of cleaned segment failed", "base_offset", base, "err", err)
	}
	segs := make([]*segment, 0, len(l.segments)-len(group)+1)
	segs = append(segs, l.segments[:first]...)
	segs = append(segs, seg)
	segs = append(segs, l.segments[first+len(group):]...)
	l.segments = segs
	return nil
}

// snapshotsClosedByLocked lists the producer snapshots that removed
// markers would leave with a transaction open forever: a snapshot at or
// below a removed marker's offset that holds the marker's producer with an
// open transaction (the marker closed it; once it is gone, a load from
// that snapshot would replay no marker, and the last stable offset would
// stay at the transaction's first offset). A snapshot that cannot be read
// is listed too: a load would skip it anyway. Snapshots below the
// transaction's first offset, and every later one, stay valid: the
// transaction's batches are gone, so a replay from before them opens
// nothing.
func (l *Log) snapshotsClosedByLocked(removed []removedMarker) []int64 {
	if len(removed) == 0 {
		return nil
	}
	lastRemoved := map[int64]int64{}
	for _, r := range removed {
		lastRemoved[r.producerID] = max(lastRemoved[r.producerID], r.offset)
	}
	var stale []int64
	for _, o := range l.snapshots {
		if o > removed[len(removed)-1].offset {
			break
		}
		b, err := os.ReadFile(segmentPath(l.dir, o, snapshotSuffix))
		var entries []ProducerSnapshotEntry
		if err == nil {
			entries, err = DecodeProducerSnapshot(b)
		}
		if err != nil {
			stale = append(stale, o)
			continue
		}
		for _, e := range entries {
			if y, ok := lastRemoved[e.ProducerID]; ok && e.CurrentTxnFirstOffset >= 0 && o <= y {
				stale = append(stale, o)
				break
			}
		}
	}
	return stale
}

// completeSwaps is the recovery half of the swap protocol, run by Open
// before anything else looks at the directory: for every <base>.log.swap
// with its <base>.swapend, the segment files with a base in [base, end)
// are removed (end read from .swapend), then the .swap files take their
// final names. The
// .cleaned, .deleted and .swapend files left behind are removed afterwards
// as stray files.
func (l *Log) completeSwaps() error {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var swaps []int64
	for _, e := range entries {
		if b, ok := parseBase(e.Name(), logSuffix+swapSuffix); ok {
			swaps = append(swaps, b)
		}
	}
	for _, base := range swaps {
		swapLog := segmentPath(l.dir, base, logSuffix+swapSuffix)
		end, err := readOffsetCheckpoint(segmentPath(l.dir, base, swapEndSuffix))
		if err != nil {
			// This protocol writes .swapend before any .swap, so a swap
			// without one is not its own: removed as a stray file
			// rather than trusted to replace segments.
			l.logger.Warn("ignoring a swap file without its range", "file", swapLog, "err", err)
			continue
		}
		newTxnIndex := swappedTxnIndex(l.dir, base)
		for _, e := range entries {
			for _, sfx := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
				if b, ok := parseBase(e.Name(), sfx); ok && b >= base && b < end {
					if sfx == txnIndexSuffix && b == base && newTxnIndex {
						continue
					}
					if err := os.Remove(filepath.Join(l.dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
						return fmt.Errorf("complete swap %s: %w", swapLog, err)
					}
				}
			}
		}
		swapTxn := segmentPath(l.dir, base, txnIndexSuffix+swapSuffix)
		if err := os.Rename(swapTxn, segmentPath(l.dir, base, txnIndexSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("complete swap %s: %w", swapLog, err)
		}
		if err := l.journal.rename(swapLog, segmentPath(l.dir, base, logSuffix)); err != nil {
			return fmt.Errorf("complete swap %s: %w", swapLog, err)
		}
		if err := atomicfile.SyncDir(l.dir); err != nil {
			return fmt.Errorf("complete swap %s: %w", swapLog, err)
		}
		l.logger.Info("completed an interrupted cleaner swap", "base_offset", base, "replaced_up_to", end)
	}
	return nil
}

// swappedTxnIndex tells whether an interrupted swap at base had already
// given the cleaned segment's .txnindex its final name: step 4 renames it
// before the .log, so a crash between the two leaves <base>.txnindex (new)
// beside <base>.log.swap. It is the new one exactly when no .txnindex.swap
// is left and the old <base>.log is gone: step 3 renames each old
// segment's .txnindex before its .log, so an old <base>.txnindex still
// under its name (a crash within step 3) has its <base>.log beside it.
func swappedTxnIndex(dir string, base int64) bool {
	exists := func(p string) bool {
		_, err := os.Stat(p)
		return err == nil
	}
	return exists(segmentPath(dir, base, txnIndexSuffix)) &&
		!exists(segmentPath(dir, base, txnIndexSuffix+swapSuffix)) &&
		!exists(segmentPath(dir, base, logSuffix))
}

// SegmentStat describes one segment for the cleaner's choice of log.
type SegmentStat struct {
	Base, Next int64 // offsets [Base, Next) the segment's batches span
	Size       int64 // .log bytes
	// LargestTimestamp is the largest batch timestamp (the file's
	// modification time when none has one); FirstBatchTimestamp is the
	// first batch's max timestamp, -1 when empty (Kafka's
	// getFirstBatchTimestampForSegments).
	LargestTimestamp, FirstBatchTimestamp int64
	Active                                bool
}

// SegmentStats lists the segments, oldest first. It holds mu shared.
func (l *Log) SegmentStats() []SegmentStat {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentStat, len(l.segments))
	for i, s := range l.segments {
		out[i] = SegmentStat{Base: s.base, Next: s.next, Size: s.size,
			LargestTimestamp: s.largestTimestamp(), FirstBatchTimestamp: s.rollingTimestamp(),
			Active: i == len(l.segments)-1}
	}
	return out
}

// TakeTruncatedTo returns the lowest offset the log was truncated to since
// the previous call (math.MaxInt64 if it was not) and forgets it: the
// cleaner lowers its checkpoint to it, as Kafka's maybeTruncateCheckpoint,
// so batches written again below the old checkpoint count as dirty.
func (l *Log) TakeTruncatedTo() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.truncatedTo
	l.truncatedTo = math.MaxInt64
	return t
}
