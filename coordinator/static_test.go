package coordinator

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func staticJoinReq(group, memberID, instance string, version int16, session time.Duration) *kmsg.JoinGroupRequest {
	r := joinReq(group, memberID, session, "t")
	r.Version = version
	r.InstanceID = kmsg.StringPtr(instance)
	return r
}

// staticGroup brings static members (by instance id) to Stable in one
// rebalance and returns their member ids by instance and the generation.
func staticGroup(t *testing.T, c *Coordinator, group string, session time.Duration, instances ...string) (map[string]string, int32) {
	t.Helper()
	var mu sync.Mutex
	joins := map[string]*kmsg.JoinGroupResponse{} // by member id
	ids := map[string]string{}
	var wg sync.WaitGroup
	for _, inst := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := c.JoinGroup(ctxT(t), staticJoinReq(group, "", inst, 5, session))
			mu.Lock()
			defer mu.Unlock()
			if resp.ErrorCode != 0 {
				t.Errorf("static join %s: code %d", inst, resp.ErrorCode)
				return
			}
			joins[resp.MemberID] = resp
			ids[inst] = resp.MemberID
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	assign := map[string][]byte{}
	var gen int32
	for id, j := range joins {
		assign[id] = []byte("assignment-of-" + id)
		gen = j.Generation
	}
	for id, s := range syncConcurrently(t, c, group, joins, assign) {
		if s.ErrorCode != 0 {
			t.Fatalf("sync %s: code %d", id, s.ErrorCode)
		}
	}
	return ids, gen
}

func staticHeartbeat(c *Coordinator, group, member, instance string, gen int32) int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group, r.MemberID, r.Generation = group, member, gen
	r.InstanceID = kmsg.StringPtr(instance)
	return c.Heartbeat(context.Background(), r).ErrorCode
}

func TestStaticRejoinWithoutRebalanceAndFencing(t *testing.T) {
	cfg := testConfig()
	log := newMemLog()
	c := startCoordinator(t, cfg, log)
	const group = "static"
	ids, gen := staticGroup(t, c, group, 10*time.Second, "a", "b")
	oldA := ids["a"]
	leader := describeLeader(t, c, group)

	// "a" restarts: unknown member id, same instance id.
	resp := c.JoinGroup(ctxT(t), staticJoinReq(group, "", "a", 5, 10*time.Second))
	if resp.ErrorCode != 0 || resp.MemberID == "" || resp.MemberID == oldA {
		t.Fatalf("static rejoin: code %d member %q (old %q)", resp.ErrorCode, resp.MemberID, oldA)
	}
	newA := resp.MemberID
	if resp.Generation != gen {
		t.Fatalf("static rejoin changed the generation: %d -> %d", gen, resp.Generation)
	}
	if resp.LeaderID != leader || len(resp.Members) != 0 {
		t.Fatalf("static rejoin before v9: leader %q members %d, want the old leader %q and no members", resp.LeaderID, len(resp.Members), leader)
	}
	if d := describe(c, group); d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("after static rejoin: state %s, %d members", d.State, len(d.Members))
	}
	// The new id syncs and gets the old member's assignment; "b" sees no rebalance.
	s := c.SyncGroup(ctxT(t), syncReq(group, newA, gen, nil))
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "assignment-of-"+oldA {
		t.Fatalf("sync of the new id: code %d assignment %q", s.ErrorCode, s.MemberAssignment)
	}
	if code := staticHeartbeat(c, group, ids["b"], "b", gen); code != 0 {
		t.Fatalf("heartbeat of b: %d", code)
	}
	if code := staticHeartbeat(c, group, newA, "a", gen); code != 0 {
		t.Fatalf("heartbeat of the new a: %d", code)
	}

	// The old member id is fenced wherever it names its instance.
	if code := staticHeartbeat(c, group, oldA, "a", gen); code != errFencedInstanceID {
		t.Fatalf("heartbeat of the old id: %d, want FENCED_INSTANCE_ID", code)
	}
	if code := heartbeat(c, group, oldA, gen); code != errUnknownMemberID {
		t.Fatalf("heartbeat of the old id without instance: %d, want UNKNOWN_MEMBER_ID", code)
	}
	sr := syncReq(group, oldA, gen, nil)
	sr.InstanceID = kmsg.StringPtr("a")
	if code := c.SyncGroup(ctxT(t), sr).ErrorCode; code != errFencedInstanceID {
		t.Fatalf("sync of the old id: %d", code)
	}
	cr := commitReq(8, group, oldA, gen, "t", map[int32]int64{0: 1})
	cr.InstanceID = kmsg.StringPtr("a")
	if codes := commitCodes(c.OffsetCommit(ctxT(t), cr)); codes[errFencedInstanceID] != 1 {
		t.Fatalf("commit of the old id: %v", codes)
	}
	cr = commitReq(8, group, newA, gen, "t", map[int32]int64{0: 1})
	cr.InstanceID = kmsg.StringPtr("a")
	if codes := commitCodes(c.OffsetCommit(ctxT(t), cr)); codes[0] != 1 {
		t.Fatalf("commit of the new id: %v", codes)
	}
	jr := staticJoinReq(group, oldA, "a", 5, 10*time.Second)
	if code := c.JoinGroup(ctxT(t), jr).ErrorCode; code != errFencedInstanceID {
		t.Fatalf("join of the old id: %d", code)
	}
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version = 3
	lr.Group = group
	lr.Members = []kmsg.LeaveGroupRequestMember{{MemberID: oldA, InstanceID: kmsg.StringPtr("a")}}
	if lresp := c.LeaveGroup(ctxT(t), lr); lresp.ErrorCode != 0 || lresp.Members[0].ErrorCode != errFencedInstanceID {
		t.Fatalf("leave of the old id: %+v", lresp)
	}
	if d := describe(c, group); d.State != "Stable" {
		t.Fatalf("state %s after fenced requests", d.State)
	}

	// Restart: the replacement was stored, with the instance ids.
	c.Close()
	c2 := startCoordinator(t, cfg, log)
	d := describe(c2, group)
	got := map[string]string{}
	for _, m := range d.Members {
		if m.InstanceID != nil {
			got[*m.InstanceID] = m.MemberID
		}
	}
	if d.State != "Stable" || got["a"] != newA || got["b"] != ids["b"] {
		t.Fatalf("after restart: state %s members %v, want a=%s b=%s", d.State, got, newA, ids["b"])
	}
	if code := staticHeartbeat(c2, group, oldA, "a", gen); code != errFencedInstanceID {
		t.Fatalf("old id after restart: %d", code)
	}
	if code := staticHeartbeat(c2, group, newA, "a", gen); code != 0 {
		t.Fatalf("new id after restart: %d", code)
	}
}

// describeLeader returns the leader of a Stable group from its internals.
func describeLeader(t *testing.T, c *Coordinator, group string) string {
	t.Helper()
	g, _ := c.lookup(group, false)
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.leader
}

func TestStaticLeaderRejoinV9SkipsAssignment(t *testing.T) {
	c := startCoordinator(t, testConfig(), newMemLog())
	const group = "static9"
	ids, gen := staticGroup(t, c, group, 10*time.Second, "a", "b")
	leader := describeLeader(t, c, group)
	inst := "a"
	if ids["b"] == leader {
		inst = "b"
	}
	resp := c.JoinGroup(ctxT(t), staticJoinReq(group, "", inst, 9, 10*time.Second))
	if resp.ErrorCode != 0 || resp.Generation != gen {
		t.Fatalf("rejoin: code %d gen %d", resp.ErrorCode, resp.Generation)
	}
	if !resp.SkipAssignment || resp.LeaderID != resp.MemberID || len(resp.Members) != 2 {
		t.Fatalf("v9 leader rejoin: skip %v leader %q member %q members %d", resp.SkipAssignment, resp.LeaderID, resp.MemberID, len(resp.Members))
	}
}

func TestStaticRejoinWithChangedProtocolRebalances(t *testing.T) {
	c := startCoordinator(t, testConfig(), newMemLog())
	const group = "static-change"
	_, gen := staticGroup(t, c, group, 10*time.Second, "a")
	r := staticJoinReq(group, "", "a", 5, 10*time.Second)
	r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "sticky", Metadata: consumerMeta("t")}, {Name: "range", Metadata: consumerMeta("t")}}
	resp := c.JoinGroup(ctxT(t), r)
	if resp.ErrorCode != 0 || resp.Generation != gen+1 {
		t.Fatalf("rejoin with another protocol: code %d gen %d, want a rebalance to %d", resp.ErrorCode, resp.Generation, gen+1)
	}
}

func TestStaticRejoinStoreFailureReverts(t *testing.T) {
	log := newMemLog()
	c := startCoordinator(t, testConfig(), log)
	const group = "static-fail"
	ids, gen := staticGroup(t, c, group, 10*time.Second, "a", "b")
	log.mu.Lock()
	log.failNext = errInjected
	log.mu.Unlock()
	resp := c.JoinGroup(ctxT(t), staticJoinReq(group, "", "a", 5, 10*time.Second))
	if resp.ErrorCode != errCoordinatorNotAvailable || resp.MemberID != "" {
		t.Fatalf("failed store: code %d member %q", resp.ErrorCode, resp.MemberID)
	}
	if code := staticHeartbeat(c, group, ids["a"], "a", gen); code != 0 {
		t.Fatalf("old id after a failed replacement: %d", code)
	}
}

func TestStaticLeaveByInstanceID(t *testing.T) {
	c := startCoordinator(t, testConfig(), newMemLog())
	const group = "static-leave"
	ids, gen := staticGroup(t, c, group, 10*time.Second, "a", "b")
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version = 4
	lr.Group = group
	lr.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: kmsg.StringPtr("b")}, {InstanceID: kmsg.StringPtr("nobody")}}
	resp := c.LeaveGroup(ctxT(t), lr)
	if resp.ErrorCode != 0 || len(resp.Members) != 2 || resp.Members[0].ErrorCode != 0 || resp.Members[1].ErrorCode != errUnknownMemberID {
		t.Fatalf("leave by instance: %+v", resp)
	}
	if code := staticHeartbeat(c, group, ids["a"], "a", gen); code != errRebalanceInProgress {
		t.Fatalf("heartbeat of a after b left: %d, want REBALANCE_IN_PROGRESS", code)
	}
	if code := staticHeartbeat(c, group, ids["b"], "b", gen); code != errUnknownMemberID {
		t.Fatalf("heartbeat of b after leaving: %d", code)
	}
}

func TestStaticSessionTimeoutRemovesMember(t *testing.T) {
	c := startCoordinator(t, testConfig(), newMemLog())
	const group = "static-expire"
	staticGroup(t, c, group, 300*time.Millisecond, "a")
	checkFor(t, 5*time.Second, func() error {
		if d := describe(c, group); d.State != "Empty" || len(d.Members) != 0 {
			return errorf("state %s, %d members", d.State, len(d.Members))
		}
		return nil
	})
	// The instance is free again: a new join is a fresh member.
	resp := c.JoinGroup(ctxT(t), staticJoinReq(group, "", "a", 5, 10*time.Second))
	if resp.ErrorCode != 0 {
		t.Fatalf("join after expiry: %d", resp.ErrorCode)
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
