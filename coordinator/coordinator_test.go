package coordinator

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPartitionFor checks the coordinator uses Kafka's hash
// (internal/kafkahash tests the hash itself).
func TestPartitionFor(t *testing.T) {
	c := New(Config{NumPartitions: 50}, newMemLog(), quietLogger())
	defer c.Close()
	if got := c.PartitionFor("test"); got != 3556498%50 {
		t.Errorf("PartitionFor(test) = %d, want %d", got, 3556498%50)
	}
	// Utils.abs(MIN_VALUE) is 0.
	if got := c.PartitionFor("polygenelubricants"); got != 0 {
		t.Errorf("PartitionFor(polygenelubricants) = %d, want 0", got)
	}
}

func TestJoinSyncThreeMembers(t *testing.T) {
	c := startCoordinator(t, testConfig(), newMemLog())
	const group = "g3"
	ids := newMemberIDs(t, c, group, 3, 10*time.Second, "orders")
	joins := joinConcurrently(t, c, group, ids, 10*time.Second, "orders")
	var leader string
	for id, j := range joins {
		if j.ErrorCode != 0 || j.Generation != 1 || j.MemberID != id {
			t.Fatalf("join %s: %+v", id, j)
		}
		if j.Protocol == nil || *j.Protocol != "range" || j.ProtocolType == nil || *j.ProtocolType != "consumer" {
			t.Fatalf("join %s protocol: %v %v", id, j.Protocol, j.ProtocolType)
		}
		if leader == "" {
			leader = j.LeaderID
		} else if leader != j.LeaderID {
			t.Fatalf("members disagree on leader")
		}
	}
	if n := len(joins[leader].Members); n != 3 {
		t.Fatalf("leader got %d members' metadata, want 3", n)
	}
	for id, j := range joins {
		if id != leader && len(j.Members) != 0 {
			t.Fatalf("follower got member metadata")
		}
	}
	if st := describe(c, group).State; st != "CompletingRebalance" {
		t.Fatalf("state %s, want CompletingRebalance", st)
	}
	assign := map[string][]byte{"not-a-member": []byte("x")}
	for _, id := range ids {
		assign[id] = []byte("for-" + id)
	}
	syncs := syncConcurrently(t, c, group, joins, assign)
	for id, s := range syncs {
		if s.ErrorCode != 0 || !bytes.Equal(s.MemberAssignment, []byte("for-"+id)) {
			t.Fatalf("sync %s: code %d assignment %q", id, s.ErrorCode, s.MemberAssignment)
		}
	}
	d := describe(c, group)
	if d.State != "Stable" || d.Protocol != "range" || len(d.Members) != 3 {
		t.Fatalf("describe: %+v", d)
	}
	for _, id := range ids {
		if code := heartbeat(c, group, id, 1); code != 0 {
			t.Fatalf("heartbeat: %d", code)
		}
	}
	// A Stable SyncGroup returns the member's assignment again.
	if s := c.SyncGroup(ctxT(t), syncReq(group, ids[0], 1, nil)); s.ErrorCode != 0 || !bytes.Equal(s.MemberAssignment, []byte("for-"+ids[0])) {
		t.Fatalf("stable sync: %+v", s)
	}
}

func TestJoinErrors(t *testing.T) {
	c := startCoordinator(t, testConfig(), newMemLog())
	ctx := ctxT(t)
	if r := c.JoinGroup(ctx, joinReq("", "", time.Second)); r.ErrorCode != errInvalidGroupID {
		t.Errorf("empty group: %d", r.ErrorCode)
	}
	if r := c.JoinGroup(ctx, joinReq("g", "", 2*time.Minute)); r.ErrorCode != errInvalidSessionTimeout {
		t.Errorf("session timeout: %d", r.ErrorCode)
	}
	if r := c.JoinGroup(ctx, joinReq("nope", "someone", time.Second)); r.ErrorCode != errUnknownMemberID {
		t.Errorf("unknown member of absent group: %d", r.ErrorCode)
	}
	bad := joinReq("g", "", time.Second)
	bad.ProtocolType = ""
	if r := c.JoinGroup(ctx, bad); r.ErrorCode != errInconsistentGroupProtocol {
		t.Errorf("empty protocol type: %d", r.ErrorCode)
	}
	// v3 joins directly (no MEMBER_ID_REQUIRED).
	c2 := startCoordinator(t, func() Config { cfg := testConfig(); cfg.InitialRebalanceDelay = 0; return cfg }(), newMemLog())
	v3 := joinReq("old", "", time.Second, "t")
	v3.Version = 3
	r := c2.JoinGroup(WithClientInfo(ctx, ClientInfo{ClientID: "cid"}), v3)
	if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != r.MemberID || len(r.Members) != 1 {
		t.Fatalf("v3 join: %+v", r)
	}
	if len(r.MemberID) < 5 || r.MemberID[:4] != "cid-" {
		t.Errorf("member id %q does not start with the client id", r.MemberID)
	}
	// A different protocol set is inconsistent with the running group.
	other := joinReq("old", "", time.Second)
	other.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "roundrobin", Metadata: consumerMeta("t")}}
	if r := c2.JoinGroup(ctx, other); r.ErrorCode != errInconsistentGroupProtocol {
		t.Errorf("protocol mismatch: %d", r.ErrorCode)
	}
}

func TestHeartbeatDuringRebalanceAndRejoin(t *testing.T) {
	c := startCoordinator(t, testConfig(), newMemLog())
	const group = "hb"
	joins, _ := stableGroup(t, c, group, 2, 10*time.Second, "t")
	var ids []string
	for id := range joins {
		ids = append(ids, id)
	}
	// A third member starts a rebalance.
	newID := newMemberIDs(t, c, group, 1, 10*time.Second, "t")[0]
	done := make(chan map[string]*kmsg.JoinGroupResponse)
	go func() { done <- joinConcurrently(t, c, group, []string{newID}, 10*time.Second, "t") }()
	checkFor(t, 5*time.Second, func() error {
		if code := heartbeat(c, group, ids[0], 1); code != errRebalanceInProgress {
			return fmt.Errorf("heartbeat code %d", code)
		}
		return nil
	})
	if code := heartbeat(c, group, ids[0], 0); code != errIllegalGeneration {
		t.Fatalf("wrong generation heartbeat: %d", code)
	}
	if code := heartbeat(c, group, "ghost", 1); code != errUnknownMemberID {
		t.Fatalf("unknown member heartbeat: %d", code)
	}
	// The old members rejoin; all three reach generation 2.
	rejoins := joinConcurrently(t, c, group, ids, 10*time.Second, "t")
	all := <-done
	for id, j := range rejoins {
		all[id] = j
	}
	for id, j := range all {
		if j.ErrorCode != 0 || j.Generation != 2 {
			t.Fatalf("rejoin %s: code %d gen %d", id, j.ErrorCode, j.Generation)
		}
	}
	syncs := syncConcurrently(t, c, group, all, map[string][]byte{newID: []byte("a")})
	for id, s := range syncs {
		if s.ErrorCode != 0 {
			t.Fatalf("sync %s: %d", id, s.ErrorCode)
		}
		if id != newID && len(s.MemberAssignment) != 0 {
			t.Fatalf("member left out by the leader got %q", s.MemberAssignment)
		}
	}
}

func TestSessionTimeoutEvictsMember(t *testing.T) {
	c := startCoordinator(t, testConfig(), newMemLog())
	const group = "evict"
	const session = 400 * time.Millisecond
	joins, _ := stableGroup(t, c, group, 2, session, "t")
	var alive, dead string
	for id := range joins {
		if alive == "" {
			alive = id
		} else {
			dead = id
		}
	}
	// Only alive heartbeats; dead's session expires and a rebalance starts.
	checkFor(t, 5*time.Second, func() error {
		if code := heartbeat(c, group, alive, 1); code != errRebalanceInProgress {
			return fmt.Errorf("heartbeat code %d", code)
		}
		return nil
	})
	j := joinConcurrently(t, c, group, []string{alive}, session, "t")[alive]
	if j.ErrorCode != 0 || j.Generation != 2 || j.LeaderID != alive || len(j.Members) != 1 {
		t.Fatalf("rejoin after eviction: %+v", j)
	}
	if code := heartbeat(c, group, dead, 1); code != errUnknownMemberID {
		t.Fatalf("evicted member heartbeat: %d", code)
	}
}

func TestRebalanceTimeoutRemovesMembersThatDoNotRejoin(t *testing.T) {
	c := startCoordinator(t, testConfig(), newMemLog())
	const group = "rto"
	joins, _ := stableGroup(t, c, group, 2, 10*time.Second, "t")
	var ids []string
	for id := range joins {
		ids = append(ids, id)
	}
	// ids[0] rejoins with a short rebalance timeout; ids[1] never does.
	// Changed metadata forces a rebalance even from a follower.
	req := joinReq(group, ids[0], 10*time.Second, "t", "t2")
	req.RebalanceTimeoutMillis = 200
	// The group's rebalance timeout is the members' maximum: lower the
	// other member's directly.
	g, _ := c.lookup(group, false)
	g.mu.Lock()
	g.members[ids[1]].rebalanceTimeout = 200 * time.Millisecond
	g.mu.Unlock()
	start := time.Now()
	j := c.JoinGroup(ctxT(t), req)
	if j.ErrorCode != 0 || j.Generation != 2 || len(j.Members) != 1 || j.LeaderID != ids[0] {
		t.Fatalf("join after rebalance timeout: %+v", j)
	}
	if time.Since(start) < 150*time.Millisecond {
		t.Fatalf("join completed before the rebalance timeout")
	}
}

func TestLeaveGroup(t *testing.T) {
	c := startCoordinator(t, testConfig(), newMemLog())
	const group = "leave"
	joins, _ := stableGroup(t, c, group, 2, 10*time.Second, "t")
	var ids []string
	for id := range joins {
		ids = append(ids, id)
	}
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version = 3
	r.Group = group
	r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: ids[0]}, {MemberID: "ghost"}}
	resp := c.LeaveGroup(ctxT(t), r)
	if resp.ErrorCode != 0 || len(resp.Members) != 2 || resp.Members[0].ErrorCode != 0 || resp.Members[1].ErrorCode != errUnknownMemberID {
		t.Fatalf("leave v3: %+v", resp)
	}
	if st := describe(c, group).State; st != "PreparingRebalance" {
		t.Fatalf("state after leave %s", st)
	}
	// The last member leaves with v0 while rebalancing: the group empties.
	r0 := kmsg.NewPtrLeaveGroupRequest()
	r0.Version = 0
	r0.Group = group
	r0.MemberID = ids[1]
	if resp := c.LeaveGroup(ctxT(t), r0); resp.ErrorCode != 0 {
		t.Fatalf("leave v0: %d", resp.ErrorCode)
	}
	if d := describe(c, group); d.State != "Empty" || len(d.Members) != 0 {
		t.Fatalf("after all left: %+v", d)
	}
	r0.MemberID = "ghost"
	if resp := c.LeaveGroup(ctxT(t), r0); resp.ErrorCode != errUnknownMemberID {
		t.Fatalf("leave v0 unknown: %d", resp.ErrorCode)
	}
}

func TestCommitValidation(t *testing.T) {
	c := startCoordinator(t, testConfig(), newMemLog())
	const group = "cv"
	joins, _ := stableGroup(t, c, group, 1, 10*time.Second, "t")
	var id string
	for k := range joins {
		id = k
	}
	ctx := ctxT(t)
	for _, tc := range []struct {
		name   string
		member string
		gen    int32
		want   int16
	}{
		{"wrong generation", id, 5, errIllegalGeneration},
		{"unknown member", "ghost", 1, errUnknownMemberID},
		{"simple commit to non-empty group", "", -1, errUnknownMemberID},
		{"member commit", id, 1, 0},
	} {
		resp := c.OffsetCommit(ctx, commitReq(8, group, tc.member, tc.gen, "t", map[int32]int64{0: 10, 1: 11}))
		if codes := commitCodes(resp); codes[tc.want] != 2 {
			t.Errorf("%s: codes %v, want %d", tc.name, codes, tc.want)
		}
	}
	if resp := c.OffsetCommit(ctx, commitReq(8, "absent", "m", 3, "t", map[int32]int64{0: 1})); commitCodes(resp)[errIllegalGeneration] != 1 {
		t.Errorf("generation for absent group: %v", commitCodes(resp))
	}
	big := commitReq(8, "simple", "", -1, "t", map[int32]int64{0: 1})
	big.Topics[0].Partitions[0].Metadata = kmsg.StringPtr(string(make([]byte, 4097)))
	if resp := c.OffsetCommit(ctx, big); commitCodes(resp)[errOffsetMetadataTooLarge] != 1 {
		t.Errorf("metadata too large: %v", commitCodes(resp))
	}
}

func TestCommitDuringCompletingRebalance(t *testing.T) {
	c := startCoordinator(t, testConfig(), newMemLog())
	const group = "cr"
	ids := newMemberIDs(t, c, group, 1, 10*time.Second, "t")
	joins := joinConcurrently(t, c, group, ids, 10*time.Second, "t")
	resp := c.OffsetCommit(ctxT(t), commitReq(8, group, ids[0], joins[ids[0]].Generation, "t", map[int32]int64{0: 1}))
	if codes := commitCodes(resp); codes[errRebalanceInProgress] != 1 {
		t.Fatalf("commit in CompletingRebalance: %v", codes)
	}
}

func TestCommitAndFetch(t *testing.T) {
	c := startCoordinator(t, testConfig(), newMemLog())
	ctx := ctxT(t)
	resp := c.OffsetCommit(ctx, commitReq(2, "simple", "", -1, "t", map[int32]int64{0: 42, 3: 7}))
	if codes := commitCodes(resp); codes[0] != 2 {
		t.Fatalf("simple commit: %v", codes)
	}
	if o, code := fetchOffset(t, c, "simple", "t", 0); o != 42 || code != 0 {
		t.Fatalf("fetch: %d %d", o, code)
	}
	if o, _ := fetchOffset(t, c, "simple", "t", 1); o != -1 {
		t.Fatalf("uncommitted partition: %d", o)
	}
	if o, _ := fetchOffset(t, c, "nobody", "t", 0); o != -1 {
		t.Fatalf("unknown group: %d", o)
	}
	// v0 commit is a simple commit whatever the body says.
	v0 := commitReq(0, "simple", "x", 99, "u", map[int32]int64{0: 5})
	if codes := commitCodes(c.OffsetCommit(ctx, v0)); codes[0] != 1 {
		t.Fatalf("v0 commit: %v", codes)
	}
	// v2+ null topics: everything, sorted.
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 7
	r.Group = "simple"
	all := c.OffsetFetch(ctx, r)
	if len(all.Topics) != 2 || all.Topics[0].Topic != "t" || len(all.Topics[0].Partitions) != 2 || all.Topics[1].Topic != "u" {
		t.Fatalf("fetch all: %+v", all.Topics)
	}
	if p := all.Topics[0].Partitions[0]; p.Partition != 0 || p.Offset != 42 || p.Metadata == nil || *p.Metadata != "md" || p.LeaderEpoch != -1 {
		t.Fatalf("fetched v2 commit: %+v", p)
	}
	// v8 batched groups, with leader epochs from v6+ commits.
	if codes := commitCodes(c.OffsetCommit(ctx, commitReq(9, "other", "", -1, "v", map[int32]int64{2: 9}))); codes[0] != 1 {
		t.Fatalf("v9 commit: %v", codes)
	}
	r8 := kmsg.NewPtrOffsetFetchRequest()
	r8.Version = 8
	r8.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "other", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "v", Partitions: []int32{2}}}},
		{Group: "simple"},
	}
	resp8 := c.OffsetFetch(ctx, r8)
	if len(resp8.Groups) != 2 {
		t.Fatalf("v8 groups: %+v", resp8)
	}
	if p := resp8.Groups[0].Topics[0].Partitions[0]; p.Offset != 9 || p.LeaderEpoch != 7 {
		t.Fatalf("v8 fetch: %+v", p)
	}
	if n := len(resp8.Groups[1].Topics); n != 2 {
		t.Fatalf("v8 null topics: %d topics", n)
	}
	// ListGroups sees the simple groups, Empty without protocol type.
	lr := kmsg.NewPtrListGroupsRequest()
	lr.Version = 4
	lr.StatesFilter = []string{"empty"}
	if lg := c.ListGroups(ctx, lr); len(lg.Groups) != 2 || lg.Groups[0].Group != "other" || lg.Groups[0].GroupState != "Empty" {
		t.Fatalf("list: %+v", lg)
	}
	lr.StatesFilter = []string{"Stable"}
	if lg := c.ListGroups(ctx, lr); len(lg.Groups) != 0 {
		t.Fatalf("list stable: %+v", lg)
	}
}

func TestAppendFailure(t *testing.T) {
	log := newMemLog()
	c := startCoordinator(t, testConfig(), log)
	ctx := ctxT(t)
	for _, tc := range []struct {
		err  error
		want int16
	}{
		{fmt.Errorf("append: %w", kerr.NotLeaderForPartition), errNotCoordinator},
		{kerr.NotEnoughReplicas, errCoordinatorNotAvailable},
		{kerr.RequestTimedOut, errCoordinatorNotAvailable},
		{kerr.MessageTooLarge, errInvalidCommitOffsetSize},
		{errInjected, errCoordinatorNotAvailable},
	} {
		log.mu.Lock()
		log.failNext = tc.err
		log.mu.Unlock()
		resp := c.OffsetCommit(ctx, commitReq(8, "f", "", -1, "t", map[int32]int64{0: 1}))
		if codes := commitCodes(resp); codes[tc.want] != 1 {
			t.Errorf("%v: codes %v, want %d", tc.err, codes, tc.want)
		}
		if o, _ := fetchOffset(t, c, "f", "t", 0); o != -1 {
			t.Fatalf("failed commit is visible: %d", o)
		}
	}
}

func TestRestartRestoresGroupsAndOffsets(t *testing.T) {
	log := newMemLog()
	cfg := testConfig()
	c := startCoordinator(t, cfg, log)
	const group = "durable"
	joins, syncs := stableGroup(t, c, group, 2, 10*time.Second, "orders")
	var ids []string
	for id := range joins {
		ids = append(ids, id)
	}
	var leader string
	for _, j := range joins {
		leader = j.LeaderID
	}
	ctx := ctxT(t)
	if codes := commitCodes(c.OffsetCommit(ctx, commitReq(8, group, ids[0], 1, "orders", map[int32]int64{0: 100, 1: 200}))); codes[0] != 2 {
		t.Fatalf("commit: %v", codes)
	}
	// A later commit wins over the earlier one on replay.
	if codes := commitCodes(c.OffsetCommit(ctx, commitReq(8, group, ids[1], 1, "orders", map[int32]int64{0: 150}))); codes[0] != 1 {
		t.Fatalf("commit: %v", codes)
	}
	// An emptied group is restored Empty.
	ids2 := newMemberIDs(t, c, "emptied", 1, 10*time.Second, "x")
	j2 := joinConcurrently(t, c, "emptied", ids2, 10*time.Second, "x")
	syncConcurrently(t, c, "emptied", j2, nil)
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version = 5
	lv.Group = "emptied"
	lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: ids2[0]}}
	c.LeaveGroup(ctx, lv)
	p := c.PartitionFor("emptied")
	checkFor(t, 5*time.Second, func() error {
		// The Empty state is stored in the background.
		recs := 0
		_ = log.ReadAll(ctx, p, func(b []byte) error {
			rs, _ := decodeBatch(b)
			for _, r := range rs {
				if pr, ok, _ := parseRecord(r); ok && !pr.isOffset && pr.group == "emptied" && pr.groupMeta != nil && len(pr.groupMeta.Members) == 0 {
					recs++
				}
			}
			return nil
		})
		if recs == 0 {
			return fmt.Errorf("empty group metadata not stored yet")
		}
		return nil
	})
	c.Close()

	c2 := startCoordinator(t, cfg, log)
	if o, _ := fetchOffset(t, c2, group, "orders", 0); o != 150 {
		t.Fatalf("restored offset p0 = %d, want 150", o)
	}
	if o, _ := fetchOffset(t, c2, group, "orders", 1); o != 200 {
		t.Fatalf("restored offset p1 = %d, want 200", o)
	}
	d := describe(c2, group)
	if d.State != "Stable" || d.Protocol != "range" || d.ProtocolType != "consumer" || len(d.Members) != 2 {
		t.Fatalf("restored group: %+v", d)
	}
	for _, m := range d.Members {
		if !bytes.Equal(m.MemberAssignment, syncs[m.MemberID].MemberAssignment) {
			t.Fatalf("restored assignment of %s: %q", m.MemberID, m.MemberAssignment)
		}
		if m.ClientID != "client" || m.ClientHost != "/127.0.0.1" {
			t.Fatalf("restored client: %+v", m)
		}
	}
	for _, id := range ids {
		if code := heartbeat(c2, group, id, 1); code != 0 {
			t.Fatalf("heartbeat after restart: %d", code)
		}
	}
	// The leader is restored: a rejoin of all (with changed metadata, so
	// that followers do not just get generation 1 back) gives generation 2.
	rj := joinConcurrently(t, c2, group, ids, 10*time.Second, "orders", "more")
	for _, j := range rj {
		if j.ErrorCode != 0 || j.Generation != 2 || j.LeaderID != leader {
			t.Fatalf("rejoin after restart: %+v (leader was %s)", j, leader)
		}
	}
	if d := describe(c2, "emptied"); d.State != "Empty" || d.ProtocolType != "consumer" {
		t.Fatalf("restored emptied group: %+v", d)
	}
}

func TestRestoredMembersSessionsRestart(t *testing.T) {
	log := newMemLog()
	cfg := testConfig()
	c := startCoordinator(t, cfg, log)
	stableGroup(t, c, "s", 1, 300*time.Millisecond, "t")
	c.Close()
	c2 := startCoordinator(t, cfg, log)
	// Nobody heartbeats: the restored member expires and the group empties.
	checkFor(t, 5*time.Second, func() error {
		if d := describe(c2, "s"); d.State != "Empty" {
			return fmt.Errorf("state %s", d.State)
		}
		return nil
	})
}

func TestCoordinatorStatus(t *testing.T) {
	log := newMemLog()
	cfg := testConfig()
	c := New(cfg, log, quietLogger())
	defer c.Close()
	ctx := ctxT(t)
	const group = "st"
	p := c.PartitionFor(group)
	if r := c.JoinGroup(ctx, joinReq(group, "", time.Second)); r.ErrorCode != errNotCoordinator {
		t.Fatalf("before leading: %d", r.ErrorCode)
	}
	gate := make(chan struct{})
	log.mu.Lock()
	log.readGate = gate
	log.mu.Unlock()
	loaded := make(chan error)
	go func() { loaded <- c.BecomeLeader(ctx, p) }()
	checkFor(t, 5*time.Second, func() error {
		if _, code := fetchOffset(t, c, group, "t", 0); code != errCoordinatorLoadInProgress {
			return fmt.Errorf("fetch code %d", code)
		}
		return nil
	})
	if code := heartbeat(c, group, "m", 1); code != 0 {
		t.Fatalf("heartbeat while loading: %d (Kafka answers NONE)", code)
	}
	if s := c.SyncGroup(ctx, syncReq(group, "m", 1, nil)); s.ErrorCode != errRebalanceInProgress {
		t.Fatalf("sync while loading: %d", s.ErrorCode)
	}
	close(gate)
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	// A parked join is answered NOT_COORDINATOR on Resign.
	id := newMemberIDs(t, c, group, 1, 10*time.Second, "t")[0]
	res := make(chan *kmsg.JoinGroupResponse)
	go func() { res <- c.JoinGroup(ctx, joinReq(group, id, 10*time.Second, "t")) }()
	checkFor(t, 5*time.Second, func() error {
		if d := describe(c, group); d.State != "PreparingRebalance" {
			return fmt.Errorf("state %s", d.State)
		}
		return nil
	})
	c.Resign(p)
	if r := <-res; r.ErrorCode != errNotCoordinator {
		t.Fatalf("parked join after resign: %d", r.ErrorCode)
	}
	if code := heartbeat(c, group, id, 0); code != errNotCoordinator {
		t.Fatalf("after resign: %d", code)
	}
}

func TestDeleteGroups(t *testing.T) {
	log := newMemLog()
	cfg := testConfig()
	c := startCoordinator(t, cfg, log)
	ctx := ctxT(t)
	stableGroup(t, c, "busy", 1, 10*time.Second, "t")
	c.OffsetCommit(ctx, commitReq(8, "idle", "", -1, "t", map[int32]int64{0: 1}))
	r := kmsg.NewPtrDeleteGroupsRequest()
	r.Version = 2
	r.Groups = []string{"busy", "idle", "absent"}
	resp := c.DeleteGroups(ctx, r)
	want := []int16{errNonEmptyGroup, 0, errGroupIDNotFound}
	for i, g := range resp.Groups {
		if g.ErrorCode != want[i] {
			t.Errorf("delete %s: %d, want %d", g.Group, g.ErrorCode, want[i])
		}
	}
	if o, _ := fetchOffset(t, c, "idle", "t", 0); o != -1 {
		t.Fatalf("deleted group's offset: %d", o)
	}
	if d := describe(c, "idle"); d.State != "Dead" {
		t.Fatalf("deleted group state %s", d.State)
	}
	c.Close()
	c2 := startCoordinator(t, cfg, log)
	if d := describe(c2, "idle"); d.State != "Dead" {
		t.Fatalf("deleted group came back: %+v", d)
	}
	if d := describe(c2, "busy"); d.State != "Stable" {
		t.Fatalf("busy group: %+v", d)
	}
}

func TestOffsetDelete(t *testing.T) {
	log := newMemLog()
	cfg := testConfig()
	c := startCoordinator(t, cfg, log)
	ctx := ctxT(t)
	const group = "od"
	joins, _ := stableGroup(t, c, group, 1, 10*time.Second, "subscribed")
	var id string
	for k := range joins {
		id = k
	}
	c.OffsetCommit(ctx, commitReq(8, group, id, 1, "subscribed", map[int32]int64{0: 1}))
	c.OffsetCommit(ctx, commitReq(8, group, id, 1, "old", map[int32]int64{0: 2}))
	r := kmsg.NewPtrOffsetDeleteRequest()
	r.Group = group
	r.Topics = []kmsg.OffsetDeleteRequestTopic{
		{Topic: "subscribed", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		{Topic: "old", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
	}
	resp := c.OffsetDelete(ctx, r)
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != errGroupSubscribedToTopic || resp.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", resp)
	}
	if o, _ := fetchOffset(t, c, group, "old", 0); o != -1 {
		t.Fatalf("deleted offset still there: %d", o)
	}
	if o, _ := fetchOffset(t, c, group, "subscribed", 0); o != 1 {
		t.Fatalf("subscribed offset: %d", o)
	}
	r.Group = "absent"
	if resp := c.OffsetDelete(ctx, r); resp.ErrorCode != errGroupIDNotFound {
		t.Fatalf("absent group: %d", resp.ErrorCode)
	}
	c.Close()
	c2 := startCoordinator(t, cfg, log)
	if o, _ := fetchOffset(t, c2, group, "old", 0); o != -1 {
		t.Fatalf("deleted offset restored: %d", o)
	}
	if o, _ := fetchOffset(t, c2, group, "subscribed", 0); o != 1 {
		t.Fatalf("subscribed offset after restart: %d", o)
	}
}

func TestOffsetExpiry(t *testing.T) {
	log := newMemLog()
	cfg := testConfig()
	c := startCoordinator(t, cfg, log)
	ctx := ctxT(t)
	c.OffsetCommit(ctx, commitReq(8, "simple", "", -1, "t", map[int32]int64{0: 1}))
	joins, _ := stableGroup(t, c, "live", 1, 10*time.Second, "t")
	var id string
	for k := range joins {
		id = k
	}
	c.OffsetCommit(ctx, commitReq(8, "live", id, 1, "t", map[int32]int64{0: 5}))
	c.OffsetCommit(ctx, commitReq(8, "live", id, 1, "gone", map[int32]int64{0: 6}))

	c.expireOffsets(ctx, time.Now().Add(cfg.OffsetsRetention/2))
	if o, _ := fetchOffset(t, c, "simple", "t", 0); o != 1 {
		t.Fatalf("expired too early: %d", o)
	}
	c.expireOffsets(ctx, time.Now().Add(cfg.OffsetsRetention+time.Second))
	if o, _ := fetchOffset(t, c, "simple", "t", 0); o != -1 {
		t.Fatalf("simple offset not expired: %d", o)
	}
	if d := describe(c, "simple"); d.State != "Dead" {
		t.Fatalf("simple group not removed: %s", d.State)
	}
	// A Stable consumer group keeps offsets of subscribed topics only.
	if o, _ := fetchOffset(t, c, "live", "t", 0); o != 5 {
		t.Fatalf("subscribed offset expired: %d", o)
	}
	if o, _ := fetchOffset(t, c, "live", "gone", 0); o != -1 {
		t.Fatalf("unsubscribed offset kept: %d", o)
	}
	c.Close()
	c2 := startCoordinator(t, cfg, log)
	if o, _ := fetchOffset(t, c2, "simple", "t", 0); o != -1 {
		t.Fatalf("expired offset restored: %d", o)
	}
	if o, _ := fetchOffset(t, c2, "live", "t", 0); o != 5 {
		t.Fatalf("live offset after restart: %d", o)
	}
}

func TestOversizedAssignment(t *testing.T) {
	cfg := testConfig()
	cfg.MaxRecordBytes = 2000
	log := newMemLog()
	c := startCoordinator(t, cfg, log)
	const group = "big"
	ids := newMemberIDs(t, c, group, 1, 10*time.Second, "t")
	joins := joinConcurrently(t, c, group, ids, 10*time.Second, "t")
	before := log.batches(c.PartitionFor(group))
	s := syncConcurrently(t, c, group, joins, map[string][]byte{ids[0]: make([]byte, 4000)})[ids[0]]
	if s.ErrorCode != errUnknownServer {
		t.Fatalf("oversized assignment: %d", s.ErrorCode)
	}
	if after := log.batches(c.PartitionFor(group)); after != before {
		t.Fatalf("oversized group metadata was stored")
	}
	// The group is usable: rejoin and sync a small assignment.
	j := joinConcurrently(t, c, group, ids, 10*time.Second, "t")
	if j[ids[0]].ErrorCode != 0 || j[ids[0]].Generation != 2 {
		t.Fatalf("rejoin: %+v", j[ids[0]])
	}
	s = syncConcurrently(t, c, group, j, map[string][]byte{ids[0]: []byte("ok")})[ids[0]]
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "ok" {
		t.Fatalf("sync after oversize: %+v", s)
	}
}

func TestCloseAnswersWaiters(t *testing.T) {
	c := New(testConfig(), newMemLog(), quietLogger())
	for p := int32(0); p < 4; p++ {
		if err := c.BecomeLeader(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	id := newMemberIDs(t, c, "cl", 1, 10*time.Second, "t")[0]
	res := make(chan int16)
	go func() { res <- c.JoinGroup(context.Background(), joinReq("cl", id, 10*time.Second, "t")).ErrorCode }()
	checkFor(t, 5*time.Second, func() error {
		if d := describe(c, "cl"); d.State != "PreparingRebalance" {
			return fmt.Errorf("state %s", d.State)
		}
		return nil
	})
	c.Close()
	select {
	case code := <-res:
		if code != errCoordinatorNotAvailable {
			t.Fatalf("join after close: %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("parked join not answered on Close")
	}
	if err := c.BecomeLeader(context.Background(), 0); err == nil {
		t.Fatal("BecomeLeader after Close succeeded")
	}
}
