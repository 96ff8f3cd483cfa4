package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/launch"
)

// TestClusterBadInput: misconfigurations and damaged ZooKeeper state are
// reported clearly and hurt nobody else.
func TestClusterBadInput(t *testing.T) {
	t.Run("duplicate broker id", testDuplicateBrokerID)
	t.Run("zookeeper unreachable", testZooKeeperUnreachable)
	t.Run("malformed topic znode", testMalformedTopicZnode)
}

// runFailingBroker runs a kbroker that must exit non-zero within limit and
// returns its exit code, how long it ran and its output.
func runFailingBroker(t *testing.T, limit time.Duration, overrides ...string) (int, time.Duration, string) {
	t.Helper()
	port := freePort(t)
	args := []string{
		"--override", "listeners=PLAINTEXT://127.0.0.1:" + strconv.Itoa(port),
		"--override", "log.dirs=" + t.TempDir(),
	}
	for _, o := range overrides {
		args = append(args, "--override", o)
	}
	logPath := filepath.Join(t.TempDir(), "kbroker.log")
	start := time.Now()
	p, err := launch.Start(launch.Spec{Path: brokerBin, Args: args, Dir: t.TempDir(), LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill(stopTimeout) })
	if _, err := p.Wait(limit); err != nil {
		_ = p.Kill(stopTimeout)
		dumpLog(t, "kbroker", logPath)
		t.Fatalf("kbroker still running %v after its start, want a non-zero exit", limit)
	}
	took := time.Since(start)
	out, _ := os.ReadFile(logPath)
	code := p.State().ExitCode()
	if code == 0 {
		t.Errorf("kbroker exited with status 0 after %v, want non-zero:\n%s", took, out)
	}
	return code, took, string(out)
}

// testDuplicateBrokerID: a second broker with a broker.id that is
// registered exits non-zero naming the id; the first keeps its
// registration and serves.
func testDuplicateBrokerID(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 2})
	before, _, err := c.zkGet("/brokers/ids/2")
	if err != nil {
		t.Fatalf("reading /brokers/ids/2: %v", err)
	}
	code, took, out := runFailingBroker(t, 20*time.Second, c.brokerOverrides(2)...)
	t.Logf("duplicate broker.id 2 exited with status %d after %v", code, took.Round(time.Millisecond))
	for _, want := range []string{"broker.id 2", "already registered"} {
		if !strings.Contains(out, want) {
			t.Errorf("the duplicate's output does not contain %q:\n%s", want, out)
		}
	}
	after, _, err := c.zkGet("/brokers/ids/2")
	if err != nil || string(after) != string(before) {
		t.Errorf("/brokers/ids/2 changed: %s (%v), was %s", after, err, before)
	}
	if !c.broker(2).Running() {
		t.Fatal("the registered broker 2 exited")
	}
	c.waitAgreed(t, clusterSettle, func(v clusterView) error {
		if len(v.brokers) != 2 {
			return fmt.Errorf("%d brokers listed, want 2", len(v.brokers))
		}
		return nil
	})
	c.broker(2).Ping(t)
}

// testZooKeeperUnreachable: zookeeper.connect naming a port where nothing
// listens makes the broker exit non-zero within a few seconds, saying so.
func testZooKeeperUnreachable(t *testing.T) {
	zkAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	code, took, out := runFailingBroker(t, 10*time.Second, "broker.id=1", "zookeeper.connect="+zkAddr,
		"zookeeper.connection.timeout.ms=1000", "zookeeper.session.timeout.ms=2000")
	t.Logf("unreachable ZooKeeper: exit status %d after %v", code, took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("exited %v after its start, want within 5s (zookeeper.connection.timeout.ms=1000)", took)
	}
	for _, want := range []string{zkAddr, "ZooKeeper"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not contain %q:\n%s", want, out)
		}
	}
}

// testMalformedTopicZnode: garbage hand-written into /brokers/topics/<t>
// is found when a new controller loads the cluster (the old one is
// killed). The error names the znode, no broker crashes, every broker
// still answers Metadata, a controller is elected and the healthy topic
// stays served.
func testMalformedTopicZnode(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3})
	c.createTopicVia(t, 1, "healthy", 6, nil)
	c.createTopicVia(t, 1, "damaged", 6, nil)
	v0 := c.waitAgreed(t, clusterSettle, func(v clusterView) error {
		if err := allLed("healthy", 6)(v); err != nil {
			return err
		}
		return allLed("damaged", 6)(v)
	})
	const path = "/brokers/topics/damaged"
	if _, err := c.zkConn().Set(c.zkPath(path), []byte(`{"version":2,"partitions":{"0":[1],`), -1); err != nil {
		t.Fatalf("writing garbage into %s: %v", path, err)
	}
	epoch := c.controllerEpoch()
	old := v0.controller
	c.broker(old).Kill()
	killed := time.Now()

	var survivors []*Broker
	for id := int32(1); id <= 3; id++ {
		if id != old {
			survivors = append(survivors, c.broker(id))
		}
	}
	checkFor(t, clusterSession+clusterSessionSlack+10*time.Second, 20*time.Millisecond, func() error {
		for _, b := range survivors {
			if logContains(b, path) {
				return nil
			}
		}
		return fmt.Errorf("no surviving broker logged an error naming %s", path)
	})
	for _, b := range survivors {
		if data, err := os.ReadFile(b.LogPath()); err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if strings.Contains(line, path) {
					t.Logf("broker %s: %s", b.Addr(), line)
					break
				}
			}
		}
	}
	t.Logf("error naming %s logged %v after the controller was killed", path, time.Since(killed).Round(time.Millisecond))

	// Nobody crashed, everyone answers, and the cluster still works for
	// the healthy topic.
	v := c.waitAgreed(t, clusterSettle, func(v clusterView) error {
		if v.hasBroker(old) {
			return fmt.Errorf("killed broker %d still listed", old)
		}
		if v.controller == old {
			return fmt.Errorf("killed broker %d still controller", old)
		}
		ls := v.leaders["healthy"]
		for p, l := range v0.leaders["healthy"] {
			if l != old && (p >= len(ls) || ls[p] != l) {
				return fmt.Errorf("healthy-%d led by %v, want %d", p, ls, l)
			}
		}
		return nil
	})
	for _, b := range survivors {
		if !b.Running() {
			t.Errorf("broker %s exited: %s", b.Addr(), b.exitState())
		}
		b.Ping(t)
	}
	// One failed takeover may cost an epoch; a storm of elections would
	// cost many.
	if got := c.controllerEpoch(); got > epoch+3 {
		t.Errorf("/controller_epoch went from %d to %d: controllers keep failing over", epoch, got)
	}
	var mine []int32
	for p, l := range v.leaders["healthy"] {
		if l >= 0 {
			mine = append(mine, int32(p))
		}
	}
	produceToPartitions(t, "healthy", mine, 5, "healthy", survivors[0].Addr())
	ctx := testContext(t, 30*time.Second)
	if resp, err := adminAt(t, survivors[0].Addr(), survivors[1].Addr()).CreateTopic(ctx, 2, 1, nil, "created-after"); err != nil || resp.Err != nil {
		t.Errorf("CreateTopics with a damaged topic znode in ZooKeeper: %v %v", err, resp.Err)
	}
}
