package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/kbroker/kbroker/internal/kafkaconn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// controllerWriteTimeout bounds one round of controller writes to
// ZooKeeper and of pushing a view.
const controllerWriteTimeout = 15 * time.Second

// active is the controller while this broker holds /controller at epoch.
// It keeps the authoritative cluster view, writes every change to
// ZooKeeper fenced on its controller epoch, and sends every live broker
// the new view.
type active struct {
	c              *Cluster
	epoch          int32
	epochZkVersion int32
	ctx            context.Context
	cancel         context.CancelFunc
	wg             sync.WaitGroup

	// mu guards the fields below and serialises decisions.
	mu         sync.Mutex
	md         *Metadata
	zkVersions map[zk.TopicPartition]int32
	senders    map[int32]*viewSender
	// seq numbers the published views.
	seq uint64
	// brokerEpochs are the registrations' creation zxids: a changed one
	// is a broker that restarted.
	brokerEpochs map[int32]int64
	// shuttingDown: brokers in controlled shutdown, never elected again
	// until they re-register.
	shuttingDown map[int32]bool
	// deleted are the deleted topics some replica has not confirmed yet
	// (/kbroker/deleted_topics): their ids go in every view.
	deleted map[[16]byte]*zk.DeletedTopic
}

// startActive loads the cluster from ZooKeeper, elects leaders where the
// live brokers require it and publishes the view.
func startActive(parent context.Context, c *Cluster, epoch, epochZkVersion int32) (*active, error) {
	ctx, cancel := context.WithCancel(parent)
	a := &active{c: c, epoch: epoch, epochZkVersion: epochZkVersion, ctx: ctx, cancel: cancel,
		zkVersions: map[zk.TopicPartition]int32{}, senders: map[int32]*viewSender{}, shuttingDown: map[int32]bool{}, brokerEpochs: map[int32]int64{},
		deleted: map[[16]byte]*zk.DeletedTopic{}}
	lctx, lcancel := context.WithTimeout(ctx, controllerWriteTimeout)
	defer lcancel()
	md, err := a.load(lctx)
	if err != nil {
		cancel()
		return nil, err
	}
	a.mu.Lock()
	a.md = md
	err = a.electAndPublishLocked(lctx)
	a.mu.Unlock()
	if err != nil {
		cancel()
		return nil, err
	}
	c.logger.Info("now controller", "broker", c.cfg.Self.ID, "controller_epoch", epoch,
		"brokers", len(md.Brokers), "topics", len(md.Topics))
	watch, err := c.store.WatchBrokers(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for range watch {
			a.onBrokersChanged()
		}
	}()
	if c.cfg.AutoLeaderRebalance && c.cfg.LeaderImbalanceCheck > 0 {
		a.wg.Add(1)
		go a.rebalanceLeaders(c.cfg.LeaderImbalanceCheck)
	}
	return a, nil
}

func (a *active) stop() {
	a.cancel()
	a.wg.Wait()
	a.mu.Lock()
	for _, s := range a.senders {
		s.close()
	}
	a.senders = nil
	a.mu.Unlock()
}

// load reads brokers, topics, assignments, partition states and configs.
func (a *active) load(ctx context.Context) (*Metadata, error) {
	store := a.c.store
	md := &Metadata{ClusterID: a.c.view.Load().ClusterID, ControllerID: a.c.cfg.Self.ID, Topics: map[string]*Topic{}}
	brokers, err := store.Brokers(ctx)
	if err != nil {
		return nil, err
	}
	md.Brokers = brokerInfos(brokers)
	for _, b := range brokers {
		a.brokerEpochs[b.ID] = b.Epoch
	}
	names, err := store.Topics(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		assignment, err := store.TopicAssignment(ctx, name)
		if errors.Is(err, zk.ErrTopicNotFound) || errors.Is(err, zk.ErrNoNode) {
			continue // deleted meanwhile
		}
		var states map[int32]zk.PartitionState
		var configs map[string]string
		if err == nil {
			states, err = store.PartitionStates(ctx, name)
		}
		if err == nil {
			configs, err = store.TopicConfig(ctx, name)
		}
		if errors.Is(err, zk.ErrMalformed) {
			// A damaged or hand-edited znode must not fail the takeover:
			// every broker in turn would win, fail and resign (an election
			// storm with no controller). Keep the topic as this broker last
			// saw it, so no broker drops its data, and name the znode.
			if known := a.c.view.Load().Topics[name]; known != nil {
				a.c.logger.Error("malformed topic znode; serving the topic as last known until it is fixed", "topic", name, "err", err)
				md.Topics[name] = (&Metadata{Topics: map[string]*Topic{name: known}}).clone().Topics[name]
			} else {
				a.c.logger.Error("malformed topic znode; ignoring the topic until it is fixed", "topic", name, "err", err)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		t := &Topic{Name: name, ID: assignment.ID, Configs: configs, Partitions: make([]PartitionState, len(assignment.Partitions))}
		if len(configs) == 0 {
			t.Configs = nil
		}
		var missing map[int32]zk.PartitionState
		for p := range t.Partitions {
			replicas := assignment.Partitions[int32(p)]
			st, ok := states[int32(p)]
			if !ok {
				// Assigned but never given a state (a crash between
				// writes, or a topic made by another tool): the first
				// replica leads.
				st = zk.PartitionState{Leader: replicas[0], ISR: slices.Clone(replicas), ControllerEpoch: a.epoch}
				if missing == nil {
					missing = map[int32]zk.PartitionState{}
				}
				missing[int32(p)] = st
			}
			t.Partitions[p] = PartitionState{Replicas: replicas, Leader: st.Leader, LeaderEpoch: st.LeaderEpoch, ISR: st.ISR}
			a.zkVersions[zk.TopicPartition{Topic: name, Partition: int32(p)}] = st.ZkVersion
		}
		if missing != nil {
			if err := store.CreatePartitionStates(ctx, a.epochZkVersion, name, missing); err != nil {
				return nil, err
			}
			fresh, err := store.PartitionStates(ctx, name)
			if err != nil {
				return nil, err
			}
			for p, st := range fresh {
				a.zkVersions[zk.TopicPartition{Topic: name, Partition: p}] = st.ZkVersion
			}
		}
		md.Topics[name] = t
	}
	if err := a.loadDeleted(ctx, md); err != nil {
		return nil, err
	}
	return md, nil
}

// loadDeleted reads the deleted topics not yet confirmed by every replica
// into md and a.deleted, and finishes a deletion a previous controller
// began (its tombstone written, the topic's znodes not all removed).
func (a *active) loadDeleted(ctx context.Context, md *Metadata) error {
	deleted, err := a.c.store.DeletedTopics(ctx)
	if err != nil {
		return err
	}
	for _, d := range deleted {
		if t := md.Topics[d.Topic]; t != nil && t.ID == [16]byte(d.ID) {
			a.c.logger.Info("finishing the deletion of a topic", "topic", d.Topic)
			if err := a.c.store.DeleteTopic(ctx, a.epochZkVersion, d.Topic, nil); err != nil && !errors.Is(err, zk.ErrTopicNotFound) {
				return a.storeErr(err)
			}
			delete(md.Topics, d.Topic)
			for tp := range a.zkVersions {
				if tp.Topic == d.Topic {
					delete(a.zkVersions, tp)
				}
			}
		}
		a.deleted[[16]byte(d.ID)] = &d
		md.markDeleted([16]byte(d.ID))
	}
	return nil
}

// confirmDeletedLocked records that broker keeps no replica of the deleted
// topics ids (it acknowledged a view naming them, or is this controller
// and checked): a deleted topic no replica is pending for is forgotten.
func (a *active) confirmDeletedLocked(broker int32, ids [][16]byte) {
	for _, id := range ids {
		d := a.deleted[id]
		if d == nil || !slices.Contains(d.Pending, broker) {
			continue
		}
		next := *d
		next.Pending = slices.DeleteFunc(slices.Clone(d.Pending), func(b int32) bool { return b == broker })
		ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
		err := a.c.store.SetDeletedTopic(ctx, a.epochZkVersion, next)
		cancel()
		if err != nil {
			a.c.logger.Warn("recording a confirmed topic deletion failed; retried with the next view", "topic", d.Topic, "broker", broker, "err", err)
			continue
		}
		if len(next.Pending) == 0 {
			a.c.logger.Info("every replica of the deleted topic is gone", "topic", d.Topic, "topic_id", zk.TopicID(id).String())
			delete(a.deleted, id)
			continue
		}
		*d = next
	}
}

// viewAcked is told by a view sender that broker applied a view naming the
// deleted topics ids and keeps no replica of them.
func (a *active) viewAcked(broker int32, ids [][16]byte) {
	if len(ids) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx.Err() != nil {
		return
	}
	a.confirmDeletedLocked(broker, ids)
}

func brokerInfos(brokers []zk.BrokerInfo) []BrokerInfo {
	out := make([]BrokerInfo, 0, len(brokers))
	for _, b := range brokers {
		info := BrokerInfo{ID: b.ID, Rack: b.Rack}
		if len(b.Endpoints) > 0 {
			info.Host, info.Port = b.Endpoints[0].Host, b.Endpoints[0].Port
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// uncleanFor is the topic's unclean.leader.election.enable.
func (a *active) uncleanFor(t *Topic) bool {
	if v, ok := t.Configs["unclean.leader.election.enable"]; ok {
		b, err := strconv.ParseBool(v)
		return err == nil && b
	}
	return a.c.cfg.UncleanDefault
}

// electAndPublishLocked re-elects every partition against the live
// brokers of a.md, writes the changes and publishes the view.
func (a *active) electAndPublishLocked(ctx context.Context) error {
	isLive, isEligible := a.liveAndEligibleLocked()
	next := a.md.clone()
	var updates []zk.PartitionUpdate
	for _, t := range next.Topics {
		unclean := a.uncleanFor(t)
		for p, ps := range t.Partitions {
			elected, changed := electLeader(ps, isLive, isEligible, unclean)
			if !changed {
				continue
			}
			if elected.Leader != ps.Leader && elected.Leader >= 0 && !slices.Contains(ps.ISR, elected.Leader) {
				a.c.UncleanElections.Add(1)
				a.c.logger.Warn("unclean leader election: records the new leader lacks are lost",
					"topic", t.Name, "partition", p, "new_leader", elected.Leader, "old_isr", ps.ISR)
			}
			t.Partitions[p] = elected
			tp := zk.TopicPartition{Topic: t.Name, Partition: int32(p)}
			updates = append(updates, a.stateUpdateLocked(tp, elected))
		}
	}
	if err := a.writeStatesLocked(ctx, next, updates); err != nil {
		return err
	}
	a.publishLocked(next)
	return nil
}

// stateUpdateLocked is the write of ps as tp's new state, conditional on
// the state znode version this controller last read or wrote (alterISR has
// checked the leader's partition epoch equals it).
func (a *active) stateUpdateLocked(tp zk.TopicPartition, ps PartitionState) zk.PartitionUpdate {
	return zk.PartitionUpdate{TopicPartition: tp, State: zk.PartitionState{
		Leader: ps.Leader, LeaderEpoch: ps.LeaderEpoch, ISR: ps.ISR,
		ControllerEpoch: a.epoch, ZkVersion: a.zkVersions[tp],
	}}
}

// writeStatesLocked writes partition state updates; partitions whose
// write lost a version race are re-read into next.
func (a *active) writeStatesLocked(ctx context.Context, next *Metadata, updates []zk.PartitionUpdate) error {
	if len(updates) == 0 {
		return nil
	}
	results, err := a.c.store.SetPartitionStates(ctx, a.epochZkVersion, updates...)
	if errors.Is(err, zk.ErrControllerMoved) {
		return fmt.Errorf("%w: %v", kerr.NotController, err)
	}
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.Err == nil {
			a.zkVersions[r.TopicPartition] = r.ZkVersion
			continue
		}
		a.c.logger.Warn("partition state write failed; re-reading it", "partition", r.TopicPartition.String(), "err", r.Err)
		st, err := a.c.store.PartitionState(ctx, r.Topic, r.Partition)
		if err != nil {
			return err
		}
		a.zkVersions[r.TopicPartition] = st.ZkVersion
		if t := next.Topics[r.Topic]; t != nil && int(r.Partition) < len(t.Partitions) {
			ps := &t.Partitions[r.Partition]
			ps.Leader, ps.LeaderEpoch, ps.ISR = st.Leader, st.LeaderEpoch, st.ISR
		}
	}
	return nil
}

// publishLocked makes next the view and sends it to every live broker.
func (a *active) publishLocked(next *Metadata) {
	for _, t := range next.Topics {
		for p := range t.Partitions {
			t.Partitions[p].PartitionEpoch = a.zkVersions[zk.TopicPartition{Topic: t.Name, Partition: int32(p)}]
		}
	}
	// Deleted topics every replica confirmed leave the views.
	next.DeletedTopicIDs = slices.DeleteFunc(next.DeletedTopicIDs, func(id [16]byte) bool { return a.deleted[id] == nil })
	a.seq++
	next.Sequence = a.seq
	a.md = next
	req := EncodeUpdateMetadata(next, a.epoch)
	deletedIDs := slices.Clone(next.DeletedTopicIDs)
	live := map[int32]bool{}
	for _, b := range next.Brokers {
		live[b.ID] = true
		if b.ID == a.c.cfg.Self.ID {
			continue
		}
		s := a.senders[b.ID]
		addr := b.Host + ":" + strconv.Itoa(int(b.Port))
		if s == nil || s.addr != addr {
			if s != nil {
				s.close()
			}
			s = newViewSender(a, b.ID, addr)
			a.senders[b.ID] = s
		}
		s.send(req, deletedIDs)
	}
	for id, s := range a.senders {
		if !live[id] {
			s.close()
			delete(a.senders, id)
		}
	}
	// This broker applies the view directly, before the change's caller
	// is answered.
	if err := a.c.ApplyUpdate(a.epoch, next); err != nil {
		a.c.logger.Error("applying own view failed", "err", err)
		return
	}
	if len(deletedIDs) > 0 && (a.c.cfg.HoldsDeleted == nil || !a.c.cfg.HoldsDeleted(deletedIDs)) {
		a.confirmDeletedLocked(a.c.cfg.Self.ID, deletedIDs)
	}
}

// onBrokersChanged re-reads the live brokers and re-elects.
func (a *active) onBrokersChanged() {
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	brokers, err := a.c.store.Brokers(ctx)
	if err != nil {
		if a.ctx.Err() == nil {
			a.c.logger.Error("reading live brokers failed", "err", err)
		}
		return
	}
	before := map[int32]bool{}
	for _, b := range a.md.Brokers {
		before[b.ID] = true
	}
	next := a.md.clone()
	next.Brokers = brokerInfos(brokers)
	for _, b := range next.Brokers {
		if !before[b.ID] {
			a.c.logger.Info("broker joined", "broker", b.ID)
		}
		delete(before, b.ID)
	}
	for _, b := range brokers {
		if old, ok := a.brokerEpochs[b.ID]; ok && old != b.Epoch && a.shuttingDown[b.ID] {
			// Restarted between two reads: a new incarnation, no
			// longer shutting down.
			a.c.logger.Info("broker re-registered", "broker", b.ID)
			delete(a.shuttingDown, b.ID)
		}
		a.brokerEpochs[b.ID] = b.Epoch
	}
	for id := range before {
		delete(a.brokerEpochs, id)
		if a.shuttingDown[id] {
			a.c.logger.Info("broker left after a controlled shutdown", "broker", id)
		} else {
			a.c.logger.Warn("broker left", "broker", id)
		}
		delete(a.shuttingDown, id)
	}
	a.md = next
	if err := a.electAndPublishLocked(ctx); err != nil {
		a.c.logger.Error("re-electing after a broker change failed", "err", err)
	}
}

// liveAndEligibleLocked returns two predicates over broker ids: live
// (registered) and eligible (live and not in controlled shutdown: may lead
// or join an ISR).
func (a *active) liveAndEligibleLocked() (live, eligible func(int32) bool) {
	registered := map[int32]bool{}
	for _, b := range a.md.Brokers {
		registered[b.ID] = true
	}
	live = func(id int32) bool { return registered[id] }
	eligible = func(id int32) bool { return registered[id] && !a.shuttingDown[id] }
	return live, eligible
}

// liveBrokersLocked lists the brokers new replicas may go to: live and not
// shutting down.
func (a *active) liveBrokersLocked() []BrokerInfo {
	out := make([]BrokerInfo, 0, len(a.md.Brokers))
	for _, b := range a.md.Brokers {
		if !a.shuttingDown[b.ID] {
			out = append(out, b)
		}
	}
	return out
}

func (a *active) createTopic(req CreateTopicRequest, validateOnly bool) (*Topic, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, exists := a.md.Topics[req.Name]; exists {
		return nil, fmt.Errorf("%w: topic %q already exists", kerr.TopicAlreadyExists, req.Name)
	}
	assignment, err := assignmentFor(a.liveBrokersLocked(), req.Assignment, req.NumPartitions, req.ReplicationFactor, 0)
	if err != nil {
		return nil, err
	}
	t := &Topic{Name: req.Name, ID: newTopicID(), Configs: req.Configs}
	nt := zk.NewTopic{Name: t.Name, ID: zk.TopicID(t.ID), Assignment: map[int32][]int32{}, Configs: req.Configs, States: map[int32]zk.PartitionState{}}
	for p, replicas := range assignment {
		t.Partitions = append(t.Partitions, PartitionState{Replicas: replicas, Leader: replicas[0], ISR: slices.Clone(replicas)})
		nt.Assignment[int32(p)] = replicas
		nt.States[int32(p)] = zk.PartitionState{Leader: replicas[0], ISR: slices.Clone(replicas), ControllerEpoch: a.epoch}
	}
	if validateOnly {
		return t, nil
	}
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	if err := a.c.store.CreateTopic(ctx, a.epochZkVersion, nt); err != nil {
		return nil, a.storeErr(err)
	}
	states, err := a.c.store.PartitionStates(ctx, t.Name)
	if err != nil {
		return nil, err
	}
	for p, st := range states {
		a.zkVersions[zk.TopicPartition{Topic: t.Name, Partition: p}] = st.ZkVersion
	}
	next := a.md.clone()
	next.Topics[t.Name] = t
	a.publishLocked(next)
	a.c.logger.Info("created topic", "topic", t.Name, "partitions", len(t.Partitions), "replication_factor", len(t.Partitions[0].Replicas))
	return t, nil
}

// storeErr maps store errors to the Kafka errors clients act on.
func (a *active) storeErr(err error) error {
	switch {
	case errors.Is(err, zk.ErrControllerMoved):
		return fmt.Errorf("%w: %v", kerr.NotController, err)
	case errors.Is(err, zk.ErrTopicExists):
		return fmt.Errorf("%w: %v", kerr.TopicAlreadyExists, err)
	case errors.Is(err, zk.ErrTopicNotFound):
		return fmt.Errorf("%w: %v", kerr.UnknownTopicOrPartition, err)
	}
	return err
}

func (a *active) deleteTopic(name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.md.Topics[name]
	if !ok {
		return fmt.Errorf("%w: %q", kerr.UnknownTopicOrPartition, name)
	}
	// Every replica must confirm its data is gone; until then the topic
	// id goes in every view (also to brokers that are down now).
	tombstone := zk.DeletedTopic{ID: zk.TopicID(t.ID), Topic: name}
	for _, ps := range t.Partitions {
		for _, id := range ps.Replicas {
			if !slices.Contains(tombstone.Pending, id) {
				tombstone.Pending = append(tombstone.Pending, id)
			}
		}
	}
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	if err := a.c.store.DeleteTopic(ctx, a.epochZkVersion, name, &tombstone); err != nil {
		return a.storeErr(err)
	}
	next := a.md.clone()
	next.markDeleted(next.Topics[name].ID)
	delete(next.Topics, name)
	a.deleted[tombstone.ID] = &tombstone
	for tp := range a.zkVersions {
		if tp.Topic == name {
			delete(a.zkVersions, tp)
		}
	}
	a.publishLocked(next)
	a.c.logger.Info("deleted topic", "topic", name)
	return nil
}

func (a *active) createPartitions(name string, total int32, assignment [][]int32, validateOnly bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, added, err := newPartitionsFor(a.md, a.liveBrokersLocked(), name, total, assignment)
	if err != nil || validateOnly {
		return err
	}
	have := int32(len(t.Partitions))
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	za := zk.TopicAssignment{ID: zk.TopicID(t.ID), Partitions: map[int32][]int32{}}
	states := map[int32]zk.PartitionState{}
	next := a.md.clone()
	nt := next.Topics[name]
	for p, ps := range t.Partitions {
		za.Partitions[int32(p)] = ps.Replicas
	}
	for i, replicas := range added {
		p := have + int32(i)
		za.Partitions[p] = replicas
		states[p] = zk.PartitionState{Leader: replicas[0], ISR: slices.Clone(replicas), ControllerEpoch: a.epoch}
		nt.Partitions = append(nt.Partitions, PartitionState{Replicas: replicas, Leader: replicas[0], ISR: slices.Clone(replicas)})
	}
	if err := a.c.store.SetTopicAssignment(ctx, a.epochZkVersion, name, za); err != nil {
		return a.storeErr(err)
	}
	if err := a.c.store.CreatePartitionStates(ctx, a.epochZkVersion, name, states); err != nil {
		return a.storeErr(err)
	}
	fresh, err := a.c.store.PartitionStates(ctx, name)
	if err != nil {
		return err
	}
	for p, st := range fresh {
		a.zkVersions[zk.TopicPartition{Topic: name, Partition: p}] = st.ZkVersion
	}
	a.publishLocked(next)
	return nil
}

func (a *active) updateTopicConfigs(name string, change func(map[string]string) (map[string]string, error), validateOnly bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.md.Topics[name]
	if !ok {
		return fmt.Errorf("%w: topic %q does not exist", kerr.UnknownTopicOrPartition, name)
	}
	configs, err := change(t.Configs)
	if err != nil || validateOnly {
		return err
	}
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	if err := a.c.store.SetTopicConfig(ctx, a.epochZkVersion, name, configs); err != nil {
		return a.storeErr(err)
	}
	next := a.md.clone()
	next.Topics[name].Configs = maps.Clone(configs)
	if len(configs) == 0 {
		next.Topics[name].Configs = nil
	}
	// A changed unclean.leader.election.enable may bring an offline
	// partition back at once.
	a.md = next
	return a.electAndPublishLocked(ctx)
}

// viewSender delivers the newest view to one broker, retrying until it is
// acknowledged or a newer view replaces it.
type viewSender struct {
	a      *active
	id     int32
	addr   string
	conn   *kafkaconn.Conn
	wake   chan struct{}
	done   chan struct{}
	mu     sync.Mutex // guards latest and latestDeleted
	latest *kmsg.UpdateMetadataRequest
	// latestDeleted are the deleted topic ids latest names: an
	// acknowledgement confirms the broker keeps no replica of them.
	latestDeleted [][16]byte
}

func newViewSender(a *active, id int32, addr string) *viewSender {
	s := &viewSender{a: a, id: id, addr: addr, conn: kafkaconn.New(addr, "kbroker-controller-"+strconv.Itoa(int(a.c.cfg.Self.ID))),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	a.wg.Add(1)
	go s.run()
	return s
}

func (s *viewSender) send(req *kmsg.UpdateMetadataRequest, deleted [][16]byte) {
	s.mu.Lock()
	s.latest, s.latestDeleted = req, deleted
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *viewSender) close() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
}

func (s *viewSender) run() {
	defer s.a.wg.Done()
	defer s.conn.Close()
	for {
		select {
		case <-s.done:
			return
		case <-s.a.ctx.Done():
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			req, deleted := s.latest, s.latestDeleted
			s.mu.Unlock()
			if req == nil {
				break
			}
			ctx, cancel := context.WithTimeout(s.a.ctx, 5*time.Second)
			resp, err := s.conn.Request(ctx, req)
			cancel()
			if err == nil {
				if code := resp.(*kmsg.UpdateMetadataResponse).ErrorCode; code != 0 {
					err = kerr.ErrorForCode(code)
				}
			}
			if err == nil {
				s.mu.Lock()
				if s.latest == req {
					s.latest = nil
				}
				s.mu.Unlock()
				s.a.viewAcked(s.id, deleted)
				continue
			}
			if errors.Is(err, kerr.StaleControllerEpoch) {
				s.a.c.logger.Warn("broker refused the view: a newer controller exists", "broker", s.id)
				return
			}
			select {
			case <-s.done:
				return
			case <-s.a.ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// alterISR changes a partition's ISR at its leader's request (Kafka's
// AlterPartition): only the current leader, at the current leader epoch and
// partition epoch, may change it; the leader stays in it; a replica joins
// only if it is assigned and alive. A request naming a topic id (every
// kbroker leader's does) applies only to that incarnation of the topic: the
// leader of a deleted topic cannot change the ISR of a new topic of the
// same name, whose epochs start over.
func (a *active) alterISR(leader int32, topic string, topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, isr []int32) (PartitionState, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.md.Topics[topic]
	if topicID != ([16]byte{}) {
		byID, ok := a.md.TopicByID(topicID)
		if !ok || (topic != "" && byID.Name != topic) {
			return PartitionState{}, fmt.Errorf("%w: no topic with id %x", kerr.UnknownTopicID, topicID)
		}
		t, topic = byID, byID.Name
	}
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return PartitionState{}, kerr.UnknownTopicOrPartition
	}
	cur := t.Partitions[partition]
	tp := zk.TopicPartition{Topic: topic, Partition: partition}
	switch {
	case cur.Leader != leader:
		return cur, fmt.Errorf("%w: broker %d does not lead %s (leader %d)", kerr.NotLeaderForPartition, leader, tp, cur.Leader)
	case leaderEpoch < cur.LeaderEpoch:
		return cur, fmt.Errorf("%w: %s at leader epoch %d, request at %d", kerr.FencedLeaderEpoch, tp, cur.LeaderEpoch, leaderEpoch)
	case leaderEpoch > cur.LeaderEpoch:
		return cur, fmt.Errorf("%w: %s at leader epoch %d, request at %d", kerr.UnknownLeaderEpoch, tp, cur.LeaderEpoch, leaderEpoch)
	case partitionEpoch != a.zkVersions[tp]:
		return cur, fmt.Errorf("%w: %s at partition epoch %d, request at %d", kerr.InvalidUpdateVersion, tp, a.zkVersions[tp], partitionEpoch)
	case !slices.Contains(isr, leader):
		return cur, fmt.Errorf("%w: the new ISR of %s leaves out its leader", kerr.InvalidRequest, tp)
	}
	// A broker in controlled shutdown is not eligible either (KIP-841):
	// its followers still fetch until it exits, and leaders must not
	// take it back into the ISR the shutdown just took it out of.
	_, eligible := a.liveAndEligibleLocked()
	for _, id := range isr {
		if !slices.Contains(cur.Replicas, id) || (!slices.Contains(cur.ISR, id) && !eligible(id)) {
			return cur, fmt.Errorf("%w: replica %d may not join the ISR of %s", kerr.IneligibleReplica, id, tp)
		}
	}
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	next := a.md.clone()
	np := &next.Topics[topic].Partitions[partition]
	np.ISR = slices.Clone(isr)
	if err := a.writeStatesLocked(ctx, next, []zk.PartitionUpdate{a.stateUpdateLocked(tp, *np)}); err != nil {
		return cur, err
	}
	a.publishLocked(next)
	a.c.logger.Info("ISR changed", "partition", tp.String(), "isr", cur.ISR, "new_isr", np.ISR)
	return next.Topics[topic].Partitions[partition], nil
}

// controlledShutdown moves leadership off a broker that is stopping (Kafka's
// ControlledShutdown): every partition it leads gets a new leader from the
// rest of its ISR, and it leaves the ISR of partitions it follows, so
// clients see NOT_LEADER_OR_FOLLOWER and move on instead of timing out. It
// returns how many partitions it still leads (no other ISR member).
func (a *active) controlledShutdown(id int32) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.shuttingDown[id] = true
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	next := a.md.clone()
	var updates []zk.PartitionUpdate
	for _, t := range next.Topics {
		for p := range t.Partitions {
			ps := &t.Partitions[p]
			if !slices.Contains(ps.ISR, id) || len(ps.ISR) == 1 {
				continue
			}
			if ps.Leader == id {
				newLeader := int32(-1)
				for _, r := range ps.Replicas {
					if r != id && slices.Contains(ps.ISR, r) && !a.shuttingDown[r] {
						newLeader = r
						break
					}
				}
				if newLeader < 0 {
					continue
				}
				ps.Leader = newLeader
				ps.LeaderEpoch++
			}
			ps.ISR = slices.DeleteFunc(slices.Clone(ps.ISR), func(r int32) bool { return r == id })
			tp := zk.TopicPartition{Topic: t.Name, Partition: int32(p)}
			updates = append(updates, a.stateUpdateLocked(tp, *ps))
		}
	}
	if err := a.writeStatesLocked(ctx, next, updates); err != nil {
		return -1, err
	}
	a.publishLocked(next)
	remaining := 0
	for _, t := range next.Topics {
		for _, ps := range t.Partitions {
			if ps.Leader == id {
				remaining++
			}
		}
	}
	a.c.logger.Info("controlled shutdown", "broker", id, "moved", len(updates), "still_leading", remaining)
	return remaining, nil
}

// ElectionResult is the outcome of a leader election for one partition.
type ElectionResult struct {
	Topic     string
	Partition int32
	Err       error // nil when elected
}

// electLeaders runs preferred (or, for offline partitions, unclean)
// elections, as Kafka's ElectLeaders: preferred moves leadership to the
// first assigned replica when it is alive and in the ISR. partitions nil
// means every partition; then partitions needing no change are left out of
// the results.
func (a *active) electLeaders(preferred bool, partitions []zk.TopicPartition) ([]ElectionResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	all := partitions == nil
	if all {
		for _, t := range a.md.Topics {
			for p := range t.Partitions {
				partitions = append(partitions, zk.TopicPartition{Topic: t.Name, Partition: int32(p)})
			}
		}
	}
	_, eligible := a.liveAndEligibleLocked()
	next := a.md.clone()
	var results []ElectionResult
	var updates []zk.PartitionUpdate
	for _, tp := range partitions {
		res := ElectionResult{Topic: tp.Topic, Partition: tp.Partition}
		t := next.Topics[tp.Topic]
		if t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			res.Err = kerr.UnknownTopicOrPartition
			results = append(results, res)
			continue
		}
		ps := &t.Partitions[tp.Partition]
		if preferred {
			want := ps.Replicas[0]
			switch {
			case ps.Leader == want:
				res.Err = kerr.ElectionNotNeeded
			case !eligible(want) || !slices.Contains(ps.ISR, want):
				res.Err = kerr.PreferredLeaderNotAvailable
			default:
				ps.Leader = want
				ps.LeaderEpoch++
			}
		} else {
			if ps.Leader >= 0 && eligible(ps.Leader) {
				res.Err = kerr.ElectionNotNeeded
			} else if elected, changed := electLeader(*ps, eligible, eligible, true); changed && elected.Leader >= 0 {
				if !slices.Contains(ps.ISR, elected.Leader) {
					a.c.UncleanElections.Add(1)
					a.c.logger.Warn("unclean leader election: records the new leader lacks are lost",
						"topic", tp.Topic, "partition", tp.Partition, "new_leader", elected.Leader, "old_isr", ps.ISR)
				}
				*ps = elected
			} else {
				res.Err = kerr.EligibleLeadersNotAvailable
			}
		}
		if res.Err == nil {
			updates = append(updates, a.stateUpdateLocked(tp, *ps))
		}
		if !all || res.Err == nil {
			results = append(results, res)
		}
	}
	if len(updates) == 0 {
		return results, nil
	}
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	if err := a.writeStatesLocked(ctx, next, updates); err != nil {
		return nil, err
	}
	a.publishLocked(next)
	a.c.logger.Info("leader election", "preferred", preferred, "moved", len(updates))
	return results, nil
}

// rebalanceLeaders periodically moves leadership back to preferred
// replicas (auto.leader.rebalance.enable).
func (a *active) rebalanceLeaders(every time.Duration) {
	defer a.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
			if _, err := a.electLeaders(true, nil); err != nil && a.ctx.Err() == nil {
				a.c.logger.Warn("preferred leader election failed", "err", err)
			}
		}
	}
}
