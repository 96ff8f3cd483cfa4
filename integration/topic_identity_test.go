package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
)

// Topic identity tests (issue 19): a topic deleted and created again under
// the same name while one broker misses it - paused, killed, or the
// controller itself killed in between - must come back as a new topic on
// every replica. After each scenario, once the cluster is quiet, every
// replica of every partition of the new incarnation holds the leader's
// bytes exactly and only new records, every partition.metadata names the
// new topic id, no broker keeps a directory of a partition it does not
// host, a consumer that read the new topic from its start while the fault
// healed never got a record of the deleted one, and no broker exited.
//
// Each scenario runs KBROKER_TOPIC_IDENTITY_LOOPS times (default 1) on one
// cluster, with a fresh topic name per iteration; the proof is
// KBROKER_TOPIC_IDENTITY_LOOPS=20. The new incarnation gets 300 records in
// even iterations and 100 in odd ones, after the old one's 200 (see
// tiRun.gen2Records).

// tiIterate runs one iteration per loop, stopping at the first failure so
// that its logs stay readable.
func tiIterate(t *testing.T, fn func(i int)) {
	t.Helper()
	n := tiLoops(t)
	for i := 0; i < n; i++ {
		start := time.Now()
		fn(i)
		t.Logf("iteration %d of %d done in %v", i+1, n, time.Since(start).Round(time.Millisecond))
		if t.Failed() {
			t.Errorf("failed in iteration %d of %d", i+1, n)
			return
		}
	}
}

// TestTopicIdentityFollowerPaused is the issue's own report: a follower F
// of a one-partition RF 3 topic is stopped (SIGSTOP, shorter than its
// session) while the topic is deleted, created again with the same
// assignment and written to; then F resumes. F must drop the old
// incarnation's 200 records and replicate the new one's from offset 0.
func TestTopicIdentityFollowerPaused(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, session: tiPauseSession, replicated: true, lag: tiLag})
	tiIterate(t, func(i int) {
		ctrl, leader, f := tiRoles(t, c)
		r := newTIRun(t, c, fmt.Sprintf("ti-follower-paused-%d", i), i)
		assign := [][]int32{{leader, f, ctrl}}
		r.createOld(assign)
		r.produceGen1()
		t.Logf("%s: pausing follower %d (leader %d, controller %d)", r, f, leader, ctrl)
		r.recreatePaused(f, assign)
	})
}

// TestTopicIdentityFollowerKilled: the follower is killed (kill -9) just
// before the deletion, the topic is re-created with it still in the
// assignment (it is still registered: its session has not expired) and
// written to, and the follower restarts on its data directory, where the
// old incarnation's partition directory waits under the same name.
func TestTopicIdentityFollowerKilled(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, session: tiKillSession, replicated: true, lag: tiLag})
	tiIterate(t, func(i int) {
		ctrl, leader, f := tiRoles(t, c)
		r := newTIRun(t, c, fmt.Sprintf("ti-follower-killed-%d", i), i)
		assign := [][]int32{{leader, f, ctrl}}
		r.createOld(assign)
		r.produceGen1()
		t.Logf("%s: killing follower %d (leader %d, controller %d)", r, f, leader, ctrl)
		c.broker(f).Kill()
		r.deleteOld()
		r.createNew(assign, f)
		r.startGen2(f)
		r.waitGen2(60 * time.Second)
		r.waitUnregistered(f)
		c.broker(f).Restart()
		t.Logf("%s: follower %d restarted", r, f)
		r.finish()
	})
}

// TestTopicIdentityLeaderPaused: the leader L of the topic is stopped
// across the deletion and re-creation. In iterations 0, 1, 4, 5, ... L is
// also the preferred (so the first) leader of the new incarnation:
// resumed, it must not lead the new topic with the old log, or its
// followers would copy the deleted records. In the others L is a follower
// of the new one.
func TestTopicIdentityLeaderPaused(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, session: tiPauseSession, replicated: true, lag: tiLag})
	tiIterate(t, func(i int) {
		ctrl, leader, f := tiRoles(t, c)
		r := newTIRun(t, c, fmt.Sprintf("ti-leader-paused-%d", i), i)
		r.createOld([][]int32{{leader, f, ctrl}})
		r.produceGen1()
		next := [][]int32{{leader, f, ctrl}}
		if (i/2)%2 == 1 {
			next = [][]int32{{f, leader, ctrl}}
		}
		t.Logf("%s: pausing leader %d (follower %d, controller %d); new assignment %v", r, leader, f, ctrl, next)
		r.recreatePaused(leader, next)
	})
}

// TestTopicIdentityControllerKilled: the controller is killed (kill -9)
// right after it answered the deletion, before the re-creation, and
// restarted on its data directory, where the old incarnation waits:
//   - restarted after the re-creation, which a new controller made with
//     the two survivors only (RF 2): it must delete its old replica;
//   - restarted before the re-creation, which then includes it (RF 3): it
//     must replace its old replica.
func TestTopicIdentityControllerKilled(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, session: tiKillSession, replicated: true, lag: tiLag})
	tiIterate(t, func(i int) {
		// Restarted after the re-creation.
		ctrl, a, b := tiRoles(t, c)
		r := newTIRun(t, c, fmt.Sprintf("ti-controller-killed-after-%d", i), i)
		r.createOld([][]int32{{a, b, ctrl}})
		r.produceGen1()
		r.deleteOld()
		t.Logf("%s: killing controller %d", r, ctrl)
		c.broker(ctrl).Kill()
		nc := r.waitController(ctrl)
		t.Logf("%s: broker %d is the controller now", r, nc)
		r.createNew([][]int32{{a, b}}, ctrl)
		r.startGen2(ctrl)
		r.waitGen2(60 * time.Second)
		r.waitUnregistered(ctrl)
		c.broker(ctrl).Restart()
		t.Logf("%s: broker %d (the old controller) restarted", r, ctrl)
		r.finish()
		if t.Failed() {
			return
		}

		// Restarted before the re-creation.
		ctrl, a, b = tiRoles(t, c)
		r = newTIRun(t, c, fmt.Sprintf("ti-controller-killed-before-%d", i), i)
		assign := [][]int32{{a, ctrl, b}}
		r.createOld(assign)
		r.produceGen1()
		r.deleteOld()
		t.Logf("%s: killing controller %d", r, ctrl)
		c.broker(ctrl).Kill()
		nc = r.waitController(ctrl)
		r.waitUnregistered(ctrl)
		c.broker(ctrl).Restart()
		r.waitAllRegistered()
		t.Logf("%s: broker %d is the controller now; broker %d (the old controller) restarted", r, nc, ctrl)
		r.createNew(assign)
		r.startGen2()
		r.waitGen2(60 * time.Second)
		r.finish()
	})
}

// TestTopicIdentityRecreateResized: the topic comes back with another
// partition count and replication factor while a replica P is paused
// across the change:
//   - 3 partitions RF 3 -> 1 partition RF 2 with P a follower of the new
//     partition 0: P must replace its partition 0 and drop 1 and 2, the
//     broker left out must drop everything, the leader 1 and 2;
//   - 1 partition RF 2 (P a follower) -> 3 partitions RF 3: P must replace
//     its partition 0 and create 1 and 2 (it is the first leader of 1).
func TestTopicIdentityRecreateResized(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, session: tiPauseSession, replicated: true, lag: tiLag})
	tiIterate(t, func(i int) {
		ctrl, l, p := tiRoles(t, c)
		wide := [][]int32{{l, p, ctrl}, {p, ctrl, l}, {ctrl, l, p}}
		narrow := [][]int32{{l, p}}

		r := newTIRun(t, c, fmt.Sprintf("ti-shrunk-%d", i), i)
		r.createOld(wide)
		r.produceGen1()
		t.Logf("%s: pausing broker %d (controller %d); %v -> %v", r, p, ctrl, wide, narrow)
		r.recreatePaused(p, narrow)
		if t.Failed() {
			return
		}

		ctrl, l, p = tiRoles(t, c)
		wide = [][]int32{{l, p, ctrl}, {p, ctrl, l}, {ctrl, l, p}}
		narrow = [][]int32{{l, p}}
		r = newTIRun(t, c, fmt.Sprintf("ti-grown-%d", i), i)
		r.createOld(narrow)
		r.produceGen1()
		t.Logf("%s: pausing broker %d (controller %d); %v -> %v", r, p, ctrl, narrow, wide)
		r.recreatePaused(p, wide)
	})
}

// TestTopicIdentityLogChecker checks the checker (no cluster): segment
// files are decoded record by record, identical logs compare equal, and a
// log that kept the deleted incarnation's records and continued with the
// new one's is reported at its first differing offset with both values.
func TestTopicIdentityLogChecker(t *testing.T) {
	batch := func(gen int, base int64, n int) []byte {
		var rs []recordbatch.Record
		for i := 0; i < n; i++ {
			rs = append(rs, recordbatch.Record{Value: []byte(fmt.Sprintf("gen%d-t-p0-%04d", gen, base+int64(i)))})
		}
		spec := recordbatch.NoProducer()
		spec.BaseOffset, spec.LeaderEpoch = base, 0
		return recordbatch.Build(spec, rs)
	}
	write := func(batches ...[]byte) *partitionLog {
		dir := t.TempDir()
		var data []byte
		for _, b := range batches {
			data = append(data, b...)
		}
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := readPartitionLog(dir)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	leader := write(batch(2, 0, 10), batch(2, 10, 10), batch(2, 20, 10))
	same := write(batch(2, 0, 10), batch(2, 10, 10), batch(2, 20, 10))
	spliced := write(batch(1, 0, 10), batch(1, 10, 10), batch(2, 20, 10))
	short := write(batch(2, 0, 10))

	if len(leader.batches) != 3 || leader.tail != 0 || nextOffset(leader.batches) != 30 {
		t.Fatalf("leader log read as %d batches, tail %d, next offset %d", len(leader.batches), leader.tail, nextOffset(leader.batches))
	}
	if r := leader.batches[1].records; len(r) != 10 || r[0].offset != 10 || r[0].value != "gen2-t-p0-0010" || isOld(r[0].value) {
		t.Errorf("second batch decoded as %+v", r)
	}
	if r := spliced.batches[0].records; len(r) != 10 || !isOld(r[9].value) || r[9].offset != 9 {
		t.Errorf("old batch decoded as %+v", r)
	}
	if d := firstDifference(same, leader); d != "" {
		t.Errorf("identical logs reported different: %s", d)
	}
	d := firstDifference(spliced, leader)
	for _, want := range []string{"first difference at offset 0", `"gen1-t-p0-0000"`, `"gen2-t-p0-0000"`} {
		if !strings.Contains(d, want) {
			t.Errorf("spliced log: %q does not say %s", d, want)
		}
	}
	if d := firstDifference(short, leader); !strings.Contains(d, "next offset 10") || !strings.Contains(d, "batch 10-19") {
		t.Errorf("short log: %q", d)
	}
}
