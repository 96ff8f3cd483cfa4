package coordinator

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// dumpGroups renders every loaded group's replayable state: what a load
// rebuilds from the log (metadata, membership, offsets), one entry per group.
func dumpGroups(c *Coordinator) map[string]string {
	groups, _ := c.allGroups()
	out := map[string]string{}
	for _, g := range groups {
		g.mu.Lock()
		var b strings.Builder
		fmt.Fprintf(&b, "p=%d state=%s gen=%d type=%q proto=%q leader=%q meta=%x\n",
			g.partition, g.state, g.generation, g.protocolType, g.protocol, g.leader, g.storedMeta)
		for _, m := range g.membersInOrder() {
			inst := "<nil>"
			if m.instanceID != nil {
				inst = *m.instanceID
			}
			fmt.Fprintf(&b, "  member %s inst=%s client=%s session=%v rebalance=%v assignment=%x\n",
				m.id, inst, m.clientID, m.sessionTimeout, m.rebalanceTimeout, m.assignment)
		}
		for _, tp := range sortedPartitions(g.offsets) {
			o := g.offsets[tp]
			fmt.Fprintf(&b, "  offset %s/%d=%d epoch=%d md=%q at=%d exp=%v app=%d\n", tp.topic, tp.partition,
				o.offset, o.leaderEpoch, o.metadata, o.commitTime.UnixMilli(), o.expireTime, o.appendOffset)
		}
		pids := make([]int64, 0, len(g.pendingTxn))
		for pid := range g.pendingTxn {
			pids = append(pids, pid)
		}
		sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
		for _, pid := range pids {
			txn := g.pendingTxn[pid]
			fmt.Fprintf(&b, "  txn %d first=%d\n", pid, txn.first)
			for _, tp := range sortedPartitions(txn.offsets) {
				o := txn.offsets[tp]
				fmt.Fprintf(&b, "    pending %s/%d=%d epoch=%d md=%q at=%d app=%d\n", tp.topic, tp.partition,
					o.offset, o.leaderEpoch, o.metadata, o.commitTime.UnixMilli(), o.appendOffset)
			}
		}
		out[g.id] = b.String()
		g.mu.Unlock()
	}
	return out
}

func diffDumps(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	ids := map[string]bool{}
	for id := range got {
		ids[id] = true
	}
	for id := range want {
		ids[id] = true
	}
	var sorted []string
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	for _, id := range sorted {
		if got[id] != want[id] {
			t.Errorf("%s: group %q differs:\n got: %s\nwant: %s", what, id, got[id], want[id])
		}
	}
}

// liveKeys counts the records a snapshot of partition p would write.
func liveKeys(c *Coordinator, p int32) int64 {
	groups, _ := c.allGroups()
	var n int64
	for _, g := range groups {
		g.mu.Lock()
		if g.partition == p {
			n += int64(len(g.offsets))
			if g.storedMeta != nil {
				n++
			}
		}
		g.mu.Unlock()
	}
	return n
}

// waitSnapshotsIdle waits until no snapshot is scheduled or running.
func waitSnapshotsIdle(t *testing.T, c *Coordinator) {
	t.Helper()
	checkFor(t, 10*time.Second, func() error {
		for p := int32(0); p < c.cfg.NumPartitions; p++ {
			if c.partLog(p).running.Load() {
				return fmt.Errorf("snapshot of partition %d running", p)
			}
		}
		return nil
	})
}

// restartedDumps loads two fresh coordinators, one on log (truncated by
// snapshots) and one on its full history, and returns their states.
func restartedDumps(t *testing.T, cfg Config, log *memLog) (truncated, full map[string]string) {
	t.Helper()
	cfg.SnapshotBytes = -1 // the loads must not snapshot
	c1 := startCoordinator(t, cfg, log)
	c2 := startCoordinator(t, cfg, log.fullHistory())
	return dumpGroups(c1), dumpGroups(c2)
}

// groupHistory writes the history both the snapshot and the compaction
// tests replay: a consumer group with members and metadata committing 200
// times, simple groups committing 200 rounds, a group whose offsets are
// partly deleted (g1's t/1), and a deleted group ("doomed", whose
// tombstones must not let it come back). It returns the simple groups,
// "doomed" last.
func groupHistory(t *testing.T, c *Coordinator) []string {
	t.Helper()
	joins, _ := stableGroup(t, c, "consumers", 2, 10*time.Second, "t")
	var member string
	var gen int32
	for id, j := range joins {
		member, gen = id, j.Generation
	}
	simple := []string{"g0", "g1", "g2", "g3", "g4", "g5", "doomed"}
	for round := int64(0); round < 200; round++ {
		for _, g := range simple {
			resp := c.OffsetCommit(ctxT(t), commitReq(2, g, "", -1, "t", map[int32]int64{0: round, 1: round * 2, 2: round * 3}))
			if codes := commitCodes(resp); codes[0] != 3 {
				t.Fatalf("commit %s round %d: %v", g, round, codes)
			}
		}
		resp := c.OffsetCommit(ctxT(t), commitReq(8, "consumers", member, gen, "t", map[int32]int64{0: round, 5: round}))
		if codes := commitCodes(resp); codes[0] != 2 {
			t.Fatalf("member commit round %d: %v", round, codes)
		}
	}
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"doomed"}
	if r := c.DeleteGroups(ctxT(t), dg); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete group: %d", r.Groups[0].ErrorCode)
	}
	del := kmsg.NewPtrOffsetDeleteRequest()
	del.Group = "g1"
	del.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 1}}}}
	if r := c.OffsetDelete(ctxT(t), del); r.ErrorCode != 0 {
		t.Fatalf("offset delete: %d", r.ErrorCode)
	}
	return simple
}

func TestSnapshotBoundsLogAndRestores(t *testing.T) {
	cfg := testConfig()
	cfg.SnapshotBytes = 4096
	log := newMemLog()
	c := New(cfg, log, quietLogger())
	for p := int32(0); p < cfg.NumPartitions; p++ {
		if err := c.BecomeLeader(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}

	simple := groupHistory(t, c)
	// More traffic, so that snapshots run after the deletions.
	for round := int64(200); round < 260; round++ {
		for _, g := range simple[:len(simple)-1] {
			c.OffsetCommit(ctxT(t), commitReq(2, g, "", -1, "t", map[int32]int64{0: round}))
		}
	}
	waitSnapshotsIdle(t, c)

	var totalWritten int64
	for p := int32(0); p < cfg.NumPartitions; p++ {
		start, retained := log.retained(p)
		live := liveKeys(c, p)
		_, all := log.fullHistory().retained(p)
		totalWritten += all
		t.Logf("partition %d: log start %d, retained %d records of %d written, live keys %d", p, start, retained, all, live)
		if all < 200 {
			continue // too little traffic to need a snapshot
		}
		if start == 0 {
			t.Errorf("partition %d: log start never advanced (%d records written)", p, all)
		}
		// A snapshot (the live keys) plus at most a threshold's worth (or a
		// snapshot's worth) of later records; a record is >= 40 bytes.
		if bound := 2*live + cfg.SnapshotBytes/40 + 1; retained > bound {
			t.Errorf("partition %d: %d records retained, bound %d", p, retained, bound)
		}
	}
	if totalWritten < 1000 {
		t.Fatalf("only %d records written", totalWritten)
	}
	live := dumpGroups(c)
	c.Close()

	truncated, full := restartedDumps(t, cfg, log)
	diffDumps(t, "snapshot replay vs full replay", truncated, full)
	if _, ok := truncated["doomed"]; ok {
		t.Errorf("deleted group came back: %s", truncated["doomed"])
	}
	if !strings.Contains(truncated["consumers"], "state=Stable") {
		t.Errorf("consumer group not restored Stable: %s", truncated["consumers"])
	}
	// The live state agrees with the reload for what is durable.
	for id, want := range truncated {
		if live[id] != want {
			t.Errorf("group %s live vs reloaded:\n live: %s\n load: %s", id, live[id], want)
		}
	}
	if strings.Contains(truncated["g1"], "t/1=") {
		t.Errorf("deleted offset came back: %s", truncated["g1"])
	}
}

func TestSnapshotEmptyPartition(t *testing.T) {
	cfg := testConfig()
	cfg.SnapshotBytes = 1 << 30
	log := newMemLog()
	c := startCoordinator(t, cfg, log)
	p := c.PartitionFor("gone")
	for i := int64(0); i < 5; i++ {
		c.OffsetCommit(ctxT(t), commitReq(2, "gone", "", -1, "t", map[int32]int64{0: i}))
	}
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"gone"}
	if r := c.DeleteGroups(ctxT(t), dg); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete group: %d", r.Groups[0].ErrorCode)
	}
	if err := c.snapshot(ctxT(t), p); err != nil {
		t.Fatal(err)
	}
	start, retained := log.retained(p)
	if start != 7 || retained != 1 {
		t.Fatalf("log start %d retained %d, want 7 and 1 (the marker)", start, retained)
	}
	c.Close()
	truncated, full := restartedDumps(t, cfg, log)
	if len(truncated) != 0 || len(full) != 0 {
		t.Fatalf("groups after reload: %v / %v", truncated, full)
	}
}

// TestSnapshotConcurrentCommits races commits (and group metadata writes)
// against snapshots under -race, then checks that a reload has every
// acknowledged offset and equals a replay of the full history.
func TestSnapshotConcurrentCommits(t *testing.T) {
	cfg := testConfig()
	cfg.SnapshotBytes = 1024
	log := newMemLog()
	c := New(cfg, log, quietLogger())
	for p := int32(0); p < cfg.NumPartitions; p++ {
		if err := c.BecomeLeader(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	stableGroup(t, c, "members", 2, 10*time.Second, "t")

	const writers, rounds = 6, 150
	var mu sync.Mutex
	acked := map[string]int64{} // "group/partition" -> last acknowledged offset
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// Explicit snapshots on top of the triggered ones.
	var snaps sync.WaitGroup
	snaps.Add(1)
	go func() {
		defer snaps.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for p := int32(0); p < cfg.NumPartitions; p++ {
				_ = c.snapshot(context.Background(), p)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := fmt.Sprintf("race-%d", w%3) // two writers per group
			for i := int64(1); i <= rounds; i++ {
				part := int32(w)
				resp := c.OffsetCommit(ctxT(t), commitReq(2, group, "", -1, "t", map[int32]int64{part: i}))
				if codes := commitCodes(resp); codes[0] != 1 {
					t.Errorf("commit %s/%d: %v", group, part, codes)
					return
				}
				mu.Lock()
				acked[fmt.Sprintf("%s/%d", group, part)] = i
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	snaps.Wait()
	waitSnapshotsIdle(t, c)
	advanced := false
	for p := int32(0); p < cfg.NumPartitions; p++ {
		if start, _ := log.retained(p); start > 0 {
			advanced = true
		}
	}
	if !advanced {
		t.Fatal("no snapshot moved a log start")
	}
	c.Close()

	truncated, full := restartedDumps(t, cfg, log)
	diffDumps(t, "snapshot replay vs full replay", truncated, full)
	c2 := startCoordinator(t, cfg, log)
	for key, want := range acked {
		var group string
		var part int32
		fmt.Sscanf(strings.Replace(key, "/", " ", 1), "%s %d", &group, &part)
		if got, code := fetchOffset(t, c2, group, "t", part); code != 0 || got != want {
			t.Errorf("%s: offset %d (code %d) after restart, want %d", key, got, code, want)
		}
	}
}
