package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// compactionModel is what a compacted topic must end up holding: the
// latest value of every key, deleted keys absent.
type compactionModel struct {
	latest  map[string]string
	deleted map[string]bool
}

func (m *compactionModel) put(key string, value []byte) {
	if value == nil {
		delete(m.latest, key)
		m.deleted[key] = true
		return
	}
	m.latest[key] = string(value)
	delete(m.deleted, key)
}

// cleanerCheckpoint reads a partition's offset from the broker's
// cleaner-offset-checkpoint (-1 when absent).
func cleanerCheckpoint(t testing.TB, dataDir, topic string, partition int) int64 {
	b, err := os.ReadFile(filepath.Join(dataDir, "cleaner-offset-checkpoint"))
	if err != nil {
		return -1
	}
	lines := strings.Split(string(b), "\n")
	for _, l := range lines[min(2, len(lines)):] {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == topic && f[1] == strconv.Itoa(partition) {
			n, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("cleaner checkpoint line %q", l)
			}
			return n
		}
	}
	return -1
}

type readRecord struct {
	offset int64
	key    string
	value  []byte
}

// readAll consumes partition 0 of topic from the start up to its end
// offset, checking that offsets strictly increase.
func readAll(t testing.TB, ctx context.Context, addr, topic string) []readRecord {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	end := listEnd(t, ctx, addr, topic)
	var out []readRecord
	last := int64(-1)
	for last < end-1 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: at offset %d of %d: %v", topic, last, end, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= last {
				t.Fatalf("offset %d after %d", r.Offset, last)
			}
			last = r.Offset
			out = append(out, readRecord{r.Offset, string(r.Key), r.Value})
		})
	}
	return out
}

func listEnd(t testing.TB, ctx context.Context, addr, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var end int64 = -1
	checkFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		o, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		lo, ok := o.Lookup(topic, 0)
		if !ok || lo.Err != nil {
			return fmt.Errorf("end offset of %s: %v", topic, lo.Err)
		}
		end = lo.Offset
		return nil
	})
	return end
}

// checkCompacted compares what a read from the start gives with the
// model: every live key exactly once with its latest value (when
// exactOnce: the whole range was cleaned), no deleted key (when
// tombstonesGone).
func checkCompacted(recs []readRecord, m *compactionModel, keyPrefix string, exactOnce, tombstonesGone bool) error {
	seen := map[string]int{}
	final := map[string]string{}
	for _, r := range recs {
		if !strings.HasPrefix(r.key, keyPrefix) {
			continue
		}
		seen[r.key]++
		if r.value == nil {
			if tombstonesGone {
				return fmt.Errorf("tombstone of %s at offset %d after delete.retention.ms", r.key, r.offset)
			}
			delete(final, r.key)
			continue
		}
		final[r.key] = string(r.value)
	}
	for k, v := range m.latest {
		if !strings.HasPrefix(k, keyPrefix) {
			continue
		}
		if final[k] != v {
			return fmt.Errorf("key %s reads %q, latest written %q", k, final[k], v)
		}
		if exactOnce && seen[k] != 1 {
			return fmt.Errorf("key %s read %d times", k, seen[k])
		}
	}
	for k := range m.deleted {
		if _, ok := final[k]; ok {
			return fmt.Errorf("deleted key %s reads %q", k, final[k])
		}
		if tombstonesGone && seen[k] > 0 {
			return fmt.Errorf("deleted key %s still read %d times", k, seen[k])
		}
	}
	return nil
}

// TestCompactionEmbedded: 100,000 keyed records over 1,000 keys on a
// compacted topic (franz-go), tombstones from franz-go and from kcat -Z,
// small segments that roll by size and by segment.ms. Once the cleaner
// checkpoint passes the data, a read from the start gives exactly one
// record per live key, its latest value, no deleted key after
// delete.retention.ms (the first cleaning keeps the tombstones and gives
// their batches a delete horizon, KIP-534; a cleaning after it drops
// them), offsets increasing; the same after a broker restart.
func TestCompactionEmbedded(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed")
	}
	b := StartBroker(t, "log.cleaner.backoff.ms=100")
	ctx := testContext(t, 180*time.Second)
	const topic = "compacted"
	if _, err := b.Admin(t).CreateTopic(ctx, 1, 1, compactionTopicConfigs(), topic); err != nil {
		t.Fatal(err)
	}
	m := &compactionModel{latest: map[string]string{}, deleted: map[string]bool{}}
	cl := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	writeCompactionWorkload(t, ctx, cl, b.Addr(), topic, m)
	dataEnd := listEnd(t, ctx, b.Addr(), topic)
	t.Logf("wrote %d records, log end %d", compactionRecords+10, dataEnd)

	// The active segment is never cleaned: a record after segment.ms
	// rolls it. A filler key every segment.ms keeps rolling, so later
	// cleanings come and tombstones reach the delete horizon.
	filler := 0
	fill := func() {
		filler++
		value := []byte(strconv.Itoa(filler))
		m.put("filler", value)
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("filler"), Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	checkFor(t, 60*time.Second, 1100*time.Millisecond, func() error {
		fill()
		if c := cleanerCheckpoint(t, b.DataDir(), topic, 0); c < dataEnd {
			return fmt.Errorf("cleaner checkpoint %d, data up to %d", c, dataEnd)
		}
		return nil
	})
	t.Logf("cleaner checkpoint passed the data after %v", time.Since(start).Round(time.Millisecond))
	recs := readAll(t, ctx, b.Addr(), topic)
	if err := checkCompacted(recs, m, "key-", true, false); err != nil {
		t.Fatalf("after the first cleaning: %v", err)
	}
	t.Logf("read %d records after cleaning (%d written)", len(recs), dataEnd)
	// librdkafka reads the cleaned log too: holes, rewritten batches and
	// batches carrying a delete horizon (the tombstones kept so far). The
	// cleaner may run again in between (the filler, tombstones past their
	// horizon), so kcat must read every live record franz-go read, and
	// nothing franz-go did not.
	kcatRecs, franzRecs := kcatOffsets(t, b.Addr(), topic), franzOffsets(recs)
	for line := range kcatRecs {
		if !franzRecs[line] {
			t.Fatalf("kcat reads %q, which franz-go did not", line)
		}
	}
	for _, r := range recs {
		if r.value != nil && strings.HasPrefix(r.key, "key-") && !kcatRecs[fmt.Sprintf("%d %s %d", r.offset, r.key, len(r.value))] {
			t.Fatalf("kcat misses offset %d (key %s)", r.offset, r.key)
		}
	}
	t.Logf("kcat read %d records", len(kcatRecs))

	checkFor(t, 60*time.Second, 1100*time.Millisecond, func() error {
		fill()
		return checkCompacted(readAll(t, ctx, b.Addr(), topic), m, "key-", true, true)
	})
	t.Logf("tombstones gone after %v", time.Since(start).Round(time.Millisecond))

	b.Restart()
	ctx = testContext(t, 60*time.Second)
	recs = readAll(t, ctx, b.Addr(), topic)
	if err := checkCompacted(recs, m, "", false, true); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if err := checkCompacted(recs, m, "key-", true, true); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// compactionRecords and compactionKeys size the workload: 100,000 keyed
// records over 1,000 keys.
const compactionRecords, compactionKeys = 100_000, 1000

// compactionTopicConfigs make a compacted topic that rolls by size and
// every second, is cleaned whenever anything is dirty, and keeps
// tombstones one second after a cleaning.
func compactionTopicConfigs() map[string]*string {
	configs := map[string]*string{}
	for k, v := range map[string]string{"cleanup.policy": "compact", "segment.bytes": "131072", "segment.ms": "1000",
		"min.cleanable.dirty.ratio": "0", "delete.retention.ms": "1000"} {
		configs[k] = &v
	}
	return configs
}

// writeCompactionWorkload writes the keyed records with franz-go
// (tombstones for keys written at i%97==0, most of them written again
// later, and for keys 0..49 at the end) and tombstones for keys 50..59
// with kcat -Z (an empty value sent as null), recording them in m.
func writeCompactionWorkload(t testing.TB, ctx context.Context, cl *kgo.Client, bootstrap, topic string, m *compactionModel) {
	t.Helper()
	var batch []*kgo.Record
	for i := 0; i < compactionRecords; i++ {
		key := fmt.Sprintf("key-%04d", i%compactionKeys)
		value := []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%40)))
		if i%97 == 0 || (i >= compactionRecords-compactionKeys && i%compactionKeys < 50) {
			value = nil
		}
		m.put(key, value)
		batch = append(batch, &kgo.Record{Key: []byte(key), Value: value})
		if len(batch) == 5000 {
			if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	var in strings.Builder
	for k := 50; k < 60; k++ {
		key := fmt.Sprintf("key-%04d", k)
		fmt.Fprintf(&in, "%s:\n", key)
		m.put(key, nil)
	}
	cmd := exec.Command("kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-K", ":", "-Z", "-X", "acks=all")
	cmd.Stdin = strings.NewReader(in.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat -Z: %v: %s", err, out)
	}
}

// TestCompactionCluster: the same workload on an RF 3 compacted topic of
// a 3-broker cluster, one follower down while it is written. Every
// replica cleans its own log (each broker's cleaner checkpoint passes the
// data); the stopped follower comes back and copies the cleaned leader,
// holes and all, and cleans on; after tombstones are gone on the leader,
// the leader is killed (kill -9) and then the other follower too, so the
// follower that copied the cleaned log leads, and a read from the start
// gives every live key once with its latest value, no deleted key; the
// same after a restart of every broker.
func TestCompactionCluster(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed")
	}
	c := startCluster(t, clusterOpts{brokers: 3, chroot: "/kbroker/compaction", replicated: true, lag: 10 * time.Second,
		extra: []string{"log.cleaner.backoff.ms=100", "min.insync.replicas=1"}})
	const topic = "compacted-rf3"
	states := c.createTopic(topic, 1, compactionTopicConfigs())
	leader := states[0].Leader
	late := otherThan(3, leader)[0]
	other := otherThan(3, leader, late)[0]
	c.broker(late).Stop()
	ctx := testContext(t, 300*time.Second)

	m := &compactionModel{latest: map[string]string{}, deleted: map[string]bool{}}
	cl := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	writeCompactionWorkload(t, ctx, cl, c.broker(leader).Addr(), topic, m)
	dataEnd := listEnd(t, ctx, c.broker(leader).Addr(), topic)
	filler := 0
	fill := func() {
		filler++
		value := []byte(strconv.Itoa(filler))
		m.put("filler", value)
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("filler"), Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cleanedOn := func(ids ...int32) func() error {
		return func() error {
			fill()
			for _, id := range ids {
				if ck := cleanerCheckpoint(t, c.broker(id).DataDir(), topic, 0); ck < dataEnd {
					return fmt.Errorf("broker %d: cleaner checkpoint %d, data up to %d", id, ck, dataEnd)
				}
			}
			return nil
		}
	}
	start := time.Now()
	checkFor(t, 90*time.Second, 1100*time.Millisecond, cleanedOn(leader, other))
	t.Logf("leader %d and follower %d cleaned past %d in %v", leader, other, dataEnd, time.Since(start).Round(time.Millisecond))
	checkFor(t, 90*time.Second, 1100*time.Millisecond, func() error {
		fill()
		return checkCompacted(readAll(t, ctx, c.broker(leader).Addr(), topic), m, "key-", true, true)
	})
	t.Logf("tombstones gone on the leader after %v", time.Since(start).Round(time.Millisecond))

	c.broker(late).Restart()
	c.waitSettled(60*time.Second, topic, 1, 3)
	checkFor(t, 90*time.Second, 1100*time.Millisecond, cleanedOn(late))
	t.Logf("follower %d copied the cleaned leader and cleaned its log", late)

	c.broker(leader).Kill()
	c.broker(other).Kill()
	c.waitPartState(60*time.Second, topic, 0, func(s zkPartState) error {
		if s.Leader != late {
			return fmt.Errorf("leader %d, want %d", s.Leader, late)
		}
		return nil
	})
	addr := c.broker(late).Addr()
	var recs []readRecord
	checkFor(t, 60*time.Second, 200*time.Millisecond, func() error {
		recs = readAll(t, ctx, addr, topic)
		return checkCompacted(recs, m, "", false, true)
	})
	if err := checkCompacted(recs, m, "key-", true, true); err != nil {
		t.Fatalf("on broker %d after the others died: %v", late, err)
	}

	for _, id := range []int32{leader, other} {
		c.waitUnregistered(id)
		c.broker(id).Restart()
	}
	c.broker(late).Restart()
	c.waitSettled(90*time.Second, topic, 1, 3)
	recs = readAll(t, ctx, c.broker(late).Addr(), topic)
	if err := checkCompacted(recs, m, "", false, true); err != nil {
		t.Fatalf("after restarting every broker: %v", err)
	}
	if err := checkCompacted(recs, m, "key-", true, true); err != nil {
		t.Fatalf("after restarting every broker: %v", err)
	}
}

// kcatOffsets reads partition 0 of topic from the start to its end with
// kcat: "offset key value-length" per record (-1 for a null).
func kcatOffsets(t testing.TB, addr, topic string) map[string]bool {
	t.Helper()
	out, err := exec.Command("kcat", "-C", "-b", addr, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
		"-f", "%o %k %S\\n").Output()
	if err != nil {
		t.Fatalf("kcat -C: %v", err)
	}
	set := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		set[l] = true
	}
	return set
}

// franzOffsets is kcatOffsets's lines for records read with franz-go.
func franzOffsets(recs []readRecord) map[string]bool {
	set := map[string]bool{}
	for _, r := range recs {
		n := len(r.value)
		if r.value == nil {
			n = -1
		}
		set[fmt.Sprintf("%d %s %d", r.offset, r.key, n)] = true
	}
	return set
}

// TestCompactionKilledWhileCleaning kills the broker (SIGKILL, from inside
// its own cleaner: KBROKER_TEST_CLEANER_KILL_AT) at every point of the
// cleaner's swap protocol in turn, in the first cleaning (min.compaction.lag.ms
// makes it the first segment's alone). Each time the restarted broker
// reads every key's latest value, no deleted key, offsets increasing (it
// may have cleaned again by then), and once its cleaner has caught up,
// exactly one record per live key. That the log is then exactly the old
// or the new one is TestCleanCrashAtEveryPoint's (segment), in process.
func TestCompactionKilledWhileCleaning(t *testing.T) {
	const topic = "killed"
	killed := 0
	for k := 0; ; k++ {
		if k > 100 {
			t.Fatal("the cleaning never got past 100 points")
		}
		var died bool
		t.Run(fmt.Sprintf("point%d", k), func(t *testing.T) {
			t.Setenv("KBROKER_TEST_CLEANER_KILL_AT", strconv.Itoa(k))
			b := StartBroker(t, "log.cleaner.backoff.ms=50")
			ctx := testContext(t, 90*time.Second)
			configs := compactionTopicConfigs()
			big, lag, roll := "1048576", "3000", "300"
			configs["segment.bytes"], configs["min.compaction.lag.ms"], configs["segment.ms"] = &big, &lag, &roll
			if _, err := b.Admin(t).CreateTopic(ctx, 1, 1, configs, topic); err != nil {
				t.Fatal(err)
			}
			m := &compactionModel{latest: map[string]string{}, deleted: map[string]bool{}}
			cl := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.RecordDeliveryTimeout(20*time.Second))
			// Three bursts a segment.ms apart: one cleaning of one group
			// of segments, which min.compaction.lag.ms holds back until
			// everything is written.
			written := 0
			for burst := 0; burst < 4; burst++ {
				var recs []*kgo.Record
				n := 1500
				if burst == 3 {
					n = 1 // rolls the third burst's segment
				}
				for i := 0; i < n; i++ {
					j := burst*1500 + i
					key := fmt.Sprintf("key-%03d", j%100)
					if burst == 3 {
						key = "filler" // stays in the active segment, never cleaned
					}
					value := []byte(fmt.Sprintf("value-%d", j))
					if j%37 == 0 || (burst == 2 && i >= 1400 && j%100 < 10) {
						value = nil
					}
					m.put(key, value)
					recs = append(recs, &kgo.Record{Key: []byte(key), Value: value})
				}
				if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
				written += n
				if burst < 3 {
					time.Sleep(350 * time.Millisecond)
				}
			}
			cl.Close()
			deadline := time.Now().Add(15 * time.Second)
			for b.Running() && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if b.Running() {
				if c := cleanerCheckpoint(t, b.DataDir(), topic, 0); c < 0 {
					t.Fatalf("neither killed nor cleaned within 15 s")
				}
				return // the cleaning has fewer points than k
			}
			died = true
			t.Setenv("KBROKER_TEST_CLEANER_KILL_AT", "")
			b.Restart()
			recs := readAll(t, ctx, b.Addr(), topic)
			if err := checkCompacted(recs, m, "key-", false, false); err != nil {
				t.Fatalf("after the kill at point %d: %v", k, err)
			}
			t.Logf("killed at point %d; the restarted broker reads %d records of %d written", k, len(recs), written)
			checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
				if c := cleanerCheckpoint(t, b.DataDir(), topic, 0); c < int64(written-1) {
					return fmt.Errorf("cleaner checkpoint %d", c)
				}
				return nil
			})
			if err := checkCompacted(readAll(t, ctx, b.Addr(), topic), m, "key-", true, false); err != nil {
				t.Fatalf("after the kill at point %d and a cleaning: %v", k, err)
			}
		})
		if t.Failed() {
			return
		}
		if !died {
			t.Logf("the broker was killed at each of %d points of the cleaning", killed)
			if killed == 0 {
				t.Fatal("never killed")
			}
			return
		}
		killed++
	}
}
