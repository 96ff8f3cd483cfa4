package integration

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partition reassignment on a real ZooKeeper cluster: replicas moved to a
// broker that joined under load, the replication factor raised and
// lowered, a reassignment cancelled, the controller killed mid-way, bad
// requests refused with Kafka's errors, and the admin calls of franz-go,
// sarama and kafkajs.

// reassignWithin bounds a reassignment of a few thousand small records.
const reassignWithin = 60 * time.Second

// stoppedBrokerSession is the ZooKeeper session of clusters whose tests
// stop a broker (SIGSTOP) to hold a reassignment open: long enough that
// the broker is still registered (live) when the reassignment naming it
// reaches the controller, however loaded the machine.
const stoppedBrokerSession = 10 * time.Second

// alterAssignments sends one AlterPartitionReassignments (kadm's request
// form) to the controller itself, and fails the test on any error. Not
// through a client that may pick a broker the test has stopped for its
// metadata: the request goes straight to the broker /controller names,
// again if the controller moved meanwhile.
func (c *testCluster) alterAssignments(t *testing.T, assign kadm.AlterPartitionAssignmentsReq) {
	t.Helper()
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = 30000
	for topic, ps := range assign {
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = topic
		for p, replicas := range ps {
			rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rp.Partition, rp.Replicas = p, replicas
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	var resp *kmsg.AlterPartitionAssignmentsResponse
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		kresp, err := c.request(c.controller(), 10*time.Second, req)
		if err != nil {
			return err
		}
		resp = kresp.(*kmsg.AlterPartitionAssignmentsResponse)
		return kerr.ErrorForCode(resp.ErrorCode) // NOT_CONTROLLER: ask the new one
	})
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				msg := ""
				if rp.ErrorMessage != nil {
					msg = *rp.ErrorMessage
				}
				t.Fatalf("reassigning %s-%d: %v (%s)", rt.Topic, rp.Partition, err, msg)
			}
		}
	}
}

// ongoingReassignments lists the topic's partitions 0..n-1 being
// reassigned, asking the controller itself (as alterAssignments).
func (c *testCluster) ongoingReassignments(topic string, n int32) (map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	rt := kmsg.NewListPartitionReassignmentsRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < n; p++ {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	kresp, err := c.request(c.controller(), 10*time.Second, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.ListPartitionReassignmentsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	out := map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic == topic {
				out[p.Partition] = p
			}
		}
	}
	return out, nil
}

// waitReassigned waits until no partition of topic is being reassigned
// and ZooKeeper's assignment of each is want's.
func (c *testCluster) waitReassigned(t *testing.T, topic string, want map[int32][]int32) {
	t.Helper()
	checkFor(t, reassignWithin, 50*time.Millisecond, func() error {
		list, err := c.ongoingReassignments(topic, int32(len(want)))
		if err != nil {
			return err
		}
		if n := len(list); n > 0 {
			return fmt.Errorf("%d partitions still being reassigned: %+v", n, list)
		}
		for p, replicas := range want {
			if got := c.replicasOf(topic, p); !slices.Equal(got, replicas) {
				return fmt.Errorf("%s-%d assigned %v, want %v", topic, p, got, replicas)
			}
		}
		return nil
	})
}

// metadataReplicas is what broker id's Metadata says of topic's
// partitions: replicas and ISR.
func (c *testCluster) metadataReplicas(id int32, topic string) (map[int32][2][]int32, error) {
	resp, err := c.metadataFrom(id, 5*time.Second)
	if err != nil {
		return nil, err
	}
	out := map[int32][2][]int32{}
	for _, mt := range resp.Topics {
		if mt.Topic == nil || *mt.Topic != topic {
			continue
		}
		for _, mp := range mt.Partitions {
			out[mp.Partition] = [2][]int32{mp.Replicas, mp.ISR}
		}
	}
	return out, nil
}

// waitDirGone waits until broker id no longer keeps topic-p on disk.
func (c *testCluster) waitDirGone(t *testing.T, id int32, topic string, p int32) {
	t.Helper()
	dir := c.broker(id).PartitionDir(topic, p)
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("broker %d still keeps %s (%v)", id, dir, err)
		}
		return nil
	})
}

// A fourth broker joins a loaded 3-broker cluster; a quarter of the
// replicas move to it (one per partition, the preferred leader's for one
// partition) under continuous acks=all production by an idempotent
// producer. Every acknowledged record is read back, the moved-away
// replicas delete their data, the new broker holds its replicas in sync,
// and it leads its share once the preferred leaders are elected.
func TestReassignMovesReplicasToNewBrokerUnderLoad(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second})
	const topic = "moving"
	const partitions = 4
	c.createTopic(topic, partitions, nil)
	load := startKgoLoad(c.client(kgo.RequiredAcks(kgo.AllISRAcks())), topic, "m", -1, 2*time.Millisecond)
	load.waitAcked(t, 300, 30*time.Second)
	newID := c.addBroker()

	// A quarter of the 12 replicas move, so that each of the 4 brokers
	// holds 3: partition p < 3 gives its replica at position p to the new
	// broker, which takes that position (for partition 0 the preferred
	// leader's); partition 3 stays.
	adm := c.admin()
	want := map[int32][]int32{}
	movedFrom := map[int32]int32{}
	var req kadm.AlterPartitionAssignmentsReq
	for p := int32(0); p < partitions; p++ {
		target := c.replicasOf(topic, p)
		want[p] = target
		if p == 3 {
			continue
		}
		movedFrom[p] = target[p]
		target[p] = newID
		req.Assign(topic, p, target)
	}
	c.alterAssignments(t, req)
	c.waitReassigned(t, topic, want)
	load.waitAcked(t, 300, 30*time.Second) // production went on
	for p := range movedFrom {
		c.waitDirGone(t, movedFrom[p], topic, p)
		if _, err := os.Stat(c.broker(newID).PartitionDir(topic, p)); err != nil {
			t.Fatalf("the new broker has no replica of %s-%d: %v", topic, p, err)
		}
	}
	// Every running broker's Metadata has the new replicas, all in sync.
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		for _, id := range c.running() {
			md, err := c.metadataReplicas(id, topic)
			if err != nil {
				return err
			}
			for p, replicas := range want {
				if got := md[p]; !slices.Equal(got[0], replicas) || len(got[1]) != 3 {
					return fmt.Errorf("broker %d: %s-%d replicas %v isr %v, want replicas %v all in sync", id, topic, p, got[0], got[1], replicas)
				}
			}
		}
		return nil
	})
	// Preferred leaders: the new broker leads partition 0, its share.
	if _, err := adm.ElectLeaders(testContext(t, 30*time.Second), kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}, 3: {}}}); err != nil {
		t.Fatalf("ElectLeaders: %v", err)
	}
	states := c.waitSettled(30*time.Second, topic, partitions, 3)
	led := 0
	for p, s := range states {
		if s.Leader == want[p][0] && s.Leader == newID {
			led++
		}
	}
	if led != 1 {
		t.Fatalf("the new broker leads %d partitions, want 1 (states %v)", led, states)
	}
	load.waitAcked(t, 100, 30*time.Second)
	load.stop(t)
	acked, failed := load.log.snapshot()
	if len(failed) > 0 {
		t.Errorf("%d records failed, e.g. %s", len(failed), firstOf(failed))
	}
	read := c.readTopic(topic, 60*time.Second)
	checkReadBack(t, read, acked)
	t.Logf("%d records acknowledged during the reassignment, all read back", len(acked))
}

// The replication factor raised 1 -> 3 and lowered back to one replica on
// another broker; a reassignment cancelled while its new replica cannot
// catch up; and bad requests refused with Kafka's errors, nothing moved.
func TestReassignReplicationFactorCancelAndBadInput(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second, session: stoppedBrokerSession})
	const topic = "rf"
	adm := c.admin()
	resp, err := adm.CreateTopic(testContext(t, 30*time.Second), 1, 1, map[string]*string{"min.insync.replicas": kadm.StringPtr("1")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	c.waitSettled(30*time.Second, topic, 1, 1)
	first := c.replicasOf(topic, 0)[0]
	produce := func(prefix string, n int) map[string]ackPos {
		t.Helper()
		cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
		acked := map[string]ackPos{}
		for i := range n {
			v := fmt.Sprintf("%s-%04d", prefix, i)
			r, err := cl.ProduceSync(testContext(t, 30*time.Second), &kgo.Record{Topic: topic, Value: []byte(v)}).First()
			if err != nil {
				t.Fatalf("producing %s: %v", v, err)
			}
			acked[v] = ackPos{r.Partition, r.Offset}
		}
		return acked
	}
	acked := produce("before", 200)

	// Raise to 3: the first broker stays the preferred leader.
	all := append([]int32{first}, otherThan(3, first)...)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, all)
	c.alterAssignments(t, req)
	c.waitReassigned(t, topic, map[int32][]int32{0: all})
	c.waitSettled(30*time.Second, topic, 1, 3)
	for k, v := range produce("three", 100) {
		acked[k] = v
	}
	// Lower to one replica on the last broker: the others delete theirs.
	last := all[2]
	req = nil
	req.Assign(topic, 0, []int32{last})
	c.alterAssignments(t, req)
	c.waitReassigned(t, topic, map[int32][]int32{0: {last}})
	c.waitSettled(30*time.Second, topic, 1, 1)
	c.waitDirGone(t, all[0], topic, 0)
	c.waitDirGone(t, all[1], topic, 0)
	checkReadBack(t, c.readTopic(topic, 30*time.Second), acked)

	// Cancel: the new replica's broker is stopped, so the reassignment
	// stays ongoing until it is cancelled.
	stopped := all[1]
	if stopped == c.controller() {
		stopped = all[0]
	}
	c.broker(stopped).Signal(syscall.SIGSTOP)
	resumed := false
	resume := func() {
		if !resumed {
			c.broker(stopped).Signal(syscall.SIGCONT)
			resumed = true
		}
	}
	t.Cleanup(resume)
	req = nil
	req.Assign(topic, 0, []int32{last, stopped})
	c.alterAssignments(t, req)
	list, err := c.ongoingReassignments(topic, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := list[0]; !slices.Equal(got.Replicas, []int32{last, stopped}) || !slices.Equal(got.AddingReplicas, []int32{stopped}) || len(got.RemovingReplicas) != 0 {
		t.Fatalf("ongoing reassignment %+v", list)
	}
	req = nil
	req.CancelAssign(topic, 0)
	c.alterAssignments(t, req)
	c.waitReassigned(t, topic, map[int32][]int32{0: {last}})
	resume()
	c.waitSettled(30*time.Second, topic, 1, 1)
	c.waitDirGone(t, stopped, topic, 0)

	// Bad requests, straight to the controller: Kafka's errors, nothing
	// moved.
	ctrl := c.controller()
	type badCase struct {
		name      string
		topic     string
		partition int32
		replicas  []int32
		want      error
	}
	for _, bc := range []badCase{
		{"a broker that does not exist", topic, 0, []int32{last, 42}, kerr.InvalidReplicaAssignment},
		{"duplicate replicas", topic, 0, []int32{last, last}, kerr.InvalidReplicaAssignment},
		{"an empty replica list", topic, 0, []int32{}, kerr.InvalidReplicaAssignment},
		{"a negative broker id", topic, 0, []int32{-3}, kerr.InvalidReplicaAssignment},
		{"a partition that does not exist", topic, 5, []int32{last}, kerr.UnknownTopicOrPartition},
		{"a topic that does not exist", "no-such-topic", 0, []int32{last}, kerr.UnknownTopicOrPartition},
		{"cancelling where nothing is ongoing", topic, 0, nil, kerr.NoReassignmentInProgress},
	} {
		kreq := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = bc.topic
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = bc.partition, bc.replicas
		rt.Partitions = append(rt.Partitions, rp)
		kreq.Topics = append(kreq.Topics, rt)
		kresp, err := c.request(ctrl, 10*time.Second, kreq)
		if err != nil {
			t.Fatalf("%s: %v", bc.name, err)
		}
		r := kresp.(*kmsg.AlterPartitionAssignmentsResponse)
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			t.Fatalf("%s: response %+v", bc.name, r)
		}
		if got := kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode); !errors.Is(got, bc.want) {
			t.Fatalf("%s: %v, want %v", bc.name, got, bc.want)
		}
	}
	// Sent to a broker that is not the controller: NOT_CONTROLLER.
	other := otherThan(3, ctrl)[0]
	kreq := kmsg.NewPtrListPartitionReassignmentsRequest()
	kresp, err := c.request(other, 10*time.Second, kreq)
	if err != nil {
		t.Fatal(err)
	}
	if code := kresp.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode; code != kerr.NotController.Code {
		t.Fatalf("ListPartitionReassignments to broker %d (not the controller): %v", other, kerr.ErrorForCode(code))
	}
	if got := c.replicasOf(topic, 0); !slices.Equal(got, []int32{last}) {
		t.Fatalf("after the bad requests %s-0 is assigned %v", topic, got)
	}
	checkReadBack(t, c.readTopic(topic, 30*time.Second), acked)
}

// The controller is killed (SIGKILL) while a reassignment waits for its
// new replica: the new controller resumes it from the assignment znode
// (adding_replicas, removing_replicas as Kafka writes them) and completes
// it once the replica catches up; nothing acknowledged is lost.
func TestReassignSurvivesControllerKill(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second, session: stoppedBrokerSession})
	const topic = "ctrl-kill"
	// The controller and one other broker hold the partition; the third
	// broker is to be added, and must not be the controller.
	ctrl := c.controller()
	replicas := []int32{otherThan(3, ctrl)[0], ctrl}
	adding := otherThan(3, replicas...)[0]
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	creq := kmsg.NewPtrCreateTopicsRequest()
	creq.TimeoutMillis = 30000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	ct.ReplicaAssignment = append(ct.ReplicaAssignment, ra)
	minISR := kmsg.NewCreateTopicsRequestTopicConfig()
	minISR.Name, minISR.Value = "min.insync.replicas", kadm.StringPtr("1")
	ct.Configs = append(ct.Configs, minISR)
	creq.Topics = append(creq.Topics, ct)
	cresp, err := creq.RequestWith(testContext(t, 30*time.Second), cl)
	if err == nil {
		err = kerr.ErrorForCode(cresp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("creating %s on %v: %v", topic, replicas, err)
	}
	c.waitSettled(30*time.Second, topic, 1, 2)
	acked := map[string]ackPos{}
	for i := range 300 {
		v := fmt.Sprintf("ck-%04d", i)
		r, err := cl.ProduceSync(testContext(t, 30*time.Second), &kgo.Record{Topic: topic, Value: []byte(v)}).First()
		if err != nil {
			t.Fatal(err)
		}
		acked[v] = ackPos{r.Partition, r.Offset}
	}
	// Move the controller's replica to the third broker, which is stopped
	// so that the reassignment cannot complete before the controller dies.
	target := []int32{replicas[0], adding}
	c.broker(adding).Signal(syscall.SIGSTOP)
	t.Cleanup(func() { c.broker(adding).Signal(syscall.SIGCONT) })
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, target)
	c.alterAssignments(t, req)
	data, _, err := c.zkGet("/brokers/topics/" + topic)
	if err != nil {
		t.Fatal(err)
	}
	wantZnode := fmt.Sprintf(`"adding_replicas":{"0":[%d]},"removing_replicas":{"0":[%d]}`, adding, replicas[1])
	if !strings.Contains(string(data), wantZnode) {
		t.Fatalf("assignment znode %s lacks %s", data, wantZnode)
	}
	epoch := c.controllerEpoch()
	c.broker(ctrl).Kill()
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if e := c.controllerEpoch(); e <= epoch {
			return fmt.Errorf("controller epoch still %d", e)
		}
		return nil
	})
	c.broker(adding).Signal(syscall.SIGCONT)
	c.waitUnregistered(ctrl)
	c.broker(ctrl).Restart()
	c.waitReassigned(t, topic, map[int32][]int32{0: target})
	c.waitSettled(30*time.Second, topic, 1, 2)
	if !slices.Contains(target, replicas[1]) {
		c.waitDirGone(t, replicas[1], topic, 0)
	}
	checkReadBack(t, c.readTopic(topic, 30*time.Second), acked)
}

// The admin calls of sarama and kafkajs: start a reassignment, list it
// while it waits for a stopped broker, cancel it (sarama), list nothing.
func TestReassignAdminClients(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second, session: stoppedBrokerSession})
	adm := c.admin()
	for _, topic := range []string{"sarama-moves", "kafkajs-moves"} {
		resp, err := adm.CreateTopic(testContext(t, 30*time.Second), 1, 1, map[string]*string{"min.insync.replicas": kadm.StringPtr("1")}, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatal(err)
		}
		c.waitSettled(30*time.Second, topic, 1, 1)
	}
	ctrl := c.controller()

	t.Run("sarama", func(t *testing.T) {
		const topic = "sarama-moves"
		cfg := saramaConfig()
		cfg.Version = sarama.V2_4_0_0 // the first with the reassignment APIs
		var ca sarama.ClusterAdmin
		if err := bounded(30*time.Second, "sarama.NewClusterAdmin", func() (err error) {
			ca, err = sarama.NewClusterAdmin(c.addrs(), cfg)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer ca.Close()
		from := c.replicasOf(topic, 0)[0]
		dst := otherThan(3, from, ctrl)[0] // three brokers: always one
		c.broker(dst).Signal(syscall.SIGSTOP)
		defer c.broker(dst).Signal(syscall.SIGCONT)
		if err := ca.AlterPartitionReassignments(topic, [][]int32{{dst}}); err != nil {
			t.Fatalf("sarama AlterPartitionReassignments: %v", err)
		}
		status, err := ca.ListPartitionReassignments(topic, []int32{0})
		if err != nil {
			t.Fatalf("sarama ListPartitionReassignments: %v", err)
		}
		st := status[topic][0]
		if st == nil || !slices.Equal(st.Replicas, []int32{dst, from}) || !slices.Equal(st.AddingReplicas, []int32{dst}) || !slices.Equal(st.RemovingReplicas, []int32{from}) {
			t.Fatalf("sarama lists %+v", status)
		}
		// sarama has no cancel; kadm sends it.
		var req kadm.AlterPartitionAssignmentsReq
		req.CancelAssign(topic, 0)
		c.alterAssignments(t, req)
		status, err = ca.ListPartitionReassignments(topic, []int32{0})
		if err != nil || len(status[topic]) != 0 {
			t.Fatalf("after cancelling sarama lists %+v, %v", status, err)
		}
		if got := c.replicasOf(topic, 0); !slices.Equal(got, []int32{from}) {
			t.Fatalf("after cancelling: assigned %v", got)
		}
	})

	t.Run("kafkajs", func(t *testing.T) {
		const topic = "kafkajs-moves"
		dir := groupsJSDir(t)
		run := func(args ...string) []string {
			t.Helper()
			cmd := exec.CommandContext(testContext(t, 60*time.Second), "node", append([]string{filepath.Join(dir, "reassign_admin.js"), c.broker(ctrl).Addr()}, args...)...)
			cmd.Dir = dir
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node reassign_admin.js %v: %v\n%s", args, err, stderr.Bytes())
			}
			var lines []string
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			if len(lines) == 0 || lines[len(lines)-1] != "OK" {
				t.Fatalf("node reassign_admin.js %v printed %q\n%s", args, lines, stderr.Bytes())
			}
			return lines[:len(lines)-1]
		}
		from := c.replicasOf(topic, 0)[0]
		dst := otherThan(3, from, ctrl)[0]
		c.broker(dst).Signal(syscall.SIGSTOP)
		run("alter", topic, "0", fmt.Sprintf("%d,%d", from, dst))
		got := run("list", topic, "0")
		c.broker(dst).Signal(syscall.SIGCONT)
		if want := fmt.Sprintf("REASSIGNING %s 0 %d,%d %d -", topic, from, dst, dst); len(got) != 1 || got[0] != want {
			t.Fatalf("kafkajs lists %q, want %q", got, want)
		}
		c.waitReassigned(t, topic, map[int32][]int32{0: {from, dst}})
		if got := run("list", topic, "0"); len(got) != 0 {
			t.Fatalf("kafkajs lists %q after completion", got)
		}
		c.waitSettled(30*time.Second, topic, 1, 2)
	})
}
