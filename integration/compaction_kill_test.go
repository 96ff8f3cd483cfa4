package integration

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// cleaningFiles lists the files of a cleaning in progress in a partition
// directory: the cleaner's output (.cleaned), a swap being installed
// (.swap, .swapend) or old segments being deleted (.deleted).
func cleaningFiles(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	var out []string
	for _, e := range entries {
		for _, suffix := range []string{".cleaned", ".swap", ".swapend", ".deleted"} {
			if strings.HasSuffix(e.Name(), suffix) {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// TestCompactionLeaderKilledWhileCleaning: the 100,000-record workload on
// an RF 3 compacted topic whose brokers' cleaners are throttled
// (log.cleaner.io.max.bytes.per.second, so a cleaning takes seconds). The
// leader is killed (kill -9) while a cleaning's files are in its partition
// directory; a follower takes over and serves every key's latest value,
// no deleted key, offsets increasing. The killed broker restarts, its log
// recovers (no cleaning file left), it catches up; then the two others are
// killed so that it leads alone, and it serves the same. With every broker
// back, its cleaner finishes the job: each live key once, tombstones gone.
func TestCompactionLeaderKilledWhileCleaning(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed")
	}
	c := startCluster(t, clusterOpts{brokers: 3, chroot: "/kbroker/compaction-kill", replicated: true, lag: 10 * time.Second,
		extra: []string{"log.cleaner.backoff.ms=100", "log.cleaner.io.max.bytes.per.second=2000000"}})
	const topic = "compacted-kill"
	states := c.createTopic(topic, 1, compactionTopicConfigs())
	leader := states[0].Leader
	ctx := testContext(t, 300*time.Second)

	m := &compactionModel{latest: map[string]string{}, deleted: map[string]bool{}}
	cl := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(60*time.Second))
	writeCompactionWorkload(t, ctx, cl, c.broker(leader).Addr(), topic, m)
	filler := 0
	fill := func() {
		filler++
		value := []byte(strconv.Itoa(filler))
		m.put("filler", value)
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("filler"), Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	dir := c.broker(leader).PartitionDir(topic, 0)
	var inProgress []string
	last := time.Now()
	checkFor(t, 60*time.Second, time.Millisecond, func() error {
		if inProgress = cleaningFiles(t, dir); len(inProgress) > 0 {
			return nil
		}
		if time.Since(last) > time.Second {
			fill() // more dirty data, more cleanings
			last = time.Now()
		}
		return fmt.Errorf("no cleaning in progress on broker %d", leader)
	})
	c.broker(leader).Kill()
	t.Logf("killed leader %d while it was cleaning: %v in its partition directory", leader, inProgress)

	read := func(id int32, exactOnce, tombstonesGone bool) []readRecord {
		var recs []readRecord
		checkFor(t, 60*time.Second, 200*time.Millisecond, func() error {
			recs = readAll(t, ctx, c.broker(id).Addr(), topic)
			return checkCompacted(recs, m, "", exactOnce, tombstonesGone)
		})
		return recs
	}
	st := c.waitPartState(60*time.Second, topic, 0, func(s zkPartState) error {
		if s.Leader <= 0 || s.Leader == leader {
			return fmt.Errorf("leader %d", s.Leader)
		}
		return nil
	})
	recs := read(st.Leader, false, false)
	t.Logf("new leader %d serves %d records: every latest value, no deleted key", st.Leader, len(recs))

	c.waitUnregistered(leader)
	c.broker(leader).Restart()
	// Its replica opens (and recovers) once the controller's view names
	// it; back in the ISR, it has.
	c.waitSettled(90*time.Second, topic, 1, 3)
	out, err := os.ReadFile(c.broker(leader).LogPath())
	if err != nil {
		t.Fatal(err)
	}
	restarted := string(out[strings.LastIndex(string(out), "\n=== ")+1:])
	removed := func(name string) bool {
		for _, l := range strings.Split(restarted, "\n") {
			if strings.Contains(l, `msg="removing stray file"`) && strings.HasSuffix(l, " file="+name) {
				return true
			}
		}
		return false
	}
	for _, name := range inProgress {
		if strings.HasSuffix(name, ".cleaned") && !removed(name) {
			t.Fatalf("broker %d's restart did not remove the interrupted cleaning's %s", leader, name)
		}
	}
	others := otherThan(3, leader)
	for _, id := range others {
		c.broker(id).Kill()
	}
	c.waitPartState(60*time.Second, topic, 0, func(s zkPartState) error {
		if s.Leader != leader {
			return fmt.Errorf("leader %d, want %d", s.Leader, leader)
		}
		return nil
	})
	recs = read(leader, false, false)
	t.Logf("restarted broker %d leads alone and serves %d records: every latest value, no deleted key", leader, len(recs))

	for _, id := range others {
		c.waitUnregistered(id)
		c.broker(id).Restart()
	}
	c.waitSettled(90*time.Second, topic, 1, 3)
	start := time.Now()
	checkFor(t, 120*time.Second, 1100*time.Millisecond, func() error {
		fill()
		return checkCompacted(readAll(t, ctx, c.broker(leader).Addr(), topic), m, "key-", true, true)
	})
	t.Logf("every live key once and tombstones gone on broker %d %v after every broker was back", leader, time.Since(start).Round(time.Millisecond))
}
