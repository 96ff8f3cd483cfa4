package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The balancing plan on a real ZooKeeper cluster, through the kreassign
// command a user would run: a fourth broker joins a loaded cluster and the
// plan moves its share of replicas to it; a broker is drained, then
// stopped. Both under continuous acks=all production by an idempotent
// producer whose every acknowledged record must be read back.

// kreassignWait bounds kreassign --execute --wait in these tests.
const kreassignWait = 2 * time.Minute

// buildKreassign builds cmd/kreassign into a test directory.
func buildKreassign(t *testing.T) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "kreassign")
	ctx := testContext(t, 5*time.Minute)
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", bin, "./cmd/kreassign")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kreassign: %v\n%s", err, out)
	}
	return bin
}

// runKreassign runs the kreassign binary against the cluster's running
// brokers, bounded by within, and returns its exit status and stdout; it
// fails the test when the status is not wantExit.
func (c *testCluster) runKreassign(t *testing.T, bin string, within time.Duration, wantExit int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	args = append([]string{"--bootstrap-server", strings.Join(c.addrs(), ",")}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("kreassign %s: %v", strings.Join(args[2:], " "), err)
	}
	t.Logf("kreassign %s: exit %d after %v\n%s%s", strings.Join(args[2:], " "), code, time.Since(start).Round(time.Millisecond), summarizeOutput(stdout.String()), stderr.String())
	if code != wantExit {
		t.Fatalf("kreassign %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args[2:], " "), code, wantExit, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// summarizeOutput shortens kreassign's JSON lines for the test log.
func summarizeOutput(out string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(out, "\n") {
		if len(line) > 300 {
			line = line[:300] + "...\n"
		}
		b.WriteString(line)
	}
	return b.String()
}

// planFile is a reassignment JSON file as kreassign writes it.
type planFile struct {
	Version    int `json:"version"`
	Partitions []struct {
		Topic     string   `json:"topic"`
		Partition int32    `json:"partition"`
		Replicas  []int32  `json:"replicas"`
		LogDirs   []string `json:"log_dirs"`
	} `json:"partitions"`
}

func readPlanFile(t *testing.T, path string) planFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f planFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
	if f.Version != 1 {
		t.Fatalf("%s: version %d", path, f.Version)
	}
	return f
}

// assignmentOf reads topic's assignment from ZooKeeper.
func (c *testCluster) assignmentOf(topic string, partitions int32) map[int32][]int32 {
	out := map[int32][]int32{}
	for p := int32(0); p < partitions; p++ {
		out[p] = c.replicasOf(topic, p)
	}
	return out
}

// replicaCounts counts replicas and preferred leaders per broker.
func replicaCounts(a map[int32][]int32) (replicas, leaders map[int32]int) {
	replicas, leaders = map[int32]int{}, map[int32]int{}
	for _, rs := range a {
		for i, b := range rs {
			replicas[b]++
			if i == 0 {
				leaders[b]++
			}
		}
	}
	return replicas, leaders
}

// A fourth broker joins a 3-broker cluster whose 12-partition RF 3 topic
// takes continuous acks=all production. kreassign plans onto brokers 1-4
// (a quarter of the 36 replicas move, all to the new broker), executes and
// waits; the new broker then holds 9 replicas in sync, every acknowledged
// record is read back, and after a preferred leader election each broker,
// the new one included, leads 3 partitions.
func TestReassignPlanNewBrokerUnderLoad(t *testing.T) {
	const (
		topic      = "plan-grow"
		partitions = 12
	)
	bin := buildKreassign(t)
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second})
	c.createTopic(topic, partitions, nil)
	load := startKgoLoad(c.client(kgo.RequiredAcks(kgo.AllISRAcks())), topic, "grow", -1, 2*time.Millisecond)
	// Enough data that the new replicas have something to copy.
	load.waitAcked(t, 2000, 60*time.Second)

	newID := c.addBroker()
	if newID != 4 {
		t.Fatalf("new broker has id %d, want 4", newID)
	}
	before := c.assignmentOf(topic, partitions)
	dir := t.TempDir()
	planPath := filepath.Join(dir, "plan.json")
	out := c.runKreassign(t, bin, time.Minute, 0, "--generate", "--brokers", "1,2,3,4", "--topics", topic, "--output", planPath)
	if !strings.Contains(out, "9 replicas to copy") {
		t.Errorf("the plan does not copy 9 replicas:\n%s", out)
	}
	plan := readPlanFile(t, planPath)
	target := cloneAssignment(before)
	moved := 0
	for _, p := range plan.Partitions {
		if p.Topic != topic {
			t.Fatalf("plan moves %s-%d, not of %s", p.Topic, p.Partition, topic)
		}
		for _, b := range p.Replicas {
			if !slices.Contains(before[p.Partition], b) {
				moved++
				if b != newID {
					t.Errorf("%s-%d: replica moves to broker %d, not the new one", topic, p.Partition, b)
				}
			}
		}
		target[p.Partition] = p.Replicas
	}
	if replicas, _ := replicaCounts(target); moved != 9 || replicas[newID] != 9 {
		t.Fatalf("plan moves %d replicas, %d onto broker %d; want a quarter of 36 (9)", moved, replicas[newID], newID)
	}

	load.waitAcked(t, 200, 30*time.Second)
	c.runKreassign(t, bin, kreassignWait+30*time.Second, 0, "--execute", "--reassignment-json-file", planPath,
		"--wait", "--timeout", kreassignWait.String(), "--interval", "200ms")
	// --verify agrees, and ZooKeeper holds the target.
	c.runKreassign(t, bin, time.Minute, 0, "--verify", "--reassignment-json-file", planPath)
	for p, want := range target {
		if got := c.replicasOf(topic, p); !slices.Equal(got, want) {
			t.Errorf("%s-%d assigned %v after the reassignment, want %v", topic, p, got, want)
		}
	}
	// The new replicas are in sync (in the ISR ZooKeeper holds); under
	// continuous production the replicas' log ends never all agree at one
	// instant, so the ISR is what says they keep up.
	for p, rs := range target {
		if slices.Contains(rs, newID) {
			c.waitISRHolds(30*time.Second, topic, p, rs)
		}
	}
	load.waitAcked(t, 200, 30*time.Second)

	// The new broker leads its share once preferred leaders are elected.
	adm := c.admin()
	set := kadm.TopicsSet{}
	for p := int32(0); p < partitions; p++ {
		set.Add(topic, p)
	}
	checkFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		res, err := adm.ElectLeaders(testContext(t, 15*time.Second), kadm.ElectPreferredReplica, set)
		if err != nil {
			return err
		}
		for _, ps := range res {
			for _, r := range ps {
				if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
					return fmt.Errorf("electing the preferred leader of %s-%d: %w", r.Topic, r.Partition, r.Err)
				}
			}
		}
		led := map[int32]int{}
		for p := int32(0); p < partitions; p++ {
			s, err := c.partState(topic, p)
			if err != nil {
				return err
			}
			if s.Leader != target[p][0] {
				return fmt.Errorf("%s-%d led by %d, preferred %d", topic, p, s.Leader, target[p][0])
			}
			led[s.Leader]++
		}
		for id := int32(1); id <= 4; id++ {
			if led[id] != 3 {
				return fmt.Errorf("leaders per broker %v, want 3 each", led)
			}
		}
		return nil
	})

	load.waitAcked(t, 200, 30*time.Second)
	load.stop(t)
	acked, failed := load.log.snapshot()
	if len(failed) > 0 {
		t.Errorf("%d records failed: %s", len(failed), firstOf(failed))
	}
	read := c.readTopic(topic, 60*time.Second)
	checkReadBack(t, read, acked)
	total := 0
	for _, rs := range read {
		total += len(rs)
	}
	if total != len(acked) {
		t.Errorf("read %d records, %d acknowledged", total, len(acked))
	}
	t.Logf("%d records acknowledged and read back", len(acked))
}

// cloneAssignment copies a partition assignment.
func cloneAssignment(a map[int32][]int32) map[int32][]int32 {
	out := map[int32][]int32{}
	for p, rs := range a {
		out[p] = slices.Clone(rs)
	}
	return out
}

// A 4-broker cluster under load is drained of broker 3 with kreassign
// --drain (every topic), the plan executed and waited for; then broker 3
// holds no replica and no partition directory, it is stopped, production
// carries on without a failed record, and everything acknowledged is read
// back.
func TestReassignPlanDrainThenStop(t *testing.T) {
	const (
		topic      = "plan-drain"
		partitions = 8
		drained    = int32(3)
	)
	bin := buildKreassign(t)
	c := startCluster(t, clusterOpts{brokers: 4, replicated: true, lag: 10 * time.Second})
	c.createTopic(topic, partitions, nil)
	before := c.assignmentOf(topic, partitions)
	onDrained := 0
	for _, rs := range before {
		if slices.Contains(rs, drained) {
			onDrained++
		}
	}
	if onDrained == 0 {
		t.Fatalf("broker %d holds no replica of %s: %v", drained, topic, before)
	}
	load := startKgoLoad(c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(250*time.Millisecond)), topic, "drain", -1, 2*time.Millisecond)
	load.waitAcked(t, 2000, 60*time.Second)

	planPath := filepath.Join(t.TempDir(), "drain.json")
	out := c.runKreassign(t, bin, time.Minute, 0, "--drain", strconv.Itoa(int(drained)), "--output", planPath)
	if !strings.Contains(out, "replicas to copy") {
		t.Errorf("no summary:\n%s", out)
	}
	plan := readPlanFile(t, planPath)
	moved := 0
	for _, p := range plan.Partitions {
		if slices.Contains(p.Replicas, drained) {
			t.Errorf("the drain plan keeps %s-%d on broker %d: %v", p.Topic, p.Partition, drained, p.Replicas)
		}
		if p.Topic == topic {
			for _, b := range p.Replicas {
				if !slices.Contains(before[p.Partition], b) {
					moved++
				}
			}
		}
	}
	if moved != onDrained {
		t.Errorf("the drain plan copies %d replicas of %s, broker %d held %d", moved, topic, drained, onDrained)
	}

	c.runKreassign(t, bin, kreassignWait+30*time.Second, 0, "--execute", "--reassignment-json-file", planPath,
		"--wait", "--timeout", kreassignWait.String(), "--interval", "200ms")
	for _, p := range plan.Partitions {
		if got := c.replicasOf(p.Topic, p.Partition); slices.Contains(got, drained) {
			t.Errorf("%s-%d still assigned to broker %d: %v", p.Topic, p.Partition, drained, got)
		}
	}
	for p, rs := range before {
		if !slices.Contains(rs, drained) {
			continue
		}
		dir := c.broker(drained).PartitionDir(topic, p)
		checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("broker %d still keeps %s (%v)", drained, dir, err)
			}
			return nil
		})
	}
	for p := int32(0); p < partitions; p++ {
		c.waitISRHolds(30*time.Second, topic, p, c.replicasOf(topic, p))
	}
	load.waitAcked(t, 200, 30*time.Second)

	c.broker(drained).Stop()
	// Nothing of the topic was on it: production carries on at once.
	load.waitAcked(t, 500, 30*time.Second)
	for p := int32(0); p < partitions; p++ {
		if s := c.mustPartState(topic, p); len(s.ISR) != 3 || slices.Contains(s.ISR, drained) {
			t.Errorf("%s-%d after broker %d stopped: %s, want a full ISR without it", topic, p, drained, s)
		}
	}
	load.stop(t)
	acked, failed := load.log.snapshot()
	if len(failed) > 0 {
		t.Errorf("%d records failed: %s", len(failed), firstOf(failed))
	}
	read := c.readTopic(topic, 60*time.Second)
	checkReadBack(t, read, acked)
	total := 0
	for _, rs := range read {
		total += len(rs)
	}
	if total != len(acked) {
		t.Errorf("read %d records, %d acknowledged", total, len(acked))
	}
	t.Logf("%d records acknowledged and read back", len(acked))
}

// A plan that only reorders replicas: every partition of a topic is made
// to prefer broker 1 (by reassignments that keep the replica sets), then
// kreassign plans onto the same brokers. The plan copies nothing, only
// changes the order; executed, it completes without a replica added, and
// after a preferred leader election each broker leads its share.
func TestReassignPlanLeadersOnly(t *testing.T) {
	const (
		topic      = "plan-leaders"
		partitions = 6
	)
	bin := buildKreassign(t)
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second})
	c.createTopic(topic, partitions, nil)
	adm := c.admin()
	var skew kadm.AlterPartitionAssignmentsReq
	for p := int32(0); p < partitions; p++ {
		skew.Assign(topic, p, []int32{1, 2, 3})
	}
	resp, err := adm.AlterPartitionAssignments(testContext(t, 30*time.Second), skew)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("reordering replicas: %v", err)
	}
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		for p := int32(0); p < partitions; p++ {
			if got := c.replicasOf(topic, p); !slices.Equal(got, []int32{1, 2, 3}) {
				return fmt.Errorf("%s-%d assigned %v", topic, p, got)
			}
		}
		return nil
	})

	planPath := filepath.Join(t.TempDir(), "leaders.json")
	out := c.runKreassign(t, bin, time.Minute, 0, "--generate", "--brokers", "1,2,3", "--topics", topic, "--output", planPath)
	if !strings.Contains(out, "0 replicas to copy, 0 to delete; 4 preferred leaders change") {
		t.Errorf("a leaders-only plan should copy nothing and move 4 preferred leaders:\n%s", out)
	}
	plan := readPlanFile(t, planPath)
	target := c.assignmentOf(topic, partitions)
	for _, p := range plan.Partitions {
		target[p.Partition] = p.Replicas
	}
	if _, leaders := replicaCounts(target); leaders[1] != 2 || leaders[2] != 2 || leaders[3] != 2 {
		t.Fatalf("planned preferred leaders %v, want 2 each", leaders)
	}
	c.runKreassign(t, bin, kreassignWait+30*time.Second, 0, "--execute", "--reassignment-json-file", planPath,
		"--wait", "--timeout", kreassignWait.String(), "--interval", "100ms")
	set := kadm.TopicsSet{}
	for p := int32(0); p < partitions; p++ {
		set.Add(topic, p)
	}
	checkFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		if _, err := adm.ElectLeaders(testContext(t, 15*time.Second), kadm.ElectPreferredReplica, set); err != nil {
			return err
		}
		for p := int32(0); p < partitions; p++ {
			s, err := c.partState(topic, p)
			if err != nil {
				return err
			}
			if s.Leader != target[p][0] || len(s.ISR) != 3 {
				return fmt.Errorf("%s-%d: %s, want led by %d with a full ISR", topic, p, s, target[p][0])
			}
		}
		return nil
	})
}

// waitISRHolds waits until topic-p's ISR in ZooKeeper is exactly the
// replicas want (in any order) with a leader among them.
func (c *testCluster) waitISRHolds(within time.Duration, topic string, p int32, want []int32) {
	c.t.Helper()
	c.waitPartState(within, topic, p, func(s zkPartState) error {
		got := slices.Sorted(slices.Values(s.ISR))
		if !slices.Equal(got, slices.Sorted(slices.Values(want))) || !slices.Contains(want, s.Leader) {
			return fmt.Errorf("%s-%d leader %d ISR %v, want ISR %v", topic, p, s.Leader, s.ISR, want)
		}
		return nil
	})
}
