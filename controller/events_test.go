package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kbroker/kbroker/controller/zk"
)

// describe is an event as the tables write it: kind, partition, election
// and, for elections, old->new leader.
func describe(e ClusterEvent) string {
	s := e.Kind
	if e.Topic != "" {
		s += " " + e.Topic
		if e.Partition >= 0 {
			s += fmt.Sprintf("-%d", e.Partition)
		}
	}
	if e.Election != "" {
		s += fmt.Sprintf(" %s %d->%d", e.Election, e.OldLeader, e.NewLeader)
	}
	if e.Topic == "" && e.Broker >= 0 {
		s += fmt.Sprintf(" broker %d", e.Broker)
	}
	return s
}

func describeAll(events []ClusterEvent) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		out = append(out, describe(e))
	}
	return out
}

func idSet(ids ...int32) func(int32) bool {
	return func(id int32) bool { return slices.Contains(ids, id) }
}

// TestPartitionEvents is the decision table of which events one
// partition's change produces.
func TestPartitionEvents(t *testing.T) {
	ps := func(leader, epoch int32, isr ...int32) PartitionState {
		return PartitionState{Replicas: []int32{1, 2, 3}, Leader: leader, LeaderEpoch: epoch, ISR: isr}
	}
	cases := []struct {
		name         string
		old, next    PartitionState
		live         []int32
		shuttingDown []int32
		want         []string
	}{
		{"nothing changed", ps(1, 0, 1, 2, 3), ps(1, 0, 1, 2, 3), []int32{1, 2, 3}, nil, nil},
		{"follower died: shrink", ps(1, 0, 1, 2, 3), ps(1, 0, 1, 3), []int32{1, 3}, nil,
			[]string{"isr_shrink t-0"}},
		{"follower caught up: expand", ps(1, 0, 1, 3), ps(1, 0, 1, 3, 2), []int32{1, 2, 3}, nil,
			[]string{"isr_expand t-0"}},
		{"leader died: clean election and shrink", ps(1, 0, 1, 2, 3), ps(2, 1, 2, 3), []int32{2, 3}, nil,
			[]string{"leader_elected t-0 clean 1->2", "isr_shrink t-0"}},
		{"leader died, none in the ISR left: offline", ps(1, 0, 1), ps(-1, 1, 1), []int32{2, 3}, nil,
			[]string{"partition_offline t-0"}},
		{"offline partition's ISR member returns: clean", ps(-1, 1, 1), ps(1, 2, 1), []int32{1}, nil,
			[]string{"leader_elected t-0 clean -1->1"}},
		{"unclean: the new leader was not in the ISR", ps(-1, 1, 1), ps(3, 2, 3), []int32{3}, nil,
			[]string{"unclean_leader_elected t-0 unclean -1->3", "isr_shrink t-0", "isr_expand t-0"}},
		{"unclean from a live leader's death at once", ps(1, 4, 1), ps(2, 5, 2), []int32{2}, nil,
			[]string{"unclean_leader_elected t-0 unclean 1->2", "isr_shrink t-0", "isr_expand t-0"}},
		{"preferred: back to the first replica while the leader lives", ps(2, 3, 2, 1), ps(1, 4, 2, 1), []int32{1, 2}, nil,
			[]string{"preferred_leader_elected t-0 preferred 2->1"}},
		{"controlled shutdown of the leader", ps(1, 0, 1, 2), ps(2, 1, 2), []int32{1, 2}, []int32{1},
			[]string{"leader_elected t-0 controlled_shutdown 1->2", "isr_shrink t-0"}},
		{"controlled shutdown to the preferred replica is a shutdown", ps(2, 0, 2, 1), ps(1, 1, 1), []int32{1, 2}, []int32{2},
			[]string{"leader_elected t-0 controlled_shutdown 2->1", "isr_shrink t-0"}},
		{"leader died, the preferred replica takes over: clean, not preferred", ps(2, 0, 2, 1), ps(1, 1, 1), []int32{1}, nil,
			[]string{"leader_elected t-0 clean 2->1", "isr_shrink t-0"}},
	}
	for _, tc := range cases {
		got := describeAll(partitionEvents("t", 0, tc.old, tc.next, idSet(tc.live...), idSet(tc.shuttingDown...)))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
	// The details an event carries.
	e := partitionEvents("t", 2, ps(1, 4, 1, 2), ps(2, 5, 2), idSet(2), idSet())[0]
	if e.OldLeader != 1 || e.NewLeader != 2 || e.LeaderEpoch != 5 || !slices.Equal(e.OldISR, []int32{1, 2}) || !slices.Equal(e.NewISR, []int32{2}) ||
		e.Partition != 2 || e.LeaderLogEnd != -1 || e.Broker != 2 || !strings.Contains(e.Text, "t-2") {
		t.Errorf("event details %+v", e)
	}
}

func TestBrokerEvents(t *testing.T) {
	cases := []struct {
		name          string
		before, after []int32
		shuttingDown  []int32
		want          []string
	}{
		{"none", []int32{1, 2}, []int32{2, 1}, nil, nil},
		{"joins, sorted", []int32{1}, []int32{3, 1, 2}, nil, []string{"broker_joined broker 2", "broker_joined broker 3"}},
		{"death", []int32{1, 2}, []int32{1}, nil, []string{"broker_died broker 2"}},
		{"controlled shutdown", []int32{1, 2}, []int32{1}, []int32{2}, []string{"broker_shutdown broker 2"}},
		{"both", []int32{1, 2}, []int32{1, 3}, nil, []string{"broker_joined broker 3", "broker_died broker 2"}},
	}
	for _, tc := range cases {
		if got := describeAll(brokerEvents(tc.before, tc.after, idSet(tc.shuttingDown...))); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestViewEvents(t *testing.T) {
	old := &Metadata{Topics: map[string]*Topic{
		"a": {Name: "a", ID: [16]byte{1}, Partitions: []PartitionState{{Replicas: []int32{1, 2}, Leader: 1, ISR: []int32{1, 2}}, {Replicas: []int32{2, 1}, Leader: 2, ISR: []int32{2, 1}}}},
		"b": {Name: "b", ID: [16]byte{2}, Partitions: []PartitionState{{Replicas: []int32{1}, Leader: 1, ISR: []int32{1}}}},
		"c": {Name: "c", ID: [16]byte{3}, Partitions: []PartitionState{{Replicas: []int32{1}, Leader: 1, ISR: []int32{1}}}},
	}}
	next := old.clone()
	delete(next.Topics, "b")
	next.Topics["c"].ID = [16]byte{4} // deleted and re-created
	next.Topics["d"] = &Topic{Name: "d", ID: [16]byte{5}, Partitions: []PartitionState{{Replicas: []int32{1}, Leader: 1, ISR: []int32{1}}}}
	next.Topics["a"].Partitions[0] = PartitionState{Replicas: []int32{1, 2}, Leader: 1, ISR: []int32{1}}
	next.Topics["a"].Partitions[1] = PartitionState{Replicas: []int32{2, 1}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1}}
	next.Topics["a"].Partitions = append(next.Topics["a"].Partitions, PartitionState{Replicas: []int32{1}, Leader: 1, ISR: []int32{1}})
	got := describeAll(viewEvents(old, next, idSet(1), idSet()))
	want := []string{"topic_deleted b", "topic_deleted c", "topic_created c", "topic_created d",
		"leader_elected a-1 clean 2->1", "isr_shrink a-0", "isr_shrink a-1"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestCapEvents(t *testing.T) {
	var events []ClusterEvent
	for i := range 10 {
		kind := EventISRShrink
		if i%2 == 0 {
			kind = EventElection
		}
		events = append(events, ClusterEvent{Kind: kind, Partition: int32(i)})
	}
	if got := capEvents(events, 10); len(got) != 10 {
		t.Fatalf("at the limit: %d events", len(got))
	}
	got := capEvents(events, 4)
	if len(got) != 4 || got[2].Partition != 2 || got[3].Kind != EventSummary ||
		got[3].Text != "and 7 more events of the same decision: 4 isr_shrink 3 leader_elected" {
		t.Fatalf("capped: %+v", got)
	}
}

func TestEventHistory(t *testing.T) {
	var h eventHistory
	if h.newest() != -1 || len(h.after(-1)) != 0 {
		t.Fatal("empty history")
	}
	ev := func(seqs ...int64) []ClusterEvent {
		var out []ClusterEvent
		for _, s := range seqs {
			out = append(out, ClusterEvent{Seq: s, Kind: "k"})
		}
		return out
	}
	seqs := func(events []ClusterEvent) []int64 {
		var out []int64
		for _, e := range events {
			out = append(out, e.Seq)
		}
		return out
	}
	// The controller's writer and the ZooKeeper follower may add the
	// same events, in either order.
	h.add(ev(0, 1, 3)...)
	h.add(ev(2, 3, 4)...)
	h.add(ev(1)...)
	if got := seqs(h.after(-1)); !slices.Equal(got, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("merged %v", got)
	}
	if got := seqs(h.after(2)); !slices.Equal(got, []int64{3, 4}) || h.newest() != 4 {
		t.Fatalf("after 2: %v, newest %d", got, h.newest())
	}
	var many []int64
	for i := int64(5); i < keepEvents+50; i++ {
		many = append(many, i)
	}
	h.add(ev(many...)...)
	if all := h.after(-1); len(all) != keepEvents || all[0].Seq != 50 {
		t.Fatalf("bounded: %d events from %d", len(all), all[0].Seq)
	}
}

// TestLocalEventStore: sequences never go back (also across trims and a
// reopen), Events reads above a sequence and the newest limit, and a
// deposed controller's writes are refused.
func TestLocalEventStore(t *testing.T) {
	dir := t.TempDir()
	s, err := openLocalStore(dir, scenarioBroker(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var in []ClusterEvent
	for i := range 5 {
		in = append(in, newEvent(EventBrokerJoined, int32(i), "x"))
		in[i].Time = time.UnixMilli(int64(1000 + i))
	}
	out, err := s.AppendEvents(ctx, 0, in)
	if err != nil || len(out) != 5 || out[0].Seq != 0 || out[4].Seq != 4 {
		t.Fatalf("append: %v %+v", err, out)
	}
	if left, err := s.TrimEvents(ctx, 0, 3); err != nil || left != 3 {
		t.Fatalf("trim: %d %v", left, err)
	}
	s2, err := openLocalStore(dir, scenarioBroker(1))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s2.Events(ctx, -1, 0)
	if err != nil || len(got) != 3 || got[0].Seq != 2 || got[0].Broker != 2 || got[0].Time.UnixMilli() != 1002 {
		t.Fatalf("reopened: %v %+v", err, got)
	}
	more, err := s2.AppendEvents(ctx, 0, in[:1])
	if err != nil || more[0].Seq != 5 {
		t.Fatalf("sequence after reopen: %v %+v", err, more)
	}
	if got, _ := s2.Events(ctx, 3, 1); len(got) != 1 || got[0].Seq != 5 {
		t.Fatalf("after 3, limit 1: %+v", got)
	}
	s2.electController()
	if _, err := s2.AppendEvents(ctx, 0, in[:1]); !errors.Is(err, zk.ErrControllerMoved) {
		t.Fatalf("deposed append: %v", err)
	}
}

// scenarioEvents are the partition and topic events controllerScenario
// makes, in order (broker events differ by store: ZooKeeper's brokers join
// one by one).
var scenarioEvents = []string{
	"topic_created t",
	// broker 2 dies: the election is written and published first
	"leader_elected t-1 clean 2->3", "isr_shrink t-1", "isr_shrink t-0", "isr_shrink t-2",
	"isr_shrink t-1",
	"isr_expand t-1",
	"preferred_leader_elected t-1 preferred 3->2",
	// controlled shutdown of broker 3
	"leader_elected t-2 controlled_shutdown 3->1", "isr_shrink t-0", "isr_shrink t-1", "isr_shrink t-2",
	"topic_created u",
	"isr_shrink u-0",
	"partition_offline t-1", "partition_offline u-0",
	"unclean_leader_elected u-0 unclean -1->3", "isr_shrink u-0", "isr_expand u-0",
	"topic_deleted t",
	"topic_created t",
}

// scenarioBrokerEvents must appear in this order among the broker and
// controller events.
var scenarioBrokerEvents = []string{
	"controller_changed broker 1",
	"broker_died broker 2", "broker_joined broker 2",
	"broker_shutdown broker 3", "broker_joined broker 3",
	"broker_died broker 3", "broker_died broker 2", "broker_joined broker 3",
}

func checkScenarioEvents(t *testing.T, c *Cluster) []ClusterEvent {
	t.Helper()
	var all []ClusterEvent
	waitFor(t, 20*time.Second, func() error {
		all = c.Events(-1)
		var topics, brokers []string
		for _, e := range all {
			if e.Topic != "" {
				topics = append(topics, describe(e))
			} else {
				brokers = append(brokers, describe(e))
			}
		}
		if !slices.Equal(topics, scenarioEvents) {
			return fmt.Errorf("topic events\n%s\nwant\n%s", strings.Join(topics, "\n"), strings.Join(scenarioEvents, "\n"))
		}
		i := 0
		for _, b := range brokers {
			if i < len(scenarioBrokerEvents) && b == scenarioBrokerEvents[i] {
				i++
			}
		}
		if i < len(scenarioBrokerEvents) {
			return fmt.Errorf("broker events %q lack %q (in order)", brokers, scenarioBrokerEvents[i:])
		}
		return nil
	})
	for i, e := range all {
		if i > 0 && e.Seq <= all[i-1].Seq {
			t.Fatalf("sequences out of order: %d after %d", e.Seq, all[i-1].Seq)
		}
		if e.Time.IsZero() || e.ControllerEpoch != all[0].ControllerEpoch {
			t.Fatalf("event %+v: no time or another controller epoch", e)
		}
	}
	return all
}

// TestControllerEventsLocalStore: the controller's events of the scenario
// on the local store, and a new controller continuing the history.
func TestControllerEventsLocalStore(t *testing.T) {
	e := newLocalEnv(t).(*localEnv)
	before := runScenarioForEvents(t, e)
	// A new controller (the old one deposed by the scenario's last step)
	// reads the history and appends its own start.
	c2 := &Cluster{cfg: ClusterConfig{Self: scenarioBroker(2)}, logger: quietLogger(), store: e.store, seenEpoch: -1,
		stop: make(chan struct{}), done: make(chan struct{})}
	c2.view.Store(&Metadata{ClusterID: "scenario", ControllerID: 1, Topics: map[string]*Topic{}})
	if err := c2.loadEvents(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.store.mu.Lock()
	version := e.store.epochZkVersion
	e.store.mu.Unlock()
	a, err := startActive(context.Background(), context.Background(), c2, 7, version)
	if err != nil {
		t.Fatal(err)
	}
	c2.active = a
	t.Cleanup(c2.Close)
	checkContinued(t, c2, before, 1, 2, 7)
}

// checkContinued waits until c's history holds before and then a
// controller change from previous to id at epoch.
func checkContinued(t *testing.T, c *Cluster, before []ClusterEvent, previous, id, epoch int32) {
	t.Helper()
	waitFor(t, 20*time.Second, func() error {
		all := c.Events(-1)
		if len(all) <= len(before) {
			return fmt.Errorf("%d events, %d before", len(all), len(before))
		}
		for i := range before {
			if all[i].Seq != before[i].Seq || all[i].Kind != before[i].Kind {
				return fmt.Errorf("event %d: %+v, before %+v", i, all[i], before[i])
			}
		}
		for _, e := range all[len(before):] {
			if e.Kind == EventControllerChanged && e.Broker == id && e.OldLeader == previous && e.ControllerEpoch == epoch {
				return nil
			}
		}
		return fmt.Errorf("no controller change to %d at epoch %d in %q", id, epoch, describeAll(all[len(before):]))
	})
}

// TestControllerEventsZooKeeper: the same on a real ZooKeeper, where
// another broker (one restarted during the scenario, so it read the
// history back from ZooKeeper) holds the same events, and a new
// controller elected after broker 1 goes continues the history.
func TestControllerEventsZooKeeper(t *testing.T) {
	e := newZKEnv(t).(*zkEnv)
	before := runScenarioForEvents(t, e)
	c3 := e.members[3]
	waitFor(t, 20*time.Second, func() error {
		got, want := c3.Events(-1), e.ctrl().Events(-1)
		if len(got) != len(want) || got[0].Seq != want[0].Seq || got[len(got)-1].Seq != want[len(want)-1].Seq {
			return fmt.Errorf("broker 3 holds %d events, the controller %d", len(got), len(want))
		}
		return nil
	})
	// The scenario deposed broker 1 by hand; end its session so that a
	// real election makes broker 3 controller.
	e.members[1].Close()
	delete(e.members, 1)
	waitFor(t, 30*time.Second, func() error {
		if !c3.IsController() {
			return errors.New("broker 3 is not controller")
		}
		return nil
	})
	c3.activeMu.Lock()
	epoch := c3.active.epoch
	c3.activeMu.Unlock()
	checkContinued(t, c3, before, 1, 3, epoch)
	// ZooKeeper holds the same events, sequence for sequence.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stored, err := c3.store.Events(ctx, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if held := c3.Events(-1); len(stored) != len(held) || stored[len(stored)-1].Seq != held[len(held)-1].Seq {
		t.Fatalf("ZooKeeper holds %d events, broker 3 %d", len(stored), len(held))
	}
}

// runScenarioForEvents runs controllerScenario and checks its events
// before the last step deposes the controller: events are written after
// the decision, so a controller deposed at once may not have written its
// last ones (the test would race it).
func runScenarioForEvents(t *testing.T, e scenarioEnv) []ClusterEvent {
	t.Helper()
	last := len(controllerScenario) - 1
	if controllerScenario[last].name != "deposed controller" {
		t.Fatalf("the scenario's last step is %q", controllerScenario[last].name)
	}
	s := &scenarioState{ids: map[string][16]byte{}}
	var before []ClusterEvent
	for i, step := range controllerScenario {
		if i == last {
			before = checkScenarioEvents(t, e.ctrl())
		}
		if err := step.do(t, e, s); (step.wantErr == nil && err != nil) || (step.wantErr != nil && !errors.Is(err, step.wantErr)) {
			t.Fatalf("%s: error %v, want %v", step.name, err, step.wantErr)
		}
	}
	return before
}

func TestTruncationEvent(t *testing.T) {
	for _, tc := range []struct {
		hw            int64
		wantCommitted int64
		wantText      string
	}{
		{hw: 80, wantCommitted: 0, wantText: "broker 3 dropped offsets 90-99 of t-2 (10 records) to follow leader 1 at epoch 7"},
		{hw: 95, wantCommitted: 5, wantText: "broker 3 dropped offsets 90-99 of t-2 (10 records) to follow leader 1 at epoch 7; at least 5 of them committed (below its high watermark 95): lost by an unclean election"},
		{hw: 200, wantCommitted: 10, wantText: "broker 3 dropped offsets 90-99 of t-2 (10 records) to follow leader 1 at epoch 7; at least 10 of them committed (below its high watermark 200): lost by an unclean election"},
	} {
		e := truncationEvent(3, Truncation{Topic: "t", Partition: 2, From: 90, To: 100, HighWatermark: tc.hw, Leader: 1, LeaderEpoch: 7})
		if e.Kind != EventTruncation || e.Broker != 3 || e.Topic != "t" || e.Partition != 2 || e.TruncatedFrom != 90 || e.TruncatedTo != 100 ||
			e.NewLeader != 1 || e.LeaderEpoch != 7 || e.CommittedLost != tc.wantCommitted || e.Text != tc.wantText {
			t.Errorf("hw %d: %+v", tc.hw, e)
		}
	}
}
