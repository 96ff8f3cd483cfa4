package replica

// Opening partition logs outside the manager's lock, and many of them at
// once, as Kafka's LogManager.loadLogs: a restart after a crash recovers
// every log whose dir was not shut down cleanly, and 10,000 of them one
// after another under one lock took longer than the restart is allowed.
//
// An open has three steps:
//
//   - beginOpenLocked (m.mu held): the checks and the bookkeeping that
//     must be atomic with the rest of the manager's state (offline dirs,
//     placement of a new log in a log dir) and an opening marker, so a
//     second open of the same partition, its removal, a move of it to
//     another log dir and Close wait for this one;
//   - finishOpen without m.mu: the stale-incarnation check, segment.Open
//     (recovery), the producer-state rebuild, partition.metadata; only the
//     opener touches the partition's directory meanwhile;
//   - under m.mu again: the marker goes, the partition is hosted, unless
//     its log dir failed meanwhile (then it is offline, as every replica in
//     that dir), and an interrupted move between log dirs resumes.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kbroker/kbroker/segment"
)

// errManagerClosed answers an open after Close began: a log opened then
// would be left open behind the clean-shutdown marker.
var errManagerClosed = errors.New("replica manager is closed")

// DefaultRecoveryThreadsPerDataDir is the default of
// num.recovery.threads.per.data.dir when the configuration leaves it 0:
// max(2, GOMAXPROCS). Kafka's default is 1, for a JVM broker whose logs
// recover one per thread; a log open is part I/O waits (directory reads,
// file creation, fsync of rebuilt indexes) and part CPU (scanning batches
// after the recovery point, the producer-state rebuild), so one thread per
// core keeps the cores busy and a second keeps a single-core machine busy
// while the first waits on the disk.
func DefaultRecoveryThreadsPerDataDir() int { return max(2, runtime.GOMAXPROCS(0)) }

// openingLog marks a partition whose log is being opened outside m.mu.
type openingLog struct {
	topicID [16]byte
	// done is closed when the open ended (hosted or failed).
	done chan struct{}
}

// openJob is one open between beginOpenLocked and finishOpen.
type openJob struct {
	tp      TopicPartition
	topicID [16]byte
	// home is the log dir the log is (or is created) in.
	home string
	// hw is the high watermark checkpointed for tp at start, if hasHW.
	hw    int64
	hasHW bool
	mark  *openingLog
}

// recoveryThreads is the per-log-dir bound of concurrent opens and closes.
func (m *Manager) recoveryThreads() int {
	if m.cfg.RecoveryThreadsPerDataDir > 0 {
		return m.cfg.RecoveryThreadsPerDataDir
	}
	return DefaultRecoveryThreadsPerDataDir()
}

// open returns the partition tp of topic topicID, opening (or creating) its
// log if needed. A partition open under another topic id is an earlier
// incarnation of the same name, deleted while this broker did not hear of
// it: it is stopped and its data deleted first, so not one of its records
// is served or copied under the new topic. The log is opened without
// m.mu; a second open of tp meanwhile waits for the first.
func (m *Manager) open(tp TopicPartition, topicID [16]byte, cfg PartitionConfig) (*Partition, error) {
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, fmt.Errorf("open %s: %w", tp, errManagerClosed)
		}
		if done, ok := m.retiring[tp]; ok {
			// Its log is being closed or deleted: opening the directory
			// now would map files being cut.
			m.mu.Unlock()
			<-done
			continue
		}
		if mark, ok := m.opening[tp]; ok {
			// Another caller is opening it: take its partition (or, if
			// that failed or names another incarnation, go round again).
			m.mu.Unlock()
			<-mark.done
			continue
		}
		old, ok := m.partitions[tp]
		if ok && old.topicID != topicID && old.topicID != ([16]byte{}) && topicID != ([16]byte{}) {
			delete(m.hwAtStart, tp)
			done := m.startRetiringLocked(tp)
			m.mu.Unlock()
			old.logger.Warn("replica belongs to an earlier topic of the same name: deleting it",
				"old_topic_id", topicIDString(old.topicID), "topic_id", topicIDString(topicID))
			dir := old.log().Dir()
			err := m.retire(old, true)
			m.afterDelete(tp, old.topicID, dir, err)
			m.doneRetiring(tp, done)
			if err != nil {
				return nil, err
			}
			continue
		}
		if ok {
			m.mu.Unlock()
			return old, nil
		}
		job, err := m.beginOpenLocked(tp, topicID)
		m.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return m.finishOpen(job, cfg)
	}
}

// beginOpenLocked starts opening tp, neither hosted nor being opened or
// retired (m.mu held): a log in an offline dir is refused, a new log is
// placed in a log dir, and the opening marker is set. The log stays listed
// as stored (if it was) until it is hosted.
func (m *Manager) beginOpenLocked(tp TopicPartition, topicID [16]byte) (*openJob, error) {
	if err := m.offlineLocked(tp); err != nil {
		return nil, err
	}
	home, ok := m.location[tp]
	if !ok && len(m.unscanned) > 0 {
		return nil, m.refuseUnlistedLocked(tp, topicID)
	}
	if !ok {
		var err error
		if home, err = m.placeLocked(tp); err != nil {
			return nil, err
		}
		m.location[tp] = home
	}
	job := &openJob{tp: tp, topicID: topicID, home: home, mark: &openingLog{topicID: topicID, done: make(chan struct{})}}
	job.hw, job.hasHW = m.hwAtStart[tp]
	m.opening[tp] = job.mark
	return job, nil
}

// finishOpen opens (or creates) job's log without m.mu, rebuilds its
// producer state from the batches in it, and hosts the partition.
func (m *Manager) finishOpen(job *openJob, cfg PartitionConfig) (*Partition, error) {
	tp, topicID := job.tp, job.topicID
	if m.openHook != nil {
		m.openHook(tp)
	}
	dir := filepath.Join(job.home, tp.String())
	logger := m.logger.With("partition", tp.String())
	hasHW := job.hasHW
	if recorded, ok, err := readPartitionTopicID(dir); err != nil {
		logger.Warn("unreadable partition.metadata; keeping the log", "err", err)
	} else if ok && recorded != topicID && topicID != ([16]byte{}) {
		// The log belongs to an earlier topic of the same name, deleted
		// while this broker did not hear of it.
		logger.Warn("log belongs to a deleted topic of the same name: removing it",
			"old_topic_id", topicIDString(recorded), "topic_id", topicIDString(topicID))
		m.mu.Lock()
		delete(m.hwAtStart, tp)
		m.mu.Unlock()
		hasHW = false
		if err := segment.RemoveDir(dir); err != nil {
			return nil, m.endOpen(job, nil, fmt.Errorf("remove stale log of %s: %w", tp, err))
		}
	}
	log, err := segment.Open(dir, cfg.Log, m.cleanDirs[job.home], logger, segment.WithSyncJournal(m.journal))
	if err != nil {
		return nil, m.endOpen(job, nil, fmt.Errorf("open log of %s: %w", tp, err))
	}
	p := &Partition{
		tp:            tp,
		topicID:       topicID,
		self:          m.cfg.BrokerID,
		logger:        logger,
		isrs:          m.cfg.ISRWriter,
		logDirFailed:  m.logDirFailed,
		truncated:     m.cfg.OnTruncation,
		descriptorLog: m.descriptorLog,
		stats:         &m.stats,
		sendFiles:     m.sendFiles,
		cfg:           cfg,
		leaderEpoch:   -1,
		leaderID:      -1,
		followers:     map[int32]*followerState{},
		producers:     newProducerStates(),
		changed:       make(chan struct{}),
		// From the checkpoint, else the log start: as leader it rises as
		// ISR followers report their log ends; as follower it comes from
		// the leader. (A single-replica ISR raises it to the log end.)
		highWatermark: log.StartOffset(),
	}
	p.logPtr.Store(log)
	if hasHW {
		p.highWatermark = max(log.StartOffset(), min(job.hw, log.EndOffset()))
	}
	// Rebuild producer state: the last batches of every producer, and
	// its open transaction, are in the log. p is not shared yet: its lock
	// is not needed.
	if err := p.rebuildProducersLocked(); err != nil {
		log.Close()
		return nil, m.endOpen(job, nil, err)
	}
	if leo := log.EndOffset(); p.loadedFrom < leo {
		// The next open starts here instead of reading this again.
		p.snapshotLocked(leo)
	}
	if topicID != ([16]byte{}) {
		if err := writePartitionTopicID(dir, topicID); err != nil {
			log.Close()
			return nil, m.endOpen(job, nil, fmt.Errorf("write partition.metadata of %s: %w", tp, err))
		}
	}
	if err := m.endOpen(job, p, nil); err != nil {
		return nil, err
	}
	return p, nil
}

// endOpen ends job under m.mu: with p (opened) the partition is hosted,
// unless its log dir failed meanwhile: then p's log is closed and the
// replica is offline for this run, as the failure handler makes every
// replica in the dir. With openErr the open failed: the log stays listed
// as stored, if it was, so a deletion of its topic still finds it. The
// opening marker goes either way, waking whoever waits for it.
func (m *Manager) endOpen(job *openJob, p *Partition, openErr error) error {
	tp := job.tp
	m.mu.Lock()
	delete(m.opening, tp)
	err := openErr
	if p != nil {
		err = m.offlineLocked(tp)
		if err != nil {
			if _, known := m.offlineReplicas[tp]; !known {
				// Reported while opening, not handled yet, or handled
				// before this open began to be listed: offline all the
				// same.
				id := job.topicID
				if stored, ok := m.stored[tp]; ok && id == ([16]byte{}) {
					id = stored
				}
				m.offlineReplicas[tp] = id
				delete(m.stored, tp)
				delete(m.hwAtStart, tp)
				delete(m.resumeMoves, tp)
			}
		} else {
			delete(m.stored, tp)
			m.partitions[tp] = p
			if dest, ok := m.resumeMoves[tp]; ok {
				delete(m.resumeMoves, tp)
				if dest != job.home {
					m.logger.Info("resuming the move of a replica to another log dir that a restart interrupted",
						"partition", tp.String(), "from", job.home, "to", dest)
					m.startMoveLocked(p, dest)
				}
			}
		}
	} else if m.offlineLocked(tp) != nil {
		// The dir failed under the open: answer as an offline replica.
		err = m.offlineLocked(tp)
	}
	m.mu.Unlock()
	close(job.mark.done)
	if p != nil && err != nil {
		if cerr := p.log().Close(); cerr != nil {
			p.logger.Warn("closing the log of an offline log dir", "err", cerr)
		}
	}
	return err
}

// OpenRequest is one partition for OpenAll.
type OpenRequest struct {
	TopicPartition
	TopicID [16]byte
	Config  PartitionConfig
}

// OpenAll opens (or creates) the logs of reqs that are not open yet, in
// parallel: in each log dir at most Config.RecoveryThreadsPerDataDir at a
// time, as Kafka's LogManager.loadLogs with
// num.recovery.threads.per.data.dir. New logs are spread over the log dirs
// as placeLocked spreads them.
// Roles are not touched: MakeLeader and MakeFollower find the partitions
// open. errs[i] is reqs[i]'s error (nil when open); ctx ending leaves the
// requests not started with its error. Opens already under way finish.
func (m *Manager) OpenAll(ctx context.Context, reqs []OpenRequest) []error {
	errs := make([]error, len(reqs))
	m.OpenEach(ctx, reqs, func(i int, err error) { errs[i] = err })
	return errs
}

// OpenEach is OpenAll telling done of each request as its open ends (from
// the goroutine that opened it; done must not block long), so a caller
// can serve each partition as soon as its log is open, while the others
// still recover. done is called exactly once per request (with nil for one
// already open) before OpenEach returns.
func (m *Manager) OpenEach(ctx context.Context, reqs []OpenRequest, done func(i int, err error)) {
	byDir := m.openQueues(reqs)
	queued := make([]bool, len(reqs))
	for _, queue := range byDir {
		for _, i := range queue {
			queued[i] = true
		}
	}
	for i, q := range queued {
		if !q {
			done(i, nil) // open already
		}
	}
	threads := m.recoveryThreads()
	var wg sync.WaitGroup
	for _, queue := range byDir {
		var next atomic.Int64
		for range min(threads, len(queue)) {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= len(queue) {
						return
					}
					r := reqs[queue[i]]
					if err := ctx.Err(); err != nil {
						done(queue[i], fmt.Errorf("open %s: %w", r.TopicPartition, err))
						continue
					}
					_, err := m.open(r.TopicPartition, r.TopicID, r.Config)
					done(queue[i], err)
				}
			})
		}
	}
	wg.Wait()
}

// openQueues groups the indexes of reqs not open yet by the log dir each
// log is in. A new log is placed here, as its open would (placeLocked),
// so it is created by its own dir's workers; when no dir is usable, or
// one is offline since the start, it is left to its open to fail.
func (m *Manager) openQueues(reqs []OpenRequest) map[string][]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var counts map[string]int
	if len(m.dirs) > 1 {
		// Counted once, not once per new log (placeLocked): 10,000 new
		// partitions would walk 50 million entries under the lock.
		counts = m.logCountsLocked()
	}
	out := map[string][]int{}
	for i, r := range reqs {
		tp := r.TopicPartition
		if _, open := m.partitions[tp]; open {
			continue
		}
		dir, ok := m.location[tp]
		// With a dir offline since the start, a log missing from the
		// others is not placed: its open refuses it
		// (refuseUnlistedLocked).
		if !ok && len(m.unscanned) == 0 && m.offlineLocked(tp) == nil {
			if placed, err := m.placeCountedLocked(tp, counts); err == nil {
				m.location[tp] = placed
				if counts != nil {
					counts[placed]++
				}
				dir = placed
			}
		}
		out[dir] = append(out[dir], i)
	}
	return out
}

// logCountsLocked counts the logs in each log dir, future logs included
// (m.mu held).
func (m *Manager) logCountsLocked() map[string]int {
	counts := map[string]int{}
	for _, dir := range m.location {
		counts[dir]++
	}
	for _, mv := range m.moves {
		counts[mv.dest]++
	}
	return counts
}

// waitOpeningLocked waits, m.mu held (and held again on return), until
// no open is under way.
func (m *Manager) waitOpeningLocked() {
	for len(m.opening) > 0 {
		var done chan struct{}
		for _, mark := range m.opening {
			done = mark.done
			break
		}
		m.mu.Unlock()
		<-done
		m.mu.Lock()
	}
}

// closeAll flushes and closes the logs of parts, in each log dir at most
// Config.RecoveryThreadsPerDataDir at a time (Kafka's LogManager.shutdown),
// each after its producer state is snapshotted at its log end, and
// returns the log dirs where a log did not close cleanly.
func (m *Manager) closeAll(parts map[TopicPartition]*Partition) (failedDirs map[string]bool, errs []error) {
	byDir := map[string][]*Partition{}
	for _, p := range parts {
		dir := filepath.Dir(p.log().Dir())
		byDir[dir] = append(byDir[dir], p)
	}
	threads := m.recoveryThreads()
	var mu sync.Mutex
	failedDirs = map[string]bool{}
	var wg sync.WaitGroup
	for dir, queue := range byDir {
		var next atomic.Int64
		for range min(threads, len(queue)) {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= len(queue) {
						return
					}
					if err := closePartition(queue[i]); err != nil {
						mu.Lock()
						errs = append(errs, err)
						failedDirs[dir] = true
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	// In a stable order, whatever order the workers failed in.
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return failedDirs, errs
}

// closePartition stops p serving and closes its log, Kafka's clean close:
// the producer state at the log end first, so the next start reads no
// batch header.
func closePartition(p *Partition) error {
	p.mu.Lock()
	p.isLeader = false
	p.notifyLocked()
	p.snapshotLocked(p.log().EndOffset())
	p.mu.Unlock()
	if err := p.log().Close(); err != nil {
		return fmt.Errorf("close %s: %w", p.tp, err)
	}
	return nil
}
