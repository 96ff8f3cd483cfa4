// Package coordinator is Kafka's group coordinator: consumer groups and
// committed offsets, stored as records in __consumer_offsets.
//
// It follows Kafka's GroupCoordinator / GroupMetadata (the "classic" group
// protocol): states Empty, PreparingRebalance, CompletingRebalance, Stable
// and Dead; JoinGroup waits like Kafka's DelayedJoin, SyncGroup distributes
// the leader's assignment, heartbeats keep sessions alive. Every commit and
// every completed rebalance is written to the group's __consumer_offsets
// partition through OffsetsLog before it is acknowledged, and BecomeLeader
// rebuilds the state by replaying that partition.
//
// Locking: Coordinator.mu guards the partition table; each group has its
// own mu guarding its state; each __consumer_offsets partition has a
// partLog.mu (RWMutex) that orders appends against snapshots (snapshot.go).
// Lock order: partLog.mu, then group.mu, then Coordinator.mu (then
// Coordinator.plMu, a leaf); never acquire a group's mu while holding
// Coordinator.mu, and never wait for partLog.mu while holding a group's mu.
// No lock is held while blocked, except partLog.mu across the append it
// orders: requests that wait (JoinGroup, SyncGroup) park on channels, and
// writes to the log are serialised per group by a token channel
// (group.writeTok), never by a mutex.
package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/kbroker/kbroker/internal/kafkahash"
)

// Config holds the group settings (Kafka property names in comments).
type Config struct {
	NumPartitions         int32         // offsets.topic.num.partitions
	OffsetsRetention      time.Duration // offsets.retention.minutes
	InitialRebalanceDelay time.Duration // group.initial.rebalance.delay.ms
	MinSessionTimeout     time.Duration // group.min.session.timeout.ms
	MaxSessionTimeout     time.Duration // group.max.session.timeout.ms
	MaxRecordBytes        int32         // message.max.bytes: bound on one stored record batch
	// SnapshotBytes bounds __consumer_offsets when the log cleaner does
	// not (the broker passes -1 with log.cleaner.enable, where the topic
	// is an ordinary compacted topic): once more than max(SnapshotBytes,
	// size of the last snapshot) bytes were appended to a partition since
	// its last snapshot, the coordinator rewrites the partition's live
	// state and moves the log start past everything older (snapshot.go).
	// 0 means 64 MiB; negative disables.
	SnapshotBytes int64

	// Consumer (KIP-848) groups.
	ConsumerSessionTimeout    time.Duration // group.consumer.session.timeout.ms (default 45s)
	ConsumerHeartbeatInterval time.Duration // group.consumer.heartbeat.interval.ms (default 5s)
	ConsumerAssignors         []string      // group.consumer.assignors (default uniform, range)
	ConsumerMaxSize           int32         // group.consumer.max.size (default unbounded)
	// Share (KIP-932) groups (share_group.go).
	ShareSessionTimeout    time.Duration // group.share.session.timeout.ms (default 45s)
	ShareHeartbeatInterval time.Duration // group.share.heartbeat.interval.ms (default 5s)
	ShareMaxSize           int32         // group.share.max.size (default 200)
	// Topics returns the cluster's topics as of now, for consumer groups'
	// subscriptions and assignments (nil: no topics).
	Topics func() *TopicImage
}

// OffsetsLog is how the coordinator stores and loads its records in
// __consumer_offsets. The server implements it on the replica layer.
//
// Append errors are turned into group error codes as Kafka's
// GroupMetadataManager does, by errors.Is against kerr values (so an
// implementation should wrap the kerr error it would answer a producer
// with): NOT_LEADER_OR_FOLLOWER and KAFKA_STORAGE_ERROR become
// NOT_COORDINATOR; UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
// REQUEST_TIMED_OUT and context errors become COORDINATOR_NOT_AVAILABLE;
// MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE become INVALID_COMMIT_OFFSET_SIZE
// for commits and UNKNOWN_SERVER_ERROR for group metadata; anything else is
// COORDINATOR_NOT_AVAILABLE (retriable: clients rediscover the coordinator).
type OffsetsLog interface {
	// Append writes one v2 record batch (built by the coordinator, base
	// offset 0) to partition p of __consumer_offsets and returns once it is
	// committed (acks=all), with the offset assigned to the batch's first
	// record.
	Append(ctx context.Context, partition int32, batch []byte) (baseOffset int64, err error)
	// ReadAll calls fn with every committed batch of partition p from its
	// log start offset, in order.
	ReadAll(ctx context.Context, partition int32, fn func(batch []byte) error) error
	// DeleteBefore raises partition p's log start offset to offset (a
	// committed offset returned by Append): ReadAll no longer returns the
	// records before it, and their storage may be reclaimed.
	DeleteBefore(ctx context.Context, partition int32, offset int64) error
}

// Kafka's offset.metadata.max.bytes default.
const maxOffsetMetadataBytes = 4096

// ErrClosed is returned by BecomeLeader after Close.
var ErrClosed = errors.New("coordinator closed")

// errResigned is returned by BecomeLeader when Resign (or a newer
// BecomeLeader) overtook the load.
var errResigned = errors.New("coordinator partition resigned during load")

// Coordinator owns all groups whose __consumer_offsets partition this broker leads.
type Coordinator struct {
	cfg    Config
	log    OffsetsLog
	logger *slog.Logger
	now    func() time.Time

	// bgCtx is cancelled by Close; background writes (group metadata of a
	// leader's SyncGroup, stores of Empty groups, expiry) run under it.
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup

	mu sync.Mutex
	// partitions guarded by mu: the __consumer_offsets partitions this broker
	// leads or is loading. A partition absent here answers NOT_COORDINATOR.
	partitions map[int32]*partitionState
	closed     bool // guarded by mu

	plMu sync.Mutex
	// partLogs guarded by plMu: the append/snapshot state of each partition
	// ever used, created on first use and never removed.
	partLogs map[int32]*partLog
}

// partitionState is one led __consumer_offsets partition. Its fields are
// guarded by Coordinator.mu.
type partitionState struct {
	loading bool
	groups  map[string]*group
	// txnGroups indexes the groups with pending transactional offsets by
	// producer id (Kafka's openGroupsForProducer); an entry may outlive the
	// group's pending offsets, never the other way round.
	txnGroups map[int64]map[string]struct{}
	// completedDuringLoad holds the CompleteTxn calls that arrived while
	// the partition was loading; they are applied before it is served.
	completedDuringLoad []txnCompletion
}

// New returns a coordinator that owns no partition yet. It starts the
// periodic offset expiry sweep; Close stops it.
func New(cfg Config, log OffsetsLog, logger *slog.Logger) *Coordinator {
	if logger == nil {
		logger = slog.Default()
	}
	if cfg.NumPartitions <= 0 {
		cfg.NumPartitions = 50
	}
	if cfg.MaxRecordBytes <= 0 {
		cfg.MaxRecordBytes = 1048588
	}
	if cfg.SnapshotBytes == 0 {
		cfg.SnapshotBytes = 64 << 20
	}
	if cfg.ShareSessionTimeout <= 0 {
		cfg.ShareSessionTimeout = 45 * time.Second
	}
	if cfg.ShareHeartbeatInterval <= 0 {
		cfg.ShareHeartbeatInterval = 5 * time.Second
	}
	if cfg.ShareMaxSize <= 0 {
		cfg.ShareMaxSize = 200
	}
	if cfg.ConsumerSessionTimeout <= 0 {
		cfg.ConsumerSessionTimeout = 45 * time.Second
	}
	if cfg.ConsumerHeartbeatInterval <= 0 {
		cfg.ConsumerHeartbeatInterval = 5 * time.Second
	}
	if len(cfg.ConsumerAssignors) == 0 {
		cfg.ConsumerAssignors = []string{AssignorUniform, AssignorRange}
	}
	if cfg.ConsumerMaxSize <= 0 {
		cfg.ConsumerMaxSize = math.MaxInt32
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{
		cfg:        cfg,
		log:        log,
		logger:     logger.With("component", "coordinator"),
		now:        time.Now,
		bgCtx:      ctx,
		bgCancel:   cancel,
		partitions: make(map[int32]*partitionState),
		partLogs:   make(map[int32]*partLog),
	}
	if cfg.OffsetsRetention > 0 {
		c.bg.Add(1)
		go c.expiryLoop(sweepInterval(cfg.OffsetsRetention))
	}
	return c
}

// PartitionFor is the __consumer_offsets partition of group, by Kafka's hash:
// Utils.abs(groupId.hashCode()) % numPartitions.
func (c *Coordinator) PartitionFor(group string) int32 {
	return partitionFor(group, c.cfg.NumPartitions)
}

func partitionFor(group string, numPartitions int32) int32 {
	return kafkahash.PartitionFor(group, numPartitions)
}

// Serving reports whether this coordinator has partition loaded: it
// answers the partition's groups (FindCoordinator names this broker only
// then; before, the metadata may already say it leads the partition while
// the load has not started, and requests would get NOT_COORDINATOR).
func (c *Coordinator) Serving(partition int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.partitions[partition]
	return ok && !ps.loading && !c.closed
}

// BecomeLeader loads partition p's groups and offsets; until it returns,
// requests for those groups get COORDINATOR_LOAD_IN_PROGRESS. Calling it for
// a partition already led is a no-op.
func (c *Coordinator) BecomeLeader(ctx context.Context, partition int32) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if ps, ok := c.partitions[partition]; ok && !ps.loading {
		c.mu.Unlock()
		return nil
	}
	ps := &partitionState{loading: true, groups: map[string]*group{}}
	c.partitions[partition] = ps
	c.mu.Unlock()

	// Barrier: a write or snapshot that passed its ownership check under an
	// earlier tenure finishes before the replay starts; later ones see ps
	// loading (or a new group table) and append nothing.
	pl := c.partLog(partition)
	pl.mu.Lock()
	//lint:ignore SA2001 the empty critical section is the barrier
	pl.mu.Unlock()

	start := c.now()
	groups, txnGroups, stats, err := c.load(ctx, partition)
	c.mu.Lock()
	if c.partitions[partition] != ps {
		c.mu.Unlock()
		if err == nil {
			err = errResigned
		}
		return fmt.Errorf("load __consumer_offsets-%d: %w", partition, err)
	}
	if err != nil {
		delete(c.partitions, partition)
		c.mu.Unlock()
		return fmt.Errorf("load __consumer_offsets-%d: %w", partition, err)
	}
	// Completions that arrived during the replay apply before anything can
	// see the groups, so none can overtake a later transaction of the same
	// producer (the groups are not published yet: no group lock needed).
	for _, tc := range ps.completedDuringLoad {
		for id := range txnGroups[tc.producerID] {
			groups[id].completeTxnLocked(tc.producerID, tc.commit)
		}
		delete(txnGroups, tc.producerID)
	}
	ps.completedDuringLoad = nil
	// The loaded groups, listed while the map is still ours: once it is
	// published below, lookups may add groups to it concurrently.
	loaded := make([]*group, 0, len(groups))
	for _, g := range groups {
		loaded = append(loaded, g)
	}
	ps.groups = groups
	ps.txnGroups = txnGroups
	ps.loading = false
	c.mu.Unlock()

	now := c.now()
	for _, g := range loaded {
		g.mu.Lock()
		g.onLoadedLocked(now)
		g.mu.Unlock()
	}
	c.logger.Info("loaded __consumer_offsets partition", "partition", partition,
		"groups", len(loaded), "bytes", stats.replayed, "took", now.Sub(start))
	pl.afterLoad(stats)
	c.maybeSnapshot(partition, pl)
	return nil
}

// Resign drops partition p's groups; requests for them get NOT_COORDINATOR.
// Waiting JoinGroup and SyncGroup requests are answered NOT_COORDINATOR.
func (c *Coordinator) Resign(partition int32) {
	c.mu.Lock()
	ps := c.partitions[partition]
	delete(c.partitions, partition)
	c.mu.Unlock()
	if ps == nil {
		return
	}
	for _, g := range ps.groups {
		g.mu.Lock()
		g.unloadLocked(errNotCoordinator)
		g.mu.Unlock()
	}
	c.logger.Info("resigned __consumer_offsets partition", "partition", partition, "groups", len(ps.groups))
}

// Close stops timers and waiting requests.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	parts := c.partitions
	c.partitions = map[int32]*partitionState{}
	c.mu.Unlock()
	c.bgCancel()
	for _, ps := range parts {
		for _, g := range ps.groups {
			g.mu.Lock()
			g.unloadLocked(errCoordinatorNotAvailable)
			g.mu.Unlock()
		}
	}
	c.bg.Wait()
}

// lookup finds group id, creating it (Empty) when create is set and it does
// not exist. code is the error to answer instead (Kafka's
// validateGroupStatus: COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
// NOT_COORDINATOR); g is nil with code 0 when the group does not exist.
func (c *Coordinator) lookup(id string, create bool) (g *group, code int16) {
	p := c.PartitionFor(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errCoordinatorNotAvailable
	}
	ps := c.partitions[p]
	if ps == nil {
		return nil, errNotCoordinator
	}
	if ps.loading {
		return nil, errCoordinatorLoadInProgress
	}
	g = ps.groups[id]
	if g == nil && create {
		g = newGroup(c, id, p, c.now())
		ps.groups[id] = g
	}
	return g, 0
}

// removeGroup drops g from its partition's table if it is still there.
// Called with g.mu held (lock order group.mu -> Coordinator.mu).
func (c *Coordinator) removeGroup(g *group) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ps := c.partitions[g.partition]; ps != nil && ps.groups[g.id] == g {
		delete(ps.groups, g.id)
	}
}

// allGroups is a snapshot of every loaded group, and whether some partition
// is still loading.
func (c *Coordinator) allGroups() (groups []*group, loading bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ps := range c.partitions {
		if ps.loading {
			loading = true
			continue
		}
		for _, g := range ps.groups {
			groups = append(groups, g)
		}
	}
	return groups, loading
}

// goBackground runs fn on a tracked goroutine that Close waits for.
func (c *Coordinator) goBackground(fn func(ctx context.Context)) {
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.bg.Add(1)
	}
	c.mu.Unlock()
	if closed {
		return
	}
	go func() {
		defer c.bg.Done()
		fn(c.bgCtx)
	}()
}
