package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReplicationGroupOffsetsFailover (issue 5, scenario 7): a consumer
// group commits its offsets on an RF=3 topic; __consumer_offsets is RF=3
// too (offsets.topic.replication.factor=3). The broker leading the
// group's __consumer_offsets partition - its coordinator - gets kill -9
// while an idempotent producer keeps writing. Another broker becomes
// coordinator with the same committed offsets; a new member of the group
// resumes exactly there (nothing consumed twice, nothing skipped), and the
// producer that retried across the failover wrote no duplicates.
func TestReplicationGroupOffsetsFailover(t *testing.T) {
	const (
		topic      = "grp"
		group      = "grp-g"
		partitions = 3
		session    = 2 * time.Second
	)
	c := startCluster(t, clusterOpts{brokers: 3, session: session, replicated: true, lag: 1500 * time.Millisecond})
	c.createTopic(topic, partitions, nil)
	first := c.client()
	firstAcked := produceKeyed(t, first, topic, "g1", 300)

	// First member: consume everything, commit, leave.
	cons := c.client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond))
	ctx := testContext(t, 60*time.Second)
	seen := map[string]bool{}
	for len(seen) < len(firstAcked) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("first member consumed %d of %d records", len(seen), len(firstAcked))
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	cons.Close()

	adm := c.admin()
	committed := fetchCommitted(t, adm, group)
	total := int64(0)
	for _, o := range committed {
		total += o
	}
	if total != 300 {
		t.Fatalf("committed offsets %v sum to %d, want 300", committed, total)
	}
	// The offsets topic is RF=3 with a full ISR.
	c.waitSettled(20*time.Second, "__consumer_offsets", 3, 3)
	coord := groupCoordinator(t, c, group, -1)
	t.Logf("group %s committed %v; coordinator broker %d (controller %d)", group, committed, coord, c.controller())

	// Kill the coordinator while an idempotent producer keeps writing.
	load := startKgoLoad(c.client(), topic, "g2", -1, 3*time.Millisecond)
	load.waitAcked(t, 200, 30*time.Second)
	c.broker(coord).Kill()
	killed := time.Now()
	newCoord := groupCoordinator(t, c, group, coord)
	survivor := kadm.NewClient(c.client())
	t.Logf("broker %d coordinates %s %v after the kill", newCoord, group, time.Since(killed).Round(time.Millisecond))
	if got := fetchCommitted(t, survivor, group); fmt.Sprint(got) != fmt.Sprint(committed) {
		t.Errorf("committed offsets after the failover %v, before %v", got, committed)
	}
	load.waitAcked(t, 200, 30*time.Second)
	load.stop(t)
	acked, failed := load.log.snapshot()
	if len(failed) > 0 {
		t.Errorf("%d records failed: %s", len(failed), firstOf(failed))
	}

	// A new member resumes from the committed offsets: it gets exactly the
	// records produced after the commit.
	cons2 := c.client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond))
	firstOffset := map[int32]int64{}
	got := map[string]int{}
	n := 0
	for n < len(acked) {
		fs := cons2.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("second member consumed %d of %d records", n, len(acked))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := firstOffset[r.Partition]; !ok {
				firstOffset[r.Partition] = r.Offset
			}
			got[string(r.Value)]++
			n++
		})
	}
	for p, off := range firstOffset {
		if off != committed[p] {
			t.Errorf("partition %d: the new member started at %d, committed %d", p, off, committed[p])
		}
	}
	for v, k := range got {
		if strings.HasPrefix(v, "g1-") {
			t.Errorf("the new member re-read %s, consumed and committed before", v)
		}
		if k > 1 {
			t.Errorf("the new member read %s %d times", v, k)
		}
	}
	for v := range acked {
		if got[v] == 0 {
			t.Errorf("the new member never read acknowledged %s", v)
		}
	}
	for v, a := range firstAcked {
		acked[v] = a
	}
	checkReadBack(t, c.readTopic(topic, 60*time.Second), acked)
}

// produceKeyed produces n keyed values "<prefix>-<i>" with acks=all.
func produceKeyed(t *testing.T, cl *kgo.Client, topic, prefix string, n int) map[string]ackPos {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	var rs []*kgo.Record
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("%s-%04d", prefix, i)
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)})
	}
	out := map[string]ackPos{}
	for _, r := range cl.ProduceSync(ctx, rs...) {
		if r.Err != nil {
			t.Fatalf("producing %s: %v", r.Record.Value, r.Err)
		}
		out[string(r.Record.Value)] = ackPos{r.Record.Partition, r.Record.Offset}
	}
	return out
}

// fetchCommitted returns the group's committed offsets per partition,
// retrying while the coordinator moves.
func fetchCommitted(t *testing.T, adm *kadm.Client, group string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		ctx := testContext(t, 5*time.Second)
		resp, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return err
		}
		clear(out)
		resp.Each(func(o kadm.OffsetResponse) { out[o.Partition] = o.At })
		return nil
	})
	return out
}

// groupCoordinator returns the group's coordinator, waiting until it is
// not `not`. Each try uses a fresh client: kgo keeps a coordinator it
// cannot dial cached.
func groupCoordinator(t *testing.T, c *testCluster, group string, not int32) int32 {
	t.Helper()
	var coord int32 = -1
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.RetryTimeout(3*time.Second))
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx := testContext(t, 5*time.Second)
		gs, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		g, ok := gs[group]
		if !ok || g.Err != nil {
			return fmt.Errorf("describe group %s: %v", group, g.Err)
		}
		if g.Coordinator.NodeID == not {
			return fmt.Errorf("coordinator still %d", not)
		}
		coord = g.Coordinator.NodeID
		return nil
	})
	return coord
}
