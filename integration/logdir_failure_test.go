package integration

import (
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

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A failed log dir (issue 15's JBOD): broker 2 of a 3-broker ZooKeeper
// cluster has two log dirs, and the second is removed under acks=all load
// (the directory renamed away and deleted, as a disk that is pulled or
// unmounted: open files still work, nothing new can be created there, so
// the next checkpoint or segment roll fails, as root or not). Only that
// dir's replicas go offline: their leadership moves to other replicas and
// they leave their ISRs, Metadata lists them as offline replicas, they
// answer KAFKA_STORAGE_ERROR; broker 2 keeps running and serving the
// replicas of its other dir (leader and follower); no acknowledged record
// is lost. Restarted with the dir replaced by an empty one, its replicas
// come back as ordinary followers and rejoin every ISR.

// logDirFailurePlan is the topic of the test: replicas per partition
// (preferred leader first) and the dir of broker 2 each one is put in.
var logDirFailurePlan = []struct {
	replicas []int32
	disk     int // 0: the dir that stays, 1: the dir that fails
}{
	{[]int32{2, 1, 3}, 0}, // led by broker 2, stays
	{[]int32{2, 3, 1}, 1}, // led by broker 2: moves to 3
	{[]int32{1, 2, 3}, 0}, // followed by broker 2, stays
	{[]int32{3, 2, 1}, 1}, // followed by broker 2: it leaves the ISR
	{[]int32{2, 1, 3}, 1}, // led by broker 2: moves to 1
	{[]int32{1, 3, 2}, 0},
}

func TestLogDirFailureFailsOverOnlyItsPartitions(t *testing.T) {
	root := t.TempDir()
	disks := []string{filepath.Join(root, "b2-disk1"), filepath.Join(root, "b2-disk2")}
	checkLogDirFailure(t, disks, func(t *testing.T, dir string) {
		// Pulled: renamed away, then deleted.
		if err := os.Rename(dir, dir+".pulled"); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(dir + ".pulled"); err != nil {
			t.Fatal(err)
		}
	}, func(t *testing.T, dir string) {
		// Replaced by an empty disk.
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLogDirFailureDiskFull is the same with the dir on a small tmpfs that
// fills up under load: appends (as leader and as follower) fail with
// ENOSPC. Freed, the dir keeps its data for the restart. It needs to mount
// a tmpfs (root, and a machine that allows it) and is skipped otherwise.
func TestLogDirFailureDiskFull(t *testing.T) {
	root := t.TempDir()
	mnt := mountTmpfsOrSkip(t, "32m")
	disks := []string{filepath.Join(root, "b2-disk1"), filepath.Join(mnt, "b2-disk2")}
	filler := filepath.Join(mnt, "filler")
	checkLogDirFailure(t, disks, func(t *testing.T, dir string) {
		f, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		chunk := make([]byte, 64<<10)
		for {
			if _, err := f.Write(chunk); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling %s: %v", mnt, err)
				}
				return
			}
		}
	}, func(t *testing.T, dir string) {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	})
}

// mountTmpfsOrSkip mounts a tmpfs of size on a fresh directory, unmounted
// at cleanup (after what started later stopped), or skips the test when
// mounting is not permitted here.
func mountTmpfsOrSkip(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root and a machine that permits it): %v: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		var out []byte
		var err error
		for attempt := 0; attempt < 50; attempt++ {
			if out, err = exec.Command("umount", dir).CombinedOutput(); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond) // a process still leaving it
		}
		t.Errorf("umount %s: %v\n%s", dir, err, out)
	})
	return dir
}

// logDirPlanCluster starts the 3-broker cluster of the log dir failure
// tests, broker 2 with the log dirs disks, and creates the topic of
// logDirFailurePlan with broker 2's replicas in the dirs of the plan. It
// returns the cluster, the topic, its partition count and each
// partition's state.
func logDirPlanCluster(t *testing.T, disks []string) (c *testCluster, topic string, partitions int32, before map[int32]zkPartState) {
	t.Helper()
	const victim = int32(2)
	c = startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second, perBroker: func(id int) []string {
		if int32(id) == victim {
			return []string{"log.dirs=" + strings.Join(disks, ",")}
		}
		return nil
	}})
	ctx := testContext(t, 4*time.Minute)
	topic = "dir-failure"
	partitions = int32(len(logDirFailurePlan))
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	creq := kmsg.NewPtrCreateTopicsRequest()
	creq.TimeoutMillis = 30000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
	for p, plan := range logDirFailurePlan {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), plan.replicas
		ct.ReplicaAssignment = append(ct.ReplicaAssignment, ra)
	}
	creq.Topics = append(creq.Topics, ct)
	cresp, err := creq.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(cresp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
	c.waitSettled(30*time.Second, topic, partitions, 3)

	// Put broker 2's replicas in the dirs of the plan (AlterReplicaLogDirs
	// where the spread put them elsewhere).
	adm := c.admin()
	want := map[int32]string{}
	moves := kadm.AlterReplicaLogDirsReq{}
	// Broker 2 opens its replicas when it applies the view: wait for all
	// of them before reading where they are.
	homes := map[int32]string{}
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		d, err := adm.DescribeBrokerLogDirs(ctx, victim, nil)
		if err != nil {
			return err
		}
		for _, dp := range d.SortedPartitions() {
			if dp.Topic == topic && !dp.IsFuture {
				homes[dp.Partition] = dp.Dir
			}
		}
		if len(homes) != int(partitions) {
			return fmt.Errorf("broker %d lists %d of %d partitions in its dirs", victim, len(homes), partitions)
		}
		return nil
	})
	for p, plan := range logDirFailurePlan {
		want[int32(p)] = disks[plan.disk]
		if homes[int32(p)] != disks[plan.disk] {
			moves.Add(disks[plan.disk], kadm.TopicsSet{topic: {int32(p): {}}})
		}
	}
	if len(moves) > 0 {
		res, err := adm.AlterBrokerReplicaLogDirs(ctx, victim, moves)
		if err != nil {
			t.Fatal(err)
		}
		res.Each(func(r kadm.AlterReplicaLogDirsResponse) {
			if r.Err != nil {
				t.Fatalf("move %s-%d to %s: %v", r.Topic, r.Partition, r.Dir, r.Err)
			}
		})
	}
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		d, err := adm.DescribeBrokerLogDirs(ctx, victim, nil)
		if err != nil {
			return err
		}
		for p, dir := range want {
			if dp, ok := d.Lookup(dir, topic, p); !ok || dp.IsFuture {
				return fmt.Errorf("%s-%d not yet current in %s: %+v", topic, p, dir, dp)
			}
		}
		for _, dp := range d.SortedPartitions() {
			if dp.IsFuture {
				return fmt.Errorf("%s-%d still moving", dp.Topic, dp.Partition)
			}
		}
		return nil
	})
	if got := partitionHomes(t, disks, topic, int(partitions)); !mapsEqual(got, want) {
		t.Fatalf("broker %d's dirs %v, want %v", victim, got, want)
	}
	before = map[int32]zkPartState{}
	for p := range partitions {
		before[p] = c.mustPartState(topic, p)
	}

	return c, topic, partitions, before
}

// checkLogDirFailure runs the scenario with broker 2's log dirs disks:
// fail breaks disks[1] under load, repair mends it before the restart.
func checkLogDirFailure(t *testing.T, disks []string, fail, repair func(t *testing.T, dir string)) {
	const victim = int32(2)
	c, topic, partitions, before := logDirPlanCluster(t, disks)
	ctx := testContext(t, 4*time.Minute)
	adm := c.admin()
	// Idempotent acks=all load over every partition, through the failure.
	load := startKgoLoad(c.client(kgo.RequiredAcks(kgo.AllISRAcks())), topic, "dirfail", -1, 3*time.Millisecond)
	load.waitAcked(t, 300, 30*time.Second)

	failedDir := disks[1]
	fail(t, failedDir)
	failedAt := time.Now()
	t.Logf("broke broker %d's log dir %s under load (%d records acknowledged so far)", victim, failedDir, load.log.count())

	// Exactly the failed dir's partitions move: broker 2 leaves their ISR
	// and leadership; the others keep it.
	offline := func(p int32) bool { return logDirFailurePlan[p].disk == 1 }
	states := map[int32]zkPartState{}
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		for p := range partitions {
			s, err := c.partState(topic, p)
			if err != nil {
				return err
			}
			if offline(p) && (s.Leader == victim || slices.Contains(s.ISR, victim)) {
				return fmt.Errorf("%s-%d (failed dir): %s", topic, p, s)
			}
			states[p] = s
		}
		return nil
	})
	t.Logf("failed over in %v", time.Since(failedAt).Round(time.Millisecond))
	for p := range partitions {
		s, b := states[p], before[p]
		plan := logDirFailurePlan[p]
		switch {
		case offline(p):
			wantLeader := b.Leader
			if b.Leader == victim {
				// The next ISR member in assignment order.
				wantLeader = plan.replicas[1]
			}
			if s.Leader != wantLeader || len(s.ISR) != 2 {
				t.Errorf("%s-%d (failed dir): %s, want leader %d and an ISR of the other two", topic, p, s, wantLeader)
			}
		default:
			if s.Leader != b.Leader || s.LeaderEpoch != b.LeaderEpoch || len(s.ISR) != 3 {
				t.Errorf("%s-%d (healthy dir): %s, was %s: it must not move", topic, p, s, b)
			}
		}
	}

	// Every broker's Metadata lists broker 2's replicas of the failed dir,
	// and only those, as offline.
	waitOfflineListed(t, c, topic, partitions, victim, offline)

	// Broker 2 is up, answers KAFKA_STORAGE_ERROR for its offline
	// replicas and serves the partition it still leads.
	if !c.broker(victim).Running() || !c.brokerRegistered(victim) {
		t.Fatalf("broker %d is %s (registered: %v)", victim, c.broker(victim).exitState(), c.brokerRegistered(victim))
	}
	if code, err := c.rawProduce(victim, topic, 1, -1, 10*time.Second); err != nil || code != kerr.KafkaStorageError.Code {
		t.Errorf("produce to broker %d's offline %s-1: %s, %v; want KAFKA_STORAGE_ERROR", victim, topic, errName(code), err)
	}
	if code, err := c.rawProduce(victim, topic, 0, -1, 10*time.Second); err != nil || code != 0 {
		t.Errorf("acks=all produce to %s-0, still led by broker %d: %s, %v", topic, victim, errName(code), err)
	}
	d, err := adm.DescribeBrokerLogDirs(ctx, victim, nil)
	if err != nil {
		t.Fatal(err)
	}
	if dd, ok := d[failedDir]; !ok || !errors.Is(dd.Err, kerr.KafkaStorageError) {
		t.Errorf("DescribeLogDirs of %s: %+v, want KAFKA_STORAGE_ERROR", failedDir, dd)
	}
	if dd, ok := d[disks[0]]; !ok || dd.Err != nil || len(dd.Topics[topic]) != 3 {
		t.Errorf("DescribeLogDirs of %s: %+v, want its 3 partitions", disks[0], dd)
	}
	if v := c.mustMetric(victim, "kbroker_offline_log_dirs"); v != 1 {
		t.Errorf("kbroker_offline_log_dirs = %v, want 1", v)
	}
	if v := c.mustMetric(victim, "kbroker_log_dir_offline", "log_dir", failedDir); v != 1 {
		t.Errorf("kbroker_log_dir_offline{%s} = %v, want 1", failedDir, v)
	}
	if v := c.mustMetric(victim, "kbroker_offline_replicas"); v != 3 {
		t.Errorf("kbroker_offline_replicas = %v, want 3", v)
	}

	// The load goes on; then every acknowledged record is there.
	load.waitAcked(t, 300, 30*time.Second)
	load.stop(t)
	acked, failed := load.log.snapshot()
	read := c.readTopic(topic, 60*time.Second)
	checkReadBack(t, read, acked)
	t.Logf("%d records acknowledged, %d failed, all acknowledged ones read back", len(acked), len(failed))
	if !c.broker(victim).Running() {
		t.Fatalf("broker %d stopped: %s", victim, c.broker(victim).exitState())
	}
	if !logContains(c.broker(victim), "log dir failed: taking it offline") || !logContains(c.broker(victim), "log_dir="+failedDir) {
		t.Errorf("broker %d's log (%s) does not say that %s failed", victim, c.broker(victim).LogPath(), failedDir)
	}
	if out, err := os.ReadFile(c.broker(victim).LogPath()); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "log dir") && strings.Contains(l, "level=ERROR") {
				t.Logf("broker %d: %s", victim, l)
			}
		}
	}

	// The disk is repaired and broker 2 restarted: its replicas there
	// come back as followers, catch up and rejoin the ISR.
	repair(t, failedDir)
	c.broker(victim).Restart()
	c.waitSettled(60*time.Second, topic, partitions, 3)
	checkFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		m, err := c.metadataFrom(victim, 2*time.Second)
		if err != nil {
			return err
		}
		for p, off := range offlineReplicasOf(m, topic) {
			if len(off) > 0 {
				return fmt.Errorf("%s-%d still lists offline replicas %v", topic, p, off)
			}
		}
		return nil
	})
	d, err = adm.DescribeBrokerLogDirs(ctx, victim, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range disks {
		if dd, ok := d[dir]; !ok || dd.Err != nil {
			t.Errorf("after the restart, DescribeLogDirs of %s: %+v", dir, dd)
		}
	}
	if v := c.mustMetric(victim, "kbroker_offline_log_dirs"); v != 0 {
		t.Errorf("after the restart kbroker_offline_log_dirs = %v, want 0", v)
	}
}

// waitOfflineListed waits until every running broker's Metadata lists
// victim's replicas of topic's partitions for which offline holds, and
// only those, as offline.
func waitOfflineListed(t *testing.T, c *testCluster, topic string, partitions, victim int32, offline func(int32) bool) {
	t.Helper()
	checkFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		for _, id := range c.running() {
			m, err := c.metadataFrom(id, 2*time.Second)
			if err != nil {
				return err
			}
			got := offlineReplicasOf(m, topic)
			for p := range partitions {
				var w []int32
				if offline(p) {
					w = []int32{victim}
				}
				if !slices.Equal(got[p], w) {
					return fmt.Errorf("broker %d's Metadata: %s-%d offline replicas %v, want %v", id, topic, p, got[p], w)
				}
			}
		}
		return nil
	})
}

// offlineReplicasOf returns a Metadata response's offline replicas of each
// partition of topic.
func offlineReplicasOf(m *kmsg.MetadataResponse, topic string) map[int32][]int32 {
	out := map[int32][]int32{}
	for _, t := range m.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		for _, p := range t.Partitions {
			if len(p.OfflineReplicas) > 0 {
				out[p.Partition] = slices.Clone(p.OfflineReplicas)
			}
		}
	}
	return out
}

// A log dir that cannot be read when the broker starts (broker 2 stopped,
// its second dir replaced by a file, as a disk missing at boot whose
// mount point holds something else) takes only its replicas offline, as
// Kafka's LogManager: broker 2 starts and registers, its replicas in the
// other dir rejoin their ISRs, those of the missing dir are listed
// offline in Metadata and answer KAFKA_STORAGE_ERROR (they are not
// created empty elsewhere), DescribeLogDirs reports the dir's error, the
// acks=all load goes on with nothing acknowledged lost; with the dir back
// and a restart, every replica rejoins its ISR.
func TestLogDirUnusableAtStart(t *testing.T) {
	const victim = int32(2)
	root := t.TempDir()
	disks := []string{filepath.Join(root, "b2-disk1"), filepath.Join(root, "b2-disk2")}
	c, topic, partitions, _ := logDirPlanCluster(t, disks)
	ctx := testContext(t, 4*time.Minute)
	adm := c.admin()
	load := startKgoLoad(c.client(kgo.RequiredAcks(kgo.AllISRAcks())), topic, "dirgone", -1, 3*time.Millisecond)
	load.waitAcked(t, 300, 30*time.Second)

	c.broker(victim).Stop()
	missing := disks[1]
	if err := os.Rename(missing, missing+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(missing, []byte("not a log dir"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.broker(victim).Restart()

	offline := func(p int32) bool { return logDirFailurePlan[p].disk == 1 }
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		for p := range partitions {
			s, err := c.partState(topic, p)
			if err != nil {
				return err
			}
			in := slices.Contains(s.ISR, victim)
			if offline(p) && (s.Leader == victim || in) {
				return fmt.Errorf("%s-%d (dir missing): %s", topic, p, s)
			}
			if !offline(p) && !in {
				return fmt.Errorf("%s-%d (dir present): %s, broker %d not back in the ISR", topic, p, s, victim)
			}
		}
		return nil
	})
	waitOfflineListed(t, c, topic, partitions, victim, offline)
	if !c.broker(victim).Running() || !c.brokerRegistered(victim) {
		t.Fatalf("broker %d is %s (registered: %v)", victim, c.broker(victim).exitState(), c.brokerRegistered(victim))
	}
	if code, err := c.rawProduce(victim, topic, 1, -1, 10*time.Second); err != nil || code != kerr.KafkaStorageError.Code {
		t.Errorf("produce to broker %d's %s-1 (dir missing): %s, %v; want KAFKA_STORAGE_ERROR", victim, topic, errName(code), err)
	}
	d, err := adm.DescribeBrokerLogDirs(ctx, victim, nil)
	if err != nil {
		t.Fatal(err)
	}
	if dd, ok := d[missing]; !ok || !errors.Is(dd.Err, kerr.KafkaStorageError) {
		t.Errorf("DescribeLogDirs of %s: %+v, want KAFKA_STORAGE_ERROR", missing, dd)
	}
	if dd, ok := d[disks[0]]; !ok || dd.Err != nil || len(dd.Topics[topic]) != 3 {
		t.Errorf("DescribeLogDirs of %s: %+v, want its 3 partitions", disks[0], dd)
	}
	if !logContains(c.broker(victim), "failed to create or read log dir") {
		t.Errorf("broker %d's log (%s) does not say that %s is unusable", victim, c.broker(victim).LogPath(), missing)
	}
	if fi, err := os.Stat(missing); err != nil || fi.IsDir() {
		t.Errorf("%s was replaced: %v", missing, err)
	}

	load.waitAcked(t, 300, 30*time.Second)
	load.stop(t)
	acked, failed := load.log.snapshot()
	checkReadBack(t, c.readTopic(topic, 60*time.Second), acked)
	t.Logf("%d records acknowledged, %d failed, all acknowledged ones read back", len(acked), len(failed))

	// The disk back: after a restart every replica is in sync again.
	if err := os.Remove(missing); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(missing+".away", missing); err != nil {
		t.Fatal(err)
	}
	c.broker(victim).Restart()
	c.waitSettled(60*time.Second, topic, partitions, 3)
}
