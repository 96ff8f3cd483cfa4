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
	"github.com/kbroker/kbroker/internal/zktest"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestReassignTo(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		cur                       PartitionState
		target                    []int32
		replicas, adding, removed []int32
	}{
		{"move one replica", PartitionState{Replicas: []int32{1, 2}}, []int32{2, 3}, []int32{2, 3, 1}, []int32{3}, []int32{1}},
		{"raise the replication factor", PartitionState{Replicas: []int32{1}}, []int32{1, 2, 3}, []int32{1, 2, 3}, []int32{2, 3}, nil},
		{"lower the replication factor", PartitionState{Replicas: []int32{1, 2, 3}}, []int32{3}, []int32{3, 1, 2}, nil, []int32{1, 2}},
		{"reorder only", PartitionState{Replicas: []int32{1, 2}}, []int32{2, 1}, []int32{2, 1}, nil, nil},
		{"over an ongoing one: the first one's origin stays",
			PartitionState{Replicas: []int32{2, 3, 1}, AddingReplicas: []int32{3}, RemovingReplicas: []int32{1}},
			[]int32{4, 2}, []int32{4, 2, 1}, []int32{4}, []int32{1}},
		{"cancel: back to the origin, nothing left ongoing",
			PartitionState{Replicas: []int32{2, 3, 1}, AddingReplicas: []int32{3}, RemovingReplicas: []int32{1}},
			[]int32{1, 2}, []int32{1, 2}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := reassignTo(tc.cur, tc.target)
			if !slices.Equal(got.Replicas, tc.replicas) || !slices.Equal(got.AddingReplicas, tc.adding) || !slices.Equal(got.RemovingReplicas, tc.removed) {
				t.Fatalf("reassignTo = replicas %v adding %v removing %v, want %v %v %v",
					got.Replicas, got.AddingReplicas, got.RemovingReplicas, tc.replicas, tc.adding, tc.removed)
			}
			if !slices.Equal(targetReplicas(got), tc.target) && got.Reassigning() {
				t.Fatalf("target of the result = %v, want %v", targetReplicas(got), tc.target)
			}
		})
	}
}

func TestValidateReassignment(t *testing.T) {
	live := func(id int32) bool { return id >= 1 && id <= 3 }
	cur := PartitionState{Replicas: []int32{1, 5}} // broker 5 is gone but already a replica
	for _, tc := range []struct {
		name   string
		target []int32
		ok     bool
	}{
		{"fine", []int32{2, 3}, true},
		{"keeps a dead replica it already has", []int32{5, 2}, true},
		{"empty", []int32{}, false},
		{"duplicate", []int32{2, 2}, false},
		{"negative", []int32{-1, 2}, false},
		{"adds a broker that is not live", []int32{1, 9}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validateReassignment(cur, tc.target, live)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, kerr.InvalidReplicaAssignment)) {
				t.Fatalf("validateReassignment(%v) = %v", tc.target, err)
			}
		})
	}
}

func TestCompleteReassignment(t *testing.T) {
	all := func(int32) bool { return true }
	not := func(dead int32) func(int32) bool { return func(id int32) bool { return id != dead } }
	moving := PartitionState{Replicas: []int32{2, 3, 1}, AddingReplicas: []int32{3}, RemovingReplicas: []int32{1}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2, 3}}
	for _, tc := range []struct {
		name           string
		ps             PartitionState
		live, eligible func(int32) bool
		ok             bool
		leader, epoch  int32
		isr            []int32
	}{
		{"the leader is removed: the first target replica in sync leads", moving, all, all, true, 2, 5, []int32{2, 3}},
		{"the first target replica cannot lead: the next", moving, all, not(2), true, 3, 5, []int32{2, 3}},
		{"no target replica can lead: wait", moving, all, func(id int32) bool { return id == 1 }, false, 1, 4, []int32{1, 2, 3}},
		{"the leader stays, replicas removed: epoch rises",
			PartitionState{Replicas: []int32{1, 2, 3}, RemovingReplicas: []int32{3}, Leader: 1, LeaderEpoch: 2, ISR: []int32{3, 1, 2}}, all, all, true, 1, 3, []int32{1, 2}},
		{"only added: the state stays",
			PartitionState{Replicas: []int32{1, 2, 3}, AddingReplicas: []int32{2, 3}, Leader: 1, LeaderEpoch: 2, ISR: []int32{1, 2, 3}}, all, all, true, 1, 2, []int32{1, 2, 3}},
		{"a dead leader in the target is replaced",
			PartitionState{Replicas: []int32{1, 2, 3}, RemovingReplicas: []int32{3}, Leader: 1, LeaderEpoch: 2, ISR: []int32{1, 2, 3}}, not(1), not(1), true, 2, 3, []int32{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !reassignmentComplete(tc.ps) {
				t.Fatal("not complete")
			}
			got, ok := completeReassignment(tc.ps, tc.live, tc.eligible)
			if ok != tc.ok || got.Leader != tc.leader || got.LeaderEpoch != tc.epoch || !slices.Equal(got.ISR, tc.isr) {
				t.Fatalf("completeReassignment = %+v ok=%v, want leader %d epoch %d isr %v ok=%v", got, ok, tc.leader, tc.epoch, tc.isr, tc.ok)
			}
			if ok && (got.Reassigning() || !slices.Equal(got.Replicas, targetReplicas(tc.ps))) {
				t.Fatalf("completed = %+v, want replicas %v and nothing ongoing", got, targetReplicas(tc.ps))
			}
		})
	}
	if reassignmentComplete(PartitionState{Replicas: []int32{2, 1}, AddingReplicas: []int32{2}, ISR: []int32{1}}) {
		t.Fatal("complete with a target replica out of the ISR")
	}
}

func TestDropUnneeded(t *testing.T) {
	all := func(int32) bool { return true }
	// Cancelling: replica 3 was being added and had joined the ISR.
	cur := PartitionState{Replicas: []int32{3, 1, 2}, AddingReplicas: []int32{3}, Leader: 3, LeaderEpoch: 7, ISR: []int32{1, 3}}
	got, err := dropUnneeded(cur, reassignTo(cur, []int32{1, 2}), all)
	if err != nil || got.Leader != 1 || got.LeaderEpoch != 8 || !slices.Equal(got.ISR, []int32{1}) || !slices.Equal(got.Replicas, []int32{1, 2}) {
		t.Fatalf("dropUnneeded = %+v, %v", got, err)
	}
	// The dropped replica holds the only in-sync copy: refused.
	cur = PartitionState{Replicas: []int32{3, 1}, AddingReplicas: []int32{3}, Leader: 3, LeaderEpoch: 7, ISR: []int32{3}}
	if _, err := dropUnneeded(cur, reassignTo(cur, []int32{1}), all); !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Fatalf("dropping the only in-sync replica: %v", err)
	}
}

// renderReassign describes the named partitions' assignment and state.
func renderReassign(c *Cluster, topic string) string {
	t := c.Metadata().Topics[topic]
	if t == nil {
		return topic + ": none"
	}
	var lines []string
	for p, ps := range t.Partitions {
		lines = append(lines, fmt.Sprintf("%s-%d replicas=%v adding=%v removing=%v leader=%d epoch=%d isr=%v",
			topic, p, ps.Replicas, ps.AddingReplicas, ps.RemovingReplicas, ps.Leader, ps.LeaderEpoch, ps.ISR))
	}
	return strings.Join(lines, "\n")
}

func wantReassign(t *testing.T, c *Cluster, topic, want string) {
	t.Helper()
	if got := renderReassign(c, topic); got != strings.TrimSpace(want) {
		t.Fatalf("\n got\n%s\nwant\n%s", got, strings.TrimSpace(want))
	}
}

// isrAt asks the controller, as partition p's leader would, for isr.
func isrAt(t *testing.T, c *Cluster, topic string, p int32, isr ...int32) {
	t.Helper()
	ps := c.Metadata().Topics[topic].Partitions[p]
	if _, err := c.AlterISR(ps.Leader, topic, c.Metadata().Topics[topic].ID, p, ps.LeaderEpoch, ps.PartitionEpoch, isr); err != nil {
		t.Fatalf("ISR %v for %s-%d: %v", isr, topic, p, err)
	}
}

func reassign(c *Cluster, topic string, p int32, replicas ...int32) error {
	var target []int32
	if replicas != nil {
		target = replicas
	}
	res, err := c.AlterReassignments([]ReassignRequest{{Topic: topic, Partition: p, Replicas: target}})
	if err != nil {
		return err
	}
	return res[0]
}

// assignmentIn is the topic's assignment as the store holds it.
func assignmentIn(t *testing.T, c *Cluster, topic string) zk.TopicAssignment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := c.store.TopicAssignment(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// runReassignScenario moves, grows, shrinks and cancels reassignments,
// and refuses bad ones, with Kafka's errors.
func runReassignScenario(t *testing.T, e scenarioEnv) {
	c := e.ctrl()
	if _, err := c.CreateTopic(CreateTopicRequest{Name: "r", Assignment: [][]int32{{1, 2}, {1}}}, false); err != nil {
		t.Fatal(err)
	}
	// Move r-0 from [1 2] to [2 3].
	if err := reassign(c, "r", 0, 2, 3); err != nil {
		t.Fatal(err)
	}
	wantReassign(t, c, "r", `
r-0 replicas=[2 3 1] adding=[3] removing=[1] leader=1 epoch=0 isr=[1 2]
r-1 replicas=[1] adding=[] removing=[] leader=1 epoch=0 isr=[1]`)
	if a := assignmentIn(t, c, "r"); !slices.Equal(a.Partitions[0], []int32{2, 3, 1}) || !slices.Equal(a.AddingReplicas[0], []int32{3}) || !slices.Equal(a.RemovingReplicas[0], []int32{1}) {
		t.Fatalf("stored assignment %+v", a)
	}
	list, err := c.ListReassignments(nil)
	if err != nil || len(list) != 1 || list[0].Partition != 0 || !slices.Equal(list[0].AddingReplicas, []int32{3}) {
		t.Fatalf("ListReassignments = %+v, %v", list, err)
	}
	if err := c.CreatePartitions("r", 3, nil, false); !errors.Is(err, kerr.ReassignmentInProgress) {
		t.Fatalf("adding partitions while reassigning: %v", err)
	}
	// Replica 3 catches up: the leader takes it into the ISR, and the
	// reassignment completes with 2 leading.
	isrAt(t, c, "r", 0, 1, 2, 3)
	wantReassign(t, c, "r", `
r-0 replicas=[2 3] adding=[] removing=[] leader=2 epoch=1 isr=[2 3]
r-1 replicas=[1] adding=[] removing=[] leader=1 epoch=0 isr=[1]`)
	if a := assignmentIn(t, c, "r"); !slices.Equal(a.Partitions[0], []int32{2, 3}) || len(a.AddingReplicas) != 0 || len(a.RemovingReplicas) != 0 {
		t.Fatalf("stored assignment after completion %+v", a)
	}
	if list, _ := c.ListReassignments(nil); len(list) != 0 {
		t.Fatalf("still listed: %+v", list)
	}
	// Raise r-1's replication factor 1 -> 3.
	if err := reassign(c, "r", 1, 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	isrAt(t, c, "r", 1, 1, 2)
	wantReassign(t, c, "r", `
r-0 replicas=[2 3] adding=[] removing=[] leader=2 epoch=1 isr=[2 3]
r-1 replicas=[1 2 3] adding=[2 3] removing=[] leader=1 epoch=0 isr=[1 2]`)
	isrAt(t, c, "r", 1, 1, 2, 3)
	wantReassign(t, c, "r", `
r-0 replicas=[2 3] adding=[] removing=[] leader=2 epoch=1 isr=[2 3]
r-1 replicas=[1 2 3] adding=[] removing=[] leader=1 epoch=0 isr=[1 2 3]`)
	// Lower it back to one replica, not the leader: done at once.
	if err := reassign(c, "r", 1, 3); err != nil {
		t.Fatal(err)
	}
	wantReassign(t, c, "r", `
r-0 replicas=[2 3] adding=[] removing=[] leader=2 epoch=1 isr=[2 3]
r-1 replicas=[3] adding=[] removing=[] leader=3 epoch=1 isr=[3]`)
	// Start a move and cancel it: back to the original replicas.
	if err := reassign(c, "r", 1, 1); err != nil {
		t.Fatal(err)
	}
	wantReassign(t, c, "r", `
r-0 replicas=[2 3] adding=[] removing=[] leader=2 epoch=1 isr=[2 3]
r-1 replicas=[1 3] adding=[1] removing=[3] leader=3 epoch=1 isr=[3]`)
	if err := reassign(c, "r", 1); err != nil {
		t.Fatal(err)
	}
	wantReassign(t, c, "r", `
r-0 replicas=[2 3] adding=[] removing=[] leader=2 epoch=1 isr=[2 3]
r-1 replicas=[3] adding=[] removing=[] leader=3 epoch=1 isr=[3]`)
	if a := assignmentIn(t, c, "r"); !slices.Equal(a.Partitions[1], []int32{3}) || len(a.AddingReplicas) != 0 {
		t.Fatalf("stored assignment after cancelling %+v", a)
	}
	// Bad requests change nothing.
	for _, bad := range []struct {
		name    string
		topic   string
		p       int32
		target  []int32
		wantErr error
	}{
		{"cancel with nothing ongoing", "r", 0, nil, kerr.NoReassignmentInProgress},
		{"empty list", "r", 0, []int32{}, kerr.InvalidReplicaAssignment},
		{"duplicate replicas", "r", 0, []int32{2, 2}, kerr.InvalidReplicaAssignment},
		{"a broker that does not exist", "r", 0, []int32{2, 9}, kerr.InvalidReplicaAssignment},
		{"a partition that does not exist", "r", 7, []int32{1}, kerr.UnknownTopicOrPartition},
		{"a topic that does not exist", "nope", 0, []int32{1}, kerr.UnknownTopicOrPartition},
	} {
		res, err := c.AlterReassignments([]ReassignRequest{{Topic: bad.topic, Partition: bad.p, Replicas: bad.target}})
		if err != nil || !errors.Is(res[0], bad.wantErr) {
			t.Fatalf("%s: %v, %v; want %v", bad.name, res, err, bad.wantErr)
		}
	}
	wantReassign(t, c, "r", `
r-0 replicas=[2 3] adding=[] removing=[] leader=2 epoch=1 isr=[2 3]
r-1 replicas=[3] adding=[] removing=[] leader=3 epoch=1 isr=[3]`)
	// A broker that is not live cannot be added.
	e.setLive(t, 1, 2)
	if err := reassign(c, "r", 1, 3, 3); !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := reassign(c, "r", 0, 2, 1); err != nil {
		t.Fatal(err)
	}
	if err := reassign(c, "r", 1, 3); err != nil {
		t.Fatalf("a no-op reassignment keeping a dead replica: %v", err)
	}
	e.setLive(t, 1, 2, 3)
}

func TestReassignScenarioLocalStore(t *testing.T) { runReassignScenario(t, newLocalEnv(t)) }

// TestReassignScenarioZooKeeper runs the same scenario on a real ZooKeeper.
func TestReassignScenarioZooKeeper(t *testing.T) { runReassignScenario(t, newZKEnv(t)) }

// A reassignment survives a controller failover: the new controller
// loads it from the assignment znode and completes it when the ISR
// allows.
func TestReassignSurvivesControllerFailover(t *testing.T) {
	e := newZKEnv(t).(*zkEnv)
	c1 := e.members[1]
	if _, err := c1.CreateTopic(CreateTopicRequest{Name: "f", Assignment: [][]int32{{1, 2}}}, false); err != nil {
		t.Fatal(err)
	}
	if err := reassign(c1, "f", 0, 2, 3); err != nil {
		t.Fatal(err)
	}
	c1.Close()
	delete(e.members, 1)
	var c *Cluster
	waitFor(t, 30*time.Second, func() error {
		for _, m := range e.members {
			if m.IsController() {
				c = m
				return nil
			}
		}
		return errors.New("no new controller")
	})
	// Broker 1 (the leader, being removed) is gone: the new controller
	// elected 2 from the ISR; the reassignment is still there.
	waitFor(t, 20*time.Second, func() error {
		if got := renderReassign(c, "f"); got != "f-0 replicas=[2 3 1] adding=[3] removing=[1] leader=2 epoch=1 isr=[2]" {
			return fmt.Errorf("view %s", got)
		}
		return nil
	})
	isrAt(t, c, "f", 0, 2, 3)
	wantReassign(t, c, "f", "f-0 replicas=[2 3] adding=[] removing=[] leader=2 epoch=2 isr=[2 3]")
	a := assignmentIn(t, c, "f")
	if !slices.Equal(a.Partitions[0], []int32{2, 3}) || len(a.AddingReplicas) != 0 || len(a.RemovingReplicas) != 0 {
		t.Fatalf("stored assignment %+v", a)
	}
	_ = zktest.Start // the environment's ZooKeeper
}
