package controller

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/kbroker/kbroker/internal/kafkaconn"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ClusterConfig configures a broker's part in a ZooKeeper cluster.
type ClusterConfig struct {
	Self              BrokerInfo
	ZookeeperConnect  string
	SessionTimeout    time.Duration
	ConnectionTimeout time.Duration
	// UncleanDefault is the broker's unclean.leader.election.enable; a
	// topic's config overrides it.
	UncleanDefault bool
	// AutoLeaderRebalance moves leadership back to preferred replicas
	// every LeaderImbalanceCheck (auto.leader.rebalance.enable).
	AutoLeaderRebalance  bool
	LeaderImbalanceCheck time.Duration
	// OnSessionLost is called when the ZooKeeper session expired: the
	// broker stops leading until the controller's next view (it may have
	// been replaced meanwhile), so it acknowledges nothing as a zombie.
	OnSessionLost func()
	// HoldsDeleted reports whether this broker still keeps a replica of
	// any of the deleted topics ids (its data not yet removed): while it
	// does, it does not confirm their deletion. Nil: never.
	HoldsDeleted func(ids [][16]byte) bool
	// PeerSecurity secures and authenticates the controller's connections
	// to the brokers (the inter-broker listener's protocol).
	PeerSecurity kafkaconn.Security
}

// Cluster is this broker's control plane in a ZooKeeper cluster. Every
// broker registers itself and campaigns for controller; the winner (see
// active) makes the decisions and sends every broker the resulting
// cluster view with UpdateMetadata. Cluster keeps the latest view it was
// sent and refuses views from an older controller epoch.
type Cluster struct {
	cfg    ClusterConfig
	logger *slog.Logger
	store  metadataStore
	// members is ZooKeeper membership; nil on the embedded single node,
	// which is always its own controller.
	members membership
	// embedded: the embedded single node (NewEmbedded).
	embedded bool

	view atomic.Pointer[Metadata]

	// viewMu serialises applying views, so subscribers see them in order;
	// it guards seenEpoch and seenSeq.
	viewMu sync.Mutex
	// zkDeleted are the topic ids under /kbroker/deleted_topics as this
	// broker last read them (followDeletions); guarded by viewMu.
	zkDeleted   map[[16]byte]bool
	seenEpoch   int32
	seenSeq     uint64
	subscribers []func(*Metadata) // set before Start, then read-only

	// activeMu guards active: non-nil while this broker is the controller.
	activeMu sync.Mutex
	active   *active

	// pidMu guards the producer id block this broker hands out from.
	pidMu            sync.Mutex
	pidNext, pidLast int64

	// UncleanElections counts leaders elected from outside the ISR by
	// this broker while controller.
	UncleanElections atomic.Int64

	// logDirs is this broker's report of its failed log dirs (logdirs.go).
	logDirs logDirReports

	// history is this broker's copy of the cluster's newest events
	// (events.go).
	history eventHistory

	started atomic.Bool
	stop    chan struct{}
	done    chan struct{}
}

// NewCluster connects to ZooKeeper. It fails, naming the ensemble, when no
// server answers within the connection timeout.
func NewCluster(ctx context.Context, cfg ClusterConfig, logger *slog.Logger) (*Cluster, error) {
	store, err := zk.Connect(ctx, cfg.ZookeeperConnect, cfg.SessionTimeout, cfg.ConnectionTimeout, logger.With("component", "zookeeper"))
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, logger: logger, store: store, members: store, seenEpoch: -1, stop: make(chan struct{}), done: make(chan struct{})}
	clusterID, err := store.ClusterID(ctx, "")
	if err != nil {
		store.Close()
		return nil, err
	}
	c.view.Store(&Metadata{ClusterID: clusterID, ControllerID: -1, Topics: map[string]*Topic{}})
	return c, nil
}

// embeddedControllerEpoch is the controller epoch of the embedded single
// node: it is the only controller there will ever be.
const embeddedControllerEpoch = 1

// NewEmbedded starts the embedded single node's control plane: the same
// controller core as a cluster's, over a local file in dir, with cfg.Self
// the only broker and always the controller. It is the controller when it
// returns, and its view holds every topic.
func NewEmbedded(dir string, cfg ClusterConfig, logger *slog.Logger) (*Cluster, error) {
	store, err := openLocalStore(dir, cfg.Self)
	if err != nil {
		return nil, err
	}
	cfg.AutoLeaderRebalance = false // one broker: nothing to rebalance
	c := &Cluster{cfg: cfg, logger: logger, store: store, embedded: true, seenEpoch: -1, stop: make(chan struct{}), done: make(chan struct{})}
	clusterID, err := store.ClusterID(context.Background(), "")
	if err != nil {
		return nil, err
	}
	c.view.Store(&Metadata{ClusterID: clusterID, ControllerID: cfg.Self.ID, Brokers: []BrokerInfo{cfg.Self}, Topics: map[string]*Topic{}})
	ctx, cancel := context.WithTimeout(context.Background(), controllerWriteTimeout)
	defer cancel()
	if err := c.loadEvents(ctx); err != nil {
		return nil, err
	}
	a, err := startActive(context.Background(), ctx, c, embeddedControllerEpoch, 0)
	if err != nil {
		return nil, err
	}
	c.active = a
	return c, nil
}

// Subscribe registers fn for every new view, in order. Call before Start.
func (c *Cluster) Subscribe(fn func(*Metadata)) { c.subscribers = append(c.subscribers, fn) }

// Metadata is the latest cluster view this broker was sent.
func (c *Cluster) Metadata() *Metadata { return c.view.Load() }

// ApplyUpdate installs a view sent by the controller of controllerEpoch
// (UpdateMetadata). A view from an older controller is refused with
// STALE_CONTROLLER_EPOCH, so a deposed controller can change nothing. The
// embedded single node is its own controller and takes no view from
// outside: INVALID_REQUEST.
func (c *Cluster) ApplyUpdate(controllerEpoch int32, md *Metadata) error {
	if c.embedded {
		return fmt.Errorf("%w: an embedded single node is its own controller", kerr.InvalidRequest)
	}
	return c.applyView(controllerEpoch, md)
}

// applyView installs a view unless an older one (see ApplyUpdate).
func (c *Cluster) applyView(controllerEpoch int32, md *Metadata) error {
	c.viewMu.Lock()
	defer c.viewMu.Unlock()
	if controllerEpoch < c.seenEpoch {
		return fmt.Errorf("%w: update from controller epoch %d, already at %d", kerr.StaleControllerEpoch, controllerEpoch, c.seenEpoch)
	}
	if controllerEpoch == c.seenEpoch && md.Sequence != 0 && md.Sequence <= c.seenSeq {
		return nil // an older view of this controller, delivered late: a newer one is applied
	}
	c.seenEpoch, c.seenSeq = controllerEpoch, md.Sequence
	if md.ClusterID == "" {
		md.ClusterID = c.view.Load().ClusterID
	}
	c.publishLocked(withoutDeleted(md, c.zkDeleted))
	return nil
}

// publishLocked makes md the view and tells the subscribers; viewMu held.
func (c *Cluster) publishLocked(md *Metadata) {
	c.view.Store(md)
	for _, fn := range c.subscribers {
		fn(md)
	}
}

// followDeletions drops the topics under /kbroker/deleted_topics from
// this broker's view as soon as ZooKeeper has them, until ctx ends. The
// controller's view says the same, but a broker cut off from the
// controller (not from ZooKeeper) would go on serving a deleted topic's
// old incarnation to clients that ask it until it heals. Kafka's brokers
// in ZooKeeper mode do that; kbroker closes the window.
func (c *Cluster) followDeletions(ctx context.Context) {
	ch, err := c.members.WatchDeletedTopicIDs(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.logger.Warn("not following topic deletions in ZooKeeper; the controller's views still bring them", "err", err)
		}
		return
	}
	for ids := range ch {
		deleted := make(map[[16]byte]bool, len(ids))
		for _, id := range ids {
			deleted[id] = true
		}
		c.viewMu.Lock()
		c.zkDeleted = deleted
		if md := c.view.Load(); md != nil {
			if nmd := withoutDeleted(md, deleted); nmd != md {
				c.logger.Info("dropping deleted topics from the view ahead of the controller", "deleted", len(nmd.DeletedTopicIDs)-len(md.DeletedTopicIDs))
				c.publishLocked(nmd)
			}
		}
		c.viewMu.Unlock()
	}
}

// Start registers the broker and campaigns for controller in the
// background, re-registering after a session expiry, until Close. Call it
// once the broker listens: the controller connects to it.
func (c *Cluster) Start(ctx context.Context) error {
	if c.members == nil {
		return nil // embedded: the controller since NewEmbedded
	}
	if err := c.register(ctx); err != nil {
		return err
	}
	c.started.Store(true)
	go c.run()
	dctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-c.stop
		cancel()
	}()
	go c.followDeletions(dctx)
	go c.followEvents(dctx)
	return nil
}

func (c *Cluster) register(ctx context.Context) error {
	epoch, err := c.members.RegisterBroker(ctx, zkBroker(c.cfg.Self))
	if err != nil {
		return err
	}
	// A new session lost the record of failed log dirs: write it again.
	return c.registeredLogDirs(ctx, epoch)
}

// run campaigns for controller whenever there is none, and re-registers
// after a session expiry.
func (c *Cluster) run() {
	defer close(c.done)
	for {
		ctx, cancel := context.WithCancel(context.Background())
		expired := c.members.SessionExpired()
		go func() {
			select {
			case <-expired:
			case <-c.stop:
			}
			cancel()
		}()
		c.campaign(ctx)
		cancel()
		c.resign()
		select {
		case <-c.stop:
			return
		default:
		}
		if c.cfg.OnSessionLost != nil {
			c.cfg.OnSessionLost()
		}
		// The session expired: wait for a new one, then register again.
		for {
			rctx, rcancel := context.WithTimeout(context.Background(), c.cfg.SessionTimeout+c.cfg.ConnectionTimeout)
			_, err := c.members.Reconnect(rctx)
			if err == nil {
				err = c.register(rctx)
			}
			rcancel()
			if err == nil {
				c.logger.Info("re-registered after ZooKeeper session expiry", "broker", c.cfg.Self.ID)
				break
			}
			c.logger.Warn("re-registering with ZooKeeper failed; retrying", "err", err)
			select {
			case <-c.stop:
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// campaign tries to become controller whenever /controller is empty, and
// serves as controller while it is, until ctx ends.
func (c *Cluster) campaign(ctx context.Context) {
	watch, err := c.members.WatchController(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.logger.Error("watching the controller failed", "err", err)
		}
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case id, ok := <-watch:
			if !ok {
				return
			}
			switch {
			case id == -1:
				c.elect(ctx)
			case id != c.cfg.Self.ID:
				c.resign()
			}
		}
	}
}

// elect tries to become controller, retrying with a pause while an error
// leaves /controller empty (no watch event would come to try again).
func (c *Cluster) elect(ctx context.Context) {
	for {
		won, epoch, zkVersion, err := c.members.ElectController(ctx, c.cfg.Self.ID)
		if err == nil {
			if won {
				c.becomeActive(ctx, epoch, zkVersion)
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		c.logger.Warn("controller election failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// becomeActive starts serving as controller.
func (c *Cluster) becomeActive(ctx context.Context, epoch, epochZkVersion int32) {
	c.activeMu.Lock()
	defer c.activeMu.Unlock()
	if c.active != nil {
		return
	}
	a, err := startActive(ctx, ctx, c, epoch, epochZkVersion)
	if err != nil {
		c.logger.Error("taking over as controller failed; resigning", "controller_epoch", epoch, "err", err)
		rctx, cancel := context.WithTimeout(context.Background(), c.cfg.SessionTimeout)
		defer cancel()
		if err := c.members.ResignController(rctx, epochZkVersion); err != nil {
			c.logger.Warn("resigning failed", "err", err)
		}
		return
	}
	c.active = a
}

// resign stops serving as controller, if this broker was.
func (c *Cluster) resign() {
	c.activeMu.Lock()
	a := c.active
	c.active = nil
	c.activeMu.Unlock()
	if a != nil {
		a.stop()
		c.logger.Info("no longer controller", "controller_epoch", a.epoch)
	}
}

// UncleanElectionCount is UncleanElections' value.
func (c *Cluster) UncleanElectionCount() int64 { return c.UncleanElections.Load() }

// IsController reports whether this broker is the active controller.
func (c *Cluster) IsController() bool {
	c.activeMu.Lock()
	defer c.activeMu.Unlock()
	return c.active != nil
}

// withActive runs fn on the active controller, or returns NOT_CONTROLLER.
func (c *Cluster) withActive(fn func(a *active) error) error {
	c.activeMu.Lock()
	a := c.active
	c.activeMu.Unlock()
	if a == nil {
		return fmt.Errorf("%w: broker %d is not the controller", kerr.NotController, c.cfg.Self.ID)
	}
	return fn(a)
}

// CreateTopic creates a topic; only the controller can.
func (c *Cluster) CreateTopic(req CreateTopicRequest, validateOnly bool) (*Topic, error) {
	var t *Topic
	err := c.withActive(func(a *active) error {
		var err error
		t, err = a.createTopic(req, validateOnly)
		return err
	})
	return t, err
}

// DeleteTopic deletes a topic; only the controller can.
func (c *Cluster) DeleteTopic(name string) error {
	return c.withActive(func(a *active) error { return a.deleteTopic(name) })
}

// CreatePartitions grows a topic; only the controller can.
func (c *Cluster) CreatePartitions(name string, total int32, assignment [][]int32, validateOnly bool) error {
	return c.withActive(func(a *active) error { return a.createPartitions(name, total, assignment, validateOnly) })
}

// UpdateTopicConfigs changes a topic's overrides; only the controller can.
func (c *Cluster) UpdateTopicConfigs(name string, change func(map[string]string) (map[string]string, error), validateOnly bool) error {
	return c.withActive(func(a *active) error { return a.updateTopicConfigs(name, change, validateOnly) })
}

// AlterISR applies a leader's ISR change; only the controller can. The
// topic is named by its id (AlterPartition v2+; topic may then be empty)
// or, from older requests, by name alone (topicID zero).
func (c *Cluster) AlterISR(leader int32, topic string, topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, isr []int32) (PartitionState, error) {
	res, err := c.AlterISRs(leader, []ISRChange{{Topic: topic, TopicID: topicID, Partition: partition,
		LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, ISR: isr}})
	if err != nil {
		return PartitionState{}, err
	}
	return res[0].State, res[0].Err
}

// AlterISRs applies a leader's ISR changes in one step (one write, one
// view); only the controller can. It returns one result per change.
func (c *Cluster) AlterISRs(leader int32, changes []ISRChange) ([]ISRResult, error) {
	var res []ISRResult
	err := c.withActive(func(a *active) error {
		var err error
		res, err = a.alterISRs(leader, changes)
		return err
	})
	return res, err
}

// ControlledShutdown moves leadership off broker id; only the controller
// can. It returns the number of partitions id still leads. A single node
// has nowhere to move them: it only counts them.
func (c *Cluster) ControlledShutdown(id int32) (int, error) {
	if c.embedded {
		return c.Metadata().partitionsLedBy(id), nil
	}
	var remaining int
	err := c.withActive(func(a *active) error {
		var err error
		remaining, err = a.controlledShutdown(id)
		return err
	})
	return remaining, err
}

// ElectLeaders runs preferred (or unclean) leader elections; only the
// controller can. partitions nil means all.
func (c *Cluster) ElectLeaders(preferred bool, partitions []TopicPartition) ([]ElectionResult, error) {
	var zps []zk.TopicPartition
	if partitions != nil {
		zps = make([]zk.TopicPartition, 0, len(partitions))
		for _, tp := range partitions {
			zps = append(zps, zk.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		}
	}
	var res []ElectionResult
	err := c.withActive(func(a *active) error {
		var err error
		res, err = a.electLeaders(preferred, zps)
		return err
	})
	return res, err
}

// AllocateProducerID hands out a producer id from this broker's block;
// blocks come from ZooKeeper (/latest_producer_id_block), so no two brokers
// and no two runs ever hand out the same id.
func (c *Cluster) AllocateProducerID() (int64, error) {
	c.pidMu.Lock()
	defer c.pidMu.Unlock()
	if c.pidNext == 0 || c.pidNext > c.pidLast {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.SessionTimeout)
		defer cancel()
		block, err := c.store.AllocateProducerIDBlock(ctx, c.cfg.Self.ID)
		if err != nil {
			return -1, fmt.Errorf("%w: allocating a producer id block: %v", kerr.CoordinatorNotAvailable, err)
		}
		c.pidNext, c.pidLast = block.First, block.Last
	}
	id := c.pidNext
	c.pidNext++
	return id, nil
}

// Close resigns, ends the ZooKeeper session (removing the broker's
// registration at once) and waits for the background work to stop.
func (c *Cluster) Close() {
	select {
	case <-c.stop:
		return
	default:
	}
	close(c.stop)
	c.resign()
	if c.members != nil {
		c.members.Close()
	}
	if !c.started.Load() {
		return
	}
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		c.logger.Warn("cluster membership did not stop within 10s")
	}
}
