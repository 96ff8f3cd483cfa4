package controller

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
)

// producerIDBlockSize is how many producer ids one persisted block holds.
const producerIDBlockSize = 1000

// Controller makes the cluster's decisions and publishes each resulting
// Metadata snapshot to its subscribers.
type Controller struct {
	store  *LocalStore
	self   BrokerInfo
	logger *slog.Logger

	// mu guards state, pidNext, pidEnd and serialises changes, so
	// subscribers see snapshots in order.
	mu      sync.Mutex
	state   *localState
	pidNext int64
	pidEnd  int64

	current     atomic.Pointer[Metadata]
	subscribers []func(*Metadata) // set before the first change, then read-only
}

// NewLocal starts the embedded single-node controller with its state in dir;
// self is this broker, the only one and the controller.
func NewLocal(dir string, self BrokerInfo, logger *slog.Logger) (*Controller, error) {
	store := NewLocalStore(dir)
	st, err := store.load()
	if err != nil {
		return nil, err
	}
	md := st.Metadata.clone()
	md.ControllerID = self.ID
	md.Brokers = []BrokerInfo{self}
	// A single node leads every partition; a changed broker id takes
	// over the replicas of the old one.
	for _, t := range md.Topics {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Leader != self.ID || !slices.Equal(p.Replicas, []int32{self.ID}) {
				p.Replicas = []int32{self.ID}
				p.Leader = self.ID
				p.ISR = []int32{self.ID}
				p.LeaderEpoch++
			}
		}
	}
	st.Metadata = md
	if err := store.save(st); err != nil {
		return nil, err
	}
	c := &Controller{store: store, self: self, logger: logger, state: st}
	c.current.Store(md)
	return c, nil
}

// Subscribe registers fn to receive every new snapshot, synchronously and in
// order, before the change's caller gets its answer. Call before any change.
func (c *Controller) Subscribe(fn func(*Metadata)) {
	c.subscribers = append(c.subscribers, fn)
}

// Metadata returns the current snapshot.
func (c *Controller) Metadata() *Metadata { return c.current.Load() }

// commitLocked persists md and publishes it.
func (c *Controller) commitLocked(md *Metadata) error {
	next := &localState{Metadata: md, NextProducerIDBlock: c.state.NextProducerIDBlock}
	if err := c.store.save(next); err != nil {
		return err
	}
	c.state = next
	c.current.Store(md)
	for _, fn := range c.subscribers {
		fn(md)
	}
	return nil
}

// CreateTopicRequest asks for one topic.
type CreateTopicRequest struct {
	Name              string
	NumPartitions     int32 // -1: num.partitions
	ReplicationFactor int16 // -1: default.replication.factor
	Assignment        [][]int32
	Configs           map[string]string
}

// CreateTopic creates a topic (or, with validateOnly, only checks that it
// could). Config values must already be validated.
func (c *Controller) CreateTopic(req CreateTopicRequest, validateOnly bool) (*Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.current.Load()
	if _, exists := cur.Topics[req.Name]; exists {
		return nil, fmt.Errorf("%w: topic %q already exists", kerr.TopicAlreadyExists, req.Name)
	}
	assignment, err := assignmentFor(cur.Brokers, req.Assignment, req.NumPartitions, req.ReplicationFactor, 0)
	if err != nil {
		return nil, err
	}
	t := &Topic{Name: req.Name, ID: newTopicID(), Configs: req.Configs}
	for _, replicas := range assignment {
		t.Partitions = append(t.Partitions, PartitionState{
			Replicas: replicas, Leader: replicas[0], LeaderEpoch: 0, ISR: slices.Clone(replicas),
		})
	}
	if validateOnly {
		return t, nil
	}
	md := cur.clone()
	md.Topics[t.Name] = t
	if err := c.commitLocked(md); err != nil {
		return nil, err
	}
	c.logger.Info("created topic", "topic", t.Name, "partitions", len(t.Partitions), "replication_factor", len(t.Partitions[0].Replicas))
	return t, nil
}

// assignmentFor checks an explicit assignment or makes one over the live
// brokers: rack-aware when every broker has a broker.rack, as Kafka.
// newPartitionsFor checks a CreatePartitions request (topic name to total
// partitions, with an optional explicit assignment of the new ones)
// against md and assigns the new partitions over live, the same rack-aware
// way as a new topic's, with the topic's replication factor.
func newPartitionsFor(md *Metadata, live []BrokerInfo, name string, total int32, assignment [][]int32) (*Topic, [][]int32, error) {
	t, ok := md.Topics[name]
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", kerr.UnknownTopicOrPartition, name)
	}
	have := int32(len(t.Partitions))
	if total <= have {
		return nil, nil, fmt.Errorf("%w: topic %q has %d partitions, cannot change to %d", kerr.InvalidPartitions, name, have, total)
	}
	if len(assignment) > 0 && int32(len(assignment)) != total-have {
		return nil, nil, fmt.Errorf("%w: %d assignments for %d new partitions", kerr.InvalidReplicaAssignment, len(assignment), total-have)
	}
	added, err := assignmentFor(live, assignment, total-have, int16(len(t.Partitions[0].Replicas)), have)
	if err != nil {
		return nil, nil, err
	}
	return t, added, nil
}

func assignmentFor(live []BrokerInfo, explicit [][]int32, numPartitions int32, rf int16, firstPartition int32) ([][]int32, error) {
	brokers := make([]int32, 0, len(live))
	racks := make(map[int32]string, len(live))
	for _, b := range live {
		brokers = append(brokers, b.ID)
		if b.Rack != "" {
			racks[b.ID] = b.Rack
		}
	}
	if len(explicit) > 0 {
		for i, replicas := range explicit {
			if len(replicas) == 0 {
				return nil, fmt.Errorf("%w: partition %d has no replicas", kerr.InvalidReplicaAssignment, i)
			}
			seen := map[int32]bool{}
			for _, r := range replicas {
				if seen[r] || !slices.Contains(brokers, r) {
					return nil, fmt.Errorf("%w: partition %d names broker %d twice or a broker that is not live", kerr.InvalidReplicaAssignment, i, r)
				}
				seen[r] = true
			}
		}
		return explicit, nil
	}
	if numPartitions <= 0 {
		return nil, fmt.Errorf("%w: number of partitions must be positive, got %d", kerr.InvalidPartitions, numPartitions)
	}
	if rf <= 0 || int(rf) > len(brokers) {
		return nil, fmt.Errorf("%w: replication factor %d is larger than the %d available brokers", kerr.InvalidReplicationFactor, rf, len(brokers))
	}
	slices.Sort(brokers)
	start, shift := rand.IntN(len(brokers)), rand.IntN(len(brokers))
	if len(racks) == len(brokers) {
		return assignReplicasRackAware(racks, numPartitions, rf, firstPartition, start, shift), nil
	}
	return assignReplicas(brokers, numPartitions, rf, firstPartition, start, shift), nil
}

// DeleteTopic removes a topic; brokers delete its logs.
func (c *Controller) DeleteTopic(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.current.Load()
	if _, ok := cur.Topics[name]; !ok {
		return fmt.Errorf("%w: %q", kerr.UnknownTopicOrPartition, name)
	}
	md := cur.clone()
	md.markDeleted(md.Topics[name].ID)
	delete(md.Topics, name)
	if err := c.commitLocked(md); err != nil {
		return err
	}
	c.logger.Info("deleted topic", "topic", name)
	return nil
}

// CreatePartitions grows a topic to total partitions.
func (c *Controller) CreatePartitions(name string, total int32, assignment [][]int32, validateOnly bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.current.Load()
	_, added, err := newPartitionsFor(cur, cur.Brokers, name, total, assignment)
	if err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	md := cur.clone()
	nt := md.Topics[name]
	for _, replicas := range added {
		nt.Partitions = append(nt.Partitions, PartitionState{Replicas: replicas, Leader: replicas[0], ISR: slices.Clone(replicas)})
	}
	return c.commitLocked(md)
}

// UpdateTopicConfigs replaces a topic's config overrides with what change
// computes from the current ones (change must not modify its argument).
// With validateOnly nothing is stored. The read-modify-write runs under the
// controller's lock, so concurrent changes never lose one another.
func (c *Controller) UpdateTopicConfigs(name string, change func(current map[string]string) (map[string]string, error), validateOnly bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.current.Load()
	t, ok := cur.Topics[name]
	if !ok {
		return fmt.Errorf("%w: topic %q does not exist", kerr.UnknownTopicOrPartition, name)
	}
	next, err := change(t.Configs)
	if err != nil || validateOnly {
		return err
	}
	md := cur.clone()
	md.Topics[name].Configs = next
	return c.commitLocked(md)
}

// AllocateProducerID hands out a producer id that was never handed out
// before: ids come from persisted blocks, so a restart skips the rest of
// the old block rather than reuse it.
func (c *Controller) AllocateProducerID() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pidNext >= c.pidEnd {
		start := c.state.NextProducerIDBlock
		next := &localState{Metadata: c.state.Metadata, NextProducerIDBlock: start + producerIDBlockSize}
		if err := c.store.save(next); err != nil {
			return -1, fmt.Errorf("reserve producer id block: %w", err)
		}
		c.state = next
		c.pidNext, c.pidEnd = start, start+producerIDBlockSize
	}
	id := c.pidNext
	c.pidNext++
	return id, nil
}
