package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"golang.org/x/sys/unix"
)

// errIndexCorrupt marks an index file that fails its sanity check; the
// segment rebuilds such an index from its batches.
var errIndexCorrupt = errors.New("index corrupt")

// mmapFile is an index file of fixed-size entries, memory-mapped read-write
// (MAP_SHARED) as Kafka's AbstractIndex does. The file of the active segment
// is set to the maximum index size; entries says how many entries at the
// front are in use. When the segment stops being active (roll) and on Close
// the file is trimmed to entries*entrySize bytes, so that a cleanly closed
// index holds exactly its entries.
//
// The file is sparse, as Kafka's (RandomAccessFile.setLength): growing it
// with ftruncate reserves no blocks, so an idle partition's indexes use
// none. Writing through the mapping into a hole allocates a block, and on a
// full disk that write fails with SIGBUS, which kills the process. Kafka
// accepts that; kbroker instead reserves the blocks ahead of the entries,
// reserveChunk bytes at a time (fallocate), before writing an entry there.
// When the reservation fails (ENOSPC) the entry is not written: the append
// reports the error, the caller skips the entry (an index is a hint; a
// lookup then scans a little further) and the disk-full error surfaces
// where it matters, on the .log write.
//
// The file is not kept open: as Kafka's AbstractIndex closes its
// RandomAccessFile once the buffer is mapped, the descriptor is closed right
// after mmap (the mapping stays valid) and the rare calls that need one
// (resize, reserve, fsync) open the path for the call. A partition's open
// descriptors are then its .log files only, not three per segment: 10,000
// partitions fit a 20,000 descriptor limit.
//
// An mmapFile is not safe for concurrent use; the Log's mu serialises access
// (writers hold it exclusively, readers shared).
type mmapFile struct {
	path string
	// mapMu orders the mapping's replacement (mapLen, unmap) after a
	// sync running without the Log's lock (a flush after a roll) that
	// still uses it: retention, truncation and the cleaner's swap close
	// segments such a flush may be syncing. Everything else reads data
	// under the Log's lock, which every replacement holds too. A pointer:
	// the index types embed an mmapFile copied from openMmapFile's.
	mapMu     *sync.Mutex
	data      []byte // the mapping; len(data) is the file size
	entrySize int
	entries   int
	// reserved is how many bytes from the start are known to have blocks
	// (fallocate) behind them; writes below it cannot hit a hole.
	reserved int64
	// misaligned is set at open when the file size was not a multiple of
	// the entry size (a sign of damage).
	misaligned bool
}

// reserveChunk is how much of an index file is reserved with fallocate at
// a time: one block, the unit of allocation. An offset index entry per
// log.index.interval.bytes (4 KiB) of log makes one fallocate per 2 MiB of
// log, a time index one per 1.3 MiB.
const reserveChunk = 4096

// openMmapFile opens (creating if needed) and maps an index file as it is.
// Every whole entry in the file counts as used; callers drop trailing zero
// entries and run the sanity check.
func openMmapFile(path string, entrySize int) (*mmapFile, error) {
	f, size, err := openSized(path, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := &mmapFile{path: path, entrySize: entrySize, mapMu: &sync.Mutex{}}
	if size%int64(entrySize) != 0 {
		m.misaligned = true
		size -= size % int64(entrySize)
		if err := f.Truncate(size); err != nil {
			return nil, err
		}
	}
	if err := m.mapLen(f, size); err != nil {
		return nil, err
	}
	m.entries = int(size) / entrySize
	return m, nil
}

// withFile runs fn with a descriptor of the file, open for the call only.
// The file must exist: a segment whose files were renamed or removed
// under it gets an error, not a new empty file.
func (m *mmapFile) withFile(fn func(f *os.File) error) error {
	f, err := os.OpenFile(m.path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = fn(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (m *mmapFile) mapLen(f *os.File, n int64) error {
	m.mapMu.Lock()
	defer m.mapMu.Unlock()
	if n == 0 {
		m.data = nil
		return nil
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", m.path, err)
	}
	m.data = b
	return nil
}

func (m *mmapFile) unmap() error {
	m.mapMu.Lock()
	defer m.mapMu.Unlock()
	if m.data == nil {
		return nil
	}
	err := unix.Munmap(m.data)
	m.data = nil
	return err
}

// maxEntries is the number of entries the current mapping can hold.
func (m *mmapFile) maxEntries() int { return len(m.data) / m.entrySize }

// resize changes the file (and mapping) size to n bytes rounded down to a
// whole number of entries, never below the used entries. Growing leaves a
// hole (see mmapFile): nothing is allocated until entries are written.
func (m *mmapFile) resize(n int64) error {
	n -= n % int64(m.entrySize)
	if used := int64(m.entries * m.entrySize); n < used {
		n = used
	}
	if n == int64(len(m.data)) {
		return nil
	}
	m.reserved = min(m.reserved, n)
	return m.withFile(func(f *os.File) error { return m.remap(f, n, false) })
}

// remap changes the file's size to n (first to 0 with empty) and maps it
// again. The descriptor is open before the old mapping goes, so running
// out of descriptors leaves the mapping as it was; a failure after that
// keeps whatever can still be mapped and never more entries than it holds.
func (m *mmapFile) remap(f *os.File, n int64, empty bool) error {
	old := int64(len(m.data))
	defer func() { m.entries = min(m.entries, m.maxEntries()) }()
	if err := m.unmap(); err != nil {
		return fmt.Errorf("munmap %s: %w", m.path, err)
	}
	err := error(nil)
	if empty {
		err = f.Truncate(0)
		old = 0
	}
	if err == nil {
		err = f.Truncate(n)
	}
	if err != nil {
		err = errors.Join(err, m.mapLen(f, old))
	} else {
		err = m.mapLen(f, n)
	}
	return err
}

// reset empties the file and sizes it to n bytes (rounded down to whole
// entries) without touching its pages: truncating to zero drops every
// block and the old entries with them, so no zero tail needs clearing or
// scanning. An index rebuilt from the batches starts here.
func (m *mmapFile) reset(n int64) error {
	n -= n % int64(m.entrySize)
	return m.withFile(func(f *os.File) error {
		m.entries, m.reserved, m.misaligned = 0, 0, false
		return m.remap(f, n, true)
	})
}

// reserve makes sure the first end bytes have blocks behind them before
// they are written through the mapping (see mmapFile), allocating up to
// the next reserveChunk boundary. A file system without fallocate
// (EOPNOTSUPP) is written sparse, as Kafka does.
func (m *mmapFile) reserve(end int64) error {
	if end <= m.reserved {
		return nil
	}
	upTo := min((end+reserveChunk-1)/reserveChunk*reserveChunk, int64(len(m.data)))
	err := m.withFile(func(f *os.File) error {
		return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, m.reserved, upTo-m.reserved)
	})
	if err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("reserve blocks of %s: %w", m.path, err)
	}
	m.reserved = upTo
	return nil
}

// truncateEntries keeps the first n entries and zeroes the rest, so that an
// untrimmed file still ends in zero entries after a crash.
func (m *mmapFile) truncateEntries(n int) {
	if n >= m.entries {
		return
	}
	clear(m.data[n*m.entrySize : m.entries*m.entrySize])
	m.entries = n
}

// dropTrailingZeros forgets all-zero entries at the end: the unused tail of
// an active segment's file that was not trimmed (unclean shutdown). An
// all-zero first entry is dropped too; for the offset index that loses at
// most a hint equal to "base offset at position 0", for the time index a
// meaningless timestamp 0.
//
// The tail is mostly a hole: only the bytes up to the end of the file's
// last data region (SEEK_DATA/SEEK_HOLE) are looked at, so a nearly empty
// 10 MiB index costs a few system calls, not a page fault per 4 KiB of
// zeros.
func (m *mmapFile) dropTrailingZeros() {
	end := int64(len(m.data))
	_ = m.withFile(func(f *os.File) error { end = dataEnd(f, end); return nil })
	m.entries = min(m.entries, int((end+int64(m.entrySize)-1)/int64(m.entrySize)))
	for m.entries > 0 {
		e := m.data[(m.entries-1)*m.entrySize : m.entries*m.entrySize]
		for _, b := range e {
			if b != 0 {
				return
			}
		}
		m.entries--
	}
}

// dataEnd is the end of the last data region of f (size bytes long):
// every byte after it lies in a hole and reads as zero. Where the file
// system cannot say (no SEEK_DATA), it is size.
func dataEnd(f *os.File, size int64) int64 {
	fd := int(f.Fd())
	end := int64(0)
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data at or after off
		}
		if err != nil {
			return size
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return size
		}
		end, off = hole, hole
	}
	return min(end, size)
}

func (m *mmapFile) entry(i int) []byte {
	return m.data[i*m.entrySize : (i+1)*m.entrySize]
}

// sync writes the mapped entries to disk, as Kafka's index flush
// (MappedByteBuffer.force): msync, which on Linux is an fdatasync of the
// mapped range, so it needs no descriptor. An empty file has no mapping
// and is fsynced through its path.
func (m *mmapFile) sync() error {
	m.mapMu.Lock()
	defer m.mapMu.Unlock()
	if len(m.data) == 0 {
		return m.withFile(func(f *os.File) error { return f.Sync() })
	}
	return unix.Msync(m.data, unix.MS_SYNC)
}

func (m *mmapFile) close() error { return m.unmap() }

// offsetIndex is Kafka's .index: 8-byte entries of (relative offset int32,
// physical position int32), big endian. As in Kafka's LogSegment.append, an
// entry maps a batch's LAST offset to the file position where that batch
// STARTS, and one is added when more than IndexIntervalBytes were appended
// since the previous entry. Entries are strictly increasing in both fields.
type offsetIndex struct {
	mmapFile
	base int64
}

const offsetIndexEntrySize = 8

func openOffsetIndex(path string, base int64) (*offsetIndex, error) {
	m, err := openMmapFile(path, offsetIndexEntrySize)
	if err != nil {
		return nil, err
	}
	return &offsetIndex{mmapFile: *m, base: base}, nil
}

func (x *offsetIndex) at(i int) (offset int64, pos int32) {
	e := x.entry(i)
	return x.base + int64(int32(binary.BigEndian.Uint32(e))), int32(binary.BigEndian.Uint32(e[4:]))
}

func (x *offsetIndex) isFull() bool { return x.entries >= x.maxEntries() }

// lastOffset is the offset of the last entry, or base when empty.
func (x *offsetIndex) lastOffset() int64 {
	if x.entries == 0 {
		return x.base
	}
	o, _ := x.at(x.entries - 1)
	return o
}

func (x *offsetIndex) append(offset int64, pos int32) error {
	if x.isFull() {
		return fmt.Errorf("offset index %s is full (%d entries)", x.path, x.entries)
	}
	if x.entries > 0 && offset <= x.lastOffset() {
		return fmt.Errorf("offset index %s: offset %d not above last entry %d", x.path, offset, x.lastOffset())
	}
	if err := x.reserve(int64((x.entries + 1) * offsetIndexEntrySize)); err != nil {
		return err
	}
	e := x.data[x.entries*offsetIndexEntrySize:]
	binary.BigEndian.PutUint32(e, uint32(int32(offset-x.base)))
	binary.BigEndian.PutUint32(e[4:], uint32(pos))
	x.entries++
	return nil
}

// lookup returns the entry with the largest offset <= target, or (base, 0).
// The batch containing target starts at or after the returned position.
func (x *offsetIndex) lookup(target int64) (int64, int32) {
	i := sort.Search(x.entries, func(i int) bool {
		o, _ := x.at(i)
		return o > target
	})
	if i == 0 {
		return x.base, 0
	}
	return x.at(i - 1)
}

// floorPosition is the largest indexed position <= pos, or 0.
func (x *offsetIndex) floorPosition(pos int64) int64 {
	i := sort.Search(x.entries, func(i int) bool {
		_, p := x.at(i)
		return int64(p) > pos
	})
	if i == 0 {
		return 0
	}
	_, p := x.at(i - 1)
	return int64(p)
}

// truncateTo removes the entries whose offset is >= offset.
func (x *offsetIndex) truncateTo(offset int64) {
	x.truncateEntries(sort.Search(x.entries, func(i int) bool {
		o, _ := x.at(i)
		return o >= offset
	}))
}

// check is Kafka's sanity check, a bit stricter: entries strictly
// increasing, relative offsets non-negative, positions inside the log file.
func (x *offsetIndex) check(logSize int64) error {
	if x.misaligned {
		return fmt.Errorf("%w: %s size is not a multiple of %d", errIndexCorrupt, x.path, offsetIndexEntrySize)
	}
	prevOff, prevPos := int64(-1), int32(-1)
	for i := 0; i < x.entries; i++ {
		o, p := x.at(i)
		if o < x.base || p < 0 || o <= prevOff || p <= prevPos || int64(p) >= logSize {
			return fmt.Errorf("%w: %s entry %d (offset %d, position %d) out of order or beyond log size %d",
				errIndexCorrupt, x.path, i, o, p, logSize)
		}
		prevOff, prevPos = o, p
	}
	return nil
}
