package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/kbroker/kbroker/controller/zk"
	"github.com/kbroker/kbroker/internal/zktest"
	"github.com/twmb/franz-go/pkg/kerr"
)

// scenarioEnv is a cluster of brokers 1..3 whose controller is broker 1,
// kept on one of the two stores. The same scenario table runs on both.
type scenarioEnv interface {
	// ctrl is broker 1's control plane, the controller.
	ctrl() *Cluster
	// setLive makes exactly ids live and waits until the controller's
	// view lists them.
	setLive(t *testing.T, ids ...int32)
	// depose makes another controller win (fencing broker 1's writes).
	depose(t *testing.T)
}

// scenarioBroker is broker id as the scenarios register it: an address
// nobody listens on, so views sent to it are never acknowledged.
func scenarioBroker(id int32) BrokerInfo { return BrokerInfo{ID: id, Host: "127.0.0.1", Port: 1} }

// waitFor polls cond every 20 ms until it returns nil, failing the test
// with its last error after within.
func waitFor(t *testing.T, within time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitBrokers waits until c's view lists exactly ids.
func waitBrokers(t *testing.T, c *Cluster, ids []int32) {
	t.Helper()
	waitFor(t, 20*time.Second, func() error {
		var have []int32
		for _, b := range c.Metadata().Brokers {
			have = append(have, b.ID)
		}
		if !slices.Equal(have, ids) {
			return fmt.Errorf("the controller's view lists brokers %v, want %v", have, ids)
		}
		return nil
	})
}

// localEnv runs the core over the local store (in memory), with brokers
// that come and go as the test says.
type localEnv struct {
	store *localStore
	c     *Cluster
}

func newLocalEnv(t *testing.T) scenarioEnv {
	st := &localState{Metadata: &Metadata{ClusterID: "scenario", ControllerID: -1, Topics: map[string]*Topic{}}}
	store := &localStore{state: st}
	for id := int32(1); id <= 3; id++ {
		store.brokers = append(store.brokers, zkBroker(scenarioBroker(id)))
	}
	e := &localEnv{store: store}
	e.c = startLocalController(t, store, 1, 0)
	return e
}

// startLocalController makes broker self the controller of store at
// controller epoch epoch (its writes name store's current epoch version).
func startLocalController(t *testing.T, store *localStore, self int32, epoch int32) *Cluster {
	t.Helper()
	c := &Cluster{cfg: ClusterConfig{Self: scenarioBroker(self)}, logger: quietLogger(), store: store, seenEpoch: -1,
		stop: make(chan struct{}), done: make(chan struct{})}
	c.view.Store(&Metadata{ClusterID: "scenario", ControllerID: -1, Topics: map[string]*Topic{}})
	store.mu.Lock()
	version := store.epochZkVersion
	store.mu.Unlock()
	a, err := startActive(context.Background(), context.Background(), c, epoch, version)
	if err != nil {
		t.Fatal(err)
	}
	c.active = a
	t.Cleanup(c.Close)
	return c
}

func (e *localEnv) ctrl() *Cluster { return e.c }

func (e *localEnv) setLive(t *testing.T, ids ...int32) {
	var bs []zk.BrokerInfo
	for _, id := range ids {
		bs = append(bs, zkBroker(scenarioBroker(id)))
	}
	e.store.setLive(bs)
	waitBrokers(t, e.c, ids)
}

func (e *localEnv) depose(*testing.T) { e.store.electController() }

// zkEnv runs three Cluster members on a real ZooKeeper; broker 1 is
// started first and so is the controller.
type zkEnv struct {
	zk      *zktest.Server
	chroot  string
	members map[int32]*Cluster
}

func newZKEnv(t *testing.T) scenarioEnv {
	e := &zkEnv{zk: zktest.Start(t), chroot: "/scenario", members: map[int32]*Cluster{}}
	e.start(t, 1)
	waitFor(t, 20*time.Second, func() error {
		if !e.members[1].IsController() {
			return errors.New("broker 1 did not become controller")
		}
		return nil
	})
	e.start(t, 2)
	e.start(t, 3)
	waitBrokers(t, e.members[1], []int32{1, 2, 3})
	return e
}

func (e *zkEnv) start(t *testing.T, id int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := NewCluster(ctx, ClusterConfig{Self: scenarioBroker(id), ZookeeperConnect: e.zk.Addr() + e.chroot,
		SessionTimeout: 4 * time.Second, ConnectionTimeout: 10 * time.Second}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.members[id] = c
	t.Cleanup(c.Close)
}

func (e *zkEnv) ctrl() *Cluster { return e.members[1] }

func (e *zkEnv) setLive(t *testing.T, ids ...int32) {
	for id := int32(2); id <= 3; id++ {
		c, running := e.members[id]
		switch {
		case running && !slices.Contains(ids, id):
			c.Close() // ends the session: the registration goes at once
			delete(e.members, id)
		case !running && slices.Contains(ids, id):
			e.start(t, id)
		}
	}
	waitBrokers(t, e.members[1], ids)
}

// depose bumps /controller_epoch's version, as a newly elected controller
// does: broker 1's fenced writes fail from then on.
func (e *zkEnv) depose(t *testing.T) {
	conn, _, err := gozk.Connect([]string{e.zk.Addr()}, 5*time.Second, gozk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p := e.chroot + zk.ControllerEpochPath
	data, stat, err := conn.Get(p)
	if err != nil {
		t.Fatal(err)
	}
	epoch, _ := strconv.Atoi(string(data))
	if _, err := conn.Set(p, []byte(strconv.Itoa(epoch+1)), stat.Version); err != nil {
		t.Fatal(err)
	}
}

// render describes the partitions of the named topics in c's view.
func render(c *Cluster, topics ...string) string {
	md := c.Metadata()
	var lines []string
	for _, name := range topics {
		t := md.Topics[name]
		if t == nil {
			lines = append(lines, name+": none")
			continue
		}
		for p, ps := range t.Partitions {
			lines = append(lines, fmt.Sprintf("%s-%d leader=%d epoch=%d isr=%v pe=%d", name, p, ps.Leader, ps.LeaderEpoch, ps.ISR, ps.PartitionEpoch))
		}
	}
	return strings.Join(lines, "\n")
}

// scenarioStep is one event and the state the controller must reach.
type scenarioStep struct {
	name string
	do   func(t *testing.T, e scenarioEnv, s *scenarioState) error
	// wantErr is the Kafka error do must return (nil: none).
	wantErr error
	// topics and want: render(ctrl, topics...) after the step.
	topics []string
	want   string
	check  func(t *testing.T, e scenarioEnv, s *scenarioState)
}

// scenarioState carries what steps learn (topic ids) to later steps.
type scenarioState struct{ ids map[string][16]byte }

func alterISR(leader int32, topic string, id [16]byte, p, leaderEpoch, partitionEpoch int32, isr ...int32) func(*testing.T, scenarioEnv, *scenarioState) error {
	return func(_ *testing.T, e scenarioEnv, _ *scenarioState) error {
		_, err := e.ctrl().AlterISR(leader, topic, id, p, leaderEpoch, partitionEpoch, isr)
		return err
	}
}

func createTopic(name string, assignment ...[]int32) func(*testing.T, scenarioEnv, *scenarioState) error {
	return func(_ *testing.T, e scenarioEnv, s *scenarioState) error {
		t, err := e.ctrl().CreateTopic(CreateTopicRequest{Name: name, Assignment: assignment}, false)
		if err == nil {
			s.ids[name] = t.ID
		}
		return err
	}
}

func setLive(ids ...int32) func(*testing.T, scenarioEnv, *scenarioState) error {
	return func(t *testing.T, e scenarioEnv, _ *scenarioState) error { e.setLive(t, ids...); return nil }
}

func setConfig(topic, key, value string) func(*testing.T, scenarioEnv, *scenarioState) error {
	return func(_ *testing.T, e scenarioEnv, _ *scenarioState) error {
		return e.ctrl().UpdateTopicConfigs(topic, func(cur map[string]string) (map[string]string, error) {
			next := maps.Clone(cur)
			if next == nil {
				next = map[string]string{}
			}
			next[key] = value
			return next, nil
		}, false)
	}
}

// controllerScenario is the table both stores run: creation, configs,
// broker deaths and returns, ISR changes with their fencing, preferred and
// unclean elections, controlled shutdown, deletion and re-creation under
// the same name, and a deposed controller.
var controllerScenario = []scenarioStep{
	{name: "create", do: createTopic("t", []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2}), topics: []string{"t"}, want: `
t-0 leader=1 epoch=0 isr=[1 2 3] pe=0
t-1 leader=2 epoch=0 isr=[2 3 1] pe=0
t-2 leader=3 epoch=0 isr=[3 1 2] pe=0`},
	{name: "create again", do: createTopic("t", []int32{1}), wantErr: kerr.TopicAlreadyExists},
	{name: "config", do: setConfig("t", "retention.ms", "100"), check: func(t *testing.T, e scenarioEnv, _ *scenarioState) {
		if got := e.ctrl().Metadata().Topics["t"].Configs["retention.ms"]; got != "100" {
			t.Fatalf("retention.ms = %q", got)
		}
	}},
	{name: "broker 2 dies", do: setLive(1, 3), topics: []string{"t"}, want: `
t-0 leader=1 epoch=0 isr=[1 3] pe=1
t-1 leader=3 epoch=1 isr=[3 1] pe=1
t-2 leader=3 epoch=0 isr=[3 1] pe=1`},
	{name: "ISR change at a stale partition epoch", do: alterISR(3, "t", [16]byte{}, 1, 1, 0, 3), wantErr: kerr.InvalidUpdateVersion},
	{name: "ISR change from a non-leader", do: alterISR(1, "t", [16]byte{}, 1, 1, 1, 1), wantErr: kerr.NotLeaderForPartition},
	{name: "ISR change at a stale leader epoch", do: alterISR(3, "t", [16]byte{}, 1, 0, 1, 3), wantErr: kerr.FencedLeaderEpoch},
	{name: "ISR change adding a dead broker", do: alterISR(3, "t", [16]byte{}, 1, 1, 1, 3, 1, 2), wantErr: kerr.IneligibleReplica},
	{name: "ISR change leaving out the leader", do: alterISR(3, "t", [16]byte{}, 1, 1, 1, 1), wantErr: kerr.InvalidRequest},
	{name: "ISR shrink", do: alterISR(3, "t", [16]byte{}, 1, 1, 1, 3), topics: []string{"t"}, want: `
t-0 leader=1 epoch=0 isr=[1 3] pe=1
t-1 leader=3 epoch=1 isr=[3] pe=2
t-2 leader=3 epoch=0 isr=[3 1] pe=1`},
	{name: "broker 2 returns", do: setLive(1, 2, 3), topics: []string{"t"}, want: `
t-0 leader=1 epoch=0 isr=[1 3] pe=1
t-1 leader=3 epoch=1 isr=[3] pe=2
t-2 leader=3 epoch=0 isr=[3 1] pe=1`},
	{name: "preferred election before it is in sync", do: func(_ *testing.T, e scenarioEnv, _ *scenarioState) error {
		res, err := e.ctrl().ElectLeaders(true, []TopicPartition{{"t", 1}})
		if err != nil {
			return err
		}
		return res[0].Err
	}, wantErr: kerr.PreferredLeaderNotAvailable},
	{name: "ISR expand", do: func(t *testing.T, e scenarioEnv, s *scenarioState) error {
		return alterISR(3, "t", s.ids["t"], 1, 1, 2, 3, 2)(t, e, s)
	}, topics: []string{"t"}, want: `
t-0 leader=1 epoch=0 isr=[1 3] pe=1
t-1 leader=3 epoch=1 isr=[3 2] pe=3
t-2 leader=3 epoch=0 isr=[3 1] pe=1`},
	{name: "preferred election", do: func(_ *testing.T, e scenarioEnv, _ *scenarioState) error {
		res, err := e.ctrl().ElectLeaders(true, []TopicPartition{{"t", 1}, {"t", 0}, {"nope", 0}})
		if err != nil {
			return err
		}
		if !errors.Is(res[1].Err, kerr.ElectionNotNeeded) || !errors.Is(res[2].Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("results %+v", res)
		}
		return res[0].Err
	}, topics: []string{"t"}, want: `
t-0 leader=1 epoch=0 isr=[1 3] pe=1
t-1 leader=2 epoch=2 isr=[3 2] pe=4
t-2 leader=3 epoch=0 isr=[3 1] pe=1`},
	{name: "controlled shutdown of broker 3", do: func(_ *testing.T, e scenarioEnv, _ *scenarioState) error {
		n, err := e.ctrl().ControlledShutdown(3)
		if err == nil && n != 0 {
			err = fmt.Errorf("%d partitions still led", n)
		}
		return err
	}, topics: []string{"t"}, want: `
t-0 leader=1 epoch=0 isr=[1] pe=2
t-1 leader=2 epoch=2 isr=[2] pe=5
t-2 leader=1 epoch=1 isr=[1] pe=2`},
	{name: "a broker in controlled shutdown may not rejoin the ISR", do: alterISR(1, "t", [16]byte{}, 0, 0, 2, 1, 3), wantErr: kerr.IneligibleReplica},
	{name: "broker 3 exits and restarts", do: func(t *testing.T, e scenarioEnv, s *scenarioState) error {
		e.setLive(t, 1, 2)
		e.setLive(t, 1, 2, 3)
		return nil
	}, topics: []string{"t"}, want: `
t-0 leader=1 epoch=0 isr=[1] pe=2
t-1 leader=2 epoch=2 isr=[2] pe=5
t-2 leader=1 epoch=1 isr=[1] pe=2`},
	{name: "create u", do: createTopic("u", []int32{2, 3}), topics: []string{"u"}, want: `
u-0 leader=2 epoch=0 isr=[2 3] pe=0`},
	{name: "u's follower dies", do: setLive(1, 2), topics: []string{"u"}, want: `
u-0 leader=2 epoch=0 isr=[2] pe=1`},
	{name: "u's leader dies: offline, the ISR kept", do: setLive(1), topics: []string{"u"}, want: `
u-0 leader=-1 epoch=1 isr=[2] pe=2`},
	{name: "an out-of-sync replica returns: no unclean election", do: setLive(1, 3), topics: []string{"u"}, want: `
u-0 leader=-1 epoch=1 isr=[2] pe=2`},
	{name: "unclean election enabled", do: setConfig("u", "unclean.leader.election.enable", "true"), topics: []string{"u"}, want: `
u-0 leader=3 epoch=2 isr=[3] pe=3`, check: func(t *testing.T, e scenarioEnv, _ *scenarioState) {
		if n := e.ctrl().UncleanElectionCount(); n != 1 {
			t.Fatalf("unclean elections %d, want 1", n)
		}
	}},
	{name: "delete t", do: func(_ *testing.T, e scenarioEnv, _ *scenarioState) error { return e.ctrl().DeleteTopic("t") },
		topics: []string{"t"}, want: "t: none", check: func(t *testing.T, e scenarioEnv, s *scenarioState) {
			if !e.ctrl().Metadata().IsDeleted(s.ids["t"]) {
				t.Fatal("the view does not name the deleted topic id while replicas are pending")
			}
		}},
	{name: "delete t again", do: func(_ *testing.T, e scenarioEnv, _ *scenarioState) error { return e.ctrl().DeleteTopic("t") }, wantErr: kerr.UnknownTopicOrPartition},
	{name: "re-create t", do: func(t *testing.T, e scenarioEnv, s *scenarioState) error {
		old := s.ids["t"]
		err := createTopic("t", []int32{1, 3})(t, e, s)
		if err == nil && s.ids["t"] == old {
			err = errors.New("the new topic has the deleted topic's id")
		}
		s.ids["old t"] = old
		return err
	}, topics: []string{"t"}, want: `
t-0 leader=1 epoch=0 isr=[1 3] pe=0`},
	{name: "the deleted topic's leader cannot change the new topic's ISR", do: func(t *testing.T, e scenarioEnv, s *scenarioState) error {
		return alterISR(1, "t", s.ids["old t"], 0, 0, 0, 1)(t, e, s)
	}, wantErr: kerr.UnknownTopicID},
	{name: "deposed controller", do: func(t *testing.T, e scenarioEnv, s *scenarioState) error {
		e.depose(t)
		return createTopic("w", []int32{1})(t, e, s)
	}, wantErr: kerr.NotController},
}

func runScenario(t *testing.T, e scenarioEnv) {
	s := &scenarioState{ids: map[string][16]byte{}}
	for _, step := range controllerScenario {
		err := step.do(t, e, s)
		switch {
		case step.wantErr == nil && err != nil:
			t.Fatalf("%s: %v", step.name, err)
		case step.wantErr != nil && !errors.Is(err, step.wantErr):
			t.Fatalf("%s: error %v, want %v", step.name, err, step.wantErr)
		}
		if step.topics != nil {
			// Bounded wait, not one look: a broker's death is published
			// in two views (the leader moves, then the ISR shrinks, as
			// Kafka orders them), and the first already lists the live
			// brokers setLive waits for.
			waitFor(t, 20*time.Second, func() error {
				if got, want := render(e.ctrl(), step.topics...), strings.TrimSpace(step.want); got != want {
					return fmt.Errorf("%s:\n got\n%s\nwant\n%s", step.name, got, want)
				}
				return nil
			})
		}
		if step.check != nil {
			step.check(t, e, s)
		}
	}
}

func TestControllerScenarioLocalStore(t *testing.T) { runScenario(t, newLocalEnv(t)) }

// TestControllerScenarioZooKeeper runs the same table on a real ZooKeeper
// (skipped without one unless KBROKER_REQUIRE_ZK=1).
func TestControllerScenarioZooKeeper(t *testing.T) { runScenario(t, newZKEnv(t)) }

// A topic made without a topic id (Kafka before 2.8, or another tool) is
// given one by the controller and written back, so replicas can fetch and
// change its ISR by id.
func TestControllerGivesTopicsIDs(t *testing.T) {
	srv := zktest.Start(t)
	conn, _, err := gozk.Connect([]string{srv.Addr()}, 5*time.Second, gozk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	acl := gozk.WorldACL(gozk.PermAll)
	for _, p := range []string{"/ids", "/ids/brokers", "/ids/brokers/topics"} {
		if _, err := conn.Create(p, nil, 0, acl); err != nil && !errors.Is(err, gozk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	if _, err := conn.Create("/ids/brokers/topics/legacy", []byte(`{"version":2,"partitions":{"0":[1]},"adding_replicas":{},"removing_replicas":{}}`), 0, acl); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := NewCluster(ctx, ClusterConfig{Self: scenarioBroker(1), ZookeeperConnect: srv.Addr() + "/ids", SessionTimeout: 4 * time.Second, ConnectionTimeout: 10 * time.Second}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() error {
		if c.Metadata().Topics["legacy"] == nil {
			return errors.New("no view with the topic")
		}
		return nil
	})
	id := c.Metadata().Topics["legacy"].ID
	if id == ([16]byte{}) {
		t.Fatal("the topic still has no id")
	}
	data, _, err := conn.Get("/ids/brokers/topics/legacy")
	if err != nil {
		t.Fatal(err)
	}
	if want := `"topic_id":"` + zk.TopicID(id).String() + `"`; !strings.Contains(string(data), want) {
		t.Fatalf("topic znode %s does not record %s", data, want)
	}
}
