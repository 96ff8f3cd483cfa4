// Package replica holds the partitions on this broker: their role (leader or
// follower), high watermark, ISR, producer (idempotence) state, and the
// waiting produces and fetches. It never talks to ZooKeeper; cluster
// decisions reach it as calls from the server.
package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbroker/kbroker/internal/ratelog"
	"github.com/kbroker/kbroker/internal/sendfile"
	"github.com/kbroker/kbroker/internal/tick"
	"github.com/kbroker/kbroker/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// cleanShutdownFile marks a log dir whose logs were all closed cleanly, as
// Kafka's .kafka_cleanshutdown.
const cleanShutdownFile = ".kafka_cleanshutdown"

// Config is the broker-wide configuration of the replica layer.
type Config struct {
	// LogDirs are log.dirs, every directory partition logs live in (JBOD);
	// when empty, LogDir alone.
	LogDirs []string
	LogDir  string
	// EnforceBrokerID: a log dir whose meta.properties names another
	// broker.id stops the start (a ZooKeeper broker, as Kafka). Without
	// it (the embedded single node) a changed broker id takes the
	// replicas over and the files are rewritten.
	EnforceBrokerID bool
	RetentionCheck  time.Duration
	// ProducerIDExpiration is producer.id.expiration.ms: the state of a
	// producer idle that long, without an open transaction, is dropped
	// (checked with retention). 0 keeps producers forever.
	ProducerIDExpiration time.Duration
	BrokerID             int32
	// ReplicaLagTimeMax is replica.lag.time.max.ms: a follower not caught
	// up for longer leaves the ISR.
	ReplicaLagTimeMax time.Duration
	// ReplicaFetchWait is replica.fetch.wait.max.ms: how long a
	// follower's fetch may wait at the leader for records (default
	// 500 ms).
	ReplicaFetchWait time.Duration
	// ISRWriter sends ISR changes to the controller; nil on a single node.
	ISRWriter ISRWriter
	// Dial opens a connection to a leader for follower fetching; nil on a
	// single node.
	Dial Dialer
	// OnStorageError is told of every failed operation on a log that
	// takes its log dir offline (disk full or failed).
	OnStorageError func(error)
	// OnTruncation is told of every truncation of a follower's log that
	// dropped records (the cluster's event history records it). It is
	// called with the partition's lock held and must not block.
	OnTruncation func(Truncation)
	// OnLogDirFailure is told when a log dir went offline and its
	// replicas were stopped (logdir_failure.go).
	OnLogDirFailure func(LogDirFailure)
	// OpenHook, for tests only, is called by every open of a partition
	// log before the log is read, outside the manager's lock (a test may
	// hold an open there).
	OpenHook func(TopicPartition)
	// Cleaner configures the log cleaner of compacted topics (RunCleaner).
	Cleaner CleanerConfig
	// RecoveryThreadsPerDataDir is num.recovery.threads.per.data.dir: how
	// many logs of one log dir OpenAll opens (recovers), and Close
	// closes, at a time. 0: DefaultRecoveryThreadsPerDataDir.
	RecoveryThreadsPerDataDir int
	// SyncJournalPath is kbroker.test.sync.journal (TEST-ONLY): when set,
	// every log records what of its .log files reached stable storage
	// there (segment.SyncJournal), for the power-loss test.
	SyncJournalPath string
}

// Stats counts replication events for metrics.
type Stats struct {
	ISRShrinks atomic.Int64
	ISRExpands atomic.Int64
}

// Manager owns the partitions of this broker.
type Manager struct {
	cfg    Config
	logger *slog.Logger
	// journal is the test-only sync journal every log records in
	// (Config.SyncJournalPath); nil: none.
	journal *segment.SyncJournal
	// dirs are the log dirs, absolute, in configured order.
	dirs []string
	// cleanDirs are the dirs whose previous run ended with every log in
	// them closed (Kafka's per-dir .kafka_cleanshutdown).
	cleanDirs map[string]bool
	// checkpointMu serialises the writes of the per-dir checkpoint files
	// (they share a temporary file name).
	checkpointMu sync.Mutex
	// moveCtx ends every replica move between log dirs at Close;
	// moveWG waits for them.
	moveCtx   context.Context
	stopMoves context.CancelFunc
	moveWG    sync.WaitGroup

	stats    Stats
	fetchers *fetcherManager
	// sendFiles bounds the segment file descriptors that reads hand out
	// for sendfile across every partition.
	sendFiles *sendfile.Budget
	// descriptorLog rate-limits lines about appends failing for want of
	// file descriptors, across every partition.
	descriptorLog *ratelog.Limiter
	// hwAtStart is the high watermark checkpoint read at Open.
	hwAtStart map[TopicPartition]int64

	// openHook, when set (tests), is called by every open of a log
	// outside mu, before the log is read.
	openHook func(TopicPartition)

	// mu guards the maps below, hwAtStart and closed. Lock order:
	// Manager.mu before Partition.mu.
	mu         sync.RWMutex
	partitions map[TopicPartition]*Partition
	// opening are the partitions whose logs are being opened outside mu
	// (open.go): a second open, a removal or a move of one waits for
	// the marker's channel. A stored log stays in stored meanwhile.
	opening map[TopicPartition]*openingLog
	// closed: Close began; no log opens any more.
	closed bool
	// stored are the partition logs found in the log dir at Open that no
	// view has opened (or deleted) since, with their recorded topic ids.
	stored map[TopicPartition][16]byte
	// retiring are partitions whose logs are being closed or deleted;
	// the channel is closed when that is done. No open of the directory
	// starts meanwhile.
	retiring map[TopicPartition]chan struct{}
	// location is the log dir of every partition log this broker keeps
	// (open, stored, or closed but not deleted).
	location map[TopicPartition]string
	// preferred are the log dirs AlterReplicaLogDirs asked for replicas
	// not yet on this broker (Kafka's preferredLogDirs): the log is
	// created there.
	preferred map[TopicPartition]string
	// moves are the replicas being copied to another log dir.
	moves map[TopicPartition]*logMove
	// resumeMoves are moves a restart interrupted: the future log was
	// dropped, and the move starts again when the partition opens.
	resumeMoves map[TopicPartition]string
	// offlineReplicas are the replicas in offline log dirs, with their
	// topic ids: never opened again by this run (logdir_failure.go).
	offlineReplicas map[TopicPartition][16]byte
	// unscanned are the log dirs offline since the start, whose
	// partition logs were never listed (failAtStart); set by Open only.
	unscanned []string
	// failures are the offline log dirs (its own lock).
	failures *dirFailures
}

// Stats returns the replication counters.
func (m *Manager) Stats() *Stats { return &m.stats }

// Open prepares the log dirs: it checks their meta.properties, reads and
// removes each clean-shutdown marker (logs opened afterwards are recovered
// unless their dir's marker was there), reads the high watermark
// checkpoints, removes what deletions left, finishes or drops the moves
// between dirs a restart interrupted, and lists the partition logs found.
func Open(cfg Config, logger *slog.Logger) (*Manager, error) {
	dirs, err := resolveLogDirs(cfg)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:             cfg,
		dirs:            dirs,
		cleanDirs:       map[string]bool{},
		stored:          map[TopicPartition][16]byte{},
		retiring:        map[TopicPartition]chan struct{}{},
		opening:         map[TopicPartition]*openingLog{},
		location:        map[TopicPartition]string{},
		preferred:       map[TopicPartition]string{},
		moves:           map[TopicPartition]*logMove{},
		resumeMoves:     map[TopicPartition]string{},
		offlineReplicas: map[TopicPartition][16]byte{},
		failures:        newDirFailures(len(dirs)),
		logger:          logger,
		sendFiles:       sendfile.NewBudget(sendfileMaxDescriptors),
		descriptorLog:   ratelog.New(5 * time.Second),
		partitions:      make(map[TopicPartition]*Partition),
		openHook:        cfg.OpenHook,
	}
	if cfg.SyncJournalPath != "" {
		if m.journal, err = segment.OpenSyncJournal(cfg.SyncJournalPath); err != nil {
			return nil, err
		}
		logger.Warn("test hook: journaling fsyncs of .log files", "journal", cfg.SyncJournalPath)
	}
	m.moveCtx, m.stopMoves = context.WithCancel(context.Background())
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			m.failAtStart(dir, fmt.Errorf("create log dir %s: %w", dir, err))
			continue
		}
		if cfg.EnforceBrokerID {
			// Before anything in any dir is changed: another broker's
			// dir must not lose its replicas (or its clean-shutdown
			// marker) to this one.
			mp, ok, err := readMetaProperties(dir)
			if err != nil {
				if isLogDirFailure(err) {
					m.failAtStart(dir, err)
					continue
				}
				return nil, err
			}
			if ok {
				if err := checkMetaProperties(filepath.Join(dir, metaPropertiesFile), mp, cfg.BrokerID, ""); err != nil {
					return nil, err
				}
			}
		}
	}
	futures := map[TopicPartition][]string{}
	for _, dir := range dirs {
		if !m.dirUsable(dir) {
			continue
		}
		found, err := m.loadDir(dir)
		if err != nil {
			if isLogDirFailure(err) {
				m.failAtStart(dir, err)
				continue
			}
			return nil, err
		}
		for tp, path := range found {
			futures[tp] = append(futures[tp], path)
		}
	}
	if len(m.unscanned) == len(dirs) {
		var errs []error
		for _, dir := range dirs {
			errs = append(errs, m.dirError(dir))
		}
		return nil, fmt.Errorf("none of the log dirs can be created or read: %w", errors.Join(errs...))
	}
	if err := m.settleFutures(futures); err != nil {
		return nil, err
	}
	m.hwAtStart, err = m.readDirCheckpoints(hwCheckpointFile)
	if err != nil {
		logger.Warn("unreadable high watermark checkpoint; high watermarks restart at the log start", "err", err)
	}
	m.fetchers = newFetcherManager(m)
	return m, nil
}

// loadDir takes dir's clean-shutdown marker, removes what deletions left
// and lists its partition logs (into m.stored and m.location) and its
// future logs (returned). An error leaves m as it was.
func (m *Manager) loadDir(dir string) (futures map[TopicPartition]string, err error) {
	marker := filepath.Join(dir, cleanShutdownFile)
	_, err = os.Stat(marker)
	clean := err == nil
	if clean {
		if err := os.Remove(marker); err != nil {
			return nil, fmt.Errorf("remove clean shutdown marker of %s: %w", dir, err)
		}
	}
	removed, err := segment.RemoveDeleted(dir)
	if len(removed) > 0 {
		m.logger.Info("removed log directories a deletion left", "log_dir", dir, "dirs", removed)
	}
	if err != nil {
		m.logger.Warn("removing log directories a deletion left failed", "log_dir", dir, "err", err)
	}
	stored, err := scanStored(dir)
	if err != nil {
		return nil, err
	}
	for tp := range stored {
		if other, dup := m.location[tp]; dup {
			return nil, fmt.Errorf("duplicate log directories for %s are found in both %s and %s: "+
				"recover by deleting the one in the log dir known to have failed recently",
				tp, filepath.Join(other, tp.String()), filepath.Join(dir, tp.String()))
		}
	}
	if futures, err = scanFutures(dir); err != nil {
		return nil, err
	}
	m.cleanDirs[dir] = clean
	for tp, id := range stored {
		m.stored[tp] = id
		m.location[tp] = dir
	}
	return futures, nil
}

// failAtStart takes dir offline before anything of it was read, as
// Kafka's LogManager does with a dir it cannot create or validate: the
// broker starts with the others. Which replicas were in dir is unknown
// until it is back, so no log missing from the online dirs is created
// meanwhile (beginOpenLocked): such a replica answers KAFKA_STORAGE_ERROR
// rather than start empty where its data may be.
func (m *Manager) failAtStart(dir string, err error) {
	m.unscanned = append(m.unscanned, dir)
	m.failures.add(dir, err)
	m.logger.Error("failed to create or read log dir: it is offline, the broker starts with the others", "log_dir", dir, "err", err)
}

// PartitionDir is where a partition's log lives, Kafka's <topic>-<partition>
// in its log dir (the first log dir for a partition this broker has no
// log of).
func (m *Manager) PartitionDir(tp TopicPartition) string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.partitionDirLocked(tp)
}

func (m *Manager) partitionDirLocked(tp TopicPartition) string {
	dir, ok := m.location[tp]
	if !ok {
		dir = m.dirs[0]
	}
	return filepath.Join(dir, tp.String())
}

// LogDirs returns the log dirs, absolute, in configured order.
func (m *Manager) LogDirs() []string { return slices.Clone(m.dirs) }

// placeLocked returns the log dir for a new log of tp: the one
// AlterReplicaLogDirs asked for, else the dir with the fewest logs.
func (m *Manager) placeLocked(tp TopicPartition) (string, error) {
	var counts map[string]int
	if len(m.dirs) > 1 {
		// Counting walks every log: not for a single dir, where it
		// decides nothing.
		counts = m.logCountsLocked()
	}
	return m.placeCountedLocked(tp, counts)
}

// placeCountedLocked is placeLocked with the logs per dir counted by the
// caller (nil for a single dir), who counts the chosen dir's new log.
func (m *Manager) placeCountedLocked(tp TopicPartition, counts map[string]int) (string, error) {
	if dir, ok := m.preferred[tp]; ok && m.failures.err(dir) == nil {
		delete(m.preferred, tp)
		return dir, nil
	}
	dir := nextLogDir(m.dirs, counts, m.dirUsable)
	if dir == "" {
		return "", fmt.Errorf("create log of %s: no log directories available, tried %s: %w",
			tp, strings.Join(m.dirs, ", "), kerr.KafkaStorageError)
	}
	return dir, nil
}

// dirUsable tells whether dir is online.
func (m *Manager) dirUsable(dir string) bool { return m.dirError(dir) == nil }

// dirError is the failure that took dir offline, nil when online.
func (m *Manager) dirError(dir string) error { return m.failures.err(dir) }

// Get returns the partition if this broker hosts it.
func (m *Manager) Get(tp TopicPartition) (*Partition, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.partitions[tp]
	return p, ok
}

// All returns every hosted partition.
func (m *Manager) All() []*Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Partition, 0, len(m.partitions))
	for _, p := range m.partitions {
		out = append(out, p)
	}
	return out
}

// Replicas lists every partition log this broker keeps: the open ones,
// those only stored in the log dir since the start, and those in offline
// log dirs (which are not opened again, and not deleted, by this run).
func (m *Manager) Replicas() []Replica {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]Replica, 0, len(m.partitions)+len(m.stored)+len(m.offlineReplicas))
	for tp, id := range m.offlineReplicas {
		out = append(out, Replica{TopicPartition: tp, TopicID: id})
	}
	for tp, p := range m.partitions {
		out = append(out, Replica{TopicPartition: tp, TopicID: p.topicID, Open: true})
	}
	for tp, id := range m.stored {
		out = append(out, Replica{TopicPartition: tp, TopicID: id})
	}
	return out
}

// startRetiringLocked takes tp out of the hosted partitions and marks it
// as being closed, so no open of its directory starts until doneRetiring.
func (m *Manager) startRetiringLocked(tp TopicPartition) chan struct{} {
	delete(m.partitions, tp)
	done := make(chan struct{})
	m.retiring[tp] = done
	return done
}

// doneRetiring ends what startRetiringLocked began.
func (m *Manager) doneRetiring(tp TopicPartition, done chan struct{}) {
	m.mu.Lock()
	delete(m.retiring, tp)
	m.mu.Unlock()
	close(done)
}

// MakeLeader makes this broker the leader of tp at leaderEpoch with the given
// ISR and partition epoch, opening the log if needed. Called again with the
// same epoch it only updates the ISR (after an ISR change).
func (m *Manager) MakeLeader(tp TopicPartition, topicID [16]byte, leaderEpoch, partitionEpoch int32, isr []int32, cfg PartitionConfig) (*Partition, error) {
	p, err := m.open(tp, topicID, cfg)
	if err != nil {
		return nil, err
	}
	m.fetchers.remove(tp)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.offline {
		return nil, offlineReplicaError(tp, filepath.Dir(p.log().Dir()), m.failures.err(filepath.Dir(p.log().Dir())))
	}
	if leaderEpoch < p.leaderEpoch {
		return nil, fmt.Errorf("make %s leader at epoch %d: already at epoch %d", tp, leaderEpoch, p.leaderEpoch)
	}
	p.cfg = cfg
	p.log().SetConfig(cfg.Log)
	if p.isLeader && leaderEpoch == p.leaderEpoch {
		p.applyISRLocked(isr, partitionEpoch, "update")
		return p, nil
	}
	if err := p.log().AssignEpoch(leaderEpoch, p.log().EndOffset()); err != nil {
		return nil, fmt.Errorf("make %s leader: %w", tp, err)
	}
	p.isLeader = true
	p.leaderID = -1
	p.leaderEpoch = leaderEpoch
	p.isrChangeInFlight, p.pendingISR = false, nil
	p.partitionEpoch = partitionEpoch
	p.isr = slices.Clone(isr)
	// Followers in the ISR start as caught up now (Kafka resets them to
	// the leader epoch's start time), with unknown log ends, which hold
	// the high watermark until they fetch.
	now := time.Now()
	p.followers = map[int32]*followerState{}
	for _, id := range isr {
		if id != p.self {
			p.followers[id] = &followerState{logEndOffset: -1, lastCaughtUp: now}
		}
	}
	p.maybeIncrementHighWatermarkLocked()
	p.notifyLocked()
	p.logger.Info("became leader", "leader_epoch", leaderEpoch, "isr", isr, "log_end_offset", p.log().EndOffset(), "high_watermark", p.highWatermark)
	return p, nil
}

// StopLeading makes the partition stop serving as leader (another broker
// leads it, or nobody) while keeping its log.
func (m *Manager) StopLeading(tp TopicPartition) {
	p, ok := m.Get(tp)
	if !ok {
		return
	}
	m.fetchers.remove(tp)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isLeader = false
	p.leaderID = -1
	p.notifyLocked()
}

// Remove stops hosting tp; with deleteData its log directory is removed,
// also when tp was only stored (not open). A move of the replica to
// another log dir stops first, and its future log is deleted before the
// current one: a future log left alone is taken, at the next start, for a
// move that completed.
func (m *Manager) Remove(tp TopicPartition, deleteData bool) error {
	m.mu.Lock()
	for {
		// A log being closed, or being opened (open.go), is removed once
		// that is done.
		done, busy := m.retiring[tp]
		if mark, opening := m.opening[tp]; opening {
			done, busy = mark.done, true
		}
		if !busy {
			break
		}
		m.mu.Unlock()
		<-done
		m.mu.Lock()
	}
	if _, offline := m.offlineReplicas[tp]; offline {
		// Its log is in an offline dir: neither closed again nor
		// deleted. A deletion stays pending until a restart finds the
		// dir usable (Kafka answers StopReplica KAFKA_STORAGE_ERROR).
		err := m.offlineLocked(tp)
		m.mu.Unlock()
		if deleteData {
			return err
		}
		return nil
	}
	p, ok := m.partitions[tp]
	_, stored := m.stored[tp]
	if deleteData {
		delete(m.stored, tp)
		delete(m.hwAtStart, tp)
		delete(m.preferred, tp)
		delete(m.resumeMoves, tp)
	}
	if !ok && !(stored && deleteData) {
		m.mu.Unlock()
		return nil
	}
	storedID := m.stored[tp]
	dir := m.partitionDirLocked(tp)
	done := m.startRetiringLocked(tp)
	m.mu.Unlock()
	defer m.doneRetiring(tp, done)
	if !ok {
		m.logger.Info("deleting stored log of a deleted topic", "partition", tp.String())
		err := segment.RemoveDir(dir)
		if err != nil {
			err = fmt.Errorf("delete stored log of %s: %w", tp, err)
		}
		m.afterDelete(tp, storedID, dir, err)
		return err
	}
	dir = p.log().Dir()
	err := m.retire(p, deleteData)
	if deleteData {
		m.afterDelete(tp, p.topicID, dir, err)
	}
	return err
}

// afterDelete follows the deletion of tp's log, which was at dir. When it
// failed and the directory is still under the partition's name, tp is
// listed as stored again, so the broker does not confirm the deletion and
// retries it with the next view. Else the high watermark checkpoint is
// rewritten at once: a new topic of the same name must not start from the
// old one's high watermark after a crash.
func (m *Manager) afterDelete(tp TopicPartition, topicID [16]byte, dir string, err error) {
	if err != nil {
		if _, serr := os.Stat(dir); serr == nil {
			m.mu.Lock()
			if _, open := m.partitions[tp]; !open {
				m.stored[tp] = topicID
			}
			m.mu.Unlock()
		}
		return
	}
	m.mu.Lock()
	if _, open := m.partitions[tp]; !open && m.location[tp] == filepath.Dir(dir) {
		delete(m.location, tp)
	}
	m.mu.Unlock()
	if werr := m.writeHWCheckpoint(); werr != nil {
		m.logger.Warn("writing the high watermark checkpoint after a deletion failed", "partition", tp.String(), "err", werr)
	}
}

// retire stops p, no longer in m.partitions: a move of it to another log
// dir stops (its future log deleted), its fetcher stops, it answers as a
// replica of nothing (appends, reads and fetcher results in flight get
// NOT_LEADER_OR_FOLLOWER or are dropped), and its log is closed or
// deleted.
func (m *Manager) retire(p *Partition, deleteData bool) error {
	m.cancelMove(p.tp)
	m.fetchers.remove(p.tp)
	p.mu.Lock()
	p.isLeader = false
	p.leaderID = -1
	p.notifyLocked()
	if !deleteData {
		p.snapshotLocked(p.log().EndOffset())
	}
	p.mu.Unlock()
	if deleteData {
		return p.log().Delete()
	}
	return p.log().Close()
}

// RunISRChecks shrinks the ISR of led partitions whose followers have not
// caught up within replica.lag.time.max.ms, checking every half of it,
// until ctx ends.
func (m *Manager) RunISRChecks(ctx context.Context) {
	if m.cfg.ReplicaLagTimeMax <= 0 || m.cfg.ISRWriter == nil {
		return
	}
	tick.Every(ctx, m.cfg.ReplicaLagTimeMax/2, func(now time.Time) {
		for _, p := range m.All() {
			p.MaybeShrinkISR(now, m.cfg.ReplicaLagTimeMax)
		}
	})
}

// RunRetention enforces retention on every partition every
// Config.RetentionCheck until ctx ends.
func (m *Manager) RunRetention(ctx context.Context) {
	if m.cfg.RetentionCheck <= 0 {
		return
	}
	tick.Every(ctx, m.cfg.RetentionCheck, func(now time.Time) {
		for _, p := range m.All() {
			if err := p.enforceRetention(now); err != nil {
				m.logger.Error("retention failed", "partition", p.tp.String(), "err", err)
				if isLogDirFailure(err) {
					m.logDirFailed(filepath.Dir(p.log().Dir()), err)
				}
			}
			if m.cfg.ProducerIDExpiration > 0 {
				p.expireProducers(now.Add(-m.cfg.ProducerIDExpiration))
			}
		}
	})
}

// Close closes every log and writes the clean-shutdown marker in each log
// dir whose logs all closed cleanly, so the next start skips their
// recovery. Opens under way finish first and no other begins; the logs
// are flushed and closed in parallel, RecoveryThreadsPerDataDir at a time
// in each log dir (Kafka's LogManager.shutdown). Moves between log dirs
// stop; their future logs stay, and the moves start again with the next
// run.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	// Before the moves stop: an open that ends resumes a move.
	m.waitOpeningLocked()
	m.mu.Unlock()
	m.stopMoves()
	m.moveWG.Wait()
	m.fetchers.closeAll()
	if err := m.writeHWCheckpoint(); err != nil {
		m.logger.Warn("writing the high watermark checkpoint failed", "err", err)
	}
	m.mu.Lock()
	parts := m.partitions
	m.partitions = map[TopicPartition]*Partition{}
	m.mu.Unlock()
	failedDirs, errs := m.closeAll(parts)
	if err := m.journal.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close sync journal: %w", err))
	}
	for _, dir := range m.dirs {
		if failedDirs[dir] || !m.dirUsable(dir) {
			continue
		}
		f, err := os.Create(filepath.Join(dir, cleanShutdownFile))
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("write clean shutdown marker in %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}
