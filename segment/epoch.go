package segment

import (
	"fmt"
	"math"
)

// EpochEntry is one leader epoch and the first offset written in it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache is Kafka's LeaderEpochFileCache: entries sorted by epoch with
// strictly increasing epochs and start offsets. It is not safe for
// concurrent use; Log.mu guards it. Methods that change it report whether
// they did, and the Log persists it then.
type epochCache struct {
	entries []EpochEntry
}

// latest returns the last entry.
func (c *epochCache) latest() (EpochEntry, bool) {
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// assign is LeaderEpochFileCache.assign: (epoch, start) is added unless the
// latest entry already has this epoch with a start offset <= start. Entries
// that would break monotonicity (epoch >= epoch or start offset >= start)
// are removed from the end first.
func (c *epochCache) assign(epoch int32, start int64) (bool, error) {
	if epoch < 0 || start < 0 {
		return false, fmt.Errorf("invalid leader epoch entry (epoch %d, start offset %d)", epoch, start)
	}
	if l, ok := c.latest(); ok && l.Epoch == epoch && start >= l.StartOffset {
		return false, nil
	}
	n := len(c.entries)
	for n > 0 && (c.entries[n-1].Epoch >= epoch || c.entries[n-1].StartOffset >= start) {
		n--
	}
	c.entries = append(c.entries[:n], EpochEntry{epoch, start})
	return true, nil
}

// truncateFromEnd removes the entries with start offset >= end.
func (c *epochCache) truncateFromEnd(end int64) bool {
	n := len(c.entries)
	for n > 0 && end >= 0 && c.entries[n-1].StartOffset >= end {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// truncateFromStart removes the entries with start offset <= start and
// re-adds the last removed one with its start offset moved to start, so the
// epoch in force at start is kept.
func (c *epochCache) truncateFromStart(start int64) bool {
	i := 0
	for i < len(c.entries) && c.entries[i].StartOffset <= start {
		i++
	}
	if i == 0 {
		return false
	}
	last := c.entries[i-1]
	if i == 1 && last.StartOffset == start {
		return false
	}
	rest := append([]EpochEntry{{last.Epoch, start}}, c.entries[i:]...)
	c.entries = rest
	return true
}

// endOffsetFor is LeaderEpochFileCache.endOffsetFor.
func (c *epochCache) endOffsetFor(epoch int32, logEnd int64) (int32, int64) {
	if epoch == -1 {
		return -1, -1
	}
	if l, ok := c.latest(); ok && l.Epoch == epoch {
		return epoch, logEnd
	}
	// higher: first entry with Epoch > epoch.
	h := 0
	for h < len(c.entries) && c.entries[h].Epoch <= epoch {
		h++
	}
	if h == len(c.entries) {
		return -1, -1
	}
	if h == 0 {
		// Older than anything known: the data is gone; answer with the
		// start of the first known epoch (Kafka does the same).
		return epoch, c.entries[0].StartOffset
	}
	return c.entries[h-1].Epoch, c.entries[h].StartOffset
}

func (c *epochCache) clear() bool {
	changed := len(c.entries) > 0
	c.entries = nil
	return changed
}

func (c *epochCache) checkpointEntries() [][]int64 {
	out := make([][]int64, len(c.entries))
	for i, e := range c.entries {
		out[i] = []int64{int64(e.Epoch), e.StartOffset}
	}
	return out
}

// loadEpochCheckpoint parses checkpoint entries, rejecting non-monotonic ones.
func loadEpochCheckpoint(path string) (epochCache, error) {
	raw, err := readCheckpoint(path, 2)
	if err != nil {
		return epochCache{}, err
	}
	var c epochCache
	for _, e := range raw {
		if e[0] < 0 || e[0] > math.MaxInt32 || e[1] < 0 {
			return epochCache{}, fmt.Errorf("checkpoint %s: bad entry %v", path, e)
		}
		if l, ok := c.latest(); ok && (int32(e[0]) <= l.Epoch || e[1] < l.StartOffset) {
			return epochCache{}, fmt.Errorf("checkpoint %s: entries not increasing at %v", path, e)
		}
		c.entries = append(c.entries, EpochEntry{int32(e[0]), e[1]})
	}
	return c, nil
}
