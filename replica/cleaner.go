package replica

import (
	"context"
	"errors"
	"maps"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/kbroker/kbroker/segment"
	"golang.org/x/sys/unix"
)

// The log cleaner's scheduling, Kafka's LogCleaner threads and
// LogCleanerManager: which compacted log to clean next, from where to
// where, the cleaner-offset-checkpoint, the I/O throttle. The cleaning
// itself is segment.Log.Clean.

// cleanerCheckpointFile is Kafka's per-log-dir cleaner-offset-checkpoint:
// for each compacted partition, the offset below which its log is clean.
const cleanerCheckpointFile = "cleaner-offset-checkpoint"

// CleanerConfig is the broker's log.cleaner.* settings.
type CleanerConfig struct {
	Enable  bool // log.cleaner.enable
	Threads int  // log.cleaner.threads
	// DedupeBufferSize is log.cleaner.dedupe.buffer.size, shared by the
	// threads: each cleaning's key map gets Size/Threads.
	DedupeBufferSize int64
	// IOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second, read
	// and written bytes of all threads together; <= 0 or +Inf: no limit.
	IOMaxBytesPerSecond float64
	Backoff             time.Duration // log.cleaner.backoff.ms: sleep when nothing is cleanable
	// Hook is segment.CleanOptions.Hook for every cleaning: crash tests
	// only.
	Hook func(point int) error
}

// cleanPlan is where one log's dirty section lies (Kafka's
// LogToClean with cleanableOffsets).
type cleanPlan struct {
	firstDirty, firstUncleanable int64
	cleanBytes, cleanableBytes   int64
	// needNow: a dirty segment is older than max.compaction.lag.ms.
	needNow bool
}

// ratio is Kafka's cleanableRatio: dirty bytes over all bytes up to the
// first uncleanable offset.
func (p cleanPlan) ratio() float64 {
	total := p.cleanBytes + p.cleanableBytes
	if total == 0 {
		return 0
	}
	return float64(p.cleanableBytes) / float64(total)
}

// planCleaning is Kafka's LogCleanerManager.cleanableOffsets and
// maxCompactionDelay for one log. checkpoint is the cleaner checkpoint
// (-1: none); a checkpoint below the log start or past the log end is
// replaced by the log start, as Kafka does. The first uncleanable offset
// is the least of the last stable offset, the active segment's base, and
// the base of the first dirty segment with a record newer than
// min.compaction.lag.ms. Clean bytes are those of segments wholly below
// the first dirty offset; cleanable bytes those of the closed segments
// overlapping [first dirty, first uncleanable).
func planCleaning(segs []segment.SegmentStat, logStart, checkpoint, lso int64, minLag, maxLag time.Duration, nowMs int64) cleanPlan {
	if len(segs) == 0 {
		return cleanPlan{}
	}
	end := segs[len(segs)-1].Next
	firstDirty := checkpoint
	if firstDirty < logStart || firstDirty > end {
		firstDirty = logStart
	}
	uncleanable := min(lso, segs[len(segs)-1].Base)
	earliest := int64(math.MaxInt64)
	for _, s := range segs {
		if s.Active || s.Next <= firstDirty {
			continue
		}
		if minLag > 0 && s.LargestTimestamp > nowMs-minLag.Milliseconds() {
			uncleanable = min(uncleanable, s.Base)
		}
		if s.FirstBatchTimestamp > 0 {
			earliest = min(earliest, s.FirstBatchTimestamp)
		}
	}
	p := cleanPlan{firstDirty: firstDirty, firstUncleanable: max(uncleanable, firstDirty)}
	for _, s := range segs {
		switch {
		case s.Next <= firstDirty:
			p.cleanBytes += s.Size
		case !s.Active && s.Base < p.firstUncleanable && p.firstDirty < p.firstUncleanable:
			// Overlaps the dirty range [firstDirty, firstUncleanable),
			// which is empty when the checkpoint reached the last
			// stable offset (Kafka's logSegments of an empty range).
			p.cleanableBytes += s.Size
		}
	}
	if maxLag > 0 && earliest != math.MaxInt64 {
		p.needNow = earliest < nowMs-maxLag.Milliseconds()
	}
	return p
}

// cleanCandidate is one compacted log the cleaner may pick.
type cleanCandidate struct {
	plan     cleanPlan
	minRatio float64 // min.cleanable.dirty.ratio
}

// chooseLog is Kafka's grabFilthiestCompactedLog: among the logs with
// something cleanable that either must be compacted now (max.compaction.lag.ms)
// or are dirtier than their min.cleanable.dirty.ratio, the one with the
// highest dirty ratio; -1 when none.
func chooseLog(cands []cleanCandidate) int {
	best := -1
	for i, c := range cands {
		if c.plan.cleanableBytes <= 0 || !(c.plan.needNow || c.plan.ratio() > c.minRatio) {
			continue
		}
		if best < 0 || c.plan.ratio() > cands[best].plan.ratio() {
			best = i
		}
	}
	return best
}

// throttleDelay is how long Kafka's Throttler sleeps after observed bytes
// in elapsed time at rate bytes per second: until the average is the rate.
func throttleDelay(observed int64, elapsed time.Duration, rate float64) time.Duration {
	if rate <= 0 || math.IsInf(rate, 1) {
		return 0
	}
	want := time.Duration(float64(observed) / rate * float64(time.Second))
	return max(want-elapsed, 0)
}

// throttleCheckInterval is Kafka's Throttler checkIntervalMs for the
// cleaner (300 ms).
const throttleCheckInterval = 300 * time.Millisecond

// throttler is the cleaner threads' shared I/O throttle.
type throttler struct {
	rate float64

	// mu guards the period below.
	mu          sync.Mutex
	periodStart time.Time
	observed    int64
}

// wait records n bytes and sleeps when the period's rate is too high.
func (t *throttler) wait(n int64) {
	t.mu.Lock()
	now := time.Now()
	if t.periodStart.IsZero() {
		t.periodStart = now
	}
	t.observed += n
	elapsed := now.Sub(t.periodStart)
	if elapsed < throttleCheckInterval {
		t.mu.Unlock()
		return
	}
	d := throttleDelay(t.observed, elapsed, t.rate)
	t.periodStart, t.observed = now.Add(d), 0
	t.mu.Unlock()
	time.Sleep(d)
}

// logCleaner runs the cleaner threads of a Manager.
type logCleaner struct {
	m        *Manager
	cfg      CleanerConfig
	throttle *throttler

	// writeMu serialises checkpoint file writes; taken before mu.
	writeMu sync.Mutex
	// mu guards the fields below. Lock order: Manager.mu and
	// Partition.mu are never taken while holding it.
	mu          sync.Mutex
	checkpoints map[TopicPartition]int64 // first dirty offset per partition
	inProgress  map[TopicPartition]bool
	uncleanable map[TopicPartition]bool // failed with an error other than an abort
}

// RunCleaner runs the log cleaner threads (log.cleaner.threads) until ctx
// ends; without log.cleaner.enable it returns at once.
func (m *Manager) RunCleaner(ctx context.Context) {
	cfg := m.cfg.Cleaner
	if !cfg.Enable {
		return
	}
	cfg.Threads = max(cfg.Threads, 1)
	if cfg.Backoff <= 0 {
		cfg.Backoff = 15 * time.Second
	}
	ckpt, err := m.readDirCheckpoints(cleanerCheckpointFile)
	if err != nil {
		m.logger.Warn("unreadable cleaner checkpoint; compacted logs are cleaned from their start", "err", err)
		ckpt = map[TopicPartition]int64{}
	}
	c := &logCleaner{m: m, cfg: cfg, throttle: &throttler{rate: cfg.IOMaxBytesPerSecond},
		checkpoints: ckpt, inProgress: map[TopicPartition]bool{}, uncleanable: map[TopicPartition]bool{}}
	var wg sync.WaitGroup
	for i := 0; i < cfg.Threads; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lowerCleanerPriority(m.logger)
			c.run(ctx)
		}()
	}
	wg.Wait()
}

// cleanerNice is the scheduling niceness of a cleaner thread: the cleaner
// is background work, and on a small machine a cleaning otherwise takes a
// whole core from the request handlers (and from clients on the same
// host) for as long as it runs.
const cleanerNice = 10

// lowerCleanerPriority locks the calling goroutine (a cleaner thread) to
// its OS thread and lowers that thread's priority to cleanerNice (Linux
// sets niceness per thread). The goroutine never unlocks: when it ends, Go
// ends the thread with it, so no thread at low priority goes back to the
// runtime's pool. A failure (not permitted, say) is logged and changes
// nothing else.
func lowerCleanerPriority(logger interface{ Warn(string, ...any) }) {
	runtime.LockOSThread()
	if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), cleanerNice); err != nil {
		logger.Warn("could not lower the log cleaner thread's priority", "nice", cleanerNice, "err", err)
	}
}

func (c *logCleaner) run(ctx context.Context) {
	for ctx.Err() == nil {
		p, plan, ok := c.pick(time.Now())
		if ok && c.clean(ctx, p, plan) {
			continue
		}
		// Nothing to clean, or a cleaning that moved nothing on (which
		// a correct plan never asks for): wait rather than spin.
		select {
		case <-ctx.Done():
		case <-time.After(c.cfg.Backoff):
		}
	}
}

// pick chooses the filthiest compacted log not being cleaned and marks it
// in progress.
func (c *logCleaner) pick(now time.Time) (*Partition, cleanPlan, bool) {
	var parts []*Partition
	var cands []cleanCandidate
	for _, p := range c.m.All() {
		p.mu.Lock()
		cfg := p.cfg
		p.mu.Unlock()
		if !cfg.Compacted {
			continue
		}
		truncatedTo := p.log().TakeTruncatedTo()
		st := p.State()
		c.mu.Lock()
		ckpt, has := c.checkpoints[p.tp]
		if has && truncatedTo < ckpt {
			ckpt = truncatedTo
			c.checkpoints[p.tp] = ckpt
		}
		skip := c.inProgress[p.tp] || c.uncleanable[p.tp]
		c.mu.Unlock()
		if skip {
			continue
		}
		if !has {
			ckpt = -1
		}
		plan := planCleaning(p.log().SegmentStats(), p.log().StartOffset(), ckpt, st.LastStableOffset,
			cfg.MinCompactionLag, cfg.MaxCompactionLag, now.UnixMilli())
		parts = append(parts, p)
		cands = append(cands, cleanCandidate{plan: plan, minRatio: cfg.MinCleanableRatio})
	}
	i := chooseLog(cands)
	if i < 0 {
		return nil, cleanPlan{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inProgress[parts[i].tp] {
		return nil, cleanPlan{}, false // another thread took it meanwhile
	}
	c.inProgress[parts[i].tp] = true
	return parts[i], cands[i].plan, true
}

// clean cleans one log and records its new checkpoint; the end of ctx
// stops it. It reports whether the checkpoint moved.
func (c *logCleaner) clean(ctx context.Context, p *Partition, plan cleanPlan) bool {
	p.mu.Lock()
	cfg := p.cfg
	p.mu.Unlock()
	start := time.Now()
	res, err := p.log().Clean(segment.CleanOptions{
		FirstDirty:        plan.firstDirty,
		FirstUncleanable:  plan.firstUncleanable,
		DedupeBufferBytes: c.cfg.DedupeBufferSize / int64(c.cfg.Threads),
		DeleteRetention:   cfg.DeleteRetention,
		Throttle:          c.throttle.wait,
		Hook:              c.cfg.Hook,
		Stop:              ctx.Done(),
	})
	c.mu.Lock()
	delete(c.inProgress, p.tp)
	switch {
	case err == nil:
		c.checkpoints[p.tp] = res.EndOffset
	case errors.Is(err, segment.ErrCleaningAborted), errors.Is(err, segment.ErrClosed):
		c.mu.Unlock()
		c.m.logger.Info("log cleaning aborted", "partition", p.tp.String(), "err", err)
		return false
	default:
		// Kafka marks such a partition uncleanable until restart
		// rather than retrying it in a loop.
		c.uncleanable[p.tp] = true
		c.mu.Unlock()
		c.m.logger.Error("log cleaning failed; partition left uncleaned until restart", "partition", p.tp.String(), "err", err)
		return false
	}
	c.mu.Unlock()
	c.m.logger.Info("log cleaned", "partition", p.tp.String(), "first_dirty", plan.firstDirty,
		"end_offset", res.EndOffset, "dirty_ratio", plan.ratio(), "bytes_read", res.BytesRead,
		"bytes_written", res.BytesWritten, "markers_removed", res.MarkersRemoved, "took", time.Since(start).Round(time.Millisecond).String())
	if err := c.writeCheckpoints(); err != nil {
		c.m.logger.Warn("writing the cleaner checkpoint failed", "err", err)
	}
	return res.EndOffset > plan.firstDirty
}

// writeCheckpoints writes the checkpoints of the hosted partitions (a
// deleted partition's entry goes with it). writeMu makes the snapshot and
// its write one step, so an older snapshot never overwrites a newer one.
func (c *logCleaner) writeCheckpoints() error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	snapshot := maps.Clone(c.checkpoints)
	c.mu.Unlock()
	for tp := range snapshot {
		if _, hosted := c.m.Get(tp); !hosted {
			delete(snapshot, tp)
		}
	}
	return c.m.writeDirCheckpoints(cleanerCheckpointFile, snapshot)
}
