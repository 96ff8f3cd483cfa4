package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/kbroker/kbroker/controller/zk"
	"github.com/twmb/franz-go/pkg/kerr"
)

// offlineTestActive is a controller core with brokers 1..3 registered at
// epochs 10, 20, 30 and the given records of replicas in failed dirs.
func offlineTestActive(records map[int32]*offlineDirReplicas) *active {
	return &active{
		c:            &Cluster{logger: quietLogger()},
		brokerEpochs: map[int32]int64{1: 10, 2: 20, 3: 30},
		shuttingDown: map[int32]bool{},
		md:           &Metadata{Brokers: []BrokerInfo{{ID: 1}, {ID: 2}, {ID: 3}}},
		offlineDirs:  records,
	}
}

func offlineRecord(epoch int64, tps ...TopicPartition) *offlineDirReplicas {
	set := map[TopicPartition]bool{}
	for _, tp := range tps {
		set[tp] = true
	}
	return &offlineDirReplicas{brokerEpoch: epoch, replicas: set}
}

func TestReplicaPredicatesWithFailedLogDirs(t *testing.T) {
	t0, t1 := TopicPartition{"t", 0}, TopicPartition{"t", 1}
	for _, tc := range []struct {
		name        string
		records     map[int32]*offlineDirReplicas
		tp          TopicPartition
		wantOffline []int32 // of brokers 1..3, for tp
	}{
		{"no failed dir", nil, t0, nil},
		{"broker 2's replica of t-0 is offline", map[int32]*offlineDirReplicas{2: offlineRecord(20, t0)}, t0, []int32{2}},
		{"only that partition", map[int32]*offlineDirReplicas{2: offlineRecord(20, t0)}, t1, nil},
		{"a record of an earlier registration counts for nothing", map[int32]*offlineDirReplicas{2: offlineRecord(19, t0)}, t0, nil},
		{"two brokers", map[int32]*offlineDirReplicas{1: offlineRecord(10, t1), 3: offlineRecord(30, t0, t1)}, t1, []int32{1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := offlineTestActive(tc.records)
			live, eligible := a.replicaPredicatesLocked(tc.tp.Topic, tc.tp.Partition, nil, nil)
			var offline []int32
			for id := int32(1); id <= 3; id++ {
				if live(id) != eligible(id) {
					t.Fatalf("broker %d: live %v, eligible %v", id, live(id), eligible(id))
				}
				if !live(id) {
					offline = append(offline, id)
				}
			}
			if !slices.Equal(offline, tc.wantOffline) {
				t.Fatalf("offline replicas of %v: %v, want %v", tc.tp, offline, tc.wantOffline)
			}
			if live(4) {
				t.Fatal("an unregistered broker is live")
			}
			ps := PartitionState{Replicas: []int32{1, 2, 3}}
			if got := offlineDirReplicasOf(ps, tc.tp.Topic, tc.tp.Partition, a.offlineDirsOfLocked); !slices.Equal(got, tc.wantOffline) {
				t.Fatalf("OfflineReplicas %v, want %v", got, tc.wantOffline)
			}
		})
	}
}

// Elections with the narrowed predicates: what Kafka's controller does
// with replicas on offline dirs (OfflineReplica: out of the ISR, leadership
// to another ISR member).
func TestElectLeaderWithFailedLogDirs(t *testing.T) {
	tp := TopicPartition{"t", 0}
	for _, tc := range []struct {
		name      string
		ps        PartitionState
		offlineOn int32
		leader    int32
		isr       []int32
		epochUp   bool
	}{
		{"the leader's dir failed: the next ISR member leads",
			PartitionState{Replicas: []int32{2, 3, 1}, Leader: 2, LeaderEpoch: 4, ISR: []int32{2, 3, 1}}, 2, 3, []int32{3, 1}, true},
		{"a follower's dir failed: it leaves the ISR, the leader stays",
			PartitionState{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2, 3}}, 2, 1, []int32{1, 3}, false},
		{"the only ISR member's dir failed: offline, the ISR kept",
			PartitionState{Replicas: []int32{2, 3}, Leader: 2, LeaderEpoch: 4, ISR: []int32{2}}, 2, -1, []int32{2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := offlineTestActive(map[int32]*offlineDirReplicas{tc.offlineOn: offlineRecord(int64(tc.offlineOn)*10, tp)})
			live, eligible := a.replicaPredicatesLocked(tp.Topic, tp.Partition, nil, nil)
			got, changed := electLeader(tc.ps, live, eligible, false)
			if !changed || got.Leader != tc.leader || !slices.Equal(got.ISR, tc.isr) || (got.LeaderEpoch > tc.ps.LeaderEpoch) != tc.epochUp {
				t.Fatalf("electLeader = %+v changed=%v, want leader %d isr %v epoch raised %v", got, changed, tc.leader, tc.isr, tc.epochUp)
			}
			if err := checkISRChange(got, 0, got.Leader, got.LeaderEpoch, 0, append(slices.Clone(got.ISR), tc.offlineOn), eligible); got.Leader >= 0 && !errors.Is(err, kerr.IneligibleReplica) {
				t.Fatalf("the offline replica may join the ISR again: %v", err)
			}
		})
	}
}

func TestForgetOfflineDirs(t *testing.T) {
	tp := TopicPartition{"t", 0}
	a := offlineTestActive(map[int32]*offlineDirReplicas{
		1: offlineRecord(10, tp), // current registration: kept
		2: offlineRecord(19, tp), // broker 2 registered again since: forgotten
		3: offlineRecord(31, tp), // read before the broker change that brings epoch 31: kept
		4: offlineRecord(40, tp), // broker 4 left: forgotten
	})
	a.forgetOfflineDirsLocked()
	var kept []int32
	for id := range a.offlineDirs {
		kept = append(kept, id)
	}
	slices.Sort(kept)
	if !slices.Equal(kept, []int32{1, 3}) {
		t.Fatalf("kept the records of brokers %v, want [1 3]", kept)
	}
	if a.offlineDirsOfLocked(3) != nil {
		t.Fatal("a record of a registration not seen yet counts already")
	}
	a.brokerEpochs[3] = 31
	if !a.offlineDirsOfLocked(3)[tp] {
		t.Fatal("the record of broker 3's registration does not count once it is seen")
	}
}

func TestOfflineReplicasInUpdateMetadata(t *testing.T) {
	md := &Metadata{ClusterID: "c", ControllerID: 1, Brokers: []BrokerInfo{{ID: 1, Host: "h", Port: 1}, {ID: 2, Host: "h", Port: 2}},
		Topics: map[string]*Topic{"t": {Name: "t", Partitions: []PartitionState{
			{Replicas: []int32{1, 2, 3}, Leader: 1, ISR: []int32{1}, OfflineReplicas: []int32{2}},
			{Replicas: []int32{2, 1}, Leader: 2, ISR: []int32{2, 1}},
		}}}}
	req := EncodeUpdateMetadata(md, 5)
	if got := req.TopicStates[0].PartitionStates[0].OfflineReplicas; !slices.Equal(got, []int32{2, 3}) {
		t.Fatalf("UpdateMetadata offline replicas %v, want [2 3] (a failed dir and a broker not live)", got)
	}
	back, err := DecodeUpdateMetadata(req)
	if err != nil {
		t.Fatal(err)
	}
	ps := back.Topics["t"].Partitions
	if !slices.Equal(ps[0].OfflineReplicas, []int32{2}) || ps[1].OfflineReplicas != nil {
		t.Fatalf("decoded offline replicas %v and %v, want [2] and none", ps[0].OfflineReplicas, ps[1].OfflineReplicas)
	}
}

// On a real ZooKeeper: broker 2 reports replicas on a failed dir; the
// controller moves leadership and ISR membership away from exactly those,
// lists them offline, deletes the notification, keeps them offline across
// a controller failover, refuses them back into an ISR, and forgets them
// once broker 2 registers again (restarted with its dir repaired).
func TestLogDirFailureScenarioZooKeeper(t *testing.T) {
	e := newZKEnv(t).(*zkEnv)
	ctrl := e.ctrl()
	if _, err := ctrl.CreateTopic(CreateTopicRequest{Name: "t", Assignment: [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}}, false); err != nil {
		t.Fatal(err)
	}
	want := func(c *Cluster, lines string) {
		t.Helper()
		waitFor(t, 20*time.Second, func() error {
			if got := renderOffline(c, "t"); got != lines {
				return fmt.Errorf("view:\n%s\nwant:\n%s", got, lines)
			}
			return nil
		})
	}
	want(ctrl, "t-0 leader 1 isr [1 2 3] offline []\nt-1 leader 2 isr [2 3 1] offline []\nt-2 leader 3 isr [3 1 2] offline []")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	failed := LogDirFailureReport{LogDirs: []string{"/data/2"}, Partitions: []TopicPartition{{"t", 0}, {"t", 1}}}
	if err := e.members[2].ReportLogDirFailure(ctx, failed); err != nil {
		t.Fatal(err)
	}
	want(ctrl, "t-0 leader 1 isr [1 3] offline [2]\nt-1 leader 3 isr [3 1] offline [2]\nt-2 leader 3 isr [3 1 2] offline []")

	conn, _, err := gozk.Connect([]string{e.zk.Addr()}, 5*time.Second, gozk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitFor(t, 10*time.Second, func() error {
		names, _, err := conn.Children(e.chroot + zk.LogDirEventNotificationPath)
		if err != nil || len(names) != 0 {
			return fmt.Errorf("notifications left: %v %v", names, err)
		}
		return nil
	})
	data, _, err := conn.Get(e.chroot + zk.LogDirFailuresOfPath(2))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := zk.DecodeLogDirFailures("", data)
	if err != nil || !slices.Equal(rec.LogDirs, []string{"/data/2"}) || len(rec.Partitions) != 2 || rec.BrokerEpoch == 0 {
		t.Fatalf("broker 2's record %s: %+v %v", data, rec, err)
	}

	// The leader of t-0 may not take broker 2 back into the ISR.
	ps := ctrl.Metadata().Topics["t"].Partitions[0]
	if _, err := ctrl.AlterISR(1, "t", [16]byte{}, 0, ps.LeaderEpoch, ps.PartitionEpoch, []int32{1, 3, 2}); !errors.Is(err, kerr.IneligibleReplica) {
		t.Fatalf("broker 2 back into t-0's ISR: %v, want INELIGIBLE_REPLICA", err)
	}

	// A new controller reads the record when it takes over.
	ctrl.Close()
	delete(e.members, 1)
	var next *Cluster
	waitFor(t, 20*time.Second, func() error {
		for _, id := range []int32{2, 3} {
			if e.members[id].IsController() {
				next = e.members[id]
				return nil
			}
		}
		return errors.New("no new controller")
	})
	want(next, "t-0 leader 3 isr [3] offline [2]\nt-1 leader 3 isr [3] offline [2]\nt-2 leader 3 isr [3 2] offline []")

	// Broker 2 restarted with its dir repaired: a new registration, no
	// record; its replicas are ordinary again.
	e.members[2].Close()
	delete(e.members, 2)
	waitFor(t, 20*time.Second, func() error {
		if e.members[3].IsController() && len(e.members[3].Metadata().Brokers) == 1 {
			return nil
		}
		return errors.New("broker 3 not yet the controller alone")
	})
	e.start(t, 2)
	waitBrokers(t, e.members[3], []int32{2, 3})
	want(e.members[3], "t-0 leader 3 isr [3] offline []\nt-1 leader 3 isr [3] offline []\nt-2 leader 3 isr [3] offline []")
	ps = e.members[3].Metadata().Topics["t"].Partitions[0]
	if _, err := e.members[3].AlterISR(3, "t", [16]byte{}, 0, ps.LeaderEpoch, ps.PartitionEpoch, []int32{3, 2}); err != nil {
		t.Fatalf("restarted broker 2 back into t-0's ISR: %v", err)
	}
}

// renderOffline describes topic's partitions in c's view with their
// offline replicas.
func renderOffline(c *Cluster, topic string) string {
	t := c.Metadata().Topics[topic]
	if t == nil {
		return topic + ": none"
	}
	out := ""
	for p, ps := range t.Partitions {
		if p > 0 {
			out += "\n"
		}
		off := ps.OfflineReplicas
		if off == nil {
			off = []int32{}
		}
		out += fmt.Sprintf("%s-%d leader %d isr %v offline %v", topic, p, ps.Leader, ps.ISR, off)
	}
	return out
}

// The embedded single node tells its own controller: a partition whose
// only replica is in the failed dir has no leader (and lists its replica
// offline); the others are untouched.
func TestLogDirFailureEmbedded(t *testing.T) {
	c, err := NewEmbedded(t.TempDir(), ClusterConfig{Self: BrokerInfo{ID: 0, Host: "127.0.0.1", Port: 9092}}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(CreateTopicRequest{Name: "t", NumPartitions: 2, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.ReportLogDirFailure(ctx, LogDirFailureReport{LogDirs: []string{"/d2"}, Partitions: []TopicPartition{{"t", 1}}}); err != nil {
		t.Fatal(err)
	}
	if got, want := renderOffline(c, "t"), "t-0 leader 0 isr [0] offline []\nt-1 leader -1 isr [0] offline [0]"; got != want {
		t.Fatalf("view:\n%s\nwant:\n%s", got, want)
	}
}
