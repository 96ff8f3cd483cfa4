package zk

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/kbroker/kbroker/internal/zktest"
)

const (
	testSessionTimeout = 2 * time.Second
	testConnectTimeout = 10 * time.Second
)

func testLogger() *slog.Logger {
	if os.Getenv("KBROKER_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func connect(t *testing.T, connectString string) *Store {
	t.Helper()
	s, err := Connect(testCtx(t), connectString, testSessionTimeout, testConnectTimeout, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// mustElect makes s the controller as broker 1 (it must win) and returns
// the controller epoch and the epoch znode's version that fence its writes.
func mustElect(t *testing.T, ctx context.Context, s *Store) (epoch, epochZkVersion int32) {
	t.Helper()
	won, epoch, epochZkVersion, err := s.ElectController(ctx, 1)
	if err != nil || !won {
		t.Fatal(won, err)
	}
	return epoch, epochZkVersion
}

// rawConn is a plain client, to look at and damage znodes behind a Store.
func rawConn(t *testing.T, addr string) *gozk.Conn {
	t.Helper()
	c, _, err := gozk.Connect([]string{addr}, testSessionTimeout, gozk.WithLogInfo(false), gozk.WithLogger(zkLogger{testLogger()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func rawGet(t *testing.T, c *gozk.Conn, path string) string {
	t.Helper()
	data, _, err := c.Get(path)
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}
	return string(data)
}

// recv waits (bounded) for the next value on ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed", what)
		}
		return v
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: nothing within 15s", what)
	}
	panic("unreachable")
}

// recvUntil reads ch until ok(v), bounded.
func recvUntil[T any](t *testing.T, ch <-chan T, what string, ok func(T) bool) T {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case v, open := <-ch:
			if !open {
				t.Fatalf("%s: channel closed", what)
			}
			if ok(v) {
				return v
			}
		case <-deadline:
			t.Fatalf("%s: not seen within 20s", what)
		}
	}
}

func brokerInfo(id int32, port int32) BrokerInfo {
	return BrokerInfo{ID: id, JMXPort: -1, Endpoints: []Endpoint{{"PLAINTEXT", "PLAINTEXT", "127.0.0.1", port}}}
}

func TestConnectUnreachable(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(zktest.FreePort(t))
	start := time.Now()
	_, err := Connect(context.Background(), addr, testSessionTimeout, time.Second, testLogger())
	took := time.Since(start)
	if err == nil {
		t.Fatal("connected to nothing")
	}
	if want := "cannot reach ZooKeeper at " + addr + " within 1s"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if took < time.Second || took > 5*time.Second {
		t.Fatalf("gave up after %v, want about 1s", took)
	}
	if _, err := Connect(context.Background(), "", time.Second, time.Second, nil); err == nil {
		t.Fatal("empty connect string accepted")
	}
	if _, err := Connect(context.Background(), "127.0.0.1:1/kb/", time.Second, time.Second, nil); err == nil {
		t.Fatal("chroot with trailing slash accepted")
	}
}

func TestParseConnectString(t *testing.T) {
	for _, tc := range []struct {
		in      string
		servers []string
		chroot  string
	}{
		{"h1:2181", []string{"h1:2181"}, ""},
		{"h1:2181,h2:2182/kafka", []string{"h1:2181", "h2:2182"}, "/kafka"},
		{"h1,h2/a/b", []string{"h1:2181", "h2:2181"}, "/a/b"},
		{"h1:1/", []string{"h1:1"}, ""},
	} {
		servers, chroot, err := ParseConnectString(tc.in)
		if err != nil || !slices.Equal(servers, tc.servers) || chroot != tc.chroot {
			t.Errorf("ParseConnectString(%q) = %v, %q, %v", tc.in, servers, chroot, err)
		}
	}
}

func TestBrokerRegistration(t *testing.T) {
	zk := zktest.Start(t)
	ctx := testCtx(t)
	s1, s2 := connect(t, zk.Addr()), connect(t, zk.Addr())

	watch, err := s2.WatchBrokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ids := recv(t, watch, "initial brokers"); len(ids) != 0 {
		t.Fatalf("initial brokers %v", ids)
	}

	info := brokerInfo(1, 9092)
	info.Rack = "r1"
	epoch, err := s1.RegisterBroker(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	if epoch <= 0 {
		t.Fatalf("broker epoch %d", epoch)
	}
	got, err := s2.Broker(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Epoch != epoch || got.Rack != "r1" || got.Version != 5 || !slices.Equal(got.Endpoints, info.Endpoints) || got.Timestamp == 0 {
		t.Fatalf("read back %+v (epoch %d)", got, epoch)
	}
	recvUntil(t, watch, "broker 1 registered", func(ids []int32) bool { return slices.Equal(ids, []int32{1}) })

	// Same session again: idempotent.
	if again, err := s1.RegisterBroker(ctx, info); err != nil || again != epoch {
		t.Fatalf("re-register in the same session: %d, %v", again, err)
	}
	// Another session with the same id: refused.
	_, err = s2.RegisterBroker(ctx, brokerInfo(1, 9093))
	if !errors.Is(err, ErrBrokerRegistered) {
		t.Fatalf("duplicate broker id: %v", err)
	}
	if !strings.Contains(err.Error(), "broker.id 1 is already registered by another broker") {
		t.Fatalf("duplicate broker id error is unclear: %v", err)
	}

	if _, err := s2.RegisterBroker(ctx, brokerInfo(2, 9093)); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, watch, "brokers 1 and 2", func(ids []int32) bool { return slices.Equal(ids, []int32{1, 2}) })
	all, err := s2.Brokers(ctx)
	if err != nil || len(all) != 2 || all[0].ID != 1 || all[1].ID != 2 || all[1].Epoch <= all[0].Epoch {
		t.Fatalf("Brokers = %+v, %v", all, err)
	}

	// Closing a session removes its registration at once.
	s1.Close()
	recvUntil(t, watch, "broker 1 gone", func(ids []int32) bool { return slices.Equal(ids, []int32{2}) })
	select {
	case <-s1.SessionExpired():
	default:
		t.Fatal("SessionExpired not closed by Close")
	}
}

func TestControllerElection(t *testing.T) {
	zk := zktest.Start(t)
	ctx := testCtx(t)
	stores := []*Store{connect(t, zk.Addr()), connect(t, zk.Addr())}

	type result struct {
		won            bool
		epoch, version int32
		err            error
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r result
			r.won, r.epoch, r.version, r.err = s.ElectController(ctx, int32(i+1))
			results[i] = r
		}()
	}
	wg.Wait()
	winner := -1
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("store %d: %v", i, r.err)
		}
		if r.won {
			if winner != -1 {
				t.Fatalf("both won: %+v", results)
			}
			winner = i
		}
	}
	if winner == -1 {
		t.Fatalf("nobody won: %+v", results)
	}
	loser := 1 - winner
	w := results[winner]
	if w.epoch != 1 {
		t.Fatalf("first controller epoch %d, want 1", w.epoch)
	}
	if e, v, err := stores[loser].ControllerEpoch(ctx); err != nil || e != 1 || v != w.version {
		t.Fatalf("ControllerEpoch = %d, %d, %v; winner has %d, %d", e, v, err, w.epoch, w.version)
	}
	raw := rawConn(t, zk.Addr())
	if got := rawGet(t, raw, "/controller_epoch"); got != "1" {
		t.Fatalf("/controller_epoch = %q", got)
	}
	ctrl, err := DecodeController([]byte(rawGet(t, raw, "/controller")))
	if err != nil || ctrl.BrokerID != int32(winner+1) || ctrl.Version != 2 || ctrl.KRaftControllerEpoch != -1 {
		t.Fatalf("/controller = %+v, %v", ctrl, err)
	}
	// Asking again in the same session keeps the job and the epoch.
	if won, e, v, err := stores[winner].ElectController(ctx, int32(winner+1)); !won || e != 1 || v != w.version || err != nil {
		t.Fatalf("re-election by the sitting controller: %v %d %d %v", won, e, v, err)
	}

	watch, err := stores[loser].WatchController(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id := recv(t, watch, "controller"); id != int32(winner+1) {
		t.Fatalf("watch says controller %d", id)
	}
	// The winner's session works, then goes away.
	if _, err := stores[winner].ClusterID(ctx, ""); err != nil {
		t.Fatal(err)
	}
	stores[winner].Close()
	recvUntil(t, watch, "controller gone", func(id int32) bool { return id == -1 })
	won, epoch, version, err := stores[loser].ElectController(ctx, int32(loser+1))
	if err != nil || !won || epoch != 2 || version != w.version+1 {
		t.Fatalf("second election: won=%v epoch=%d version=%d err=%v", won, epoch, version, err)
	}
	recvUntil(t, watch, "new controller", func(id int32) bool { return id == int32(loser+1) })

	// The deposed controller's epoch zkVersion no longer passes the fence.
	other := connect(t, zk.Addr())
	err = other.CreateTopic(ctx, w.version, NewTopic{Name: "t", ID: TopicID{1}, Assignment: map[int32][]int32{0: {1}}})
	if !errors.Is(err, ErrControllerMoved) {
		t.Fatalf("write by the deposed controller: %v", err)
	}
	if err := other.ResignController(ctx, w.version); !errors.Is(err, ErrControllerMoved) {
		t.Fatalf("resign by the deposed controller: %v", err)
	}
	if topics, _ := other.Topics(ctx); len(topics) != 0 {
		t.Fatalf("fenced write left topics %v", topics)
	}
	// The current one passes, and can resign.
	if err := stores[loser].CreateTopic(ctx, version, NewTopic{Name: "t", ID: TopicID{1}, Assignment: map[int32][]int32{0: {1}}}); err != nil {
		t.Fatal(err)
	}
	if err := stores[loser].ResignController(ctx, version); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, watch, "resigned", func(id int32) bool { return id == -1 })
}

func TestSessionExpiryFencesZombieController(t *testing.T) {
	zk := zktest.Start(t)
	ctx := testCtx(t)
	proxy := zktest.NewProxy(t, zk.Addr())
	zombie := connect(t, proxy.Addr())
	other := connect(t, zk.Addr())

	if _, err := zombie.RegisterBroker(ctx, brokerInfo(1, 9092)); err != nil {
		t.Fatal(err)
	}
	won, _, oldVersion, err := zombie.ElectController(ctx, 1)
	if err != nil || !won {
		t.Fatalf("election: %v %v", won, err)
	}
	oldSession := zombie.SessionID()
	brokers, err := other.WatchBrokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recvUntil(t, brokers, "broker 1", func(ids []int32) bool { return slices.Equal(ids, []int32{1}) })

	// Cut the zombie off until ZooKeeper expires its session.
	proxy.Pause()
	recvUntil(t, brokers, "broker 1 expired", func(ids []int32) bool { return len(ids) == 0 })
	won, epoch, newVersion, err := other.ElectController(ctx, 2)
	if err != nil || !won || epoch != 2 {
		t.Fatalf("election after expiry: won=%v epoch=%d err=%v", won, epoch, err)
	}
	select {
	case <-zombie.SessionExpired():
		t.Fatal("expiry reported while ZooKeeper was unreachable")
	default:
	}
	proxy.Resume()
	select {
	case <-zombie.SessionExpired():
	case <-time.After(15 * time.Second):
		t.Fatal("session expiry not reported after reconnecting")
	}
	id, err := zombie.Reconnect(ctx)
	if err != nil || id == oldSession || id == 0 {
		t.Fatalf("Reconnect: session 0x%x (old 0x%x), %v", id, oldSession, err)
	}
	// The zombie's writes are fenced.
	_, err = zombie.SetPartitionStates(ctx, oldVersion, PartitionUpdate{TopicPartition{"t", 0}, PartitionState{Leader: 1, ISR: []int32{1}}})
	if !errors.Is(err, ErrControllerMoved) {
		t.Fatalf("zombie write: %v", err)
	}
	// It loses a new election, and re-registers as a broker.
	if won, e, _, err := zombie.ElectController(ctx, 1); won || e != 2 || err != nil {
		t.Fatalf("zombie re-election: won=%v epoch=%d err=%v", won, e, err)
	}
	if _, err := zombie.RegisterBroker(ctx, brokerInfo(1, 9092)); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, brokers, "broker 1 back", func(ids []int32) bool { return slices.Equal(ids, []int32{1}) })
	if newVersion == oldVersion {
		t.Fatal("epoch zkVersion did not move")
	}
}

func TestTopicsAndPartitionStates(t *testing.T) {
	zk := zktest.Start(t)
	ctx := testCtx(t)
	s := connect(t, zk.Addr())
	raw := rawConn(t, zk.Addr())
	cepoch, v := mustElect(t, ctx, s)
	id, _ := ParseTopicID("AAAAAAAAAAAAA7SrBWaJ7g")
	nt := NewTopic{
		Name: "orders", ID: id,
		Assignment: map[int32][]int32{0: {1, 2}, 1: {2, 3}},
		Configs:    map[string]string{"retention.ms": "1000"},
		States: map[int32]PartitionState{
			0: {Leader: 1, ISR: []int32{1, 2}, ControllerEpoch: cepoch},
			1: {Leader: 2, ISR: []int32{2, 3}, ControllerEpoch: cepoch},
		},
	}
	if err := s.CreateTopic(ctx, v, nt); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTopic(ctx, v, nt); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("second create: %v", err)
	}
	// What is in ZooKeeper is Kafka's JSON.
	if got, want := rawGet(t, raw, "/brokers/topics/orders"), `{"partitions":{"0":[1,2],"1":[2,3]},"topic_id":"AAAAAAAAAAAAA7SrBWaJ7g","adding_replicas":{},"removing_replicas":{},"version":3}`; got != want {
		t.Fatalf("topic znode %s, want %s", got, want)
	}
	if got, want := rawGet(t, raw, "/config/topics/orders"), `{"version":1,"config":{"retention.ms":"1000"}}`; got != want {
		t.Fatalf("config znode %s, want %s", got, want)
	}
	if got, want := rawGet(t, raw, "/brokers/topics/orders/partitions/1/state"), `{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,3]}`; got != want {
		t.Fatalf("state znode %s, want %s", got, want)
	}

	topics, err := s.Topics(ctx)
	if err != nil || !slices.Equal(topics, []string{"orders"}) {
		t.Fatalf("Topics = %v, %v", topics, err)
	}
	a, err := s.TopicAssignment(ctx, "orders")
	if err != nil || a.ID != id || len(a.Partitions) != 2 || !slices.Equal(a.Partitions[1], []int32{2, 3}) {
		t.Fatalf("TopicAssignment = %+v, %v", a, err)
	}
	if _, err := s.TopicAssignment(ctx, "nope"); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("missing topic: %v", err)
	}

	states, err := s.PartitionStates(ctx, "orders")
	if err != nil || len(states) != 2 || states[0].Leader != 1 || states[0].ZkVersion != 0 {
		t.Fatalf("PartitionStates = %+v, %v", states, err)
	}
	// Conditional update: the current version wins once; a stale one loses.
	next := states[0]
	next.Leader, next.LeaderEpoch, next.ISR = 2, 1, []int32{2}
	res, err := s.SetPartitionStates(ctx, v, PartitionUpdate{TopicPartition{"orders", 0}, next})
	if err != nil || res[0].Err != nil || res[0].ZkVersion != 1 {
		t.Fatalf("update: %+v, %v", res, err)
	}
	stale := states[0] // still at version 0
	stale.ISR = []int32{1}
	update1 := states[1]
	update1.LeaderEpoch = 5
	res, err = s.SetPartitionStates(ctx, v,
		PartitionUpdate{TopicPartition{"orders", 0}, stale},
		PartitionUpdate{TopicPartition{"orders", 1}, update1},
		PartitionUpdate{TopicPartition{"orders", 9}, update1})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, ErrVersionConflict) {
		t.Fatalf("stale update: %+v", res[0])
	}
	if res[1].Err != nil || res[1].ZkVersion != 1 {
		t.Fatalf("fresh update next to a stale one: %+v", res[1])
	}
	if !errors.Is(res[2].Err, ErrNoNode) {
		t.Fatalf("update of a missing partition: %+v", res[2])
	}
	got, err := s.PartitionState(ctx, "orders", 0)
	if err != nil || got.Leader != 2 || got.LeaderEpoch != 1 || !slices.Equal(got.ISR, []int32{2}) || got.ZkVersion != 1 {
		t.Fatalf("state after updates: %+v, %v", got, err)
	}

	// Grow the topic.
	a.Partitions[2] = []int32{3, 1}
	if err := s.SetTopicAssignment(ctx, v, "orders", a); err != nil {
		t.Fatal(err)
	}
	if err := s.CreatePartitionStates(ctx, v, "orders", map[int32]PartitionState{2: {Leader: 3, ISR: []int32{3, 1}, ControllerEpoch: cepoch}}); err != nil {
		t.Fatal(err)
	}
	if states, err := s.PartitionStates(ctx, "orders"); err != nil || len(states) != 3 || states[2].Leader != 3 {
		t.Fatalf("after growing: %+v, %v", states, err)
	}
	if err := s.CreatePartitionStates(ctx, v, "nope", map[int32]PartitionState{0: {}}); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("states for a missing topic: %v", err)
	}

	// Configs.
	if err := s.SetTopicConfig(ctx, v, "orders", map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	if cfg, err := s.TopicConfig(ctx, "orders"); err != nil || len(cfg) != 1 || cfg["cleanup.policy"] != "compact" {
		t.Fatalf("TopicConfig = %v, %v", cfg, err)
	}
	if err := s.SetTopicConfig(ctx, v, "nope", nil); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("config of a missing topic: %v", err)
	}

	// ISR change notifications.
	name, err := s.NotifyISRChange(ctx, []TopicPartition{{"orders", 0}})
	if err != nil || !strings.HasPrefix(name, "isr_change_") {
		t.Fatalf("NotifyISRChange = %q, %v", name, err)
	}
	if _, err := s.NotifyISRChange(ctx, []TopicPartition{{"orders", 0}, {"orders", 1}}); err != nil {
		t.Fatal(err)
	}
	names, tps, err := s.ISRChangeNotifications(ctx)
	if err != nil || len(names) != 2 || !slices.Equal(tps, []TopicPartition{{"orders", 0}, {"orders", 1}}) {
		t.Fatalf("ISRChangeNotifications = %v, %v, %v", names, tps, err)
	}
	if err := s.DeleteISRChangeNotifications(ctx, v, names); err != nil {
		t.Fatal(err)
	}
	if names, _, _ := s.ISRChangeNotifications(ctx); len(names) != 0 {
		t.Fatalf("left after delete: %v", names)
	}

	// Delete, through Kafka's deletion mark.
	if err := s.MarkTopicForDeletion(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if marked, err := s.TopicsMarkedForDeletion(ctx); err != nil || !slices.Equal(marked, []string{"orders"}) {
		t.Fatalf("TopicsMarkedForDeletion = %v, %v", marked, err)
	}
	tomb := DeletedTopic{ID: TopicID{7}, Topic: "orders", Pending: []int32{3, 1, 2}}
	if err := s.DeleteTopic(ctx, v, "orders", &tomb); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/brokers/topics/orders", "/config/topics/orders", "/admin/delete_topics/orders"} {
		if ok, _, err := raw.Exists(p); ok || err != nil {
			t.Fatalf("%s still exists after delete (%v)", p, err)
		}
	}
	// The deletion's tombstone stays until every replica confirmed.
	if data, _, err := raw.Get(DeletedTopicPath(tomb.ID)); err != nil || string(data) != `{"version":1,"topic":"orders","pending_replicas":[1,2,3]}` {
		t.Fatalf("tombstone = %s, %v", data, err)
	}
	tomb.Pending = []int32{2}
	if err := s.SetDeletedTopic(ctx, v, tomb); err != nil {
		t.Fatal(err)
	}
	if got, err := s.DeletedTopics(ctx); err != nil || len(got) != 1 || got[0].Topic != "orders" || got[0].ID != tomb.ID || !slices.Equal(got[0].Pending, []int32{2}) {
		t.Fatalf("DeletedTopics = %+v, %v", got, err)
	}
	if err := s.SetDeletedTopic(ctx, v+1, DeletedTopic{ID: tomb.ID, Topic: "orders"}); !errors.Is(err, ErrControllerMoved) {
		t.Fatalf("fenced tombstone update: %v", err)
	}
	tomb.Pending = nil
	if err := s.SetDeletedTopic(ctx, v, tomb); err != nil {
		t.Fatal(err)
	}
	if got, err := s.DeletedTopics(ctx); err != nil || len(got) != 0 {
		t.Fatalf("DeletedTopics after every confirmation = %+v, %v", got, err)
	}
	if err := s.DeleteTopic(ctx, v, "orders", nil); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	// A config left behind (Kafka deletes it separately) does not block
	// re-creation; no initial states is fine too.
	if _, err := raw.Create("/config/topics/orders", []byte(`{"version":1,"config":{"a":"b"}}`), 0, acl); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTopic(ctx, v, NewTopic{Name: "orders", ID: TopicID{2}, Assignment: map[int32][]int32{0: {1}}}); err != nil {
		t.Fatal(err)
	}
	if cfg, _ := s.TopicConfig(ctx, "orders"); len(cfg) != 0 {
		t.Fatalf("old config survived re-creation: %v", cfg)
	}
	if err := s.CreateTopic(ctx, v, NewTopic{Name: "bad", ID: TopicID{3}, Assignment: map[int32][]int32{1: {1}}}); err == nil {
		t.Fatal("topic without partition 0 accepted")
	}
	// A deletion whose tombstone an earlier attempt already wrote (or a
	// transaction replayed after a lost connection) still completes.
	replayed := DeletedTopic{ID: TopicID{2}, Topic: "orders", Pending: []int32{1}}
	if _, err := raw.Create(DeletedTopicPath(replayed.ID), EncodeDeletedTopic(replayed), 0, acl); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTopic(ctx, v, "orders", &replayed); err != nil {
		t.Fatalf("delete with its tombstone already written: %v", err)
	}
	if ok, _, err := raw.Exists("/brokers/topics/orders"); ok || err != nil {
		t.Fatalf("topic still there (%v)", err)
	}
}

func TestProducerIDBlocksDoNotOverlap(t *testing.T) {
	zk := zktest.Start(t)
	ctx := testCtx(t)
	stores := []*Store{connect(t, zk.Addr()), connect(t, zk.Addr())}
	const perWorker, workersPerStore = 15, 3
	var mu sync.Mutex
	var blocks []ProducerIDBlock
	var wg sync.WaitGroup
	for i, s := range stores {
		for w := 0; w < workersPerStore; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; n < perWorker; n++ {
					b, err := s.AllocateProducerIDBlock(ctx, int32(i+1))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					blocks = append(blocks, b)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	slices.SortFunc(blocks, func(a, b ProducerIDBlock) int { return int(a.First - b.First) })
	if len(blocks) != len(stores)*workersPerStore*perWorker {
		t.Fatalf("%d blocks", len(blocks))
	}
	for i, b := range blocks {
		if b.First != int64(i)*ProducerIDBlockSize || b.Last != b.First+ProducerIDBlockSize-1 {
			t.Fatalf("block %d is [%d, %d]: blocks overlap or leave gaps", i, b.First, b.Last)
		}
	}
	raw := rawConn(t, zk.Addr())
	last := blocks[len(blocks)-1]
	want := string(EncodeProducerIDBlock(last))
	if got := rawGet(t, raw, "/latest_producer_id_block"); got != want {
		t.Fatalf("/latest_producer_id_block = %s, want %s", got, want)
	}
}

func TestChrootAndClusterID(t *testing.T) {
	zk := zktest.Start(t)
	ctx := testCtx(t)
	s := connect(t, zk.Addr()+"/kbroker/test")
	root := connect(t, zk.Addr())
	raw := rawConn(t, zk.Addr())

	if _, err := s.RegisterBroker(ctx, brokerInfo(1, 9092)); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeBrokerInfo(1, []byte(rawGet(t, raw, "/kbroker/test/brokers/ids/1"))); err != nil {
		t.Fatal(err)
	}
	if ids, err := root.BrokerIDs(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("broker visible outside the chroot: %v, %v", ids, err)
	}
	id, err := s.ClusterID(ctx, "")
	if err != nil || len(id) != 22 {
		t.Fatalf("ClusterID = %q, %v", id, err)
	}
	if again, err := s.ClusterID(ctx, "other"); err != nil || again != id {
		t.Fatalf("second ClusterID = %q, %v; want %q", again, err, id)
	}
	if got, want := rawGet(t, raw, "/kbroker/test/cluster/id"), `{"version":"1","id":"`+id+`"}`; got != want {
		t.Fatalf("/cluster/id = %s, want %s", got, want)
	}
	name, err := s.NotifyISRChange(ctx, []TopicPartition{{"t", 0}})
	if err != nil || strings.Contains(name, "/") {
		t.Fatalf("NotifyISRChange in chroot = %q, %v", name, err)
	}
	// Decoding errors name the real path, chroot included.
	if _, err := raw.Create("/kbroker/test/brokers/ids/7", []byte("garbage"), 0, acl); err != nil {
		t.Fatal(err)
	}
	_, err = s.Brokers(ctx)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "/kbroker/test/brokers/ids/7") {
		t.Fatalf("malformed broker znode: %v", err)
	}
}

func TestMalformedZNodesInZooKeeper(t *testing.T) {
	zk := zktest.Start(t)
	ctx := testCtx(t)
	s := connect(t, zk.Addr())
	raw := rawConn(t, zk.Addr())
	_, _, v, err := s.ElectController(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTopic(ctx, v, NewTopic{Name: "t", ID: TopicID{1}, Assignment: map[int32][]int32{0: {1}},
		States: map[int32]PartitionState{0: {Leader: 1, ISR: []int32{1}}}}); err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string]string{
		"/brokers/topics/t/partitions/0/state": `{"leader":1}`,
		"/config/topics/t":                     `{"version":1,"config":{"a":1}}`,
		"/controller_epoch":                    `x`,
	} {
		if _, err := raw.Set(path, []byte(data), -1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := raw.Create("/brokers/ids/oops", nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create("/brokers/topics/u", []byte(`{"partitions":{"0":[1]},"topic_id":"short"}`), 0, acl); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		err  error
	}{
		{"/brokers/topics/t/partitions/0/state", func() error { _, err := s.PartitionStates(ctx, "t"); return err }()},
		{"/config/topics/t", func() error { _, err := s.TopicConfig(ctx, "t"); return err }()},
		{"/controller_epoch", func() error { _, _, _, err := s.ElectController(ctx, 2); return err }()},
		{"/brokers/ids/oops", func() error { _, err := s.BrokerIDs(ctx); return err }()},
		{"/brokers/topics/u", func() error { _, err := s.TopicAssignment(ctx, "u"); return err }()},
	} {
		if !errors.Is(tc.err, ErrMalformed) || !strings.Contains(tc.err.Error(), tc.path) {
			t.Errorf("reading damaged %s: %v", tc.path, tc.err)
		}
	}
}

func TestSurvivesZooKeeperRestart(t *testing.T) {
	zk := zktest.Start(t)
	ctx := testCtx(t)
	s := connect(t, zk.Addr())
	if _, err := s.RegisterBroker(ctx, brokerInfo(1, 9092)); err != nil {
		t.Fatal(err)
	}
	session := s.SessionID()
	zk.Restart()
	// Requests during and after the restart are retried until the
	// connection is back, with the same session (ZooKeeper keeps sessions
	// across a restart shorter than their timeout).
	ids, err := s.BrokerIDs(ctx)
	if err != nil || !slices.Equal(ids, []int32{1}) {
		t.Fatalf("BrokerIDs after restart = %v, %v", ids, err)
	}
	if s.SessionID() != session {
		t.Fatalf("session changed across a short restart: 0x%x -> 0x%x", session, s.SessionID())
	}
	select {
	case <-s.SessionExpired():
		t.Fatal("session reported expired across a short restart")
	default:
	}
	if !s.Connected() {
		t.Fatal("not connected after restart")
	}
}

// A topic of 10,000 partitions (RF 3) is created, and grown by 3,000 more:
// more states than one transaction may carry under jute.maxbuffer (1 MB;
// ZooKeeper drops the connection of a bigger request), so they go in
// several.
func TestManyPartitionStates(t *testing.T) {
	zk := zktest.Start(t)
	ctx := testCtx(t)
	s := connect(t, zk.Addr())
	cepoch, v := mustElect(t, ctx, s)
	id, _ := ParseTopicID("AAAAAAAAAAAAA7SrBWaJ7g")
	nt := NewTopic{Name: "many-partitions-topic", ID: id, Assignment: map[int32][]int32{}, States: map[int32]PartitionState{}}
	for p := range int32(10_000) {
		r := []int32{p%3 + 1, (p+1)%3 + 1, (p+2)%3 + 1}
		nt.Assignment[p] = r
		nt.States[p] = PartitionState{Leader: r[0], ISR: r, ControllerEpoch: cepoch}
	}
	if err := s.CreateTopic(ctx, v, nt); err != nil {
		t.Fatal(err)
	}
	more := map[int32]PartitionState{}
	a := TopicAssignment{ID: id, Partitions: nt.Assignment}
	for p := int32(10_000); p < 13_000; p++ {
		a.Partitions[p] = []int32{1, 2, 3}
		more[p] = PartitionState{Leader: 1, ISR: []int32{1, 2, 3}, ControllerEpoch: cepoch}
	}
	if err := s.SetTopicAssignment(ctx, v, nt.Name, a); err != nil {
		t.Fatal(err)
	}
	if err := s.CreatePartitionStates(ctx, v, nt.Name, more); err != nil {
		t.Fatal(err)
	}
	readStart := time.Now()
	states, err := s.PartitionStates(ctx, nt.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("read %d partition states in %v", len(states), time.Since(readStart))
	var updates []PartitionUpdate
	for p := int32(0); p < 3_333; p++ {
		st := states[p]
		st.Leader, st.LeaderEpoch, st.ISR = st.ISR[1], st.LeaderEpoch+1, st.ISR[1:]
		updates = append(updates, PartitionUpdate{TopicPartition: TopicPartition{Topic: nt.Name, Partition: p}, State: st})
	}
	writeStart := time.Now()
	results, err := s.SetPartitionStates(ctx, v, updates...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil || r.ZkVersion != 1 {
			t.Fatalf("update %v: version %d, %v", r.TopicPartition, r.ZkVersion, r.Err)
		}
	}
	t.Logf("wrote %d partition states in %v", len(updates), time.Since(writeStart))
	if len(states) != 13_000 || states[9_999].Leader != 1 || states[12_999].Leader != 1 || !slices.Equal(states[5].ISR, []int32{3, 1, 2}) {
		t.Fatalf("%d states (9999: %+v, 12999: %+v, 5: %+v)", len(states), states[9_999], states[12_999], states[5])
	}
}

// A new controller's elections share transactions: hundreds of partition
// state writes are a few ZooKeeper transactions (one zxid each), not one
// per partition, and a stale version among them still fails only its own
// partition.
func TestSetPartitionStatesShareTransactions(t *testing.T) {
	zk := zktest.Start(t)
	ctx := testCtx(t)
	s := connect(t, zk.Addr())
	raw := rawConn(t, zk.Addr())
	cepoch, v := mustElect(t, ctx, s)
	const n = 450
	id, _ := ParseTopicID("AAAAAAAAAAAAA7SrBWaJ7g")
	nt := NewTopic{Name: "batched", ID: id, Assignment: map[int32][]int32{}, States: map[int32]PartitionState{}}
	for p := range int32(n) {
		nt.Assignment[p] = []int32{1, 2, 3}
		nt.States[p] = PartitionState{Leader: 1, ISR: []int32{1, 2, 3}, ControllerEpoch: cepoch}
	}
	if err := s.CreateTopic(ctx, v, nt); err != nil {
		t.Fatal(err)
	}
	states, err := s.PartitionStates(ctx, nt.Name)
	if err != nil || len(states) != n {
		t.Fatalf("%d states, %v", len(states), err)
	}
	elect := func() []PartitionUpdate {
		var updates []PartitionUpdate
		for p := range int32(n) {
			st := states[p]
			st.Leader, st.LeaderEpoch, st.ISR = 2, st.LeaderEpoch+1, []int32{2, 3}
			updates = append(updates, PartitionUpdate{TopicPartition{nt.Name, p}, st})
		}
		return updates
	}
	results, err := s.SetPartitionStates(ctx, v, elect()...)
	if err != nil {
		t.Fatal(err)
	}
	zxids := map[int64]bool{}
	for _, r := range results {
		if r.Err != nil || r.ZkVersion != 1 {
			t.Fatalf("update %v: version %d, %v", r.TopicPartition, r.ZkVersion, r.Err)
		}
		_, stat, err := raw.Get(PartitionStatePath(nt.Name, r.Partition))
		if err != nil {
			t.Fatal(err)
		}
		zxids[stat.Mzxid] = true
		st := states[r.Partition]
		st.ZkVersion = r.ZkVersion
		states[r.Partition] = st
	}
	if want := (n + statesPerMulti - 1) / statesPerMulti; len(zxids) != want {
		t.Fatalf("%d partition states written in %d transactions, want %d", n, len(zxids), want)
	}

	// Partition 7's version moves behind the controller's back: its write
	// fails alone, its group's other writes land.
	if _, err := raw.Set(PartitionStatePath(nt.Name, 7), EncodePartitionState(states[7]), 1); err != nil {
		t.Fatal(err)
	}
	results, err = s.SetPartitionStates(ctx, v, elect()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		switch {
		case r.Partition == 7 && !errors.Is(r.Err, ErrVersionConflict):
			t.Fatalf("stale write of partition 7: %+v", r)
		case r.Partition != 7 && (r.Err != nil || r.ZkVersion != 2):
			t.Fatalf("update %v beside a stale one: version %d, %v", r.TopicPartition, r.ZkVersion, r.Err)
		}
	}
}
