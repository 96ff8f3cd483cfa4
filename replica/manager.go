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
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbroker/kbroker/internal/ratelog"
	"github.com/kbroker/kbroker/internal/sendfile"
	"github.com/kbroker/kbroker/internal/tick"
	"github.com/kbroker/kbroker/segment"
)

// cleanShutdownFile marks a log dir whose logs were all closed cleanly, as
// Kafka's .kafka_cleanshutdown.
const cleanShutdownFile = ".kafka_cleanshutdown"

// Config is the broker-wide configuration of the replica layer.
type Config struct {
	LogDir         string
	RetentionCheck time.Duration
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
	// OnStorageError is told when a log write fails (disk full or failed).
	OnStorageError func(error)
	// Cleaner configures the log cleaner of compacted topics (RunCleaner).
	Cleaner CleanerConfig
}

// Stats counts replication events for metrics.
type Stats struct {
	ISRShrinks atomic.Int64
	ISRExpands atomic.Int64
}

// Manager owns the partitions of this broker.
type Manager struct {
	cfg           Config
	logger        *slog.Logger
	cleanShutdown bool // the previous run ended with every log closed

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

	// mu guards partitions, stored and hwAtStart. Lock order: Manager.mu
	// before Partition.mu.
	mu         sync.RWMutex
	partitions map[TopicPartition]*Partition
	// stored are the partition logs found in the log dir at Open that no
	// view has opened (or deleted) since, with their recorded topic ids.
	stored map[TopicPartition][16]byte
	// retiring are partitions whose logs are being closed or deleted;
	// the channel is closed when that is done. No open of the directory
	// starts meanwhile.
	retiring map[TopicPartition]chan struct{}
}

// Stats returns the replication counters.
func (m *Manager) Stats() *Stats { return &m.stats }

// Open prepares the log dir. It reads and removes the clean-shutdown
// marker: logs opened afterwards are recovered unless the marker was there.
func Open(cfg Config, logger *slog.Logger) (*Manager, error) {
	if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir %s: %w", cfg.LogDir, err)
	}
	marker := filepath.Join(cfg.LogDir, cleanShutdownFile)
	_, err := os.Stat(marker)
	clean := err == nil
	if clean {
		if err := os.Remove(marker); err != nil {
			return nil, fmt.Errorf("remove clean shutdown marker: %w", err)
		}
	}
	hw, err := readHWCheckpoint(cfg.LogDir)
	if err != nil {
		logger.Warn("unreadable high watermark checkpoint; high watermarks restart at the log start", "err", err)
		hw = map[TopicPartition]int64{}
	}
	removed, err := segment.RemoveDeleted(cfg.LogDir)
	if len(removed) > 0 {
		logger.Info("removed log directories a deletion left", "dirs", removed)
	}
	if err != nil {
		logger.Warn("removing log directories a deletion left failed", "err", err)
	}
	stored, err := scanStored(cfg.LogDir)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:           cfg,
		stored:        stored,
		retiring:      map[TopicPartition]chan struct{}{},
		logger:        logger,
		sendFiles:     sendfile.NewBudget(sendfileMaxDescriptors),
		descriptorLog: ratelog.New(5 * time.Second),
		cleanShutdown: clean,
		partitions:    make(map[TopicPartition]*Partition),
		hwAtStart:     hw,
	}
	m.fetchers = newFetcherManager(m)
	return m, nil
}

// PartitionDir is where a partition's log lives, Kafka's <topic>-<partition>.
func (m *Manager) PartitionDir(tp TopicPartition) string {
	return filepath.Join(m.cfg.LogDir, tp.String())
}

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

// Replicas lists every partition log this broker keeps: the open ones and
// those only stored in the log dir since the start.
func (m *Manager) Replicas() []Replica {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]Replica, 0, len(m.partitions)+len(m.stored))
	for tp, p := range m.partitions {
		out = append(out, Replica{TopicPartition: tp, TopicID: p.topicID, Open: true})
	}
	for tp, id := range m.stored {
		out = append(out, Replica{TopicPartition: tp, TopicID: id})
	}
	return out
}

// open returns the partition tp of topic topicID, opening (or creating) its
// log if needed. A partition open under another topic id is an earlier
// incarnation of the same name, deleted while this broker did not hear of
// it: it is stopped and its data deleted first, so not one of its records
// is served or copied under the new topic.
func (m *Manager) open(tp TopicPartition, topicID [16]byte, cfg PartitionConfig) (*Partition, error) {
	for {
		m.mu.Lock()
		if done, ok := m.retiring[tp]; ok {
			// Its log is being closed or deleted: opening the directory
			// now would map files being cut.
			m.mu.Unlock()
			<-done
			continue
		}
		old, ok := m.partitions[tp]
		if ok && old.topicID != topicID && old.topicID != ([16]byte{}) && topicID != ([16]byte{}) {
			delete(m.hwAtStart, tp)
			done := m.startRetiringLocked(tp)
			m.mu.Unlock()
			old.logger.Warn("replica belongs to an earlier topic of the same name: deleting it",
				"old_topic_id", topicIDString(old.topicID), "topic_id", topicIDString(topicID))
			err := m.retire(old, true)
			m.afterDelete(tp, old.topicID, err)
			m.doneRetiring(tp, done)
			if err != nil {
				return nil, err
			}
			continue
		}
		p, err := m.openLocked(tp, topicID, cfg)
		m.mu.Unlock()
		return p, err
	}
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

// openLocked opens (or creates) a partition's log and rebuilds its producer
// state from the batches in it.
func (m *Manager) openLocked(tp TopicPartition, topicID [16]byte, cfg PartitionConfig) (*Partition, error) {
	if p, ok := m.partitions[tp]; ok {
		return p, nil
	}
	delete(m.stored, tp)
	dir := m.PartitionDir(tp)
	if recorded, ok, err := readPartitionTopicID(dir); err != nil {
		m.logger.Warn("unreadable partition.metadata; keeping the log", "partition", tp.String(), "err", err)
	} else if ok && recorded != topicID && topicID != ([16]byte{}) {
		// The log belongs to an earlier topic of the same name, deleted
		// while this broker did not hear of it.
		m.logger.Warn("log belongs to a deleted topic of the same name: removing it", "partition", tp.String(),
			"old_topic_id", topicIDString(recorded), "topic_id", topicIDString(topicID))
		if err := segment.RemoveDir(dir); err != nil {
			return nil, fmt.Errorf("remove stale log of %s: %w", tp, err)
		}
		delete(m.hwAtStart, tp)
	}
	log, err := segment.Open(dir, cfg.Log, m.cleanShutdown, m.logger.With("partition", tp.String()))
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", tp, err)
	}
	p := &Partition{
		tp:             tp,
		topicID:        topicID,
		self:           m.cfg.BrokerID,
		log:            log,
		logger:         m.logger.With("partition", tp.String()),
		isrs:           m.cfg.ISRWriter,
		onStorageError: m.cfg.OnStorageError,
		descriptorLog:  m.descriptorLog,
		stats:          &m.stats,
		sendFiles:      m.sendFiles,
		cfg:            cfg,
		leaderEpoch:    -1,
		leaderID:       -1,
		followers:      map[int32]*followerState{},
		producers:      newProducerStates(),
		changed:        make(chan struct{}),
		// From the checkpoint, else the log start: as leader it rises as
		// ISR followers report their log ends; as follower it comes from
		// the leader. (A single-replica ISR raises it to the log end.)
		highWatermark: log.StartOffset(),
	}
	if hw, ok := m.hwAtStart[tp]; ok {
		p.highWatermark = max(log.StartOffset(), min(hw, log.EndOffset()))
	}
	// Rebuild producer state: the last batches of every producer, and
	// its open transaction, are in the log.
	if err := p.rebuildProducersLocked(); err != nil {
		log.Close()
		return nil, err
	}
	if leo := log.EndOffset(); p.loadedFrom < leo {
		// The next open starts here instead of reading this again.
		p.snapshotLocked(leo)
	}
	if topicID != ([16]byte{}) {
		if err := writePartitionTopicID(dir, topicID); err != nil {
			log.Close()
			return nil, fmt.Errorf("write partition.metadata of %s: %w", tp, err)
		}
	}
	m.partitions[tp] = p
	return p, nil
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
	if leaderEpoch < p.leaderEpoch {
		return nil, fmt.Errorf("make %s leader at epoch %d: already at epoch %d", tp, leaderEpoch, p.leaderEpoch)
	}
	p.cfg = cfg
	p.log.SetConfig(cfg.Log)
	if p.isLeader && leaderEpoch == p.leaderEpoch {
		p.applyISRLocked(isr, partitionEpoch, "update")
		return p, nil
	}
	if err := p.log.AssignEpoch(leaderEpoch, p.log.EndOffset()); err != nil {
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
	p.logger.Info("became leader", "leader_epoch", leaderEpoch, "isr", isr, "log_end_offset", p.log.EndOffset(), "high_watermark", p.highWatermark)
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
// also when tp was only stored (not open).
func (m *Manager) Remove(tp TopicPartition, deleteData bool) error {
	m.mu.Lock()
	for {
		done, busy := m.retiring[tp]
		if !busy {
			break
		}
		m.mu.Unlock()
		<-done
		m.mu.Lock()
	}
	p, ok := m.partitions[tp]
	_, stored := m.stored[tp]
	if deleteData {
		delete(m.stored, tp)
		delete(m.hwAtStart, tp)
	}
	if !ok && !(stored && deleteData) {
		m.mu.Unlock()
		return nil
	}
	storedID := m.stored[tp]
	done := m.startRetiringLocked(tp)
	m.mu.Unlock()
	defer m.doneRetiring(tp, done)
	if !ok {
		m.logger.Info("deleting stored log of a deleted topic", "partition", tp.String())
		err := segment.RemoveDir(m.PartitionDir(tp))
		if err != nil {
			err = fmt.Errorf("delete stored log of %s: %w", tp, err)
		}
		m.afterDelete(tp, storedID, err)
		return err
	}
	err := m.retire(p, deleteData)
	if deleteData {
		m.afterDelete(tp, p.topicID, err)
	}
	return err
}

// afterDelete follows the deletion of tp's log. When it failed and the
// directory is still under the partition's name, tp is listed as stored
// again, so the broker does not confirm the deletion and retries it with
// the next view. Else the high watermark checkpoint is rewritten at once: a
// new topic of the same name must not start from the old one's high
// watermark after a crash.
func (m *Manager) afterDelete(tp TopicPartition, topicID [16]byte, err error) {
	if err != nil {
		if _, serr := os.Stat(m.PartitionDir(tp)); serr == nil {
			m.mu.Lock()
			if _, open := m.partitions[tp]; !open {
				m.stored[tp] = topicID
			}
			m.mu.Unlock()
		}
		return
	}
	if werr := m.writeHWCheckpoint(); werr != nil {
		m.logger.Warn("writing the high watermark checkpoint after a deletion failed", "partition", tp.String(), "err", werr)
	}
}

// retire stops p, no longer in m.partitions: its fetcher stops, it
// answers as a replica of nothing (appends, reads and fetcher results in
// flight get NOT_LEADER_OR_FOLLOWER or are dropped), and its log is closed
// or deleted.
func (m *Manager) retire(p *Partition, deleteData bool) error {
	m.fetchers.remove(p.tp)
	p.mu.Lock()
	p.isLeader = false
	p.leaderID = -1
	p.notifyLocked()
	if !deleteData {
		p.snapshotLocked(p.log.EndOffset())
	}
	p.mu.Unlock()
	if deleteData {
		return p.log.Delete()
	}
	return p.log.Close()
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
			}
			if m.cfg.ProducerIDExpiration > 0 {
				p.expireProducers(now.Add(-m.cfg.ProducerIDExpiration))
			}
		}
	})
}

// Close closes every log and, when all closed cleanly, writes the
// clean-shutdown marker so the next start skips recovery.
func (m *Manager) Close() error {
	m.fetchers.closeAll()
	if err := m.writeHWCheckpoint(); err != nil {
		m.logger.Warn("writing the high watermark checkpoint failed", "err", err)
	}
	m.mu.Lock()
	parts := m.partitions
	m.partitions = map[TopicPartition]*Partition{}
	m.mu.Unlock()
	var errs []error
	for _, p := range parts {
		p.mu.Lock()
		p.isLeader = false
		p.notifyLocked()
		// Kafka's clean close: the producer state at the log end, so
		// the next start reads no batch header.
		p.snapshotLocked(p.log.EndOffset())
		p.mu.Unlock()
		if err := p.log.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", p.tp, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(m.cfg.LogDir, cleanShutdownFile))
	if err != nil {
		return fmt.Errorf("write clean shutdown marker: %w", err)
	}
	return f.Close()
}
