package integration

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// rawControlBatches reads a partition's .log files as they are on disk and
// lists the base offsets of their control batches (a torn tail of the
// active segment ends its file's scan). A file the cleaner swapped away
// meanwhile is an error: the caller reads again.
func rawControlBatches(dir string) ([]int64, error) {
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, p := range logs {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		for len(b) >= recordbatch.HeaderSize {
			h, err := recordbatch.ParseHeader(b)
			if err != nil || h.Size() < recordbatch.HeaderSize || h.Size() > len(b) {
				break
			}
			if h.IsControl() {
				out = append(out, h.BaseOffset)
			}
			b = b[h.Size():]
		}
	}
	slices.Sort(out)
	return out, nil
}

// readCommittedUpTo writes a sentinel record (non-transactional) to
// partition 0 of topic, then reads the partition from the start with a
// read_committed consumer until the sentinel: everything before it, in
// offset order, is what read_committed shows. It returns the values read
// (the sentinel left out) as key -> last value, and all of them.
func readCommittedUpTo(t *testing.T, ctx context.Context, addr, topic, sentinel string) (map[string]string, []string) {
	t.Helper()
	pr, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if err := pr.ProduceSync(ctx, &kgo.Record{Key: []byte(sentinel), Value: []byte(sentinel)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	latest := map[string]string{}
	var all []string
	last := int64(-1)
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s read_committed up to the sentinel: %v (last offset %d)", topic, err, last)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		found := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= last {
				t.Fatalf("offset %d after %d", r.Offset, last)
			}
			last = r.Offset
			if found {
				return
			}
			if string(r.Key) == sentinel {
				found = true
				return
			}
			latest[string(r.Key)] = string(r.Value)
			all = append(all, string(r.Value))
		})
		if found {
			return latest, all
		}
	}
}

// TestCompactionTxnMarkers: a compacted topic written by a franz-go
// transactional producer, committing and aborting transactions that
// rewrite the same keys. read_committed consumers see exactly the
// committed records before cleaning, and exactly the latest committed
// value of every key after; the cleaner removes the markers of the
// transactions whose records are all gone (aborted, or superseded) once
// delete.retention.ms passed after the cleaning that first found them
// alone (KIP-534's delete horizon), which a read of the segment files
// shows: only the last transaction's marker (whose records are the
// latest values, and which is the producer's last batch) stays. The last
// stable offset equals the high watermark, and the same holds after a
// clean restart and after kill -9.
func TestCompactionTxnMarkers(t *testing.T) {
	b := StartBroker(t, "log.cleaner.backoff.ms=100", "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1")
	ctx := testContext(t, 150*time.Second)
	const topic = "compacted-txn"
	configs := compactionTopicConfigs()
	segBytes, deletePolicy := "4096", "delete"
	configs["segment.bytes"] = &segBytes
	// Created with cleanup.policy=delete so nothing is cleaned before the
	// first read; compact is set once the uncleaned log was checked.
	configs["cleanup.policy"] = &deletePolicy
	if _, err := b.Admin(t).CreateTopic(ctx, 1, 1, configs, topic); err != nil {
		t.Fatal(err)
	}

	const txns, keys = 20, 10
	tx, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("compacted-txn"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	var committed []string
	latest := map[string]string{}
	for i := 0; i < txns; i++ {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		commit := i%2 == 0 || i == txns-1
		var vals []string
		for k := 0; k < keys; k++ {
			v := fmt.Sprintf("txn%d-key%d-commit=%v", i, k, commit)
			vals = append(vals, v)
			if err := tx.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("key%d", k)), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce in transaction %d: %v", i, err)
			}
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction %d: %v", i, err)
		}
		if commit {
			committed = append(committed, vals...)
			for k, v := range vals {
				latest[fmt.Sprintf("key%d", k)] = v
			}
		}
	}
	lastMarker := listEnd(t, ctx, b.Addr(), topic) - 1
	dir := b.PartitionDir(topic, 0)
	before, err := rawControlBatches(dir)
	if err != nil || len(before) != txns || before[len(before)-1] != lastMarker {
		t.Fatalf("markers on disk before cleaning: %v (%v), want %d ending at %d", before, err, txns, lastMarker)
	}
	_, all := readCommittedUpTo(t, ctx, b.Addr(), topic, "sentinel-0")
	if !slices.Equal(all, committed) {
		t.Fatalf("read_committed before cleaning read %d values, want the %d committed (first difference: %s)", len(all), len(committed), firstDiff(all, committed))
	}

	compact := "compact"
	alter, err := b.Admin(t).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: &compact}}, topic)
	if err == nil {
		err = alter[0].Err
	}
	if err != nil {
		t.Fatalf("set cleanup.policy=compact: %v", err)
	}

	// A plain record every segment.ms rolls the active segment, so
	// cleanings keep coming: the first drops the transactions' records,
	// the next gives their markers a delete horizon (1 s on), a later one
	// removes them.
	pr, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	start := time.Now()
	var markers []int64
	checkFor(t, 60*time.Second, 1100*time.Millisecond, func() error {
		if err := pr.ProduceSync(ctx, &kgo.Record{Key: []byte("filler"), Value: []byte(time.Now().String())}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		markers, err = rawControlBatches(dir)
		if err != nil {
			return err
		}
		if !slices.Equal(markers, []int64{lastMarker}) {
			return fmt.Errorf("markers on disk %v, want only the last transaction's at %d", markers, lastMarker)
		}
		return nil
	})
	t.Logf("markers on disk: %d before cleaning, %v after %v", len(before), markers, time.Since(start).Round(time.Millisecond))

	check := func(when string, sentinel string) {
		t.Helper()
		got, _ := readCommittedUpTo(t, ctx, b.Addr(), topic, sentinel)
		for k, v := range latest {
			if got[k] != v {
				t.Fatalf("%s: %s reads %q, latest committed %q", when, k, got[k], v)
			}
		}
		for k, v := range got {
			if strings.HasPrefix(k, "key") && latest[k] != v {
				t.Fatalf("%s: %s reads %q, not a latest committed value", when, k, v)
			}
		}
		_, all := readCommittedUpTo(t, ctx, b.Addr(), topic, sentinel+"-again")
		for _, v := range all {
			if strings.Contains(v, "commit=false") {
				t.Fatalf("%s: read_committed reads the aborted value %q", when, v)
			}
		}
		// read_committed's end (the last stable offset) is the high
		// watermark: no transaction is open again.
		checkFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			adm := b.Admin(t)
			end, err := adm.ListEndOffsets(ctx, topic)
			if err != nil {
				return err
			}
			stable, err := adm.ListCommittedOffsets(ctx, topic)
			if err != nil {
				return err
			}
			e, _ := end.Lookup(topic, 0)
			s, _ := stable.Lookup(topic, 0)
			if e.Err != nil || s.Err != nil || e.Offset != s.Offset {
				return fmt.Errorf("%s: high watermark %d (%v), last stable offset %d (%v)", when, e.Offset, e.Err, s.Offset, s.Err)
			}
			return nil
		})
		t.Logf("%s: read_committed reads the latest committed value of %d keys (%v)", when, len(latest), slices.Sorted(maps.Keys(got)))
	}
	check("after cleaning", "sentinel-1")

	b.Restart()
	ctx = testContext(t, 60*time.Second)
	check("after a restart", "sentinel-2")

	b.Kill()
	b.Restart()
	ctx = testContext(t, 60*time.Second)
	check("after kill -9", "sentinel-3")
	if m, err := rawControlBatches(dir); err != nil || len(m) == 0 || m[0] != lastMarker {
		t.Fatalf("markers on disk after the restarts: %v (%v)", m, err)
	}
}
