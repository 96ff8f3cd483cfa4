package segment

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bigIndexConfig sizes the active segment's index files to the full
// 10 MiB of log.index.size.max.bytes (a 1 GiB segment at a 1 KiB index
// interval could use 12 MiB).
func bigIndexConfig() Config {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 30
	cfg.IndexIntervalBytes = 1024
	return cfg
}

// allocated is the disk space a file's blocks take (what du counts).
func allocated(t *testing.T, path string) (size, blocks int64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size(), st.Sys().(*syscall.Stat_t).Blocks * 512
}

// dirAllocated sums the allocated bytes of every file in dir.
func dirAllocated(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		_, b := allocated(t, filepath.Join(dir, e.Name()))
		n += b
	}
	return n
}

// The active segment's index files are sized to 10 MiB but sparse: a new
// or nearly empty partition allocates no index blocks, and entries get
// blocks reserved just ahead of them.
func TestActiveIndexFilesAreSparse(t *testing.T) {
	cfg := bigIndexConfig()
	dir := t.TempDir()
	l := openLog(t, dir, cfg, true, nil)
	defer l.Close()
	a := newAppender(t, l)
	a.add(1, 20)
	a.add(1, 20)
	for _, sfx := range []string{indexSuffix, timeIndexSuffix} {
		size, blocks := allocated(t, segmentPath(dir, 0, sfx))
		if size < 9<<20 {
			t.Fatalf("%s is %d bytes: not sized for the active segment", sfx, size)
		}
		if blocks > 0 {
			t.Fatalf("%s of a log without index entries has %d bytes of blocks, want none", sfx, blocks)
		}
	}
	// Kafka's figure for an idle partition's directory: a few KiB.
	if n := dirAllocated(t, dir); n > 64<<10 {
		t.Fatalf("partition dir with 2 records uses %d bytes of disk, want <= 64 KiB", n)
	}

	for range 40 {
		a.add(1, 1100) // past the 1 KiB index interval: an entry each
	}
	l.mu.RLock()
	s := l.activeLocked()
	offEntries, timeEntries := s.offIdx.entries, s.timeIdx.entries
	l.mu.RUnlock()
	if offEntries < 30 || timeEntries < 30 {
		t.Fatalf("%d offset and %d time index entries, want >= 30", offEntries, timeEntries)
	}
	for _, c := range []struct {
		sfx  string
		used int64
	}{{indexSuffix, int64(offEntries * offsetIndexEntrySize)}, {timeIndexSuffix, int64(timeEntries * timeIndexEntrySize)}} {
		_, blocks := allocated(t, segmentPath(dir, 0, c.sfx))
		if blocks < c.used || blocks > c.used+2*reserveChunk {
			t.Fatalf("%s: %d bytes of blocks for %d bytes of entries, want them reserved and little more", c.sfx, blocks, c.used)
		}
	}
}

// dropTrailingZeros finds the used entries of a 10 MiB index without
// touching its hole: only the pages with data get into memory.
func TestDropTrailingZerosReadsOnlyData(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stray   int64 // a non-zero entry written at this byte, 0 none
		entries int
	}{
		{"entries then hole", 0, 3},
		{"stray entry after the hole", 5 << 20, 5<<20/offsetIndexEntrySize + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "00000000000000000000.index")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			var e [offsetIndexEntrySize]byte
			for i := range 3 {
				binary.BigEndian.PutUint32(e[:], uint32(i+1))
				binary.BigEndian.PutUint32(e[4:], uint32(100*(i+1)))
				if _, err := f.WriteAt(e[:], int64(i*offsetIndexEntrySize)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.stray > 0 {
				if _, err := f.WriteAt(e[:], tc.stray); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Truncate(10 << 20); err != nil {
				t.Fatal(err)
			}
			f.Close()

			x, err := openOffsetIndex(path, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer x.close()
			x.dropTrailingZeros()
			if x.entries != tc.entries {
				t.Fatalf("%d entries, want %d", x.entries, tc.entries)
			}
			if tc.stray > 0 {
				return // the pages between are looked at: that file is damaged
			}
			resident := residentPages(t, x.data)
			if resident > 4 {
				t.Fatalf("%d of %d pages of the index in memory after dropTrailingZeros, want the few with data", resident, len(x.data)/os.Getpagesize())
			}
		})
	}
}

// The reason a nearly empty partition took 25 ms to open after kill -9: its
// 10 MiB index files were read (zero-filled page by page) to find their
// last entry, and then cleared. Recovery now resets them by truncation, so
// the open reads a handful of pages, not thousands.
func TestUncleanOpenOfNearlyEmptyLogTouchesFewPages(t *testing.T) {
	cfg := bigIndexConfig()
	dir := t.TempDir()
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	a.add(2, 20)
	crash(l)
	// An index written by an older kbroker (or any with its zero tail in
	// the page cache): every page of the 10 MiB holds data.
	for _, sfx := range []string{indexSuffix, timeIndexSuffix} {
		if err := unix.Fallocate(int(mustOpen(t, segmentPath(dir, 0, sfx)).Fd()), 0, 0, 10<<20); err != nil {
			t.Skipf("no fallocate here: %v", err)
		}
	}

	l = openLog(t, dir, cfg, false, nil)
	defer l.Close()
	if l.EndOffset() != 2 {
		t.Fatalf("LEO %d after recovery, want 2", l.EndOffset())
	}
	for _, sfx := range []string{indexSuffix, timeIndexSuffix} {
		path := segmentPath(dir, 0, sfx)
		if _, blocks := allocated(t, path); blocks > 0 {
			t.Fatalf("%s keeps %d bytes of blocks after recovery, want none", sfx, blocks)
		}
		// Pages the open read are in the page cache: reading the
		// 10 MiB of zeros puts 2,560 there.
		m, err := unix.Mmap(int(mustOpen(t, path).Fd()), 0, 10<<20, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		resident := residentPages(t, m)
		unix.Munmap(m)
		if resident > 4 {
			t.Fatalf("%d pages of %s in memory after an unclean open, want the few with data", resident, sfx)
		}
	}
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// residentPages counts the pages of a mapping in memory (mincore).
func residentPages(t *testing.T, m []byte) int {
	t.Helper()
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
