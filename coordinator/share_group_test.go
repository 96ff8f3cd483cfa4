package coordinator

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func sgHB(t *testing.T, c *Coordinator, group, member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.MemberEpoch = group, member, epoch
	if topics != nil {
		req.SubscribedTopicNames = topics
	}
	return c.ShareGroupHeartbeat(WithClientInfo(ctxT(t), ClientInfo{ClientID: "test", ClientHost: "/127.0.0.1"}), req)
}

func sgAssigned(resp *kmsg.ShareGroupHeartbeatResponse) tpSet {
	if resp.Assignment == nil {
		return nil
	}
	s := tpSet{}
	for _, tp := range resp.Assignment.TopicPartitions {
		for _, p := range tp.Partitions {
			s.add(tp.TopicID, p)
		}
	}
	return s
}

// TestShareGroupHeartbeat: every member gets every partition of its
// topics; epochs move on membership changes; Kafka's errors leave the
// group unchanged.
func TestShareGroupHeartbeat(t *testing.T) {
	cfg := cgTestConfig()
	cfg.ShareHeartbeatInterval = 250 * time.Millisecond
	cfg.ShareMaxSize = 2
	c := startCoordinator(t, cfg, newMemLog())

	r := sgHB(t, c, "sg", "m1", 0, "a")
	if r.ErrorCode != 0 || r.MemberEpoch != 1 || r.HeartbeatIntervalMillis != 250 {
		t.Fatalf("join: %+v", r)
	}
	all := tpSet{topicA: {0, 1, 2, 3}}
	if got := sgAssigned(r); !got.equal(all) {
		t.Fatalf("m1 assigned %v, want %v", got, all)
	}
	r2 := sgHB(t, c, "sg", "m2", 0, "a", "b")
	if r2.ErrorCode != 0 || r2.MemberEpoch != 2 {
		t.Fatalf("second join: %+v", r2)
	}
	if got, want := sgAssigned(r2), (tpSet{topicA: {0, 1, 2, 3}, topicB: {0, 1}}); !got.equal(want) {
		t.Fatalf("m2 assigned %v, want %v", got, want)
	}
	// m1 catches up to the group epoch; its assignment did not change, so
	// none is sent.
	r = sgHB(t, c, "sg", "m1", 1)
	if r.ErrorCode != 0 || r.MemberEpoch != 2 || r.Assignment != nil {
		t.Fatalf("m1 heartbeat: %+v", r)
	}

	describe := func() kmsg.ShareGroupDescribeResponseGroup {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{"sg"}
		return c.ShareGroupDescribe(ctxT(t), req).Groups[0]
	}
	before := describe()
	if before.GroupState != "Stable" || before.GroupEpoch != 2 || len(before.Members) != 2 || before.Assignor != "simple" {
		t.Fatalf("describe: %+v", before)
	}

	for _, tc := range []struct {
		name   string
		member string
		epoch  int32
		topics []string
		want   int16
	}{
		{"stale epoch", "m1", 1, nil, kerr.FencedMemberEpoch.Code},
		{"future epoch", "m1", 9, nil, kerr.FencedMemberEpoch.Code},
		{"unknown member", "nobody", 2, nil, kerr.UnknownMemberID.Code},
		{"unknown member leaves", "nobody", -1, nil, kerr.UnknownMemberID.Code},
		{"empty member id", "", 0, []string{"a"}, kerr.InvalidRequest.Code},
		{"join without topics", "m3", 0, nil, kerr.InvalidRequest.Code},
		{"bad epoch", "m1", -2, nil, kerr.InvalidRequest.Code},
		{"group full", "m3", 0, []string{"a"}, kerr.GroupMaxSizeReached.Code},
	} {
		if got := sgHB(t, c, "sg", tc.member, tc.epoch, tc.topics...).ErrorCode; got != tc.want {
			t.Errorf("%s: error %d, want %d", tc.name, got, tc.want)
		}
	}
	after := describe()
	if after.GroupEpoch != before.GroupEpoch || len(after.Members) != len(before.Members) {
		t.Fatalf("refused heartbeats changed the group: %+v -> %+v", before, after)
	}

	// A consumer-protocol or classic member cannot use a share group's id.
	if r := cgHB(t, c, "sg", "x", 0, tpSet{}); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer heartbeat on a share group: %d", r.ErrorCode)
	}
	if r := c.JoinGroup(WithClientInfo(ctxT(t), ClientInfo{ClientID: "c"}), joinReq("sg", "", 10*time.Second, "a")); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("classic join on a share group: %d", r.ErrorCode)
	}
	// And a share member cannot use a consumer group's id.
	if r := cgHB(t, c, "cg", "x", 0, tpSet{}); r.ErrorCode != 0 {
		t.Fatalf("consumer join: %d", r.ErrorCode)
	}
	if r := sgHB(t, c, "cg", "x", 0, "a"); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("share heartbeat on a consumer group: %d", r.ErrorCode)
	}

	// Leaving bumps the epoch; a non-empty group cannot be deleted, an
	// empty one can.
	del := func() int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{"sg"}
		return c.DeleteGroups(ctxT(t), req).Groups[0].ErrorCode
	}
	if code := del(); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete of a live share group: %d", code)
	}
	if r := sgHB(t, c, "sg", "m2", -1); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.TypesFilter = []string{"share"}
	if gs := c.ListGroups(ctxT(t), lreq).Groups; len(gs) != 1 || gs[0].Group != "sg" || gs[0].GroupState != "Stable" {
		t.Fatalf("list share groups: %+v", gs)
	}
	if r := sgHB(t, c, "sg", "m1", 2); r.ErrorCode != 0 || r.MemberEpoch != 3 {
		t.Fatalf("m1 after m2 left: %+v", r)
	}
	sgHB(t, c, "sg", "m1", -1)
	if d := describe(); d.GroupState != "Empty" {
		t.Fatalf("after everyone left: %+v", d)
	}
	if code := del(); code != 0 {
		t.Fatalf("delete of an empty share group: %d", code)
	}
	if d := describe(); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe after delete: %+v", d)
	}
}

// TestShareGroupSessionTimeout: a member that stops heartbeating is removed
// and the group epoch moves.
func TestShareGroupSessionTimeout(t *testing.T) {
	cfg := cgTestConfig()
	cfg.ShareSessionTimeout = 200 * time.Millisecond
	c := startCoordinator(t, cfg, newMemLog())
	if r := sgHB(t, c, "sg", "m1", 0, "a"); r.ErrorCode != 0 {
		t.Fatalf("join: %+v", r)
	}
	checkFor(t, 5*time.Second, func() error {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{"sg"}
		if d := c.ShareGroupDescribe(ctxT(t), req).Groups[0]; len(d.Members) != 0 || d.GroupEpoch != 2 {
			return fmt.Errorf("members %d, epoch %d", len(d.Members), d.GroupEpoch)
		}
		return nil
	})
	if r := sgHB(t, c, "sg", "m1", 1); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat of the removed member: %+v", r)
	}
	if r := sgHB(t, c, "sg", "m1", 0, "a"); r.ErrorCode != 0 || r.MemberEpoch != 3 {
		t.Fatalf("rejoin after the timeout: %+v", r)
	}
}

// TestShareStateDurable: a share partition's stored state survives a
// coordinator failover (replay) and a snapshot, a stale state epoch is
// refused, and deleting the group removes it.
func TestShareStateDurable(t *testing.T) {
	cfg := cgTestConfig()
	log := newMemLog()
	c := startCoordinator(t, cfg, log)
	want := ShareState{StateEpoch: 3, StartOffset: 17, Batches: []ShareStateBatch{{First: 17, Last: 17, DeliveryState: 0, DeliveryCount: 2}, {First: 18, Last: 20, DeliveryState: 2, DeliveryCount: 1}}}
	if code := c.WriteShareState(ctxT(t), "sg", topicA, 1, want, 4); code != 0 {
		t.Fatalf("write: %d", code)
	}
	if code := c.WriteShareState(ctxT(t), "sg", topicA, 1, ShareState{StateEpoch: 2, StartOffset: 99}, 4); code != kerr.FencedStateEpoch.Code {
		t.Fatalf("write with a stale state epoch: %d, want FENCED_STATE_EPOCH", code)
	}
	check := func(c *Coordinator, what string) {
		t.Helper()
		got, found, code := c.ReadShareState(ctxT(t), "sg", topicA, 1, -1)
		if code != 0 || !found || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: read %+v found %v code %d, want %+v", what, got, found, code, want)
		}
		if _, found, _ := c.ReadShareState(ctxT(t), "sg", topicA, 2, -1); found {
			t.Fatalf("%s: partition 2 has a state", what)
		}
	}
	check(c, "written")
	c.Close()
	c2 := startCoordinator(t, cfg, log)
	check(c2, "after a failover")
	if err := c2.snapshot(ctxT(t), c2.PartitionFor("sg")); err != nil {
		t.Fatal(err)
	}
	c2.Close()
	c3 := startCoordinator(t, cfg, log)
	check(c3, "after a snapshot and a failover")
	deleteGroup(t, c3, "sg")
	c3.Close()
	c4 := startCoordinator(t, cfg, log)
	if _, found, _ := c4.ReadShareState(ctxT(t), "sg", topicA, 1, -1); found {
		t.Fatal("share state back after the group was deleted")
	}
}

// TestShareStateLeaderFencing: a read by a share partition's new leader
// fences its older leaders (FENCED_LEADER_EPOCH), so a deposed leader
// cannot store an acknowledgement after its successor loaded the state,
// which the successor's first write would overwrite. A write in flight
// during the new leader's read is answered FENCED_LEADER_EPOCH once
// durable; operators (-1) are never fenced by the leader epoch.
func TestShareStateLeaderFencing(t *testing.T) {
	cfg := cgTestConfig()
	log := newMemLog()
	c := startCoordinator(t, cfg, log)
	write := func(c *Coordinator, partition int32, leaderEpoch, stateEpoch int32, start int64) int16 {
		t.Helper()
		return c.WriteShareState(ctxT(t), "sg", topicA, partition, ShareState{StateEpoch: stateEpoch, StartOffset: start}, leaderEpoch)
	}
	if code := write(c, 1, 17, 1, 10); code != 0 {
		t.Fatalf("write by leader epoch 17: %d", code)
	}
	got, found, code := c.ReadShareState(ctxT(t), "sg", topicA, 1, 18)
	if code != 0 || !found || got.StartOffset != 10 {
		t.Fatalf("read by the new leader: %+v %v %d", got, found, code)
	}
	if code := write(c, 1, 17, 1, 60); code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("write by the deposed leader after the new one read: %d, want FENCED_LEADER_EPOCH", code)
	}
	if _, _, code := c.ReadShareState(ctxT(t), "sg", topicA, 1, 17); code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("read by the deposed leader: %d, want FENCED_LEADER_EPOCH", code)
	}
	if code := write(c, 1, 18, 2, 10); code != 0 {
		t.Fatalf("first write by the new leader: %d", code)
	}
	if got, _, code := c.ReadShareState(ctxT(t), "sg", topicA, 1, -1); code != 0 || got.StartOffset != 10 || got.StateEpoch != 2 {
		t.Fatalf("operator's read: %+v %d", got, code)
	}
	// Another partition has its own fence.
	if code := write(c, 2, 3, 1, 5); code != 0 {
		t.Fatalf("write to partition 2 at leader epoch 3: %d", code)
	}

	// A deposed leader's write in flight while the new leader reads: the
	// read stores its epoch without waiting for the write (its own append
	// reaches the log while the write's is held), and the write is then
	// answered FENCED_LEADER_EPOCH.
	if code := write(c, 3, 5, 1, 10); code != 0 {
		t.Fatalf("write to partition 3: %d", code)
	}
	gate, held := make(chan struct{}), make(chan struct{})
	log.mu.Lock()
	log.appendGate, log.appendHeld = gate, held
	log.mu.Unlock()
	waitHeld := func(what string) {
		t.Helper()
		select {
		case <-held:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never reached the log", what)
		}
	}
	inFlight := make(chan int16, 1)
	go func() { inFlight <- write(c, 3, 5, 1, 20) }()
	waitHeld("the deposed leader's write")
	type readResult struct {
		st   ShareState
		code int16
	}
	read := make(chan readResult, 1)
	go func() {
		st, _, code := c.ReadShareState(ctxT(t), "sg", topicA, 3, 6)
		read <- readResult{st, code}
	}()
	waitHeld("the new leader's read (it waited for the write in flight)")
	log.mu.Lock()
	log.appendGate, log.appendHeld = nil, nil
	log.mu.Unlock()
	close(gate)
	select {
	case code := <-inFlight:
		if code != kerr.FencedLeaderEpoch.Code {
			t.Fatalf("write in flight during the new leader's read: %d, want FENCED_LEADER_EPOCH (its acknowledgements would be overwritten)", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write in flight never returned")
	}
	select {
	case r := <-read:
		if r.code != 0 || (r.st.StartOffset != 10 && r.st.StartOffset != 20) {
			t.Fatalf("new leader's read during the old leader's write: %+v %d", r.st, r.code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the new leader's read never returned")
	}
	if code := write(c, 3, 6, 2, 10); code != 0 {
		t.Fatalf("first write by partition 3's new leader: %d", code)
	}

	// A new coordinator: the deposed leader is older than the stored
	// leader epoch (18), and its state epoch (1) older than the one its
	// successor stored (2); an operator's write (-1) meets the latter.
	c.Close()
	c2 := startCoordinator(t, cfg, log)
	if code := write(c2, 1, 17, 1, 70); code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("deposed leader's write after a coordinator failover: %d, want FENCED_LEADER_EPOCH", code)
	}
	if code := write(c2, 1, -1, 1, 70); code != kerr.FencedStateEpoch.Code {
		t.Fatalf("write with a stale state epoch after a coordinator failover: %d, want FENCED_STATE_EPOCH", code)
	}
	if got, _, code := c2.ReadShareState(ctxT(t), "sg", topicA, 1, -1); code != 0 || got.StartOffset != 10 || got.StateEpoch != 2 {
		t.Fatalf("state after the failover: %+v %d", got, code)
	}
}

// TestShareStateLeaderFenceSurvivesFailover: a new partition leader read
// the state, and the coordinator failed over before that leader's first
// write. The state epoch cannot fence the deposed leader yet (its write
// carries the stored one), so the new coordinator must know the newest
// leader epoch from the log, as Kafka's share coordinator stores it; it
// must survive a snapshot too, and go with the group.
func TestShareStateLeaderFenceSurvivesFailover(t *testing.T) {
	cfg := cgTestConfig()
	log := newMemLog()
	c := startCoordinator(t, cfg, log)
	write := func(c *Coordinator, leaderEpoch, stateEpoch int32, start int64) int16 {
		t.Helper()
		return c.WriteShareState(ctxT(t), "sg", topicA, 4, ShareState{StateEpoch: stateEpoch, StartOffset: start}, leaderEpoch)
	}
	if code := write(c, 7, 1, 10); code != 0 {
		t.Fatalf("write by leader epoch 7: %d", code)
	}
	if _, _, code := c.ReadShareState(ctxT(t), "sg", topicA, 4, 8); code != 0 {
		t.Fatalf("read by the new leader (epoch 8): %d", code)
	}
	c.Close()
	c2 := startCoordinator(t, cfg, log)
	if code := write(c2, 7, 1, 30); code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("deposed leader's write after the failover: %d, want FENCED_LEADER_EPOCH", code)
	}
	if _, _, code := c2.ReadShareState(ctxT(t), "sg", topicA, 4, 7); code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("deposed leader's read after the failover: %d, want FENCED_LEADER_EPOCH", code)
	}
	if err := c2.snapshot(ctxT(t), c2.PartitionFor("sg")); err != nil {
		t.Fatal(err)
	}
	c2.Close()
	c3 := startCoordinator(t, cfg, log)
	if code := write(c3, 7, 1, 40); code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("deposed leader's write after a snapshot and another failover: %d, want FENCED_LEADER_EPOCH", code)
	}
	if code := write(c3, 8, 2, 10); code != 0 {
		t.Fatalf("first write by the new leader: %d", code)
	}
	if got, _, code := c3.ReadShareState(ctxT(t), "sg", topicA, 4, -1); code != 0 || got.StartOffset != 10 || got.StateEpoch != 2 {
		t.Fatalf("state: %+v %d", got, code)
	}
	// Group deletion takes the leader epochs with it.
	deleteGroup(t, c3, "sg")
	c3.Close()
	c4 := startCoordinator(t, cfg, log)
	if code := write(c4, 1, 0, 0); code != 0 {
		t.Fatalf("write by leader epoch 1 after the group's deletion: %d", code)
	}
	c4.Close()
	c5 := startCoordinator(t, cfg, log)
	if code := write(c5, 1, 0, 5); code != 0 {
		t.Fatalf("write by leader epoch 1 to the group made again, after a failover: %d (the deleted group's leader epoch came back)", code)
	}
}
