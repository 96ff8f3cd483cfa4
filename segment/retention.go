package segment

import (
	"fmt"
	"path/filepath"
	"time"
)

// TruncateTo removes every batch with BaseOffset >= offset; a batch that
// contains offset is removed too, so the log end offset becomes the base
// offset of the first removed batch (<= offset; Kafka would set it to
// offset itself, which would leave a hole in a mid-batch case). Later
// segments are deleted, the indexes and the leader epoch cache
// (truncateFromEnd) are fixed, and the log start offset is lowered if it
// is now past the end. If offset is below the first segment, the log is
// emptied and restarted at offset (Kafka's behaviour). offset >= EndOffset()
// only truncates the epoch cache from the end (Kafka does this to drop an
// epoch entry written without data).
func (l *Log) TruncateTo(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.errorf("truncate: %w", ErrClosed)
	}
	if offset < 0 {
		return l.errorf("truncate to negative offset %d", offset)
	}
	leo := l.endOffsetLocked()
	if offset >= leo {
		if l.epochs.truncateFromEnd(leo) {
			return l.writeEpochsLocked()
		}
		return nil
	}
	if offset < l.segments[0].base {
		return l.truncateFullyLocked(offset)
	}
	l.truncations++
	l.truncatedTo = min(l.truncatedTo, offset)
	now := l.now()
	i := l.segmentIndexLocked(offset)
	for j := len(l.segments) - 1; j > i; j-- {
		s := l.segments[j]
		l.logger.Info("deleting segment on truncation", "base_offset", s.base, "target_offset", offset)
		if err := s.remove(); err != nil {
			return l.errorf("truncate to %d: %w", offset, err)
		}
	}
	l.segments = l.segments[:i+1]
	s := l.segments[i]
	before := s.size
	if err := s.truncateTo(offset, int64(l.cfg.MaxIndexBytes), now); err != nil {
		return l.errorf("truncate to %d: %w", offset, err)
	}
	newEnd := s.next
	// Kafka's truncateAndReload: snapshots past the new end describe
	// batches that are gone.
	if err := l.deleteSnapshotsLocked(func(o int64) bool { return o > newEnd }); err != nil {
		return l.errorf("truncate to %d: %w", offset, err)
	}
	l.logger.Info("truncated log", "target_offset", offset, "end_offset", newEnd, "previous_end_offset", leo,
		"bytes_dropped_in_segment", before-s.size)
	if l.recoveryPoint > newEnd {
		l.recoveryPoint = newEnd
		l.persistRecoveryPointLocked()
	}
	if l.startOffset > newEnd {
		l.startOffset = newEnd
		if err := l.writeStartOffsetLocked(); err != nil {
			return err
		}
	}
	if l.epochs.truncateFromEnd(newEnd) {
		return l.writeEpochsLocked()
	}
	return nil
}

// TruncateFullyAndStartAt deletes all segments and starts an empty log at
// offset: StartOffset() == EndOffset() == offset. The epoch cache is
// cleared, as in Kafka.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.errorf("truncate fully: %w", ErrClosed)
	}
	if offset < 0 {
		return l.errorf("truncate fully: negative offset %d", offset)
	}
	return l.truncateFullyLocked(offset)
}

func (l *Log) truncateFullyLocked(offset int64) error {
	l.truncations++
	l.truncatedTo = min(l.truncatedTo, offset)
	for _, s := range l.segments {
		if err := s.remove(); err != nil {
			return l.errorf("truncate fully: %w", err)
		}
	}
	l.segments = nil
	if err := l.deleteSnapshotsLocked(func(int64) bool { return true }); err != nil {
		return l.errorf("truncate fully: %w", err)
	}
	s, err := openSegment(l.dir, offset, true, l.now(), l.journal)
	if err == nil {
		err = s.resizeIndexes(int64(l.cfg.MaxIndexBytes))
	}
	if err != nil {
		return l.errorf("truncate fully: create segment %d: %w", offset, err)
	}
	l.segments = []*segment{s}
	l.logger.Info("truncated log fully", "start_offset", offset)
	l.startOffset = offset
	l.recoveryPoint = offset
	l.persistRecoveryPointLocked()
	if err := l.writeStartOffsetLocked(); err != nil {
		return err
	}
	if l.epochs.clear() {
		return l.writeEpochsLocked()
	}
	return nil
}

func (l *Log) writeStartOffsetLocked() error {
	if err := writeOffsetCheckpoint(filepath.Join(l.dir, StartOffsetCheckpointFile), l.startOffset); err != nil {
		return l.errorf("write log start offset checkpoint: %w", err)
	}
	return nil
}

// SetStartOffset raises the log start offset (DeleteRecords). It never
// lowers it and fails above EndOffset(). Segments wholly below the new start
// are deleted and the epoch cache is truncated from the start (Kafka's
// truncateFromStart). The new value is persisted before it is used.
func (l *Log) SetStartOffset(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.errorf("set start offset: %w", ErrClosed)
	}
	if leo := l.endOffsetLocked(); offset > leo {
		return l.errorf("set start offset %d above log end offset %d: %w", offset, leo, ErrOffsetOutOfRange)
	}
	if offset <= l.startOffset {
		return nil
	}
	l.startOffset = offset
	if err := l.writeStartOffsetLocked(); err != nil {
		return err
	}
	n := 0
	for n+1 < len(l.segments) && l.segments[n+1].base <= offset {
		n++
	}
	if err := l.deleteFirstLocked(n, "log start offset breach"); err != nil {
		return err
	}
	if err := l.deleteSnapshotsLocked(func(o int64) bool { return o < l.startOffset }); err != nil {
		l.logger.Warn("deleting producer snapshots below the log start failed", "err", err)
	}
	if l.epochs.truncateFromStart(l.startOffset) {
		return l.writeEpochsLocked()
	}
	return nil
}

// deleteFirstLocked deletes the n oldest segments (never the active one).
func (l *Log) deleteFirstLocked(n int, reason string) error {
	for k := 0; k < n; k++ {
		s := l.segments[0]
		l.logger.Info("deleting segment", "base_offset", s.base, "next_offset", s.next, "size", s.size,
			"largest_timestamp", s.largestTimestamp(), "reason", reason)
		if err := s.remove(); err != nil {
			return l.errorf("delete segment %d: %w", s.base, err)
		}
		l.segments = l.segments[1:]
	}
	if first := l.segments[0].base; l.startOffset < first {
		l.startOffset = first
	}
	l.recoveryPoint = max(l.recoveryPoint, l.segments[0].base)
	return nil
}

// DeleteOldSegments applies retention (Kafka's deleteOldSegments): starting
// from the oldest, segments are deleted while one of these holds and the
// segment holds no offset >= limit (the high watermark):
//   - its largest timestamp is older than now-RetentionTime (RetentionTime >= 0);
//   - the log without it is still >= RetentionBytes (RetentionBytes >= 0);
//   - it lies wholly below the log start offset.
//
// The active segment counts only if non-empty; if every segment goes, a new
// empty active segment is rolled first. The log start offset advances to the
// first remaining segment. It returns how many segments were deleted.
func (l *Log) DeleteOldSegments(now time.Time, limit int64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, l.errorf("retention: %w", ErrClosed)
	}
	cfg := l.cfg
	nowMs := now.UnixMilli()
	remaining := l.sizeLocked()
	n := 0
	var reasons []string
	for i, s := range l.segments {
		last := i == len(l.segments)-1
		upper := s.next
		if !last {
			upper = l.segments[i+1].base
		}
		if limit < upper || (last && s.size == 0) {
			break
		}
		var reason string
		switch {
		case retentionTimeBreached(nowMs, s.largestTimestamp(), cfg.RetentionTime):
			reason = fmt.Sprintf("retention time %v breached", cfg.RetentionTime)
		case cfg.RetentionBytes >= 0 && remaining-s.size >= cfg.RetentionBytes:
			reason = fmt.Sprintf("retention size %d breached", cfg.RetentionBytes)
		case upper <= l.startOffset:
			reason = "log start offset breach"
		default:
		}
		if reason == "" {
			break
		}
		remaining -= s.size
		reasons = append(reasons, reason)
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if n == len(l.segments) {
		if err := l.rollLocked(now); err != nil {
			return 0, err
		}
	}
	for k := 0; k < n; k++ {
		if err := l.deleteFirstLocked(1, reasons[k]); err != nil {
			return k, err
		}
	}
	if err := l.deleteSnapshotsLocked(func(o int64) bool { return o < l.startOffset }); err != nil {
		l.logger.Warn("deleting producer snapshots below the log start failed", "err", err)
	}
	if l.epochs.truncateFromStart(l.startOffset) {
		if err := l.writeEpochsLocked(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// retentionTimeBreached is retention's time rule: a segment whose largest
// timestamp is largestMs has outlived retention at nowMs when
// nowMs-largestMs > retention (in ms). A negative retention keeps forever.
// Timestamps come from producers and may be any int64, so the age is taken
// without overflow: a timestamp after now is never old, and an age beyond
// the int64 range is older than any retention.
func retentionTimeBreached(nowMs, largestMs int64, retention time.Duration) bool {
	if retention < 0 || largestMs > nowMs {
		return false
	}
	age := nowMs - largestMs // the true age is >= 0; it wrapped if negative
	return age < 0 || age > retention.Milliseconds()
}
