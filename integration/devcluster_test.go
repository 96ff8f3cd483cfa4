package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/launch"
	"github.com/kbroker/kbroker/internal/zktest"
)

// devCluster is one run of `kbroker dev-cluster` started by a test.
type devCluster struct {
	t         *testing.T
	dir       string
	out       string // its stdout and stderr
	proc      *launch.Process
	bootstrap []string
}

var bootstrapLine = regexp.MustCompile(`(?m)^  bootstrap\.servers=(\S+)$`)

// startDevCluster runs `kbroker dev-cluster --dir dir --brokers n` and
// waits until it prints its bootstrap servers.
func startDevCluster(t *testing.T, dir string, n int) *devCluster {
	t.Helper()
	if err := zktest.Available(); err != nil {
		if os.Getenv(zktest.RequireEnv) == "1" {
			t.Fatalf("dev-cluster: %v", err)
		}
		t.Skipf("dev-cluster needs ZooKeeper: %v", err)
	}
	out := filepath.Join(t.TempDir(), "dev-cluster.out")
	p, err := launch.Start(launch.Spec{Path: brokerBin, Args: []string{"dev-cluster", "--dir", dir, "--brokers", fmt.Sprint(n)}, LogPath: out})
	if err != nil {
		t.Fatal(err)
	}
	d := &devCluster{t: t, dir: dir, out: out, proc: p}
	t.Cleanup(func() {
		if p.Running() {
			_, _ = p.Stop(60 * time.Second)
		}
		if t.Failed() {
			dumpLog(t, "dev-cluster", out)
			for id := 1; id <= n; id++ {
				dumpLog(t, fmt.Sprintf("dev-cluster broker %d", id), filepath.Join(dir, fmt.Sprintf("broker-%d", id), "kbroker.log"))
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = launch.WaitReady(ctx, p, 100*time.Millisecond, func() error {
		data, err := os.ReadFile(out)
		if err != nil {
			return err
		}
		m := bootstrapLine.FindSubmatch(data)
		if m == nil {
			return fmt.Errorf("no bootstrap.servers line yet")
		}
		d.bootstrap = strings.Split(string(m[1]), ",")
		return nil
	})
	if err != nil {
		t.Fatalf("dev-cluster did not come up: %v", err)
	}
	if len(d.bootstrap) != n {
		t.Fatalf("dev-cluster printed %d bootstrap servers %v, want %d", len(d.bootstrap), d.bootstrap, n)
	}
	return d
}

// control runs `kbroker dev-cluster --dir DIR args...` and returns its
// output, failing the test unless it exits 0.
func (d *devCluster) control(args ...string) string {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, brokerBin, append([]string{"dev-cluster", "--dir", d.dir}, args...)...).CombinedOutput()
	if err != nil {
		d.t.Fatalf("kbroker dev-cluster %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// interrupt sends SIGINT (a terminal's Ctrl-C) and wants a clean exit.
func (d *devCluster) interrupt() {
	d.t.Helper()
	if err := d.proc.Signal(syscall.SIGINT); err != nil {
		d.t.Fatal(err)
	}
	st, err := d.proc.Wait(90 * time.Second)
	if err != nil {
		d.t.Fatalf("dev-cluster after SIGINT: %v", err)
	}
	if !st.Exited() || st.ExitCode() != 0 {
		d.t.Fatalf("dev-cluster exited with %v after SIGINT, want status 0", st)
	}
}

// TestDevCluster runs `kbroker dev-cluster` as a user would: three brokers
// with RF 3 and min.insync.replicas=2 by default; records produced with
// acks=all, a leader killed through `--kill`, more records produced while
// it is down, everything consumed; `--restart`; Ctrl-C shuts every broker
// down cleanly; a second run on the same directory serves the same data on
// the same addresses.
func TestDevCluster(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	d := startDevCluster(t, dir, 3)
	addr := d.bootstrap[0]
	const topic = "dev-cluster-topic"

	// Replication factor -1: the broker's default.replication.factor.
	adm := adminAt(t, addr)
	ctx := testContext(t, 3*time.Minute)
	resp, err := adm.CreateTopic(ctx, 3, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	var leader0 int32 = -1
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		td, ok := md.Topics[topic]
		if !ok || td.Err != nil || len(td.Partitions) != 3 {
			return fmt.Errorf("metadata of %s: %+v", topic, td)
		}
		for _, p := range td.Partitions {
			if len(p.Replicas) != 3 || len(p.ISR) != 3 || p.Leader < 0 {
				return fmt.Errorf("partition %d: leader %d replicas %v isr %v, want RF 3 with a full ISR", p.Partition, p.Leader, p.Replicas, p.ISR)
			}
			if p.Partition == 0 {
				leader0 = p.Leader
			}
		}
		return nil
	})
	cfgs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := cfgs.On(topic, nil); err != nil {
		t.Fatal(err)
	} else {
		got := "(absent)"
		for _, c := range v.Configs {
			if c.Key == "min.insync.replicas" && c.Value != nil {
				got = *c.Value
			}
		}
		if got != "2" {
			t.Errorf("min.insync.replicas of %s = %s, want 2 (the dev cluster's default)", topic, got)
		}
	}

	partitions := []int32{0, 1, 2}
	before := produceToPartitions(t, topic, partitions, 200, "before", d.bootstrap...)

	if out := d.control("--kill", fmt.Sprint(leader0)); !strings.Contains(out, "killed") {
		t.Errorf("--kill %d said %q", leader0, out)
	}
	status := d.control("--status")
	if !strings.Contains(status, fmt.Sprintf("broker %d %s: signal: killed", leader0, d.bootstrap[leader0-1])) {
		t.Errorf("--status after the kill:\n%s", status)
	}
	var alive []string
	for i, a := range d.bootstrap {
		if int32(i+1) != leader0 {
			alive = append(alive, a)
		}
	}
	// acks=all with two of three brokers: the partitions fail over once
	// the killed broker's session expires, and min.insync.replicas=2 is
	// still met.
	during := produceToPartitions(t, topic, partitions, 200, "during", alive...)
	consumeAndCompare(t, alive[0], topic, append(before, during...))

	if out := d.control("--restart", fmt.Sprint(leader0)); !strings.Contains(out, "restarted") {
		t.Errorf("--restart %d said %q", leader0, out)
	}
	after := produceToPartitions(t, topic, partitions, 100, "after", d.bootstrap...)
	all := append(append(before, during...), after...)
	d.interrupt()
	for id := 1; id <= 3; id++ {
		log, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("broker-%d", id), "kbroker.log"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(lastRun(string(log)), "shut down cleanly") {
			t.Errorf("broker %d's last run did not shut down cleanly after Ctrl-C", id)
		}
	}

	// Same directory: same addresses, same data.
	again := startDevCluster(t, dir, 3)
	if strings.Join(again.bootstrap, ",") != strings.Join(d.bootstrap, ",") {
		t.Errorf("restarted dev cluster serves %v, first run %v", again.bootstrap, d.bootstrap)
	}
	// The restarted brokers serve the topic once the controller's first
	// view reaches them: wait for it (bounded) before reading.
	againAdm := adminAt(t, again.bootstrap[0])
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		_, err := offsetsOf(testContext(t, 10*time.Second), againAdm, topic, true)
		return err
	})
	consumeAndCompare(t, again.bootstrap[0], topic, all)
	again.interrupt()
}

// lastRun is the part of a launch log file written by its last run.
func lastRun(log string) string {
	if i := strings.LastIndex(log, "\n=== "); i >= 0 {
		return log[i:]
	}
	return log
}
