package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"

	"github.com/kbroker/kbroker/internal/atomicfile"
)

// Producer state snapshots are Kafka's ProducerStateManager snapshot files,
// "<20-digit offset>.snapshot" in the partition directory: the producer
// state valid at that offset (every batch below it applied, none at or
// after it). Layout, big-endian (schema version 1):
//
//	version int16 (1) | crc uint32 | count int32 | count entries of
//	  producerId int64 | epoch int16 | lastSequence int32 | lastOffset int64 |
//	  offsetDelta int32 | timestamp int64 | coordinatorEpoch int32 |
//	  currentTxnFirstOffset int64
//
// The CRC-32C covers everything after the crc field (the count and the
// entries). A producer without a known batch has lastSequence -1,
// lastOffset -1 and offsetDelta 0; currentTxnFirstOffset is -1 without an
// open transaction.
//
// kbroker appends an extension after the entries, inside the CRC, when a
// producer has more than its last batch remembered: the earlier batches
// of its duplicate-detection window (Kafka keeps up to 5 in memory but
// snapshots only the last). Without them a replica that restarts knows
// only the last batch written before the snapshot, and the retry of an
// earlier batch still in flight gets OUT_OF_ORDER_SEQUENCE_NUMBER, on
// which franz-go starts a new epoch and writes the batch a second time
// (kverify found those duplicates on a compacted topic, whose segments
// roll, and so snapshot, every second). Kafka's reader parses the schema's
// fields and checks the CRC over the whole rest of the file, so it reads
// such a file as the plain v1 snapshot it starts with. Layout:
//
//	magic uint32 ("kbrk") | version int16 (1) | count int32 | count of
//	  producerId int64 | n int32 | n batches, oldest first, of
//	    firstSequence int32 | lastSequence int32 | baseOffset int64 |
//	    offsetDelta int32 | timestamp int64
const (
	snapshotSuffix          = ".snapshot"
	producerSnapshotVersion = 1
	snapshotHeaderSize      = 2 + 4 + 4
	snapshotEntrySize       = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8

	snapshotExtMagic      = 0x6b62726b // "kbrk"
	snapshotExtVersion    = 1
	snapshotExtHeaderSize = 4 + 2 + 4
	snapshotExtEntrySize  = 8 + 4
	snapshotExtBatchSize  = 4 + 4 + 8 + 4 + 8
	// MaxEarlierBatches bounds ProducerSnapshotEntry.Earlier: the broker
	// remembers 5 batches per producer, the last in Kafka's entry.
	MaxEarlierBatches = 4
)

// SnapshotBatch is one earlier batch of a producer's duplicate-detection
// window (the snapshot extension).
type SnapshotBatch struct {
	FirstSequence, LastSequence int32
	BaseOffset                  int64
	OffsetDelta                 int32
	Timestamp                   int64 // log append time, or -1
}

// ProducerSnapshotEntry is one producer of a snapshot (Kafka's v1 entry).
type ProducerSnapshotEntry struct {
	ProducerID            int64
	Epoch                 int16
	LastSequence          int32 // last sequence of the last batch, -1 if none
	LastOffset            int64 // last offset of the last batch, -1 if none
	OffsetDelta           int32 // last offset - base offset of the last batch
	Timestamp             int64 // max timestamp of the last batch or marker
	CoordinatorEpoch      int32
	CurrentTxnFirstOffset int64 // -1 without an open transaction
	// Earlier are the producer's batches before its last one that the
	// broker still remembers for duplicate detection, oldest first
	// (kbroker's extension, at most MaxEarlierBatches).
	Earlier []SnapshotBatch
}

var (
	snapshotCRCTable = crc32.MakeTable(crc32.Castagnoli)
	// ErrCorruptSnapshot is returned (wrapped) by DecodeProducerSnapshot.
	ErrCorruptSnapshot = errors.New("corrupt producer state snapshot")
)

// EncodeProducerSnapshot returns the bytes of a snapshot file.
func EncodeProducerSnapshot(entries []ProducerSnapshotEntry) []byte {
	b := make([]byte, snapshotHeaderSize+len(entries)*snapshotEntrySize)
	binary.BigEndian.PutUint16(b[0:], producerSnapshotVersion)
	binary.BigEndian.PutUint32(b[6:], uint32(len(entries)))
	p := b[snapshotHeaderSize:]
	for _, e := range entries {
		binary.BigEndian.PutUint64(p[0:], uint64(e.ProducerID))
		binary.BigEndian.PutUint16(p[8:], uint16(e.Epoch))
		binary.BigEndian.PutUint32(p[10:], uint32(e.LastSequence))
		binary.BigEndian.PutUint64(p[14:], uint64(e.LastOffset))
		binary.BigEndian.PutUint32(p[22:], uint32(e.OffsetDelta))
		binary.BigEndian.PutUint64(p[26:], uint64(e.Timestamp))
		binary.BigEndian.PutUint32(p[34:], uint32(e.CoordinatorEpoch))
		binary.BigEndian.PutUint64(p[38:], uint64(e.CurrentTxnFirstOffset))
		p = p[snapshotEntrySize:]
	}
	b = appendSnapshotExtension(b, entries)
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], snapshotCRCTable))
	return b
}

// appendSnapshotExtension appends the earlier batches of the entries that
// have any; nothing when none has, so such a file is Kafka's byte for byte.
func appendSnapshotExtension(b []byte, entries []ProducerSnapshotEntry) []byte {
	count := 0
	for _, e := range entries {
		if len(e.Earlier) > 0 {
			count++
		}
	}
	if count == 0 {
		return b
	}
	be := binary.BigEndian
	b = be.AppendUint32(b, snapshotExtMagic)
	b = be.AppendUint16(b, snapshotExtVersion)
	b = be.AppendUint32(b, uint32(count))
	for _, e := range entries {
		if len(e.Earlier) == 0 {
			continue
		}
		b = be.AppendUint64(b, uint64(e.ProducerID))
		b = be.AppendUint32(b, uint32(len(e.Earlier)))
		for _, x := range e.Earlier {
			b = be.AppendUint32(b, uint32(x.FirstSequence))
			b = be.AppendUint32(b, uint32(x.LastSequence))
			b = be.AppendUint64(b, uint64(x.BaseOffset))
			b = be.AppendUint32(b, uint32(x.OffsetDelta))
			b = be.AppendUint64(b, uint64(x.Timestamp))
		}
	}
	return b
}

// decodeSnapshotExtension reads the extension (ext: the bytes after
// Kafka's entries) into out's entries.
func decodeSnapshotExtension(ext []byte, out []ProducerSnapshotEntry) error {
	if len(ext) == 0 {
		return nil
	}
	be := binary.BigEndian
	if len(ext) < snapshotExtHeaderSize || be.Uint32(ext) != snapshotExtMagic {
		return fmt.Errorf("%w: %d bytes after the entries", ErrCorruptSnapshot, len(ext))
	}
	if v := int16(be.Uint16(ext[4:])); v != snapshotExtVersion {
		return fmt.Errorf("%w: unknown extension version %d", ErrCorruptSnapshot, v)
	}
	byID := make(map[int64]int, len(out))
	for i, e := range out {
		byID[e.ProducerID] = i
	}
	count := int64(int32(be.Uint32(ext[6:])))
	p := ext[snapshotExtHeaderSize:]
	for ; count > 0; count-- {
		if len(p) < snapshotExtEntrySize {
			return fmt.Errorf("%w: extension cut short", ErrCorruptSnapshot)
		}
		id, n := int64(be.Uint64(p)), int32(be.Uint32(p[8:]))
		p = p[snapshotExtEntrySize:]
		i, ok := byID[id]
		if !ok || n < 1 || n > MaxEarlierBatches || len(out[i].Earlier) > 0 || len(p) < int(n)*snapshotExtBatchSize {
			return fmt.Errorf("%w: extension entry of producer %d with %d batches", ErrCorruptSnapshot, id, n)
		}
		earlier := make([]SnapshotBatch, n)
		for j := range earlier {
			earlier[j] = SnapshotBatch{
				FirstSequence: int32(be.Uint32(p)),
				LastSequence:  int32(be.Uint32(p[4:])),
				BaseOffset:    int64(be.Uint64(p[8:])),
				OffsetDelta:   int32(be.Uint32(p[16:])),
				Timestamp:     int64(be.Uint64(p[20:])),
			}
			p = p[snapshotExtBatchSize:]
		}
		out[i].Earlier = earlier
	}
	if count != 0 || len(p) != 0 {
		return fmt.Errorf("%w: %d bytes after the extension", ErrCorruptSnapshot, len(p))
	}
	return nil
}

// DecodeProducerSnapshot parses a snapshot file; a wrong version, CRC or
// length is ErrCorruptSnapshot.
func DecodeProducerSnapshot(b []byte) ([]ProducerSnapshotEntry, error) {
	if len(b) < snapshotHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorruptSnapshot, len(b))
	}
	if v := int16(binary.BigEndian.Uint16(b)); v != producerSnapshotVersion {
		return nil, fmt.Errorf("%w: unknown version %d", ErrCorruptSnapshot, v)
	}
	if stored, computed := binary.BigEndian.Uint32(b[2:]), crc32.Checksum(b[6:], snapshotCRCTable); stored != computed {
		return nil, fmt.Errorf("%w: stored crc %d, computed %d", ErrCorruptSnapshot, stored, computed)
	}
	n := int32(binary.BigEndian.Uint32(b[6:]))
	if n < 0 || int64(len(b)-snapshotHeaderSize) < int64(n)*snapshotEntrySize {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", ErrCorruptSnapshot, n, len(b))
	}
	out := make([]ProducerSnapshotEntry, n)
	p := b[snapshotHeaderSize:]
	for i := range out {
		out[i] = ProducerSnapshotEntry{
			ProducerID:            int64(binary.BigEndian.Uint64(p[0:])),
			Epoch:                 int16(binary.BigEndian.Uint16(p[8:])),
			LastSequence:          int32(binary.BigEndian.Uint32(p[10:])),
			LastOffset:            int64(binary.BigEndian.Uint64(p[14:])),
			OffsetDelta:           int32(binary.BigEndian.Uint32(p[22:])),
			Timestamp:             int64(binary.BigEndian.Uint64(p[26:])),
			CoordinatorEpoch:      int32(binary.BigEndian.Uint32(p[34:])),
			CurrentTxnFirstOffset: int64(binary.BigEndian.Uint64(p[38:])),
		}
		p = p[snapshotEntrySize:]
	}
	if err := decodeSnapshotExtension(p, out); err != nil {
		return nil, err
	}
	return out, nil
}

// WriteProducerSnapshot writes the producer state valid at offset (at most
// the log end offset) to "<offset>.snapshot", atomically (temporary file
// and rename), then deletes the snapshots no longer needed, as Kafka keeps
// them: those below both the base of the segment before the active one and
// the base of the segment holding the recovery point. The file is written
// without the lock; a truncation meanwhile, or an offset past the log end,
// discards it.
//
// A snapshot at or below the recovery point is fsynced (with its
// directory) before it counts. One above it is not, yet: after a crash the
// load deletes every snapshot past the recovery point, so until the log is
// flushed that far nothing would read it, and the flush that moves the
// recovery point past it fsyncs it first (as Kafka flushes producer
// snapshots with the segments). The snapshot every partition writes when
// it opens after a kill -9 (above its recovery point) costs no fsync.
func (l *Log) WriteProducerSnapshot(offset int64, entries []ProducerSnapshotEntry) error {
	l.mu.RLock()
	closed, gen, leo, rp := l.closed, l.truncations, l.endOffsetLocked(), l.recoveryPoint
	l.mu.RUnlock()
	if closed {
		return l.errorf("write producer snapshot: %w", ErrClosed)
	}
	if offset > leo || offset < 0 {
		return l.errorf("write producer snapshot at %d, log end offset %d: %w", offset, leo, ErrOffsetOutOfRange)
	}
	path := segmentPath(l.dir, offset, snapshotSuffix)
	durable := offset <= rp
	write := writeUnsynced
	if durable {
		write = atomicfile.Write
	}
	if err := write(path, EncodeProducerSnapshot(entries)); err != nil {
		return l.errorf("write producer snapshot: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.truncations != gen || offset > l.endOffsetLocked() {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return l.errorf("remove stale producer snapshot: %w", err)
		}
		return nil
	}
	if !durable {
		if offset <= l.recoveryPoint {
			// A flush passed it while it was being written.
			if err := errors.Join(syncFile(path), atomicfile.SyncDir(l.dir)); err != nil {
				return l.errorf("write producer snapshot: %w", err)
			}
		} else {
			if l.unsyncedSnapshots == nil {
				l.unsyncedSnapshots = map[int64]bool{}
			}
			l.unsyncedSnapshots[offset] = true
		}
	}
	if i, found := slices.BinarySearch(l.snapshots, offset); !found {
		l.snapshots = slices.Insert(l.snapshots, i, offset)
	}
	keep := l.activeLocked().base
	if n := len(l.segments); n > 1 {
		keep = l.segments[n-2].base
	}
	keep = min(keep, l.segments[l.segmentIndexLocked(l.recoveryPoint)].base, offset)
	return l.deleteSnapshotsLocked(func(o int64) bool { return o < keep })
}

// writeUnsynced replaces path with data atomically (temporary file and
// rename) but without fsync: after a crash either file may be there, or a
// torn one, which the reader must detect (a snapshot's CRC, a checkpoint's
// parse) and rebuild from the log.
func writeUnsynced(path string, data []byte) error {
	tmp := path + atomicfile.TmpSuffix
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// syncFile fsyncs the file at path; one removed meanwhile is no error.
func syncFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}

// unsyncedSnapshotsLocked lists the snapshots not yet fsynced at or below
// upTo, ascending.
func (l *Log) unsyncedSnapshotsLocked(upTo int64) []int64 {
	var out []int64
	for o := range l.unsyncedSnapshots {
		if o <= upTo {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
}

// syncSnapshots fsyncs the snapshot files at the given offsets (without
// the directory).
func (l *Log) syncSnapshots(offsets []int64) error {
	var errs []error
	for _, o := range offsets {
		errs = append(errs, syncFile(segmentPath(l.dir, o, snapshotSuffix)))
	}
	return errors.Join(errs...)
}

// LoadProducerSnapshot reads the newest snapshot whose offset lies in
// [minOffset, maxOffset]. A snapshot that cannot be read or is corrupt
// (short, wrong CRC) is logged and deleted, and the next older one is
// tried; ok is false when none is left.
func (l *Log) LoadProducerSnapshot(minOffset, maxOffset int64) (offset int64, entries []ProducerSnapshotEntry, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.snapshots) - 1; i >= 0; i-- {
		o := l.snapshots[i]
		if o > maxOffset {
			continue
		}
		if o < minOffset {
			break
		}
		path := segmentPath(l.dir, o, snapshotSuffix)
		b, err := os.ReadFile(path)
		if err == nil {
			entries, err = DecodeProducerSnapshot(b)
		}
		if err == nil {
			return o, entries, true
		}
		l.logger.Warn("ignoring unreadable producer state snapshot", "file", path, "err", err)
		if derr := l.deleteSnapshotsLocked(func(x int64) bool { return x == o }); derr != nil {
			l.logger.Warn("removing unreadable producer state snapshot failed", "err", derr)
			l.snapshots = slices.DeleteFunc(l.snapshots, func(x int64) bool { return x == o })
		}
	}
	return 0, nil, false
}

// ProducerSnapshotOffsets lists the offsets of the snapshot files, ascending.
func (l *Log) ProducerSnapshotOffsets() []int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.snapshots)
}

// deleteSnapshotsLocked deletes the snapshot files whose offsets match.
// One that cannot be removed stays listed, and the error says so.
func (l *Log) deleteSnapshotsLocked(match func(offset int64) bool) error {
	var errs []error
	kept := l.snapshots[:0]
	for _, o := range l.snapshots {
		if !match(o) {
			kept = append(kept, o)
			continue
		}
		if err := os.Remove(segmentPath(l.dir, o, snapshotSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove producer snapshot: %w", err))
			kept = append(kept, o)
			continue
		}
		delete(l.unsyncedSnapshots, o)
	}
	l.snapshots = kept
	if err := errors.Join(errs...); err != nil {
		return l.errorf("%w", err)
	}
	return nil
}
