package segment

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// timeIndex is Kafka's .timeindex: 12-byte entries of (timestamp int64,
// relative offset int32), big endian. Following Kafka's LogSegment, an entry
// (max timestamp so far, last offset of the batch holding it) is offered
// whenever an offset-index entry is written, when the segment is rolled and
// when it is closed; it is kept only if its timestamp is greater than the
// last entry's, so timestamps strictly increase and offsets never decrease.
type timeIndex struct {
	mmapFile
	base int64
}

const timeIndexEntrySize = 12

func openTimeIndex(path string, base int64) (*timeIndex, error) {
	m, err := openMmapFile(path, timeIndexEntrySize)
	if err != nil {
		return nil, err
	}
	return &timeIndex{mmapFile: *m, base: base}, nil
}

func (x *timeIndex) at(i int) (ts int64, offset int64) {
	e := x.entry(i)
	return int64(binary.BigEndian.Uint64(e)), x.base + int64(int32(binary.BigEndian.Uint32(e[8:])))
}

// isFull reserves the last slot for the entry written on roll, as Kafka's
// TimeIndex does.
func (x *timeIndex) isFull() bool { return x.entries >= x.maxEntries()-1 }

// lastEntry is the last entry or (-1, base) when empty.
func (x *timeIndex) lastEntry() (int64, int64) {
	if x.entries == 0 {
		return -1, x.base
	}
	return x.at(x.entries - 1)
}

// maybeAppend adds (ts, offset) if ts is newer than the last entry.
// skipFullCheck lets the roll/close entry use the reserved slot.
func (x *timeIndex) maybeAppend(ts, offset int64, skipFullCheck bool) error {
	lastTs, lastOff := x.lastEntry()
	if ts <= lastTs {
		return nil
	}
	if x.entries > 0 && offset < lastOff {
		return fmt.Errorf("time index %s: offset %d below last entry offset %d", x.path, offset, lastOff)
	}
	if x.entries >= x.maxEntries() || (!skipFullCheck && x.isFull()) {
		return fmt.Errorf("time index %s is full (%d entries)", x.path, x.entries)
	}
	if err := x.reserve(int64((x.entries + 1) * timeIndexEntrySize)); err != nil {
		return err
	}
	e := x.data[x.entries*timeIndexEntrySize:]
	binary.BigEndian.PutUint64(e, uint64(ts))
	binary.BigEndian.PutUint32(e[8:], uint32(int32(offset-x.base)))
	x.entries++
	return nil
}

// lookup returns the entry with the largest timestamp <= ts, or (-1, base)
// if there is none. Every batch before the entry's batch has a max
// timestamp below the entry's (the entry names the first batch that reached
// it), hence below ts, so a search for ts may start at the entry's batch.
func (x *timeIndex) lookup(ts int64) (int64, int64) {
	i := sort.Search(x.entries, func(i int) bool {
		t, _ := x.at(i)
		return t > ts
	})
	if i == 0 {
		return -1, x.base
	}
	return x.at(i - 1)
}

// truncateTo removes the entries whose offset is >= offset.
func (x *timeIndex) truncateTo(offset int64) {
	x.truncateEntries(sort.Search(x.entries, func(i int) bool {
		_, o := x.at(i)
		return o >= offset
	}))
}

// check verifies alignment, ordering and that offsets lie in [base, limit)
// where limit is the next segment's base (or no bound when limit < 0).
func (x *timeIndex) check(limit int64) error {
	if x.misaligned {
		return fmt.Errorf("%w: %s size is not a multiple of %d", errIndexCorrupt, x.path, timeIndexEntrySize)
	}
	prevTs, prevOff := int64(-1<<63), x.base
	for i := 0; i < x.entries; i++ {
		t, o := x.at(i)
		if o < prevOff || (i > 0 && t <= prevTs) || (limit >= 0 && o >= limit) {
			return fmt.Errorf("%w: %s entry %d (timestamp %d, offset %d) out of order", errIndexCorrupt, x.path, i, t, o)
		}
		prevTs, prevOff = t, o
	}
	return nil
}
