package controller

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/internal/atomicfile"
)

// localStateFile holds the embedded mode's cluster state in the log dir.
const localStateFile = "kbroker-cluster.json"

// localState is what the embedded mode persists: the format of the
// releases before the controller core was shared, plus the deleted topics.
type localState struct {
	Metadata *Metadata `json:"metadata"`
	// NextProducerIDBlock is the first producer id not yet handed out in a
	// block; ids below it are never reused, even after a crash.
	NextProducerIDBlock int64 `json:"next_producer_id_block"`
	// DeletedTopics are deletions not yet confirmed (by this broker).
	DeletedTopics []localDeletedTopic `json:"deleted_topics,omitempty"`
	// ACLs are every ACL binding, sorted, in the form the view's
	// UpdateMetadata tag carries them (aclRecord: explicit keys and
	// Kafka's codes).
	ACLs []aclRecord `json:"acls,omitempty"`
}

type localDeletedTopic struct {
	ID      [16]byte `json:"id"`
	Topic   string   `json:"topic"`
	Pending []int32  `json:"pending_replicas"`
}

// localStore is the embedded single node's metadataStore: the whole state
// in one JSON file in the log dir, replaced atomically on every write. The
// node is the only broker and always the controller, so writes are never
// fenced; partition states are still written conditionally on their
// version, as in ZooKeeper, so the controller core behaves the same.
type localStore struct {
	path string // "" keeps the state in memory only (tests)

	// mu guards the fields below; every write saves a new state before
	// it is used.
	mu    sync.Mutex
	state *localState
	// brokers are the live brokers: the one node, or in tests a cluster
	// whose brokers come and go (setLive).
	brokers  []zk.BrokerInfo
	watchers []chan []int32
	// epochZkVersion is the controller epoch version writes must name:
	// always 0 for the embedded node; tests elect new controllers
	// (electController) to check that a deposed one is fenced.
	epochZkVersion int32
	// events is the cluster's event history (events_local.go).
	events localEvents
}

// openLocalStore reads (or starts) the state in dir for the single broker
// self. A changed broker id takes over the replicas of the old one.
func openLocalStore(dir string, self BrokerInfo) (*localStore, error) {
	s := &localStore{path: filepath.Join(dir, localStateFile), brokers: []zk.BrokerInfo{zkBroker(self)}}
	st, err := s.load()
	if err != nil {
		return nil, err
	}
	md := st.Metadata.clone()
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
	// The previous release kept deleted topic ids in the view it stored;
	// they become pending deletions, so their logs are removed if any are
	// left.
	for _, id := range md.DeletedTopicIDs {
		if !slices.ContainsFunc(st.DeletedTopics, func(d localDeletedTopic) bool { return d.ID == id }) {
			st.DeletedTopics = append(st.DeletedTopics, localDeletedTopic{ID: id, Pending: []int32{self.ID}})
		}
	}
	md.DeletedTopicIDs = nil
	st.Metadata = md
	if err := s.save(st); err != nil {
		return nil, err
	}
	s.state = st
	return s, nil
}

// zkBroker is b as its ZooKeeper registration: every endpoint, the
// inter-broker one first (one PLAINTEXT endpoint at Host:Port when b
// lists none).
func zkBroker(b BrokerInfo) zk.BrokerInfo {
	eps := slices.Clone(b.Endpoints)
	if len(eps) == 0 {
		eps = []zk.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: b.Host, Port: b.Port}}
	}
	return zk.BrokerInfo{ID: b.ID, Rack: b.Rack, JMXPort: -1, Endpoints: eps}
}

func (s *localStore) load() (*localState, error) {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return &localState{Metadata: &Metadata{ClusterID: newClusterID(), ControllerID: -1, Topics: map[string]*Topic{}}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read cluster state: %w", err)
	}
	var st localState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("cluster state file %s is damaged: %w", s.path, err)
	}
	if st.Metadata == nil {
		return nil, fmt.Errorf("cluster state file %s has no metadata", s.path)
	}
	if st.Metadata.Topics == nil {
		st.Metadata.Topics = map[string]*Topic{}
	}
	return &st, nil
}

func (s *localStore) save(st *localState) error {
	if s.path == "" {
		return nil
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode cluster state: %w", err)
	}
	// Private: it holds the SCRAM stored and server keys.
	if err := atomicfile.WritePrivate(s.path, data); err != nil {
		return fmt.Errorf("write cluster state: %w", err)
	}
	return nil
}

// update applies change to a copy of the state, saves it, then keeps it.
// A write from a deposed controller (another epoch version) fails with
// zk.ErrControllerMoved, as ZooKeeper's fenced transactions do.
func (s *localStore) update(epochZkVersion int32, change func(st *localState) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if epochZkVersion != s.epochZkVersion {
		return fmt.Errorf("controller epoch version %d, current %d: %w", epochZkVersion, s.epochZkVersion, zk.ErrControllerMoved)
	}
	next := &localState{Metadata: s.state.Metadata.clone(), NextProducerIDBlock: s.state.NextProducerIDBlock,
		DeletedTopics: slices.Clone(s.state.DeletedTopics), ACLs: slices.Clone(s.state.ACLs)}
	if err := change(next); err != nil {
		return err
	}
	if err := s.save(next); err != nil {
		return err
	}
	s.state = next
	return nil
}

// topic returns a topic of the current state (not to be modified).
func (s *localStore) topic(name string) (*Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.state.Metadata.Topics[name]
	if t == nil {
		return nil, fmt.Errorf("topic %q: %w", name, zk.ErrTopicNotFound)
	}
	return t, nil
}

func (s *localStore) ClusterID(context.Context, string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Metadata.ClusterID, nil
}

func (s *localStore) Brokers(context.Context) ([]zk.BrokerInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.brokers), nil
}

// WatchBrokers delivers the live broker ids after every change (setLive),
// the latest only to a slow reader; the embedded node's never change (the
// controller read them when it took over).
func (s *localStore) WatchBrokers(ctx context.Context) (<-chan []int32, error) {
	in := make(chan []int32, 1)
	s.mu.Lock()
	s.watchers = append(s.watchers, in)
	s.mu.Unlock()
	out := make(chan []int32)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case ids := <-in:
				select {
				case out <- ids:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// setLive makes brokers the live ones and tells the watchers (tests).
func (s *localStore) setLive(brokers []zk.BrokerInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.brokers = slices.Clone(brokers)
	ids := make([]int32, 0, len(brokers))
	for _, b := range brokers {
		ids = append(ids, b.ID)
	}
	for _, w := range s.watchers {
		select { // keep only the latest for a slow reader
		case <-w:
		default:
		}
		w <- ids
	}
}

// electController fences every controller so far and returns the epoch
// version the next one writes with (tests).
func (s *localStore) electController() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epochZkVersion++
	return s.epochZkVersion
}

func (s *localStore) Topics(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.state.Metadata.Topics)), nil
}

func (s *localStore) TopicAssignment(_ context.Context, topic string) (zk.TopicAssignment, error) {
	t, err := s.topic(topic)
	if err != nil {
		return zk.TopicAssignment{}, err
	}
	return assignmentOf(t), nil
}

func zkState(ps PartitionState) zk.PartitionState {
	return zk.PartitionState{Leader: ps.Leader, LeaderEpoch: ps.LeaderEpoch, ISR: slices.Clone(ps.ISR), ZkVersion: ps.PartitionEpoch}
}

func (s *localStore) PartitionStates(_ context.Context, topic string) (map[int32]zk.PartitionState, error) {
	t, err := s.topic(topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]zk.PartitionState{}
	for p, ps := range t.Partitions {
		if ps.Replicas != nil {
			out[int32(p)] = zkState(ps)
		}
	}
	return out, nil
}

func (s *localStore) PartitionState(ctx context.Context, topic string, partition int32) (zk.PartitionState, error) {
	states, err := s.PartitionStates(ctx, topic)
	if err != nil {
		return zk.PartitionState{}, err
	}
	st, ok := states[partition]
	if !ok {
		return zk.PartitionState{}, fmt.Errorf("%s-%d: %w", topic, partition, zk.ErrNoNode)
	}
	return st, nil
}

// ReadTopics is zk.Store.ReadTopics over the local file.
func (s *localStore) ReadTopics(ctx context.Context, names []string) (map[string]zk.TopicRead, error) {
	out := make(map[string]zk.TopicRead, len(names))
	for _, name := range names {
		var tr zk.TopicRead
		var err error
		if tr.Assignment, err = s.TopicAssignment(ctx, name); err == nil {
			if tr.States, err = s.PartitionStates(ctx, name); err == nil {
				tr.Configs, err = s.TopicConfig(ctx, name)
			}
		}
		tr.Err = err
		out[name] = tr
	}
	return out, nil
}

func (s *localStore) TopicConfig(_ context.Context, topic string) (map[string]string, error) {
	t, err := s.topic(topic)
	if err != nil {
		return nil, err
	}
	return maps.Clone(t.Configs), nil
}

func (s *localStore) DeletedTopics(context.Context) ([]zk.DeletedTopic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []zk.DeletedTopic
	for _, d := range s.state.DeletedTopics {
		out = append(out, zk.DeletedTopic{ID: zk.TopicID(d.ID), Topic: d.Topic, Pending: slices.Clone(d.Pending)})
	}
	return out, nil
}

func (s *localStore) CreateTopic(_ context.Context, epochZkVersion int32, nt zk.NewTopic) error {
	return s.update(epochZkVersion, func(st *localState) error {
		if _, ok := st.Metadata.Topics[nt.Name]; ok {
			return fmt.Errorf("topic %q: %w", nt.Name, zk.ErrTopicExists)
		}
		t := &Topic{Name: nt.Name, ID: [16]byte(nt.ID), Configs: maps.Clone(nt.Configs), Partitions: make([]PartitionState, len(nt.Assignment))}
		if len(t.Configs) == 0 {
			t.Configs = nil
		}
		for p, replicas := range nt.Assignment {
			if p < 0 || int(p) >= len(t.Partitions) {
				return fmt.Errorf("topic %q: partition %d out of range", nt.Name, p)
			}
			t.Partitions[p].Replicas = slices.Clone(replicas)
			if st, ok := nt.States[p]; ok {
				t.Partitions[p].Leader, t.Partitions[p].LeaderEpoch, t.Partitions[p].ISR = st.Leader, st.LeaderEpoch, slices.Clone(st.ISR)
			}
		}
		st.Metadata.Topics[nt.Name] = t
		return nil
	})
}

func (s *localStore) CreatePartitionStates(_ context.Context, epochZkVersion int32, topic string, states map[int32]zk.PartitionState) error {
	return s.update(epochZkVersion, func(st *localState) error {
		t := st.Metadata.Topics[topic]
		if t == nil {
			return fmt.Errorf("topic %q: %w", topic, zk.ErrTopicNotFound)
		}
		for p, zs := range states {
			if p < 0 || int(p) >= len(t.Partitions) {
				return fmt.Errorf("topic %q: partition %d out of range", topic, p)
			}
			ps := &t.Partitions[p]
			ps.Leader, ps.LeaderEpoch, ps.ISR, ps.PartitionEpoch = zs.Leader, zs.LeaderEpoch, slices.Clone(zs.ISR), 0
		}
		return nil
	})
}

func (s *localStore) SetTopicAssignment(_ context.Context, epochZkVersion int32, topic string, a zk.TopicAssignment) error {
	return s.update(epochZkVersion, func(st *localState) error {
		t := st.Metadata.Topics[topic]
		if t == nil {
			return fmt.Errorf("topic %q: %w", topic, zk.ErrTopicNotFound)
		}
		for p, replicas := range a.Partitions {
			for int(p) >= len(t.Partitions) {
				t.Partitions = append(t.Partitions, PartitionState{Leader: -1})
			}
			t.Partitions[p].Replicas = slices.Clone(replicas)
			t.Partitions[p].AddingReplicas = slices.Clone(a.AddingReplicas[p])
			t.Partitions[p].RemovingReplicas = slices.Clone(a.RemovingReplicas[p])
		}
		return nil
	})
}

func (s *localStore) SetTopicConfig(_ context.Context, epochZkVersion int32, topic string, configs map[string]string) error {
	return s.update(epochZkVersion, func(st *localState) error {
		t := st.Metadata.Topics[topic]
		if t == nil {
			return fmt.Errorf("topic %q: %w", topic, zk.ErrTopicNotFound)
		}
		t.Configs = maps.Clone(configs)
		if len(t.Configs) == 0 {
			t.Configs = nil
		}
		return nil
	})
}

// SetPartitionStates writes each state if its version is the stored one,
// as ZooKeeper's conditional set; the version then grows by one.
func (s *localStore) SetPartitionStates(_ context.Context, epochZkVersion int32, updates ...zk.PartitionUpdate) ([]zk.PartitionUpdateResult, error) {
	results := make([]zk.PartitionUpdateResult, len(updates))
	err := s.update(epochZkVersion, func(st *localState) error {
		for i, u := range updates {
			results[i].TopicPartition = u.TopicPartition
			t := st.Metadata.Topics[u.Topic]
			if t == nil || u.Partition < 0 || int(u.Partition) >= len(t.Partitions) {
				results[i].Err = fmt.Errorf("%s: %w", u.TopicPartition, zk.ErrNoNode)
				continue
			}
			ps := &t.Partitions[u.Partition]
			if ps.PartitionEpoch != u.State.ZkVersion {
				results[i].Err = fmt.Errorf("%s at version %d, stored %d: %w", u.TopicPartition, u.State.ZkVersion, ps.PartitionEpoch, zk.ErrVersionConflict)
				continue
			}
			ps.Leader, ps.LeaderEpoch, ps.ISR = u.State.Leader, u.State.LeaderEpoch, slices.Clone(u.State.ISR)
			ps.PartitionEpoch++
			results[i].ZkVersion = ps.PartitionEpoch
		}
		return nil
	})
	return results, err
}

func (s *localStore) DeleteTopic(_ context.Context, epochZkVersion int32, topic string, tombstone *zk.DeletedTopic) error {
	return s.update(epochZkVersion, func(st *localState) error {
		if _, ok := st.Metadata.Topics[topic]; !ok {
			return fmt.Errorf("topic %q: %w", topic, zk.ErrTopicNotFound)
		}
		delete(st.Metadata.Topics, topic)
		if tombstone != nil {
			st.DeletedTopics = append(st.DeletedTopics, localDeletedTopic{ID: [16]byte(tombstone.ID), Topic: tombstone.Topic, Pending: slices.Clone(tombstone.Pending)})
		}
		return nil
	})
}

func (s *localStore) SetDeletedTopic(_ context.Context, epochZkVersion int32, d zk.DeletedTopic) error {
	return s.update(epochZkVersion, func(st *localState) error {
		for i := range st.DeletedTopics {
			if st.DeletedTopics[i].ID != [16]byte(d.ID) {
				continue
			}
			if len(d.Pending) == 0 {
				st.DeletedTopics = slices.Delete(st.DeletedTopics, i, i+1)
			} else {
				st.DeletedTopics[i].Pending = slices.Clone(d.Pending)
			}
			return nil
		}
		return nil
	})
}

// AllocateProducerIDBlock reserves the next block; ids below the persisted
// mark are never handed out again, even after a crash.
func (s *localStore) AllocateProducerIDBlock(_ context.Context, brokerID int32) (zk.ProducerIDBlock, error) {
	var block zk.ProducerIDBlock
	s.mu.Lock()
	epochZkVersion := s.epochZkVersion // producer id blocks are not fenced, as in ZooKeeper
	s.mu.Unlock()
	err := s.update(epochZkVersion, func(st *localState) error {
		block = zk.ProducerIDBlock{Broker: brokerID, First: st.NextProducerIDBlock, Last: st.NextProducerIDBlock + zk.ProducerIDBlockSize - 1}
		st.NextProducerIDBlock += zk.ProducerIDBlockSize
		return nil
	})
	if err != nil {
		return zk.ProducerIDBlock{}, fmt.Errorf("reserve producer id block: %w", err)
	}
	return block, nil
}

// Users lists the users with a config or with client id configs (as
// ZooKeeper lists a user's znode made as their parent), sorted.
func (s *localStore) Users(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	users := slices.Collect(maps.Keys(s.state.Metadata.UserConfigs))
	for u := range s.state.Metadata.UserClientConfigs {
		if _, ok := s.state.Metadata.UserConfigs[u]; !ok {
			users = append(users, u)
		}
	}
	slices.Sort(users)
	return users, nil
}

// UserConfig returns a user's config. Its version is 0 when it exists and
// -1 when not: the controller is the file's only writer (under its lock),
// so a version only has to tell creation from replacement.
func (s *localStore) UserConfig(_ context.Context, user string) (map[string]string, int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	configs, ok := s.state.Metadata.UserConfigs[user]
	if !ok {
		return map[string]string{}, -1, nil
	}
	return maps.Clone(configs), 0, nil
}

// SetUserConfig replaces a user's config, conditional on it existing
// (version >= 0) or not (-1) as UserConfig said. An empty config removes
// the user: the file keeps no empty entries.
func (s *localStore) SetUserConfig(_ context.Context, epochZkVersion int32, user string, configs map[string]string, version int32) error {
	if user == "" {
		return errors.New("set user config: empty user name")
	}
	return s.update(epochZkVersion, func(st *localState) error {
		if _, exists := st.Metadata.UserConfigs[user]; exists != (version >= 0) {
			return fmt.Errorf("set config of user %q at version %d: %w", user, version, zk.ErrVersionConflict)
		}
		if len(configs) == 0 {
			delete(st.Metadata.UserConfigs, user)
			if len(st.Metadata.UserConfigs) == 0 {
				st.Metadata.UserConfigs = nil
			}
			return nil
		}
		if st.Metadata.UserConfigs == nil {
			st.Metadata.UserConfigs = map[string]map[string]string{}
		}
		st.Metadata.UserConfigs[user] = maps.Clone(configs)
		return nil
	})
}

// BrokerConfigEntities lists the broker config entities of the file.
func (s *localStore) BrokerConfigEntities(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.state.Metadata.BrokerConfigs)), nil
}

// BrokerConfig returns a broker entity's dynamic configs, at version 0
// when they exist and -1 when not (as UserConfig).
func (s *localStore) BrokerConfig(_ context.Context, entity string) (map[string]string, int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	configs, ok := s.state.Metadata.BrokerConfigs[entity]
	if !ok {
		return map[string]string{}, -1, nil
	}
	return maps.Clone(configs), 0, nil
}

// SetBrokerConfig replaces a broker entity's dynamic configs, conditional
// as SetUserConfig; an emptied entity is kept, as Kafka keeps its znode.
func (s *localStore) SetBrokerConfig(_ context.Context, epochZkVersion int32, entity string, configs map[string]string, version int32) error {
	if err := zk.ValidBrokerEntity(entity); err != nil {
		return err
	}
	return s.update(epochZkVersion, func(st *localState) error {
		if _, exists := st.Metadata.BrokerConfigs[entity]; exists != (version >= 0) {
			return fmt.Errorf("set config of broker %s at version %d: %w", entity, version, zk.ErrVersionConflict)
		}
		if st.Metadata.BrokerConfigs == nil {
			st.Metadata.BrokerConfigs = map[string]map[string]string{}
		}
		st.Metadata.BrokerConfigs[entity] = maps.Clone(configs)
		return nil
	})
}

// WatchConfigChanges delivers no notification: nothing but the controller
// writes the file. The channel closes when ctx ends.
func (s *localStore) WatchConfigChanges(ctx context.Context) (<-chan []string, error) {
	out := make(chan []string, 1)
	out <- nil
	go func() {
		<-ctx.Done()
		close(out)
	}()
	return out, nil
}

// ConfigChange finds nothing: the local store keeps no notifications.
func (s *localStore) ConfigChange(_ context.Context, name string) (zk.ConfigChange, error) {
	return zk.ConfigChange{}, fmt.Errorf("config change %s: %w", name, zk.ErrNoNode)
}

// DeleteConfigChanges has nothing to delete.
func (s *localStore) DeleteConfigChanges(context.Context, int32, []string) error { return nil }

// ACLResources lists the resource patterns with ACLs, in the state's
// (sorted) order.
func (s *localStore) ACLResources(context.Context) ([]acl.Resource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []acl.Resource
	for _, rec := range s.state.ACLs {
		r := rec.binding().Resource
		if len(out) == 0 || out[len(out)-1] != r {
			out = append(out, r)
		}
	}
	return out, nil
}

// ResourceACLs returns the entries of one resource pattern. The version is
// 0 when it has some and -1 when not: the controller is the file's only
// writer (under its lock), so a version only has to tell creation from
// replacement.
func (s *localStore) ResourceACLs(_ context.Context, r acl.Resource) ([]acl.Entry, int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var entries []acl.Entry
	for _, rec := range s.state.ACLs {
		if b := rec.binding(); b.Resource == r {
			entries = append(entries, b.Entry)
		}
	}
	if len(entries) == 0 {
		return nil, -1, nil
	}
	return entries, 0, nil
}

// SetResourceACLs replaces the entries of one resource pattern,
// conditional on it having entries (version >= 0) or not (-1) as
// ResourceACLs said; no entries removes the pattern.
func (s *localStore) SetResourceACLs(_ context.Context, epochZkVersion int32, r acl.Resource, entries []acl.Entry, version int32) error {
	if _, err := acl.ZNodePath(r); err != nil {
		// The same refusal as ZooKeeper's store, so both modes accept
		// the same patterns.
		return fmt.Errorf("set ACLs of %s: %w", r, err)
	}
	return s.update(epochZkVersion, func(st *localState) error {
		bindings := make([]acl.Binding, 0, len(st.ACLs)+len(entries))
		exists := false
		for _, rec := range st.ACLs {
			b := rec.binding()
			if b.Resource == r {
				exists = true
				continue
			}
			bindings = append(bindings, b)
		}
		if exists != (version >= 0) {
			return fmt.Errorf("set ACLs of %s at version %d: %w", r, version, zk.ErrVersionConflict)
		}
		for _, e := range entries {
			bindings = append(bindings, acl.Binding{Resource: r, Entry: e})
		}
		st.ACLs = aclRecords(sortBindings(bindings))
		return nil
	})
}

// WatchACLChanges delivers no notification: nothing but the controller
// writes the file. The channel closes when ctx ends.
func (s *localStore) WatchACLChanges(ctx context.Context) (<-chan []string, error) {
	return s.WatchConfigChanges(ctx)
}

// ACLChange finds nothing: the local store keeps no notifications.
func (s *localStore) ACLChange(_ context.Context, path string) (zk.ACLChange, error) {
	return zk.ACLChange{}, fmt.Errorf("ACL change %s: %w", path, zk.ErrNoNode)
}

// DeleteACLChanges has nothing to delete.
func (s *localStore) DeleteACLChanges(context.Context, int32, []string) error { return nil }

// newClusterID makes a Kafka-style cluster id: 16 random bytes, URL-safe
// base64 without padding.
func newClusterID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// newTopicID makes a random version-4 UUID that is not Kafka's reserved
// zero or one id.
func newTopicID() [16]byte {
	for {
		var id [16]byte
		rand.Read(id[:])
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
		if id != ([16]byte{}) && id != ([16]byte{15: 1}) {
			return id
		}
	}
}
