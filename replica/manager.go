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
	"sync"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/segment"
)

// cleanShutdownFile marks a log dir whose logs were all closed cleanly, as
// Kafka's .kafka_cleanshutdown.
const cleanShutdownFile = ".kafka_cleanshutdown"

// Config is the broker-wide configuration of the replica layer.
type Config struct {
	LogDir         string
	RetentionCheck time.Duration
}

// Manager owns the partitions of this broker.
type Manager struct {
	cfg           Config
	logger        *slog.Logger
	cleanShutdown bool // the previous run ended with every log closed

	// mu guards partitions. Lock order: Manager.mu before Partition.mu.
	mu         sync.RWMutex
	partitions map[TopicPartition]*Partition
}

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
	return &Manager{
		cfg:           cfg,
		logger:        logger,
		cleanShutdown: clean,
		partitions:    make(map[TopicPartition]*Partition),
	}, nil
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

// openLocked opens (or creates) a partition's log and rebuilds its producer
// state from the batches in it.
func (m *Manager) openLocked(tp TopicPartition, topicID [16]byte, cfg PartitionConfig) (*Partition, error) {
	if p, ok := m.partitions[tp]; ok {
		return p, nil
	}
	log, err := segment.Open(m.PartitionDir(tp), cfg.Log, m.cleanShutdown, m.logger.With("partition", tp.String()))
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", tp, err)
	}
	p := &Partition{
		tp:            tp,
		topicID:       topicID,
		log:           log,
		logger:        m.logger.With("partition", tp.String()),
		cfg:           cfg,
		leaderEpoch:   -1,
		producers:     newProducerStates(),
		changed:       make(chan struct{}),
		highWatermark: log.EndOffset(),
	}
	// Rebuild idempotent producer state: the last batches of every
	// producer are in the log.
	err = log.ScanHeaders(log.StartOffset(), func(h recordbatch.Header) bool {
		ts := int64(-1)
		if h.Attributes&recordbatch.TimestampTypeBit != 0 {
			ts = h.MaxTimestamp
		}
		p.producers.update(h, ts)
		return true
	})
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("rebuild producer state of %s: %w", tp, err)
	}
	m.partitions[tp] = p
	return p, nil
}

// MakeLeader makes this broker the leader of tp at leaderEpoch with the given
// ISR, opening the log if needed.
func (m *Manager) MakeLeader(tp TopicPartition, topicID [16]byte, leaderEpoch int32, isr []int32, cfg PartitionConfig) (*Partition, error) {
	m.mu.Lock()
	p, err := m.openLocked(tp, topicID, cfg)
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if leaderEpoch < p.leaderEpoch {
		return nil, fmt.Errorf("make %s leader at epoch %d: already at epoch %d", tp, leaderEpoch, p.leaderEpoch)
	}
	if err := p.log.AssignEpoch(leaderEpoch, p.log.EndOffset()); err != nil {
		return nil, fmt.Errorf("make %s leader: %w", tp, err)
	}
	p.isLeader = true
	p.leaderEpoch = leaderEpoch
	p.isr = append([]int32(nil), isr...)
	p.cfg = cfg
	p.log.SetConfig(cfg.Log)
	p.maybeIncrementHighWatermarkLocked()
	p.notifyLocked()
	return p, nil
}

// StopLeading makes the partition stop serving as leader (another broker
// leads it, or nobody) while keeping its log.
func (m *Manager) StopLeading(tp TopicPartition) {
	p, ok := m.Get(tp)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isLeader = false
	p.notifyLocked()
}

// Remove stops hosting tp; with deleteData its log directory is removed.
func (m *Manager) Remove(tp TopicPartition, deleteData bool) error {
	m.mu.Lock()
	p, ok := m.partitions[tp]
	delete(m.partitions, tp)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	p.mu.Lock()
	p.isLeader = false
	p.notifyLocked()
	p.mu.Unlock()
	if deleteData {
		return p.log.Delete()
	}
	return p.log.Close()
}

// RunRetention enforces retention on every partition every
// Config.RetentionCheck until ctx ends.
func (m *Manager) RunRetention(ctx context.Context) {
	if m.cfg.RetentionCheck <= 0 {
		return
	}
	t := time.NewTicker(m.cfg.RetentionCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, p := range m.All() {
				if err := p.enforceRetention(now); err != nil {
					m.logger.Error("retention failed", "partition", p.tp.String(), "err", err)
				}
			}
		}
	}
}

// Close closes every log and, when all closed cleanly, writes the
// clean-shutdown marker so the next start skips recovery.
func (m *Manager) Close() error {
	m.mu.Lock()
	parts := m.partitions
	m.partitions = map[TopicPartition]*Partition{}
	m.mu.Unlock()
	var errs []error
	for _, p := range parts {
		p.mu.Lock()
		p.isLeader = false
		p.notifyLocked()
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
