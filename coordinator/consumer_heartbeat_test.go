package coordinator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	topicA = [16]byte{0xa}
	topicB = [16]byte{0xb}
)

func cgTestConfig() Config {
	cfg := testConfig()
	cfg.ConsumerSessionTimeout = time.Minute
	cfg.ConsumerHeartbeatInterval = 100 * time.Millisecond
	im := NewTopicImage(map[string]TopicInfo{"a": {ID: topicA, Partitions: 4}, "b": {ID: topicB, Partitions: 2}})
	cfg.Topics = func() *TopicImage { return im }
	return cfg
}

type hbOpt func(*kmsg.ConsumerGroupHeartbeatRequest)

func cgHB(t *testing.T, c *Coordinator, group, member string, epoch int32, owned tpSet, opts ...hbOpt) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = group, member, epoch
	req.RebalanceTimeoutMillis = 30000
	if epoch == 0 {
		req.SubscribedTopicNames = []string{"a"}
	}
	if owned != nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, id := range owned.topicIDs() {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id, Partitions: owned[id]})
		}
	}
	for _, o := range opts {
		o(req)
	}
	return c.ConsumerGroupHeartbeat(WithClientInfo(ctxT(t), ClientInfo{ClientID: "test", ClientHost: "/127.0.0.1"}), req)
}

func respAssigned(resp *kmsg.ConsumerGroupHeartbeatResponse) tpSet {
	if resp.Assignment == nil {
		return nil
	}
	s := tpSet{}
	for _, tp := range resp.Assignment.Topics {
		for _, p := range tp.Partitions {
			s.add(tp.TopicID, p)
		}
	}
	return s
}

func mustOK(t *testing.T, resp *kmsg.ConsumerGroupHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	if resp.ErrorCode != 0 {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		t.Fatalf("heartbeat: %v %s", kerr.ErrorForCode(resp.ErrorCode), msg)
	}
	return resp
}

func describeCG(t *testing.T, c *Coordinator, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Version = 1
	req.Groups = []string{group}
	return c.ConsumerGroupDescribe(context.Background(), req).Groups[0]
}

// TestConsumerGroupJoinRevokeAssign: the second member's join moves half
// of the first's partitions through revocation; the durable log replays to
// the same state on another coordinator.
func TestConsumerGroupJoinRevokeAssign(t *testing.T) {
	log := newMemLog()
	cfg := cgTestConfig()
	c := startCoordinator(t, cfg, log)

	r1 := mustOK(t, cgHB(t, c, "g", "m1", 0, tpSet{}))
	if r1.MemberEpoch != 1 || respAssigned(r1).count() != 4 || r1.HeartbeatIntervalMillis != 100 {
		t.Fatalf("first join: epoch %d assigned %v interval %d", r1.MemberEpoch, respAssigned(r1), r1.HeartbeatIntervalMillis)
	}
	own1 := respAssigned(r1)

	r2 := mustOK(t, cgHB(t, c, "g", "m2", 0, tpSet{}))
	if r2.MemberEpoch != 2 || respAssigned(r2).count() != 0 {
		t.Fatalf("second join: epoch %d assigned %v (its partitions are still m1's)", r2.MemberEpoch, respAssigned(r2))
	}
	if d := describeCG(t, c, "g"); d.State != cgStateReconciling || d.Epoch != 2 || d.AssignmentEpoch != 2 {
		t.Fatalf("describe: %+v", d)
	}

	// m1 is asked to revoke two partitions and stays at epoch 1.
	r1 = mustOK(t, cgHB(t, c, "g", "m1", 1, own1))
	if r1.MemberEpoch != 1 || respAssigned(r1).count() != 2 {
		t.Fatalf("m1 revoke: epoch %d assigned %v", r1.MemberEpoch, respAssigned(r1))
	}
	kept := respAssigned(r1)
	// A stale epoch is fenced and changes nothing.
	before := describeCG(t, c, "g")
	if r := cgHB(t, c, "g", "m1", 0+7, kept); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("epoch ahead: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := cgHB(t, c, "g", "nobody", 1, kept); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if after := describeCG(t, c, "g"); after.Epoch != before.Epoch || len(after.Members) != 2 {
		t.Fatalf("state changed by refused heartbeats: %+v", after)
	}
	// m2 cannot have them before m1 acknowledges.
	if r := mustOK(t, cgHB(t, c, "g", "m2", 2, tpSet{})); respAssigned(r).count() != 0 {
		t.Fatalf("m2 got partitions still owned by m1: %v", respAssigned(r))
	}
	r1 = mustOK(t, cgHB(t, c, "g", "m1", 1, kept))
	if r1.MemberEpoch != 2 {
		t.Fatalf("m1 after ack: epoch %d", r1.MemberEpoch)
	}
	r2 = mustOK(t, cgHB(t, c, "g", "m2", 2, tpSet{}))
	if respAssigned(r2).count() != 2 {
		t.Fatalf("m2 after the revocation: %v", respAssigned(r2))
	}
	if d := describeCG(t, c, "g"); d.State != cgStateStable {
		t.Fatalf("not stable: %s", d.State)
	}

	// Offsets: a commit at the member's epoch works, a stale one does not.
	commit := func(member string, epoch int32) int16 {
		req := commitReq(9, "g", member, epoch, "a", map[int32]int64{0: 10})
		for _, tt := range c.OffsetCommit(ctxT(t), req).Topics {
			return tt.Partitions[0].ErrorCode
		}
		return -1
	}
	if code := commit("m1", 2); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	if code := commit("m1", 1); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("stale commit: %v", kerr.ErrorForCode(code))
	}
	if code := commit("ghost", 2); code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member commit: %v", kerr.ErrorForCode(code))
	}
	if code := commit("", -1); code != kerr.UnknownMemberID.Code {
		t.Fatalf("simple commit to a group with members: %v", kerr.ErrorForCode(code))
	}

	// Another coordinator replays the log to the same state.
	c2 := startCoordinator(t, cfg, log)
	d1, d2 := describeCG(t, c, "g"), describeCG(t, c2, "g")
	if d2.Epoch != d1.Epoch || d2.AssignmentEpoch != d1.AssignmentEpoch || d2.State != d1.State || len(d2.Members) != 2 {
		t.Fatalf("reloaded: %+v\nwant %+v", d2, d1)
	}
	for i := range d1.Members {
		a, b := d1.Members[i], d2.Members[i]
		if a.MemberID != b.MemberID || a.MemberEpoch != b.MemberEpoch || len(a.Assignment.TopicPartitions) != len(b.Assignment.TopicPartitions) {
			t.Fatalf("member %d reloaded as %+v, was %+v", i, b, a)
		}
	}
	if o, code := fetchOffset(t, c2, "g", "a", 0); o != 10 || code != 0 {
		t.Fatalf("offset after reload: %d %v", o, code)
	}
	// The reloaded member keeps heartbeating at its epoch.
	mustOK(t, cgHB(t, c2, "g", "m2", 2, respAssigned(r2)))
}

func TestConsumerGroupBadInput(t *testing.T) {
	c := startCoordinator(t, cgTestConfig(), newMemLog())
	regex := func(re string) hbOpt {
		return func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.SubscribedTopicNames = nil
			r.SubscribedTopicRegex = &re
		}
	}
	cases := []struct {
		name string
		resp *kmsg.ConsumerGroupHeartbeatResponse
		want int16
	}{
		{"invalid regex", cgHB(t, c, "g", "m1", 0, tpSet{}, regex("a(")), kerr.InvalidRegularExpression.Code},
		{"no member id (v1)", cgHB(t, c, "g", "", 0, tpSet{}), kerr.InvalidRequest.Code},
		{"owned partitions on join", cgHB(t, c, "g", "m1", 0, set(0xa, 1)), kerr.InvalidRequest.Code},
		{"no subscription on join", cgHB(t, c, "g", "m1", 0, tpSet{}, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }), kerr.InvalidRequest.Code},
		{"epoch below -2", cgHB(t, c, "g", "m1", -3, nil), kerr.InvalidRequest.Code},
		{"unknown assignor", cgHB(t, c, "g", "m1", 0, tpSet{}, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = kmsg.StringPtr("sticky") }), kerr.UnsupportedAssignor.Code},
		{"heartbeat to a missing group", cgHB(t, c, "g", "m1", 3, nil), kerr.GroupIDNotFound.Code},
		{"leave of a missing group", cgHB(t, c, "g", "m1", -1, nil), kerr.GroupIDNotFound.Code},
	}
	for _, tc := range cases {
		if tc.resp.ErrorCode != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, kerr.ErrorForCode(tc.resp.ErrorCode), kerr.ErrorForCode(tc.want))
		}
	}
	// Nothing was created by the refused requests.
	if resp := c.ListGroups(context.Background(), kmsg.NewPtrListGroupsRequest()); len(resp.Groups) != 0 {
		t.Fatalf("groups after refused requests: %+v", resp.Groups)
	}
	// A regex subscription resolves against the topics, whole names only.
	r := mustOK(t, cgHB(t, c, "g", "m1", 0, tpSet{}, regex("[ab]")))
	if got := respAssigned(r); got.count() != 6 {
		t.Fatalf("regex [ab]: %v", got)
	}
	r = mustOK(t, cgHB(t, c, "g2", "m1", 0, tpSet{}, regex("a.")))
	if got := respAssigned(r); got.count() != 0 {
		t.Fatalf("regex a. matched %v", got)
	}
}

func TestConsumerGroupStaticAndLeave(t *testing.T) {
	c := startCoordinator(t, cgTestConfig(), newMemLog())
	inst := func(id string) hbOpt { return func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = &id } }
	r1 := mustOK(t, cgHB(t, c, "g", "s1", 0, tpSet{}, inst("i1")))
	own := respAssigned(r1)
	// Another member with the same instance id while s1 is live.
	if r := cgHB(t, c, "g", "s2", 0, tpSet{}, inst("i1")); r.ErrorCode != kerr.UnreleasedInstanceID.Code {
		t.Fatalf("duplicate instance: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// s1 leaves for now (-2): it keeps its partitions.
	if r := mustOK(t, cgHB(t, c, "g", "s1", -2, nil, inst("i1"))); r.MemberEpoch != -2 {
		t.Fatalf("static leave epoch %d", r.MemberEpoch)
	}
	// A new process with the same instance id takes over its assignment.
	r2 := mustOK(t, cgHB(t, c, "g", "s2", 0, tpSet{}, inst("i1")))
	if !respAssigned(r2).equal(own) || r2.MemberEpoch != r1.MemberEpoch {
		t.Fatalf("static rejoin: epoch %d assigned %v, want %d %v", r2.MemberEpoch, respAssigned(r2), r1.MemberEpoch, own)
	}
	if r := cgHB(t, c, "g", "s1", r1.MemberEpoch, own, inst("i1")); r.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("old static member: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// A full leave removes it and bumps the epoch.
	if r := mustOK(t, cgHB(t, c, "g", "s2", -1, nil, inst("i1"))); r.MemberEpoch != -1 {
		t.Fatalf("leave epoch %d", r.MemberEpoch)
	}
	if d := describeCG(t, c, "g"); len(d.Members) != 0 || d.State != cgStateEmpty || d.Epoch != r1.MemberEpoch+1 {
		t.Fatalf("after leave: %+v", d)
	}
	// Group size bound.
	cfg := cgTestConfig()
	cfg.ConsumerMaxSize = 1
	c2 := startCoordinator(t, cfg, newMemLog())
	mustOK(t, cgHB(t, c2, "g", "a", 0, tpSet{}))
	if r := cgHB(t, c2, "g", "b", 0, tpSet{}); r.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("max size: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

func TestConsumerGroupSessionTimeoutAndConversion(t *testing.T) {
	cfg := cgTestConfig()
	cfg.ConsumerSessionTimeout = 200 * time.Millisecond
	c := startCoordinator(t, cfg, newMemLog())
	mustOK(t, cgHB(t, c, "g", "m1", 0, tpSet{}))
	checkFor(t, 5*time.Second, func() error {
		if d := describeCG(t, c, "g"); len(d.Members) != 0 {
			return context.DeadlineExceeded
		}
		return nil
	})
	// ListGroups shows the empty consumer group with its type; classic
	// filter leaves it out.
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.Version = 5
	lreq.TypesFilter = []string{"consumer"}
	if l := c.ListGroups(context.Background(), lreq); len(l.Groups) != 1 || l.Groups[0].GroupType != "consumer" || l.Groups[0].GroupState != "Empty" {
		t.Fatalf("list consumer: %+v", l.Groups)
	}
	lreq.TypesFilter = []string{"classic"}
	if l := c.ListGroups(context.Background(), lreq); len(l.Groups) != 0 {
		t.Fatalf("list classic: %+v", l.Groups)
	}
	// A classic JoinGroup converts the empty consumer group.
	resp := c.JoinGroup(ctxT(t), joinReq("g", "", time.Second, "a"))
	if resp.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("classic join to an empty consumer group: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if d := describeCG(t, c, "g"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer group still there: %+v", d)
	}
	// A consumer heartbeat to a classic group with members is refused.
	stableGroup(t, c, "classic", 1, 10*time.Second, "a")
	if r := cgHB(t, c, "classic", "m1", 0, tpSet{}); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer join to a live classic group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestConsumerGroupSnapshot: snapshots rewrite a consumer group's records,
// and a replay from the moved log start rebuilds the same group.
func TestConsumerGroupSnapshot(t *testing.T) {
	log := newMemLog()
	cfg := cgTestConfig()
	cfg.SnapshotBytes = 1 // a snapshot after every write
	c := startCoordinator(t, cfg, log)
	r1 := mustOK(t, cgHB(t, c, "g", "m1", 0, tpSet{}))
	mustOK(t, cgHB(t, c, "g", "m2", 0, tpSet{}))
	mustOK(t, cgHB(t, c, "g", "m1", r1.MemberEpoch, respAssigned(r1)))
	want := describeCG(t, c, "g")
	p := c.PartitionFor("g")
	checkFor(t, 5*time.Second, func() error {
		if start, _ := log.retained(p); start == 0 {
			return context.DeadlineExceeded // no snapshot moved the log start yet
		}
		return nil
	})
	// Whatever snapshots ran, a replay gives the live state.
	checkFor(t, 5*time.Second, func() error {
		c2 := New(cfg, log, quietLogger())
		defer c2.Close()
		if err := c2.BecomeLeader(context.Background(), p); err != nil {
			return err
		}
		got := describeCG(t, c2, "g")
		if got.Epoch != want.Epoch || got.AssignmentEpoch != want.AssignmentEpoch || len(got.Members) != len(want.Members) {
			return errors.New("replayed group differs")
		}
		for i := range got.Members {
			g, w := got.Members[i], want.Members[i]
			if g.MemberID != w.MemberID || g.MemberEpoch != w.MemberEpoch ||
				len(g.Assignment.TopicPartitions) != len(w.Assignment.TopicPartitions) ||
				len(g.TargetAssignment.TopicPartitions) != len(w.TargetAssignment.TopicPartitions) {
				return errors.New("replayed member differs")
			}
		}
		return nil
	})
}
