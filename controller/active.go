package controller

import (
	"bytes"
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
	"github.com/twmb/franz-go/pkg/kerr"
)

// controllerWriteTimeout bounds one round of controller writes to
// ZooKeeper and of pushing a view.
const controllerWriteTimeout = 15 * time.Second

// active is the controller core: every cluster decision, made while this
// broker is the controller at epoch. It keeps the authoritative cluster
// view, writes every change to its store (ZooKeeper, or the embedded
// node's local file) fenced on its controller epoch, and sends every live
// broker the new view.
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
	// configChangeSeq is the sequence number of the newest config change
	// notification handled (or already there when this controller
	// started, its change loaded with the rest); configChanges are the
	// notifications seen, with their creation time, to purge old ones.
	configChangeSeq int64
	configChanges   map[string]time.Time
	// aclChangeSeq is, per ACL change directory, the sequence number of
	// the newest notification handled (as configChangeSeq); aclChanges
	// are the ACL notifications seen, by path, with their creation time.
	aclChangeSeq map[string]int64
	aclChanges   map[string]time.Time
	// offlineDirs are, per broker, its replicas in failed log dirs
	// (logdirs.go).
	offlineDirs map[int32]*offlineDirReplicas
	// events records the decisions in the cluster's history (events.go).
	events *eventRecorder
	// phases times the takeover's steps; nil once it is done.
	phases *phaseClock
}

// startActive loads the cluster from the store, elects leaders where the
// live brokers require it and publishes the view.
func startActive(parent, loadCtx context.Context, c *Cluster, epoch, epochZkVersion int32) (*active, error) {
	ctx, cancel := context.WithCancel(parent)
	a := &active{c: c, epoch: epoch, epochZkVersion: epochZkVersion, ctx: ctx, cancel: cancel,
		zkVersions: map[zk.TopicPartition]int32{}, senders: map[int32]*viewSender{}, shuttingDown: map[int32]bool{}, brokerEpochs: map[int32]int64{},
		deleted: map[[16]byte]*zk.DeletedTopic{}}
	lctx, lcancel := context.WithTimeout(loadCtx, controllerWriteTimeout)
	defer lcancel()
	// Watch config change notifications before loading: a change made
	// after the watch's first list is then both loaded and notified
	// (harmless), and none can fall in between.
	changes, err := c.store.WatchConfigChanges(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	var pending []string
	select {
	case pending = <-changes: // the first list is there at once
	case <-lctx.Done():
		cancel()
		return nil, fmt.Errorf("watching config changes: %w", lctx.Err())
	}
	a.configChangeSeq = newestConfigChange(pending)
	// ACL change notifications likewise (acls.go).
	aclPending, aclChanges, err := a.watchACLChanges(ctx, lctx)
	if err != nil {
		cancel()
		return nil, err
	}
	takeoverStart := time.Now()
	a.phases = newPhaseClock()
	md, err := a.load(lctx)
	if err != nil {
		cancel()
		return nil, err
	}
	a.mu.Lock()
	a.md = md
	a.events = newEventRecorder(a)
	a.wg.Add(1)
	go a.events.run(keepEvents + trimSlack + 1) // trims after its first write
	a.recordLocked(controllerEvent(c.previousController(), c.cfg.Self.ID, epoch))
	// Brokers that came or went while there was no controller (the old
	// one among them, when it died): against the last view this broker
	// was sent.
	a.recordLocked(brokerEvents(brokerIDs(c.view.Load().Brokers), brokerIDs(md.Brokers), func(int32) bool { return false })...)
	a.loadOfflineDirsLocked(lctx)
	a.phases.mark("load_offline_dirs")
	err = a.electAndPublishLocked(lctx)
	phases := a.phases
	a.phases = nil
	a.mu.Unlock()
	if err != nil {
		cancel()
		return nil, err
	}
	// The steps' durations: a failover's time to every partition led is
	// the session timeout plus these.
	c.logger.Info("now controller", append([]any{"broker", c.cfg.Self.ID, "controller_epoch", epoch,
		"brokers", len(md.Brokers), "topics", len(md.Topics), "takeover_ms", time.Since(takeoverStart).Milliseconds()},
		phases.attrs...)...)
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
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		// The first list only records creation times (and purges):
		// its changes were loaded.
		a.onConfigChanges(pending)
		for {
			select {
			case <-ctx.Done():
				return
			case names, ok := <-changes:
				if !ok {
					return
				}
				a.onConfigChanges(names)
			}
		}
	}()
	a.wg.Add(1)
	go a.followACLChanges(aclPending, aclChanges)
	a.wg.Add(1)
	go a.followLogDirEvents()
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

// load reads brokers, topics, assignments, partition states, topic and
// user configs, client quotas, and ACLs.
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
	a.phases.mark("load_brokers")
	names, err := store.Topics(ctx)
	if err != nil {
		return nil, err
	}
	// Every topic's znodes at once (a few ZooKeeper requests for all of
	// them, where one per partition took a second per 10,000 partitions).
	reads, err := store.ReadTopics(ctx, names)
	if err != nil {
		return nil, err
	}
	a.phases.mark("load_read_topics")
	for _, name := range names {
		read := reads[name]
		assignment, states, configs, err := read.Assignment, read.States, read.Configs, read.Err
		if errors.Is(err, zk.ErrTopicNotFound) || errors.Is(err, zk.ErrNoNode) {
			continue // deleted meanwhile
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
		if assignment.ID.IsZero() {
			// A topic made before topic ids (Kafka < 2.8, or another
			// tool): give it one, as Kafka's controller does, so that
			// replicas fetch and change its ISR by id.
			assignment.ID = zk.TopicID(newTopicID())
			if err := store.SetTopicAssignment(ctx, a.epochZkVersion, name, assignment); err != nil {
				return nil, a.storeErr(err)
			}
			a.c.logger.Info("gave a topic without an id one", "topic", name, "topic_id", assignment.ID.String())
		}
		t := &Topic{Name: name, ID: [16]byte(assignment.ID), Configs: configs, Partitions: make([]PartitionState, len(assignment.Partitions))}
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
			t.Partitions[p] = PartitionState{Replicas: replicas, Leader: st.Leader, LeaderEpoch: st.LeaderEpoch, ISR: st.ISR,
				AddingReplicas: assignment.AddingReplicas[int32(p)], RemovingReplicas: assignment.RemovingReplicas[int32(p)]}
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
	a.phases.mark("load_topics")
	a.phases.note("partitions", len(a.zkVersions))
	if err := a.loadDeleted(ctx, md); err != nil {
		return nil, err
	}
	if md.UserConfigs, err = a.readUserConfigs(ctx, a.c.view.Load().UserConfigs, nil); err != nil {
		return nil, err
	}
	if err := a.readQuotaEntities(ctx, md, a.c.view.Load(), nil); err != nil {
		return nil, err
	}
	if md.ACLs, err = a.readACLs(ctx, a.c.view.Load().ACLs, nil); err != nil {
		return nil, err
	}
	if md.BrokerConfigs, err = a.readBrokerConfigs(ctx, a.c.view.Load().BrokerConfigs, nil); err != nil {
		return nil, err
	}
	a.phases.mark("load_rest")
	return md, nil
}

func brokerInfos(brokers []zk.BrokerInfo) []BrokerInfo {
	out := make([]BrokerInfo, 0, len(brokers))
	for _, b := range brokers {
		out = append(out, BrokerInfo{ID: b.ID, Rack: b.Rack}.withEndpoints(b.Endpoints))
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
	type change struct {
		topic     string
		partition int
		elected   PartitionState
	}
	// Kafka's order (KafkaController.onReplicasBecomeOffline): partitions
	// that need a new leader are elected, written and published first,
	// then the ISR shrinks of the others. A broker that dies takes every
	// ISR it was in, thousands at scale: clients must not wait for those
	// writes to find the new leaders.
	var leaderMoves, isrOnly []change
	for _, t := range a.md.Topics {
		unclean := a.uncleanFor(t)
		for p, ps := range t.Partitions {
			live, eligible := a.replicaPredicatesLocked(t.Name, int32(p), isLive, isEligible)
			elected, changed := electLeader(ps, live, eligible, unclean)
			if !changed {
				continue
			}
			if elected.Leader != ps.Leader && elected.Leader >= 0 && !slices.Contains(ps.ISR, elected.Leader) {
				a.c.UncleanElections.Add(1)
				a.c.logger.Warn("unclean leader election: records the new leader lacks are lost",
					"topic", t.Name, "partition", p, "new_leader", elected.Leader, "old_isr", ps.ISR)
			}
			c := change{t.Name, p, elected}
			if elected.Leader != ps.Leader {
				leaderMoves = append(leaderMoves, c)
			} else {
				isrOnly = append(isrOnly, c)
			}
		}
	}
	a.phases.mark("elect")
	a.phases.note("leader_moves", len(leaderMoves))
	a.phases.note("isr_shrinks", len(isrOnly))
	for i, phase := range [][]change{leaderMoves, isrOnly} {
		if len(phase) == 0 {
			continue
		}
		name := [...]string{"leaders", "isrs"}[i]
		next := a.md.clone()
		updates := make([]zk.PartitionUpdate, 0, len(phase))
		for _, c := range phase {
			next.Topics[c.topic].Partitions[c.partition] = c.elected
			updates = append(updates, a.stateUpdateLocked(zk.TopicPartition{Topic: c.topic, Partition: int32(c.partition)}, c.elected))
		}
		if err := a.writeStatesLocked(ctx, next, updates); err != nil {
			return err
		}
		a.phases.mark(name + "_write")
		a.publishLocked(next)
		a.phases.mark(name + "_own_view")
	}
	if len(leaderMoves) == 0 && len(isrOnly) == 0 {
		a.publishLocked(a.md.clone())
		a.phases.mark("publish")
	}
	// A broker's return (or a new controller) may be what a
	// reassignment waited for.
	return a.completeReassignmentsLocked(ctx)
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

// publishLocked makes next the view and sends it to every live broker. A
// controller that was stopped publishes nothing.
func (a *active) publishLocked(next *Metadata) {
	if a.ctx.Err() != nil {
		return
	}
	a.recordViewLocked(next)
	for _, t := range next.Topics {
		for p := range t.Partitions {
			t.Partitions[p].PartitionEpoch = a.zkVersions[zk.TopicPartition{Topic: t.Name, Partition: int32(p)}]
		}
	}
	a.markOfflineDirReplicasLocked(next)
	// Every view names every deleted topic some replica has not confirmed
	// (no bound: each must reach every replica); confirmed ones leave.
	next.DeletedTopicIDs = slices.SortedFunc(maps.Keys(a.deleted), func(x, y [16]byte) int { return bytes.Compare(x[:], y[:]) })
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
	a.phases.mark("view_sent")
	// This broker applies the view directly, before the change's caller
	// is answered.
	if err := a.c.applyView(a.epoch, next); err != nil {
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
		if old, ok := a.brokerEpochs[b.ID]; ok && old != b.Epoch {
			a.recordLocked(newEvent(EventBrokerRestarted, b.ID, fmt.Sprintf("broker %d re-registered (a new incarnation: it left and returned between two looks)", b.ID)))
		}
		if old, ok := a.brokerEpochs[b.ID]; ok && old != b.Epoch && a.shuttingDown[b.ID] {
			// Restarted between two reads: a new incarnation, no
			// longer shutting down.
			a.c.logger.Info("broker re-registered", "broker", b.ID)
			delete(a.shuttingDown, b.ID)
		}
		a.brokerEpochs[b.ID] = b.Epoch
	}
	a.recordLocked(brokerEvents(brokerIDs(a.md.Brokers), brokerIDs(next.Brokers), func(id int32) bool { return a.shuttingDown[id] })...)
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
	a.forgetOfflineDirsLocked()
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
	za := assignmentOf(t)
	states := map[int32]zk.PartitionState{}
	next := a.md.clone()
	nt := next.Topics[name]
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
