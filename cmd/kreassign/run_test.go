package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/rebalance"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeCluster is a kfake cluster of four brokers (ids 0-3) whose
// Metadata, AlterPartitionReassignments and ListPartitionReassignments are
// answered from a scripted assignment, so that kreassign runs end to end
// against real Kafka protocol without a broker that reassigns.
type fakeCluster struct {
	c *kfake.Cluster

	mu         sync.Mutex
	assignment rebalance.Assignment
	ongoing    map[string]map[int32][]int32 // target replicas of reassignments in progress
	alterErrs  map[string]*kerr.Error       // "t-0" -> the error AlterPartitionReassignments answers
	altered    []*kmsg.AlterPartitionAssignmentsRequest
	lists      int
	// completeAfterLists, when > 0, completes every reassignment once the
	// controller has been asked to list them that many times.
	completeAfterLists int
}

func newFakeCluster(t *testing.T, a rebalance.Assignment) *fakeCluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	f := &fakeCluster{c: c, assignment: a, ongoing: map[string]map[int32][]int32{}, alterErrs: map[string]*kerr.Error{}}
	addrs := c.ListenAddrs()
	c.ControlKey(3, func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.MetadataRequest)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		for i, addr := range addrs {
			host, port, _ := net.SplitHostPort(addr)
			p, _ := strconv.Atoi(port)
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = int32(i), host, int32(p)
			resp.Brokers = append(resp.Brokers, b)
		}
		resp.ControllerID = 0
		f.mu.Lock()
		defer f.mu.Unlock()
		var names []string
		if req.Topics == nil {
			for name := range f.assignment {
				names = append(names, name)
			}
		}
		for _, rt := range req.Topics {
			names = append(names, *rt.Topic)
		}
		for _, name := range names {
			st := kmsg.NewMetadataResponseTopic()
			st.Topic = kmsg.StringPtr(name)
			ps, ok := f.assignment[name]
			if !ok {
				st.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			for p, rs := range ps {
				sp := kmsg.NewMetadataResponseTopicPartition()
				sp.Partition, sp.Leader = p, rs[0]
				sp.Replicas, sp.ISR = slices.Clone(rs), slices.Clone(rs)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	c.ControlKey(45, func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.AlterPartitionAssignmentsRequest)
		resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.altered = append(f.altered, req)
		for _, rt := range req.Topics {
			st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				sp.Partition = rp.Partition
				_, exists := f.assignment[rt.Topic][rp.Partition]
				_, inProgress := f.ongoing[rt.Topic][rp.Partition]
				switch e := f.alterErrs[tpName(rt.Topic, rp.Partition)]; {
				case e != nil:
					sp.ErrorCode, sp.ErrorMessage = e.Code, kmsg.StringPtr("scripted refusal")
				case !exists:
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case rp.Replicas == nil && !inProgress:
					sp.ErrorCode = kerr.NoReassignmentInProgress.Code
				case rp.Replicas == nil:
					delete(f.ongoing[rt.Topic], rp.Partition)
				default:
					if f.ongoing[rt.Topic] == nil {
						f.ongoing[rt.Topic] = map[int32][]int32{}
					}
					f.ongoing[rt.Topic][rp.Partition] = slices.Clone(rp.Replicas)
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	c.ControlKey(46, func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.ListPartitionReassignmentsRequest)
		resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.lists++
		if f.completeAfterLists > 0 && f.lists >= f.completeAfterLists {
			f.completeLocked()
		}
		for topic, ps := range f.ongoing {
			if len(ps) == 0 {
				continue
			}
			st := kmsg.NewListPartitionReassignmentsResponseTopic()
			st.Topic = topic
			for p, target := range ps {
				sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
				sp.Partition = p
				cur := f.assignment[topic][p]
				sp.Replicas = slices.Clone(target)
				for _, b := range cur {
					if !slices.Contains(target, b) {
						sp.Replicas = append(sp.Replicas, b)
						sp.RemovingReplicas = append(sp.RemovingReplicas, b)
					}
				}
				for _, b := range target {
					if !slices.Contains(cur, b) {
						sp.AddingReplicas = append(sp.AddingReplicas, b)
					}
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return f
}

// completeLocked finishes every reassignment in progress.
func (f *fakeCluster) completeLocked() {
	for topic, ps := range f.ongoing {
		for p, target := range ps {
			f.assignment[topic][p] = target
		}
	}
	f.ongoing = map[string]map[int32][]int32{}
}

func (f *fakeCluster) complete() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.completeLocked()
}

// kreassign runs the command against f and returns its exit status,
// stdout and stderr.
func (f *fakeCluster) kreassign(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args = append([]string{"--bootstrap-server", strings.Join(f.c.ListenAddrs(), ",")}, args...)
	code := run(ctx, args, &stdout, &stderr)
	t.Logf("kreassign %s: exit %d\n%s%s", strings.Join(args[2:], " "), code, stdout.String(), stderr.String())
	return code, stdout.String(), stderr.String()
}

func roundRobin(topic string, partitions, rf int, ids ...int32) rebalance.Assignment {
	ps := map[int32][]int32{}
	for p := range partitions {
		var rs []int32
		for r := range rf {
			rs = append(rs, ids[(p+r)%len(ids)])
		}
		ps[int32(p)] = rs
	}
	return rebalance.Assignment{topic: ps}
}

// proposedSection returns the JSON line after "Proposed partition
// reassignment configuration".
func proposedSection(t *testing.T, out string) []target {
	t.Helper()
	_, rest, ok := strings.Cut(out, "Proposed partition reassignment configuration\n")
	if !ok {
		t.Fatalf("no proposal in\n%s", out)
	}
	line, _, _ := strings.Cut(rest, "\n")
	ts, err := parseReassignment([]byte(line))
	if err != nil {
		t.Fatalf("proposal %q: %v", line, err)
	}
	return ts
}

func TestGenerateExecuteVerify(t *testing.T) {
	f := newFakeCluster(t, roundRobin("t", 12, 3, 0, 1, 2))
	dir := t.TempDir()
	planFile := filepath.Join(dir, "plan.json")

	code, out, _ := f.kreassign(t, "--generate", "--brokers", "0,1,2,3", "--output", planFile)
	if code != exitOK {
		t.Fatalf("generate: exit %d", code)
	}
	if !strings.HasPrefix(out, "Current partition replica assignment\n{\"version\":1,\"partitions\":[") {
		t.Errorf("generate output does not start as Kafka's:\n%s", out)
	}
	if !strings.Contains(out, "9 replicas to copy") {
		t.Errorf("summary does not say 9 replicas move:\n%s", out)
	}
	proposed := proposedSection(t, out)
	onNew := 0
	for _, tg := range proposed {
		if slices.Contains(tg.Replicas, 3) {
			onNew++
		}
	}
	if onNew != 9 {
		t.Errorf("%d proposed partitions on broker 3, want 9", onNew)
	}
	fileData, err := os.ReadFile(planFile)
	if err != nil {
		t.Fatal(err)
	}
	if fromFile, err := parseReassignment(fileData); err != nil || len(fromFile) != len(proposed) {
		t.Fatalf("--output file: %d partitions, %v; printed %d", len(fromFile), err, len(proposed))
	}

	code, out, _ = f.kreassign(t, "--execute", "--reassignment-json-file", planFile)
	if code != exitOK || !strings.Contains(out, "Successfully started partition reassignments for t-") ||
		!strings.Contains(out, "Save this to use as the --reassignment-json-file option during rollback") {
		t.Fatalf("execute: exit %d\n%s", code, out)
	}
	f.mu.Lock()
	sent := 0
	for _, rt := range f.altered[0].Topics {
		sent += len(rt.Partitions)
	}
	f.mu.Unlock()
	if len(f.altered) != 1 || sent != len(proposed) {
		t.Fatalf("%d requests with %d partitions, want one with %d", len(f.altered), sent, len(proposed))
	}

	code, out, _ = f.kreassign(t, "--verify", "--reassignment-json-file", planFile)
	if code != exitIncomplete || !strings.Contains(out, "is still in progress.") {
		t.Errorf("verify mid-way: exit %d\n%s", code, out)
	}
	code, out, _ = f.kreassign(t, "--list")
	if code != exitOK || !strings.Contains(out, "Current partition reassignments:\n") || !strings.Contains(out, " adding: 3.") {
		t.Errorf("list: exit %d\n%s", code, out)
	}
	// Another execute while this one runs needs --additional.
	code, _, errOut := f.kreassign(t, "--execute", "--reassignment-json-file", planFile)
	if code != exitError || !strings.Contains(errOut, "Cannot execute because there is an existing partition assignment.") {
		t.Errorf("second execute: exit %d\n%s", code, errOut)
	}

	f.complete()
	code, out, _ = f.kreassign(t, "--verify", "--reassignment-json-file", planFile)
	if code != exitOK || strings.Contains(out, "in progress") || !strings.Contains(out, "Reassignment of partition t-0 is completed.") && !strings.Contains(out, "is completed.") {
		t.Errorf("verify after: exit %d\n%s", code, out)
	}
	code, out, _ = f.kreassign(t, "--list")
	if code != exitOK || !strings.Contains(out, "No partition reassignments found.") {
		t.Errorf("list after: exit %d\n%s", code, out)
	}
	// Balanced now: the next plan moves nothing.
	code, out, _ = f.kreassign(t, "--generate", "--brokers", "0,1,2,3")
	if code != exitOK || len(proposedSection(t, out)) != 0 || !strings.Contains(out, "0 replicas to copy") {
		t.Errorf("generate on a balanced cluster: exit %d\n%s", code, out)
	}
}

func TestDrainPlan(t *testing.T) {
	f := newFakeCluster(t, roundRobin("t", 8, 2, 0, 1, 2, 3))
	code, out, _ := f.kreassign(t, "--drain", "2")
	if code != exitOK {
		t.Fatalf("drain: exit %d", code)
	}
	moved := 0
	for _, tg := range proposedSection(t, out) {
		if slices.Contains(tg.Replicas, 2) {
			t.Errorf("%s still on broker 2: %v", tg.name(), tg.Replicas)
		}
		moved++
	}
	if moved != 4 || !strings.Contains(out, "4 replicas to copy") {
		t.Errorf("%d partitions in the drain plan, want the 4 on broker 2\n%s", moved, out)
	}
	// A broker that is gone may be drained too; one never seen may not be
	// planned onto.
	if code, _, errOut := f.kreassign(t, "--generate", "--brokers", "0,1,7"); code != exitError || !strings.Contains(errOut, "Unknown broker id 7") {
		t.Errorf("unknown broker: exit %d %s", code, errOut)
	}
	if code, _, errOut := f.kreassign(t, "--generate", "--brokers", "0,1", "--topics", "nope"); code != exitError || !strings.Contains(errOut, "Topic nope not found.") {
		t.Errorf("unknown topic: exit %d %s", code, errOut)
	}
	if code, _, errOut := f.kreassign(t, "--generate", "--brokers", "0", "--replication-factor", "2"); code != exitError || !strings.Contains(errOut, "Replication factor: 2 larger than available brokers: 1.") {
		t.Errorf("RF too high: exit %d %s", code, errOut)
	}
}

func TestExecuteErrors(t *testing.T) {
	f := newFakeCluster(t, roundRobin("t", 3, 2, 0, 1, 2))
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f.alterErrs["t-1"] = kerr.InvalidReplicaAssignment
	plan := write("plan.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,1]},{"topic":"t","partition":1,"replicas":[1,3]}]}`)
	code, out, errOut := f.kreassign(t, "--execute", "--reassignment-json-file", plan)
	if code != exitError || !strings.Contains(errOut, "Error reassigning partition(s):\nt-1: INVALID_REPLICA_ASSIGNMENT: scripted refusal") ||
		!strings.Contains(out, "Successfully started partition reassignment for t-0") {
		t.Errorf("partial failure: exit %d\n%s%s", code, out, errOut)
	}
	for name, c := range map[string]struct{ file, err string }{
		"unknown broker":    {`{"partitions":[{"topic":"t","partition":0,"replicas":[1,9]}]}`, "Unknown broker id 9"},
		"unknown partition": {`{"partitions":[{"topic":"t","partition":7,"replicas":[1,2]}]}`, "Unable to find partition: t-7"},
		"duplicate replica": {`{"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}`, "may not contain duplicate entries"},
		"empty":             {`{"version":1,"partitions":[]}`, "cannot be empty"},
	} {
		code, _, errOut := f.kreassign(t, "--execute", "--additional", "--reassignment-json-file", write(strings.ReplaceAll(name, " ", "-")+".json", c.file))
		if code != exitError || !strings.Contains(errOut, c.err) {
			t.Errorf("%s: exit %d, %q", name, code, errOut)
		}
	}
}

func TestWaitAndCancel(t *testing.T) {
	f := newFakeCluster(t, roundRobin("t", 4, 2, 0, 1, 2))
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(plan, []byte(`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,1]},{"topic":"t","partition":2,"replicas":[2,3]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// Completes on the fourth ListPartitionReassignments: execute lists
	// once before sending, so --wait sees it in progress twice, then done.
	f.completeAfterLists = 4
	code, out, _ := f.kreassign(t, "--execute", "--reassignment-json-file", plan, "--wait", "--interval", "10ms")
	if code != exitOK || !strings.Contains(out, "0 of 2 partition reassignments complete") || !strings.Contains(out, "2 of 2 partition reassignments complete") {
		t.Errorf("execute --wait: exit %d\n%s", code, out)
	}
	if got := f.assignment["t"][0]; !slices.Equal(got, []int32{3, 1}) {
		t.Errorf("t-0 is %v after the wait", got)
	}

	// Never completes: --wait gives up at --timeout.
	f.completeAfterLists = 0
	plan2 := filepath.Join(dir, "plan2.json")
	if err := os.WriteFile(plan2, []byte(`{"version":1,"partitions":[{"topic":"t","partition":1,"replicas":[3,2]},{"topic":"t","partition":3,"replicas":[3,1]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, _, errOut := f.kreassign(t, "--execute", "--reassignment-json-file", plan2, "--wait", "--interval", "20ms", "--timeout", "1s")
	if code != exitIncomplete || !strings.Contains(errOut, "2 of 2 partition reassignments not complete") {
		t.Errorf("execute --wait that cannot finish: exit %d %s", code, errOut)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("--timeout 1s took %v", took)
	}

	code, out, _ = f.kreassign(t, "--cancel", "--reassignment-json-file", plan2)
	if code != exitOK || !strings.Contains(out, "Successfully cancelled partition reassignments for: t-1,t-3") {
		t.Errorf("cancel: exit %d\n%s", code, out)
	}
	f.mu.Lock()
	last := f.altered[len(f.altered)-1]
	f.mu.Unlock()
	for _, rt := range last.Topics {
		for _, rp := range rt.Partitions {
			if rp.Replicas != nil {
				t.Errorf("cancel sent replicas %v for %s-%d, want null", rp.Replicas, rt.Topic, rp.Partition)
			}
		}
	}
	code, out, _ = f.kreassign(t, "--cancel", "--reassignment-json-file", plan2)
	if code != exitOK || !strings.Contains(out, "None of the specified partition reassignments are active.") {
		t.Errorf("cancel again: exit %d\n%s", code, out)
	}
	code, out, _ = f.kreassign(t, "--verify", "--reassignment-json-file", plan2)
	if code != exitIncomplete || !strings.Contains(out, "There is no active reassignment of partition t-1, but replica set is 1,2 rather than 3,2.") {
		t.Errorf("verify a cancelled plan: exit %d\n%s", code, out)
	}
}
