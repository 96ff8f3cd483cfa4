package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/kbroker/kbroker/controller/zk"
)

// The cluster's event history: the controller records every decision it
// makes, when it makes it (not as a view diff taken later, which misses a
// change reverted before the next look), in its store (ZooKeeper's
// /kbroker/events, the embedded node's local file), fenced on its epoch and
// bounded; every broker keeps the newest events in memory (Cluster.Events)
// for its console, reading them from the store, so they survive a
// controller change and a broker's restart.

// ClusterEvent is one event of the cluster's history (see zk.ClusterEvent).
type ClusterEvent = zk.ClusterEvent

// Event kinds.
const (
	EventBrokerJoined      = "broker_joined"
	EventBrokerDied        = "broker_died"
	EventBrokerShutdown    = "broker_shutdown"  // left after a controlled shutdown
	EventBrokerRestarted   = "broker_restarted" // left and returned between two looks
	EventControllerChanged = "controller_changed"
	EventElection          = "leader_elected"         // clean: the new leader was in the ISR
	EventUncleanElection   = "unclean_leader_elected" // the new leader was not in the ISR
	EventPreferredElection = "preferred_leader_elected"
	EventOffline           = "partition_offline"
	EventISRShrink         = "isr_shrink"
	EventISRExpand         = "isr_expand"
	EventTopicCreated      = "topic_created"
	EventTopicDeleted      = "topic_deleted"
	// EventTruncation is recorded by a broker, not the controller: its
	// replica, following a new leader, dropped offsets its log had. Below
	// the replica's high watermark they were committed: after an unclean
	// election, the exact records lost.
	EventTruncation = "replica_truncated"
	// EventSummary stands for the events of one decision beyond
	// maxEventsPerDecision.
	EventSummary = "more_events"
)

// How a leader was elected (ClusterEvent.Election).
const (
	ElectionClean              = "clean"
	ElectionUnclean            = "unclean"
	ElectionPreferred          = "preferred"
	ElectionControlledShutdown = "controlled_shutdown"
)

const (
	// keepEvents bounds the history in the store and in every broker.
	keepEvents = 1000
	// trimSlack: the controller trims the store once it holds this many
	// more than keepEvents, so trimming is one transaction per
	// trimSlack events, not one per event.
	trimSlack = 100
	// maxEventsPerDecision bounds what one decision records: a broker's
	// death at 10,000 partitions is thousands of elections and ISR
	// shrinks; the first ones are kept, a summary counts the rest, so the
	// history is not all one failover.
	maxEventsPerDecision = 200
	// eventRetryBackoff spaces retries of a failed event write.
	eventRetryBackoff = 500 * time.Millisecond
)

// newEvent is an event of kind with no partition, leaders or offsets.
func newEvent(kind string, broker int32, text string) ClusterEvent {
	return ClusterEvent{Kind: kind, Broker: broker, Partition: -1, OldLeader: -1, NewLeader: -1, LeaderEpoch: -1, LeaderLogEnd: -1, Text: text}
}

// controllerEvent is a new controller's first event.
func controllerEvent(previous, id, epoch int32) ClusterEvent {
	e := newEvent(EventControllerChanged, id, fmt.Sprintf("broker %d became controller (epoch %d; previous controller %s)", id, epoch, brokerName(previous)))
	e.OldLeader, e.NewLeader = previous, id
	return e
}

// brokerEvents are the joins and departures that take the live brokers
// from before to after; a departure of a broker in controlled shutdown is
// a shutdown, any other a death (session expiry or kill).
func brokerEvents(before, after []int32, shuttingDown func(int32) bool) []ClusterEvent {
	var out []ClusterEvent
	for _, id := range sortedIDs(after) {
		if !slices.Contains(before, id) {
			out = append(out, newEvent(EventBrokerJoined, id, fmt.Sprintf("broker %d joined", id)))
		}
	}
	for _, id := range sortedIDs(before) {
		if slices.Contains(after, id) {
			continue
		}
		if shuttingDown(id) {
			out = append(out, newEvent(EventBrokerShutdown, id, fmt.Sprintf("broker %d left after a controlled shutdown", id)))
		} else {
			out = append(out, newEvent(EventBrokerDied, id, fmt.Sprintf("broker %d died (its ZooKeeper registration went without a controlled shutdown)", id)))
		}
	}
	return out
}

func sortedIDs(ids []int32) []int32 {
	s := slices.Clone(ids)
	slices.Sort(s)
	return s
}

// partitionEvents are the events of one partition's change from old to
// next: an election (how the leader was chosen is read from the change:
// outside the old ISR is unclean; off a broker in controlled shutdown is
// controlled_shutdown; to the first assigned replica while the old leader
// lives is preferred; any other is clean), the partition going offline,
// and ISR shrinks and expansions. live and shuttingDown describe the
// brokers when next was decided.
func partitionEvents(topic string, partition int32, old, next PartitionState, live, shuttingDown func(int32) bool) []ClusterEvent {
	name := fmt.Sprintf("%s-%d", topic, partition)
	base := func(kind string, broker int32, text string) ClusterEvent {
		e := newEvent(kind, broker, text)
		e.Topic, e.Partition = topic, partition
		e.OldLeader, e.NewLeader, e.LeaderEpoch = old.Leader, next.Leader, next.LeaderEpoch
		e.OldISR, e.NewISR = slices.Clone(old.ISR), slices.Clone(next.ISR)
		return e
	}
	var out []ClusterEvent
	if next.Leader != old.Leader {
		var e ClusterEvent
		switch {
		case next.Leader < 0:
			e = base(EventOffline, old.Leader, fmt.Sprintf("%s offline: leader %s gone, no eligible replica in the ISR %v (leader epoch %d)", name, brokerName(old.Leader), old.ISR, next.LeaderEpoch))
		case !slices.Contains(old.ISR, next.Leader):
			e = base(EventUncleanElection, next.Leader, fmt.Sprintf("%s: UNCLEAN election of broker %d (not in the ISR %v), leader epoch %d: records above its log end are lost", name, next.Leader, old.ISR, next.LeaderEpoch))
			e.Election = ElectionUnclean
		case old.Leader >= 0 && live(old.Leader) && shuttingDown(old.Leader):
			e = base(EventElection, next.Leader, fmt.Sprintf("%s: leader %d -> %d (controlled shutdown of %d), leader epoch %d", name, old.Leader, next.Leader, old.Leader, next.LeaderEpoch))
			e.Election = ElectionControlledShutdown
		case old.Leader >= 0 && live(old.Leader) && len(next.Replicas) > 0 && next.Replicas[0] == next.Leader:
			e = base(EventPreferredElection, next.Leader, fmt.Sprintf("%s: preferred leader %d elected (was %d), leader epoch %d", name, next.Leader, old.Leader, next.LeaderEpoch))
			e.Election = ElectionPreferred
		default:
			e = base(EventElection, next.Leader, fmt.Sprintf("%s: leader %s -> %d (clean, from the ISR %v), leader epoch %d", name, brokerName(old.Leader), next.Leader, old.ISR, next.LeaderEpoch))
			e.Election = ElectionClean
		}
		out = append(out, e)
	}
	var removed, added []int32
	for _, id := range old.ISR {
		if !slices.Contains(next.ISR, id) {
			removed = append(removed, id)
		}
	}
	for _, id := range next.ISR {
		if !slices.Contains(old.ISR, id) {
			added = append(added, id)
		}
	}
	if len(removed) > 0 {
		out = append(out, base(EventISRShrink, removed[0], fmt.Sprintf("%s ISR shrank %v -> %v (out: %v)", name, old.ISR, next.ISR, removed)))
	}
	if len(added) > 0 {
		out = append(out, base(EventISRExpand, added[0], fmt.Sprintf("%s ISR expanded %v -> %v (caught up: %v)", name, old.ISR, next.ISR, added)))
	}
	return out
}

// viewEvents are the events that take the view old to next: topics
// created and deleted (a name whose id changed is both), then every
// partition's (partitionEvents), topics by name, partitions in order.
// Leadership changes come first: they are what clients wait for.
func viewEvents(old, next *Metadata, live, shuttingDown func(int32) bool) []ClusterEvent {
	var topics, leaders, isrs []ClusterEvent
	for _, name := range slices.Sorted(maps.Keys(old.Topics)) {
		if nt := next.Topics[name]; nt == nil || nt.ID != old.Topics[name].ID {
			e := newEvent(EventTopicDeleted, -1, fmt.Sprintf("topic %s deleted", name))
			e.Topic = name
			topics = append(topics, e)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(next.Topics)) {
		nt := next.Topics[name]
		ot := old.Topics[name]
		if ot == nil || ot.ID != nt.ID {
			e := newEvent(EventTopicCreated, -1, fmt.Sprintf("topic %s created with %d partitions", name, len(nt.Partitions)))
			e.Topic = name
			topics = append(topics, e)
			continue
		}
		for p := range nt.Partitions {
			if p >= len(ot.Partitions) {
				continue // a new partition: created, not changed
			}
			for _, e := range partitionEvents(name, int32(p), ot.Partitions[p], nt.Partitions[p], live, shuttingDown) {
				if e.Kind == EventISRShrink || e.Kind == EventISRExpand {
					isrs = append(isrs, e)
				} else {
					leaders = append(leaders, e)
				}
			}
		}
	}
	return slices.Concat(topics, leaders, isrs)
}

// capEvents keeps the first limit-1 of events and, when there are more
// than limit, a summary counting the rest by kind instead of them.
func capEvents(events []ClusterEvent, limit int) []ClusterEvent {
	if len(events) <= limit {
		return events
	}
	kept := slices.Clone(events[:limit-1])
	counts := map[string]int{}
	for _, e := range events[limit-1:] {
		counts[e.Kind]++
	}
	text := fmt.Sprintf("and %d more events of the same decision:", len(events)-(limit-1))
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		text += fmt.Sprintf(" %d %s", counts[k], k)
	}
	return append(kept, newEvent(EventSummary, -1, text))
}

func brokerName(id int32) string {
	if id < 0 {
		return "none"
	}
	return fmt.Sprint(id)
}

// eventRecorder writes a controller's events to the store in the order
// they were decided, off the decision path: decisions (under active.mu)
// only queue, one goroutine writes, so a ZooKeeper round trip never delays
// an election. Written events go into the broker's history at once.
type eventRecorder struct {
	a    *active
	wake chan struct{}

	// mu guards queue.
	mu    sync.Mutex
	queue []ClusterEvent
	// stored is how many events the store holds, as of the last trim.
	stored int
}

func newEventRecorder(a *active) *eventRecorder {
	return &eventRecorder{a: a, wake: make(chan struct{}, 1)}
}

// add queues events decided at now. Past keepEvents queued (the store
// unreachable for long), the oldest queued are dropped: the history is
// bounded anyway.
func (r *eventRecorder) add(now time.Time, events ...ClusterEvent) {
	if len(events) == 0 {
		return
	}
	events = capEvents(events, maxEventsPerDecision)
	r.mu.Lock()
	for _, e := range events {
		e.Time, e.ControllerEpoch = now, r.a.epoch
		r.queue = append(r.queue, e)
	}
	if over := len(r.queue) - keepEvents; over > 0 {
		r.queue = append(r.queue[:0:0], r.queue[over:]...)
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run writes queued events until the controller stops (a.wg). stored is
// how many events the store may hold: more than keepEvents+trimSlack
// trims after the first write.
func (r *eventRecorder) run(stored int) {
	defer r.a.wg.Done()
	r.stored = stored
	for {
		select {
		case <-r.a.ctx.Done():
			return
		case <-r.wake:
		}
		for {
			more, failed := r.flush()
			if failed {
				select {
				case <-r.a.ctx.Done():
					return
				case <-time.After(eventRetryBackoff):
				}
				continue
			}
			if !more {
				break
			}
		}
	}
}

// flush writes up to maxEventsPerDecision queued events; more reports
// that some are left, failed that the write failed (retry later).
func (r *eventRecorder) flush() (more, failed bool) {
	r.mu.Lock()
	batch := slices.Clone(r.queue[:min(len(r.queue), maxEventsPerDecision)])
	r.mu.Unlock()
	if len(batch) == 0 {
		return false, false
	}
	a := r.a
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	written, err := a.c.store.AppendEvents(ctx, a.epochZkVersion, batch)
	if errors.Is(err, zk.ErrControllerMoved) {
		return false, false // deposed: the next controller records from here
	}
	if err != nil {
		if a.ctx.Err() == nil {
			a.c.logger.Warn("recording cluster events failed; retrying", "events", len(batch), "err", err)
		}
		return false, true
	}
	r.mu.Lock()
	// add keeps the queue's oldest events first and drops only from the
	// front, so the batch is still the queue's head unless add dropped
	// some of it meanwhile.
	r.queue = r.queue[min(len(batch), len(r.queue)):]
	more = len(r.queue) > 0
	r.mu.Unlock()
	a.c.history.add(written...)
	r.stored += len(written)
	if r.stored > keepEvents+trimSlack {
		left, err := a.c.store.TrimEvents(ctx, a.epochZkVersion, keepEvents)
		if err != nil {
			a.c.logger.Warn("trimming cluster events failed", "err", err)
		} else {
			r.stored = left
		}
	}
	return more, false
}

// eventHistory is a broker's copy of the newest events, by sequence.
type eventHistory struct {
	mu     sync.Mutex
	events []ClusterEvent
}

// add merges events in (by sequence, ignoring ones already held) and
// keeps the newest keepEvents.
func (h *eventHistory) add(events ...ClusterEvent) {
	if len(events) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range events {
		i, found := sort.Find(len(h.events), func(i int) int { return compareSeq(e.Seq, h.events[i].Seq) })
		if !found {
			h.events = slices.Insert(h.events, i, e)
		}
	}
	if over := len(h.events) - keepEvents; over > 0 {
		h.events = append(h.events[:0:0], h.events[over:]...)
	}
}

func compareSeq(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// after returns the events with a sequence above seq, oldest first.
func (h *eventHistory) after(seq int64) []ClusterEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	i, _ := sort.Find(len(h.events), func(i int) int { return compareSeq(seq+1, h.events[i].Seq) })
	return slices.Clone(h.events[i:])
}

// lastController is the controller the newest controller change in the
// history names (-1: none there).
func (h *eventHistory) lastController() int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.events) - 1; i >= 0; i-- {
		if h.events[i].Kind == EventControllerChanged {
			return h.events[i].Broker
		}
	}
	return -1
}

// previousController is who was controller before this broker: the
// history's last controller change, or the controller of the last view.
func (c *Cluster) previousController() int32 {
	if id := c.history.lastController(); id >= 0 {
		return id
	}
	return c.view.Load().ControllerID
}

// newest is the newest event's sequence (-1: none).
func (h *eventHistory) newest() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) == 0 {
		return -1
	}
	return h.events[len(h.events)-1].Seq
}

// Events returns the cluster's events with a sequence above after, oldest
// first: the newest keepEvents the controller recorded, as this broker
// has read them (a cluster's broker follows /kbroker/events).
func (c *Cluster) Events(after int64) []ClusterEvent { return c.history.after(after) }

// reloadWindow is how far below the newest event held loadEvents reads
// again: brokers write events too (truncations), so an event may be
// created just before one this broker already holds (add skips those it
// has).
const reloadWindow = 100

// loadEvents reads the newest events from the store into the history.
func (c *Cluster) loadEvents(ctx context.Context) error {
	after := c.history.newest()
	if after >= 0 {
		after = max(after-reloadWindow, -1)
	}
	events, err := c.store.Events(ctx, after, keepEvents)
	if err != nil {
		return fmt.Errorf("reading the cluster's events: %w", err)
	}
	c.history.add(events...)
	return nil
}

// followEvents keeps the history current with the store's events until
// ctx ends (a cluster's brokers: the controller writes, every broker
// reads).
func (c *Cluster) followEvents(ctx context.Context) {
	ch, err := c.members.WatchEvents(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.logger.Warn("not following the cluster's events in ZooKeeper; the console's timeline shows none", "err", err)
		}
		return
	}
	for newest := range ch {
		if newest <= c.history.newest() {
			continue
		}
		for ctx.Err() == nil {
			rctx, cancel := context.WithTimeout(ctx, controllerWriteTimeout)
			err := c.loadEvents(rctx)
			cancel()
			if err == nil {
				break
			}
			c.logger.Warn("reading the cluster's events failed; retrying", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(eventRetryBackoff):
			}
		}
	}
}

// Truncation is a replica's truncation after it began following a new
// leader: it dropped the offsets [From, To) of its log.
type Truncation struct {
	Topic     string
	Partition int32
	From, To  int64
	// HighWatermark is the replica's high watermark before: offsets below
	// it were committed.
	HighWatermark int64
	Leader        int32
	LeaderEpoch   int32
}

// truncationEvent is the timeline entry of broker self's truncation t.
func truncationEvent(self int32, t Truncation) ClusterEvent {
	e := newEvent(EventTruncation, self, "")
	e.Topic, e.Partition = t.Topic, t.Partition
	e.NewLeader, e.LeaderEpoch = t.Leader, t.LeaderEpoch
	e.TruncatedFrom, e.TruncatedTo = t.From, t.To
	e.CommittedLost = max(min(t.To, t.HighWatermark)-t.From, 0)
	what := fmt.Sprintf("broker %d dropped offsets %d-%d of %s-%d (%d records) to follow leader %d at epoch %d",
		self, t.From, t.To-1, t.Topic, t.Partition, t.To-t.From, t.Leader, t.LeaderEpoch)
	if e.CommittedLost > 0 {
		// A lower bound: a replica restarted after a crash knows only
		// its checkpointed high watermark.
		what += fmt.Sprintf("; at least %d of them committed (below its high watermark %d): lost by an unclean election", e.CommittedLost, t.HighWatermark)
	}
	e.Text = what
	return e
}

// RecordTruncation writes t, observed by this broker, to the cluster's
// event history.
func (c *Cluster) RecordTruncation(ctx context.Context, t Truncation) error {
	e := truncationEvent(c.cfg.Self.ID, t)
	e.Time = time.Now()
	e, err := c.store.AppendBrokerEvent(ctx, e)
	if err != nil {
		return err
	}
	c.history.add(e)
	return nil
}

// recordLocked queues events the controller just decided (a.mu held).
func (a *active) recordLocked(events ...ClusterEvent) {
	if a.events != nil {
		a.events.add(time.Now(), events...)
	}
}

// recordViewLocked records what takes the view from a.md to next.
func (a *active) recordViewLocked(next *Metadata) {
	if a.events == nil || a.md == nil {
		return
	}
	registered := map[int32]bool{}
	for _, b := range next.Brokers {
		registered[b.ID] = true
	}
	live := func(id int32) bool { return registered[id] }
	shutting := func(id int32) bool { return a.shuttingDown[id] }
	a.recordLocked(viewEvents(a.md, next, live, shutting)...)
}

func brokerIDs(brokers []BrokerInfo) []int32 {
	ids := make([]int32, 0, len(brokers))
	for _, b := range brokers {
		ids = append(ids, b.ID)
	}
	return ids
}
