package zk

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	gozk "github.com/go-zookeeper/zk"
)

// maxOpsPerMulti bounds a transaction's size: ZooKeeper refuses requests
// over jute.maxbuffer (1 MB by default).
const maxOpsPerMulti = 1000

// NewTopic is a topic to create.
type NewTopic struct {
	Name       string
	ID         TopicID           // must not be zero
	Assignment map[int32][]int32 // partitions 0..n-1 -> replicas
	Configs    map[string]string // overrides; /config/topics/<t> is written even when empty, as Kafka does
	// States, when set, are the partitions' initial leader/ISR states,
	// created in the same transaction (Kafka's controller writes them
	// later, in onNewPartitionCreation; one transaction leaves no topic
	// without states behind a crash).
	States map[int32]PartitionState
}

func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("invalid topic name %q", name)
	}
	return nil
}

// CreateTopic writes the topic's config and assignment znodes (and its
// initial partition states, if given) in one transaction fenced on the
// controller epoch, except the states of a topic too big for one
// transaction, which follow in more. An existing topic is ErrTopicExists.
func (s *Store) CreateTopic(ctx context.Context, epochZkVersion int32, t NewTopic) error {
	if err := validTopicName(t.Name); err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	if t.ID.IsZero() {
		return fmt.Errorf("create topic %q: zero topic id", t.Name)
	}
	if len(t.Assignment) == 0 {
		return fmt.Errorf("create topic %q: no partitions", t.Name)
	}
	for p := int32(0); p < int32(len(t.Assignment)); p++ {
		if len(t.Assignment[p]) == 0 {
			return fmt.Errorf("create topic %q: partitions must be 0..%d, each with replicas; partition %d has none", t.Name, len(t.Assignment)-1, p)
		}
	}
	for p := range t.States {
		if _, ok := t.Assignment[p]; !ok {
			return fmt.Errorf("create topic %q: state for partition %d, which is not assigned", t.Name, p)
		}
	}
	topicData := EncodeTopicAssignment(TopicAssignment{ID: t.ID, Partitions: t.Assignment})
	configData := EncodeTopicConfig(t.Configs)
	// The states that fit go in the topic's transaction; the rest (a
	// topic of thousands of partitions would exceed jute.maxbuffer) in
	// CreatePartitionStates' transactions right after.
	var stateOps []any
	rest := map[int32]PartitionState{}
	if len(t.States) > 0 {
		stateOps = append(stateOps, s.createOp(TopicPartitionsPath(t.Name), nil, 0))
		for _, p := range slices.Sorted(maps.Keys(t.States)) {
			if len(stateOps)+4 > maxOpsPerMulti {
				rest[p] = t.States[p]
				continue
			}
			stateOps = append(stateOps,
				s.createOp(TopicPartitionPath(t.Name, p), nil, 0),
				s.createOp(PartitionStatePath(t.Name, p), EncodePartitionState(t.States[p]), 0))
		}
	}
	for attempt := 0; ; attempt++ {
		// A config znode can outlive its topic (Kafka deletes it in a
		// separate step); overwrite it then, conditionally.
		configOp, err := s.createOrSetOp(ctx, TopicConfigPath(t.Name), configData)
		if err != nil {
			return fmt.Errorf("create topic %q: %w", t.Name, err)
		}
		ops := append([]any{s.createOp(TopicPath(t.Name), topicData, 0), configOp}, stateOps...)
		_, err = s.fencedMulti(ctx, epochZkVersion, ops...)
		if err == nil && len(rest) > 0 {
			// A crash before these land leaves partitions without a
			// state, which the next controller creates.
			err = s.CreatePartitionStates(ctx, epochZkVersion, t.Name, rest)
			if err != nil {
				return fmt.Errorf("create topic %q: %w", t.Name, err)
			}
		}
		if err == nil {
			s.logger.Info("created topic", "topic", t.Name, "topic_id", t.ID.String(), "partitions", len(t.Assignment))
			return nil
		}
		var me *MultiError
		if errors.As(err, &me) {
			switch {
			case me.Index == 0 && errors.Is(me.Err, gozk.ErrNodeExists):
				return fmt.Errorf("create topic %q: %w", t.Name, ErrTopicExists)
			case me.Index == 1 && attempt < 3:
				continue // the config znode changed under us: look again
			case me.Index >= 2 && errors.Is(me.Err, gozk.ErrNodeExists):
				// Partition znodes without a topic znode: leftovers of a
				// half-finished deletion.
				return fmt.Errorf("create topic %q: %s already exists without its topic (a deletion did not finish): %w", t.Name, me.Path, err)
			}
		}
		return fmt.Errorf("create topic %q: %w", t.Name, err)
	}
}

// createOrSetOp returns a create op for p, or a set op conditional on its
// current version if it exists.
func (s *Store) createOrSetOp(ctx context.Context, p string, data []byte) (any, error) {
	var exists bool
	var stat *gozk.Stat
	err := s.retry(ctx, func() error {
		var err error
		exists, stat, err = s.conn.Exists(s.abs(p))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.abs(p), err)
	}
	if exists {
		return s.setOp(p, data, stat.Version), nil
	}
	return s.createOp(p, data, 0), nil
}

// Topics lists the topics, sorted.
func (s *Store) Topics(ctx context.Context) ([]string, error) {
	names, err := s.children(ctx, TopicsPath)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// TopicAssignment reads /brokers/topics/<t>; ErrTopicNotFound if absent.
func (s *Store) TopicAssignment(ctx context.Context, topic string) (TopicAssignment, error) {
	data, _, err := s.get(ctx, TopicPath(topic))
	if errors.Is(err, ErrNoNode) {
		return TopicAssignment{}, fmt.Errorf("topic %q: %w", topic, ErrTopicNotFound)
	}
	if err != nil {
		return TopicAssignment{}, err
	}
	a, err := DecodeTopicAssignment(topic, data)
	return a, s.malformedAt(err)
}

// SetTopicAssignment replaces a topic's assignment (to add partitions or
// reassign), fenced on the controller epoch (KafkaZkClient.setTopicAssignment).
func (s *Store) SetTopicAssignment(ctx context.Context, epochZkVersion int32, topic string, a TopicAssignment) error {
	_, err := s.fencedMulti(ctx, epochZkVersion, s.setOp(TopicPath(topic), EncodeTopicAssignment(a), -1))
	if errors.Is(err, gozk.ErrNoNode) {
		return fmt.Errorf("set assignment of topic %q: %w", topic, ErrTopicNotFound)
	}
	if err != nil {
		return fmt.Errorf("set assignment of topic %q: %w", topic, err)
	}
	return nil
}

// TopicConfig reads /config/topics/<t>; a missing znode is no overrides.
func (s *Store) TopicConfig(ctx context.Context, topic string) (map[string]string, error) {
	data, _, err := s.get(ctx, TopicConfigPath(topic))
	if errors.Is(err, ErrNoNode) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	cfg, err := DecodeTopicConfig(topic, data)
	return cfg, s.malformedAt(err)
}

// SetTopicConfig replaces a topic's config overrides, fenced on the
// controller epoch and on the topic existing.
func (s *Store) SetTopicConfig(ctx context.Context, epochZkVersion int32, topic string, configs map[string]string) error {
	data := EncodeTopicConfig(configs)
	for attempt := 0; ; attempt++ {
		op, err := s.createOrSetOp(ctx, TopicConfigPath(topic), data)
		if err != nil {
			return fmt.Errorf("set config of topic %q: %w", topic, err)
		}
		_, err = s.fencedMulti(ctx, epochZkVersion, s.checkOp(TopicPath(topic), -1), op)
		var me *MultiError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &me) && me.Index == 0:
			return fmt.Errorf("set config of topic %q: %w", topic, ErrTopicNotFound)
		case errors.As(err, &me) && me.Index == 1 && attempt < 3:
			continue // created or changed meanwhile
		default:
			return fmt.Errorf("set config of topic %q: %w", topic, err)
		}
	}
}

// DeleteTopic removes the topic's znodes: every partition's state and
// partition znode, /partitions, the topic znode, its config and its
// deletion mark, fenced on the controller epoch. A topic of up to a few
// hundred partitions goes in one transaction; a bigger one in several, the
// topic znode last, so a crash leaves a topic that can still be deleted.
// With a tombstone, its deleted topic znode is created in the first
// transaction: a controller that finds a tombstone naming a topic that still
// exists finishes the deletion (DeleteTopic again, without one).
func (s *Store) DeleteTopic(ctx context.Context, epochZkVersion int32, topic string, tombstone *DeletedTopic) error {
	if err := validTopicName(topic); err != nil {
		return fmt.Errorf("delete topic: %w", err)
	}
	for attempt := 0; ; attempt++ {
		ops, found, err := s.deleteTopicOps(ctx, topic)
		if err != nil {
			return fmt.Errorf("delete topic %q: %w", topic, err)
		}
		if !found {
			return fmt.Errorf("delete topic %q: %w", topic, ErrTopicNotFound)
		}
		if tombstone != nil {
			ops = append([]any{s.createOp(DeletedTopicPath(tombstone.ID), EncodeDeletedTopic(*tombstone), 0)}, ops...)
		}
		for len(ops) > 0 {
			n := min(len(ops), maxOpsPerMulti)
			if _, err = s.fencedMulti(ctx, epochZkVersion, ops[:n]...); err != nil {
				break
			}
			ops = ops[n:]
			tombstone = nil // written with the first transaction
		}
		if err == nil {
			s.logger.Info("deleted topic", "topic", topic)
			return nil
		}
		var me *MultiError
		if errors.As(err, &me) && tombstone != nil && me.Path == s.abs(DeletedTopicPath(tombstone.ID)) && errors.Is(me.Err, gozk.ErrNodeExists) && attempt < 3 {
			tombstone = nil // written by an earlier attempt (or a replay after a lost connection)
			continue
		}
		if errors.As(err, &me) && (errors.Is(me.Err, gozk.ErrNoNode) || errors.Is(me.Err, gozk.ErrNotEmpty)) && attempt < 3 {
			continue // the subtree changed while we listed it
		}
		return fmt.Errorf("delete topic %q: %w", topic, err)
	}
}

// deleteTopicOps lists what DeleteTopic removes, children before parents
// and the topic znode after all its descendants.
func (s *Store) deleteTopicOps(ctx context.Context, topic string) ([]any, bool, error) {
	var ops []any
	found := false
	subtree, err := s.subtree(ctx, TopicPath(topic))
	if err != nil {
		return nil, false, err
	}
	for _, p := range subtree {
		ops = append(ops, s.deleteOp(p, -1))
		found = true
	}
	for _, p := range []string{TopicConfigPath(topic), DeleteTopicPath(topic)} {
		var exists bool
		err := s.retry(ctx, func() error {
			var err error
			exists, _, err = s.conn.Exists(s.abs(p))
			return err
		})
		if err != nil {
			return nil, false, err
		}
		if exists {
			ops = append(ops, s.deleteOp(p, -1))
		}
	}
	return ops, found, nil
}

// subtree lists p and its descendants (chroot-relative), children first;
// nothing if p does not exist.
func (s *Store) subtree(ctx context.Context, p string) ([]string, error) {
	var exists bool
	err := s.retry(ctx, func() error {
		var err error
		exists, _, err = s.conn.Exists(s.abs(p))
		return err
	})
	if err != nil || !exists {
		return nil, err
	}
	children, err := s.children(ctx, p)
	if err != nil {
		return nil, err
	}
	slices.Sort(children)
	var out []string
	for _, c := range children {
		sub, err := s.subtree(ctx, p+"/"+c)
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return append(out, p), nil
}

// MarkTopicForDeletion creates /admin/delete_topics/<t>, the request to
// delete a topic that Kafka's admin tools write (AdminZkClient.deleteTopic).
func (s *Store) MarkTopicForDeletion(ctx context.Context, topic string) error {
	if err := validTopicName(topic); err != nil {
		return fmt.Errorf("mark topic for deletion: %w", err)
	}
	err := s.retry(ctx, func() error {
		_, err := s.conn.Create(s.abs(DeleteTopicPath(topic)), nil, 0, acl)
		return err
	})
	if err != nil && !errors.Is(err, gozk.ErrNodeExists) {
		return fmt.Errorf("mark topic %q for deletion: %w", topic, err)
	}
	return nil
}

// TopicsMarkedForDeletion lists /admin/delete_topics, sorted.
func (s *Store) TopicsMarkedForDeletion(ctx context.Context) ([]string, error) {
	names, err := s.children(ctx, DeleteTopicsPath)
	slices.Sort(names)
	return names, err
}

// PartitionStates reads every partition state of a topic, with each
// znode's version; partitions without a state znode are absent.
func (s *Store) PartitionStates(ctx context.Context, topic string) (map[int32]PartitionState, error) {
	names, err := s.children(ctx, TopicPartitionsPath(topic))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		if _, err := s.TopicAssignment(ctx, topic); err != nil {
			return nil, err
		}
	}
	partitions, err := s.partitionNumbers(topic, names)
	if err != nil {
		return nil, err
	}
	if len(partitions) >= bulkReadMin {
		states, err := s.partitionStatesBulk(ctx, topic, partitions)
		if err == nil || ctx.Err() != nil || errors.Is(err, ErrMalformed) {
			return states, err
		}
		s.logger.Info("bulk read of partition states failed; reading one znode per request", "topic", topic, "err", err)
	}
	return s.partitionStatesEach(ctx, topic, partitions)
}

// partitionNumbers parses the children of a topic's partitions znode.
func (s *Store) partitionNumbers(topic string, names []string) ([]int32, error) {
	partitions := make([]int32, len(names))
	for i, n := range names {
		p, err := strconv.ParseInt(n, 10, 32)
		if err != nil || p < 0 {
			return nil, s.malformedAt(malformed(TopicPartitionsPath(topic)+"/"+n, nil, "not a partition number"))
		}
		partitions[i] = int32(p)
	}
	return partitions, nil
}

// partitionStatesBulk reads the partitions' states in multiRead requests
// on a bulk read session (multiread.go).
func (s *Store) partitionStatesBulk(ctx context.Context, topic string, partitions []int32) (map[int32]PartitionState, error) {
	ops := make([]readOp, len(partitions))
	for i, p := range partitions {
		ops[i] = readOp{path: s.abs(PartitionStatePath(topic, p))}
	}
	res, err := s.readMany(ctx, ops)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]PartitionState, len(partitions))
	for i, p := range partitions {
		st, ok, err := s.decodeStateRead(topic, p, res[i])
		if err != nil {
			return nil, err
		}
		if ok {
			out[p] = st
		}
	}
	return out, nil
}

// decodeStateRead decodes a bulk read of a partition state; ok is false
// when the partition has no state znode.
func (s *Store) decodeStateRead(topic string, p int32, r znodeRead) (st PartitionState, ok bool, err error) {
	switch {
	case errors.Is(r.err, ErrNoNode):
		return PartitionState{}, false, nil
	case r.err != nil:
		return PartitionState{}, false, fmt.Errorf("read %s: %w", s.abs(PartitionStatePath(topic, p)), r.err)
	}
	st, err = DecodePartitionState(topic, p, r.data, r.version)
	return st, err == nil, s.malformedAt(err)
}

// partitionStatesEach reads the partitions' states one getData each on the
// Store's session.
func (s *Store) partitionStatesEach(ctx context.Context, topic string, partitions []int32) (map[int32]PartitionState, error) {
	states, errs := eachBounded(partitions, partitionStateReaders, func(p int32) (PartitionState, error) {
		return s.PartitionState(ctx, topic, p)
	})
	out := make(map[int32]PartitionState, len(partitions))
	for i, p := range partitions {
		switch {
		case errors.Is(errs[i], ErrNoNode):
		case errs[i] != nil:
			return nil, errs[i]
		default:
			out[p] = states[i]
		}
	}
	return out, nil
}

// partitionStateReaders bounds the partition state reads one
// partitionStatesEach call has outstanding: more do not help, the server's
// time per request is the limit.
const partitionStateReaders = 64

// PartitionState reads one partition's state; ErrNoNode if it has none.
func (s *Store) PartitionState(ctx context.Context, topic string, partition int32) (PartitionState, error) {
	data, stat, err := s.get(ctx, PartitionStatePath(topic, partition))
	if err != nil {
		return PartitionState{}, err
	}
	st, err := DecodePartitionState(topic, partition, data, stat.Version)
	return st, s.malformedAt(err)
}

// CreatePartitionStates creates state znodes (and their parents) for new
// partitions of an existing topic, fenced on the controller epoch
// (KafkaZkClient.createTopicPartitionStatesRaw). Up to about
// maxOpsPerMulti/2 partitions go in one transaction, each checking that the
// topic still exists: one transaction for a topic of 10,000 partitions
// would exceed jute.maxbuffer and ZooKeeper would drop the connection. A
// partition's znode and its state are always in the same transaction, so a
// crash between two leaves whole partitions without a state, which a new
// controller creates (as Kafka's, which writes them one by one).
func (s *Store) CreatePartitionStates(ctx context.Context, epochZkVersion int32, topic string, states map[int32]PartitionState) error {
	exists := false
	err := s.retry(ctx, func() error {
		var err error
		exists, _, err = s.conn.Exists(s.abs(TopicPartitionsPath(topic)))
		return err
	})
	if err != nil {
		return fmt.Errorf("create partition states of %q: %w", topic, err)
	}
	ops := []any{s.checkOp(TopicPath(topic), -1)}
	if !exists {
		ops = append(ops, s.createOp(TopicPartitionsPath(topic), nil, 0))
	}
	flush := func() error {
		_, err := s.fencedMulti(ctx, epochZkVersion, ops...)
		var me *MultiError
		if errors.As(err, &me) && me.Index == 0 {
			return fmt.Errorf("create partition states of %q: %w", topic, ErrTopicNotFound)
		}
		if err != nil {
			return fmt.Errorf("create partition states of %q: %w", topic, err)
		}
		ops = []any{s.checkOp(TopicPath(topic), -1)}
		return nil
	}
	for _, p := range slices.Sorted(maps.Keys(states)) {
		if len(ops)+2 > maxOpsPerMulti {
			if err := flush(); err != nil {
				return err
			}
		}
		ops = append(ops,
			s.createOp(TopicPartitionPath(topic, p), nil, 0),
			s.createOp(PartitionStatePath(topic, p), EncodePartitionState(states[p]), 0))
	}
	if len(ops) > 1 {
		return flush()
	}
	return nil
}

// PartitionUpdate is one conditional partition state write: State
// replaces the state znode if it is still at State.ZkVersion.
type PartitionUpdate struct {
	TopicPartition
	State PartitionState
}

// PartitionUpdateResult is the outcome of one PartitionUpdate.
type PartitionUpdateResult struct {
	TopicPartition
	// ZkVersion is the state znode's new version (the condition of the
	// next write) when Err is nil.
	ZkVersion int32
	// Err: ErrVersionConflict (someone else wrote it first: re-read,
	// decide again, retry), ErrNoNode, or another failure.
	Err error
}

// maxConcurrentUpdates bounds SetPartitionStates' requests in flight.
const maxConcurrentUpdates = 32

// statesPerMulti is how many partition state writes SetPartitionStates
// puts in one transaction. A new controller writes the elections of a dead
// broker's thousands of leaderships at once: one transaction each (Kafka's
// way) costs ZooKeeper a request, a log entry and a share of an fsync per
// partition (3,333 writes: 0.3-0.5 s on a quiet machine); a few hundred per
// transaction, about 0.05 s. A transaction of 200 state writes stays far
// below jute.maxbuffer.
const statesPerMulti = 200

// SetPartitionStates writes partition states, each conditional on its
// znode's version and fenced on the controller epoch, as
// KafkaZkClient.updateLeaderAndIsr, with the same outcome as one
// transaction per partition: one stale version fails only that partition.
// Up to statesPerMulti writes go in one transaction; if one of them fails
// (the transaction then writes none), that group's writes are tried again
// one transaction each. The error is ErrControllerMoved if the fence
// failed (results are then incomplete and the caller must stop acting as
// controller), else nil with one result per update, in order.
func (s *Store) SetPartitionStates(ctx context.Context, epochZkVersion int32, updates ...PartitionUpdate) ([]PartitionUpdateResult, error) {
	results := make([]PartitionUpdateResult, len(updates))
	for i, u := range updates {
		results[i].TopicPartition = u.TopicPartition
	}
	var moved atomic.Pointer[error]
	sem := make(chan struct{}, maxConcurrentUpdates)
	var wg sync.WaitGroup
	for first := 0; first < len(updates); first += statesPerMulti {
		group := updates[first:min(first+statesPerMulti, len(updates))]
		out := results[first : first+len(group)]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if len(group) > 1 && s.setStatesTogether(ctx, epochZkVersion, group, out, &moved) {
				return
			}
			for i, u := range group {
				s.setState(ctx, epochZkVersion, u, &out[i], &moved)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return results, fmt.Errorf("set partition states: %w", err)
	}
	if m := moved.Load(); m != nil {
		return results, fmt.Errorf("set partition states: %w", *m)
	}
	return results, nil
}

// setStatesTogether writes group in one fenced transaction and fills out.
// It reports false, out untouched, when one write failed (a stale version,
// a deleted partition) or the transaction's outcome is unknown: the caller
// writes them one by one, to learn which.
func (s *Store) setStatesTogether(ctx context.Context, epochZkVersion int32, group []PartitionUpdate, out []PartitionUpdateResult, moved *atomic.Pointer[error]) bool {
	ops := make([]any, len(group))
	for i, u := range group {
		ops[i] = s.setOp(PartitionStatePath(u.Topic, u.Partition), EncodePartitionState(u.State), u.State.ZkVersion)
	}
	res, err := s.fencedMulti(ctx, epochZkVersion, ops...)
	switch {
	case err == nil && len(res) == len(group):
		for i := range out {
			out[i].ZkVersion = res[i].Stat.Version
		}
		return true
	case errors.Is(err, ErrControllerMoved):
		moved.Store(&err)
		for i := range out {
			out[i].Err = err
		}
		return true
	}
	return false
}

// setState writes one partition state in its own fenced transaction.
func (s *Store) setState(ctx context.Context, epochZkVersion int32, u PartitionUpdate, out *PartitionUpdateResult, moved *atomic.Pointer[error]) {
	path := PartitionStatePath(u.Topic, u.Partition)
	res, err := s.fencedMulti(ctx, epochZkVersion, s.setOp(path, EncodePartitionState(u.State), u.State.ZkVersion))
	switch {
	case err == nil:
		out.ZkVersion = res[0].Stat.Version
	case errors.Is(err, ErrControllerMoved):
		moved.Store(&err)
		out.Err = err
	case errors.Is(err, gozk.ErrBadVersion):
		out.Err = fmt.Errorf("update %s at version %d: %w", s.abs(path), u.State.ZkVersion, ErrVersionConflict)
	case errors.Is(err, gozk.ErrNoNode):
		out.Err = fmt.Errorf("update %s: %w", s.abs(path), ErrNoNode)
	default:
		out.Err = fmt.Errorf("update %s: %w", s.abs(path), err)
	}
}

// NotifyISRChange creates /isr_change_notification/isr_change_<seq>, with
// which a partition leader tells the controller that ISRs changed
// (KafkaZkClient.propagateIsrChanges). It returns the sequence name.
func (s *Store) NotifyISRChange(ctx context.Context, partitions []TopicPartition) (string, error) {
	var created string
	err := s.retry(ctx, func() error {
		var err error
		created, err = s.conn.Create(s.abs(ISRChangeNotificationSequencePath("")), EncodeISRChangeNotification(partitions), gozk.FlagSequence, acl)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("notify ISR change: %w", err)
	}
	return strings.TrimPrefix(s.rel(created), ISRChangeNotificationPath+"/"), nil
}

// ISRChangeNotifications reads the pending notifications: their names
// (sorted) and the partitions they name (deduplicated).
func (s *Store) ISRChangeNotifications(ctx context.Context) ([]string, []TopicPartition, error) {
	names, err := s.children(ctx, ISRChangeNotificationPath)
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(names)
	seen := map[TopicPartition]bool{}
	var partitions []TopicPartition
	var kept []string
	for _, n := range names {
		p := ISRChangeNotificationPath + "/" + n
		data, _, err := s.get(ctx, p)
		if errors.Is(err, ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		tps, err := DecodeISRChangeNotification(p, data)
		if err != nil {
			return nil, nil, s.malformedAt(err)
		}
		kept = append(kept, n)
		for _, tp := range tps {
			if !seen[tp] {
				seen[tp] = true
				partitions = append(partitions, tp)
			}
		}
	}
	return kept, partitions, nil
}

// DeleteISRChangeNotifications removes processed notifications, fenced on
// the controller epoch; already-deleted ones are fine.
func (s *Store) DeleteISRChangeNotifications(ctx context.Context, epochZkVersion int32, names []string) error {
	for _, n := range names {
		_, err := s.fencedMulti(ctx, epochZkVersion, s.deleteOp(ISRChangeNotificationPath+"/"+n, -1))
		if err != nil && !errors.Is(err, gozk.ErrNoNode) {
			return fmt.Errorf("delete ISR change notification %s: %w", n, err)
		}
	}
	return nil
}
