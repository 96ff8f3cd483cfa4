package integration

// Bad input to the group coordinator (issue 3), as raw kmsg requests sent
// through a kgo client, against a broker with message.max.bytes=10000:
//
//   - OffsetCommit from a stale or future generation, or from a member id
//     the group does not know, is refused (ILLEGAL_GENERATION,
//     UNKNOWN_MEMBER_ID) and stores nothing: OffsetFetch still shows the
//     last accepted commit;
//   - the group APIs refuse an empty group id with INVALID_GROUP_ID;
//   - a leader's SyncGroup naming members that do not exist: those
//     assignments are ignored and the real members get theirs;
//   - a member joining with protocol metadata larger than message.max.bytes
//     gets an error code (the group metadata record holding it cannot be
//     written), and the group then recovers for its real members, who go
//     on consuming.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func groupsConsumerMetadata(topic string, userData []byte) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = []string{topic}
	m.UserData = userData
	return m.AppendTo(nil)
}

func groupsConsumerAssignment(topic string, partitions ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: partitions}}
	return a.AppendTo(nil)
}

func groupsDecodeAssignment(t *testing.T, b []byte) map[string][]int32 {
	t.Helper()
	a := kmsg.NewConsumerMemberAssignment()
	if err := a.ReadFrom(b); err != nil {
		t.Fatalf("decoding assignment %x: %v", b, err)
	}
	out := make(map[string][]int32)
	for _, tp := range a.Topics {
		ps := append([]int32(nil), tp.Partitions...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out[tp.Topic] = ps
	}
	return out
}

// groupsJoin sends one JoinGroup for the "consumer" protocol with the range
// assignor.
func groupsJoin(ctx context.Context, cl *kgo.Client, group, memberID string, meta []byte, session, rebalance time.Duration) (*kmsg.JoinGroupResponse, error) {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group = group
	req.MemberID = memberID
	req.ProtocolType = "consumer"
	req.SessionTimeoutMillis = int32(session.Milliseconds())
	req.RebalanceTimeoutMillis = int32(rebalance.Milliseconds())
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta}}
	return req.RequestWith(ctx, cl)
}

// groupsJoinMember joins as a new member: a JoinGroup without member id, and
// when the coordinator answers MEMBER_ID_REQUIRED (v4+), again with the id
// it handed out.
func groupsJoinMember(ctx context.Context, cl *kgo.Client, group string, meta []byte, session, rebalance time.Duration) (*kmsg.JoinGroupResponse, error) {
	resp, err := groupsJoin(ctx, cl, group, "", meta, session, rebalance)
	if err != nil {
		return nil, err
	}
	if resp.ErrorCode == kerr.MemberIDRequired.Code {
		return groupsJoin(ctx, cl, group, resp.MemberID, meta, session, rebalance)
	}
	return resp, nil
}

func groupsSync(ctx context.Context, cl *kgo.Client, group, memberID string, gen int32, assignments map[string][]byte) (*kmsg.SyncGroupResponse, error) {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group = group
	req.MemberID = memberID
	req.Generation = gen
	req.ProtocolType = kmsg.StringPtr("consumer")
	req.Protocol = kmsg.StringPtr("range")
	ids := make([]string, 0, len(assignments))
	for id := range assignments {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: assignments[id]})
	}
	return req.RequestWith(ctx, cl)
}

func groupsCommit(ctx context.Context, cl *kgo.Client, group, memberID string, gen int32, topic string, offsets map[int32]int64) (map[int32]int16, error) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = group
	req.MemberID = memberID
	req.Generation = gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = p
		rp.Offset = o
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	codes := make(map[int32]int16)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			codes[p.Partition] = p.ErrorCode
		}
	}
	return codes, nil
}

// groupsFetchOffsets returns the committed offsets of topic's partitions
// (-1: none).
func groupsFetchOffsets(ctx context.Context, cl *kgo.Client, group, topic string, partitions ...int32) (map[int32]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	rt.Partitions = partitions
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	out := make(map[int32]int64)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out, nil
}

func groupsCodeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}

func TestGroupsBadInput(t *testing.T) {
	b := StartBroker(t, append(append([]string(nil), groupsBrokerOverrides...), "message.max.bytes=10000")...)
	adm := b.Admin(t)
	cl := b.Client(t)
	const topic = "groups-bad"
	groupsCreateTopic(t, adm, topic)

	t.Run("commit-fencing-and-sync-to-non-members", func(t *testing.T) {
		const group = "bad-fencing"
		ctx := testContext(t, 60*time.Second)
		meta := groupsConsumerMetadata(topic, nil)
		session, rebalance := 30*time.Second, 30*time.Second

		// Each member has its own client: the broker, like Kafka, reads no
		// further request from a connection whose JoinGroup or SyncGroup
		// is parked, so two members cannot share one.
		clA, clB := b.Client(t), b.Client(t)
		// A alone: generation 1.
		ja, err := groupsJoinMember(ctx, clA, group, meta, session, rebalance)
		if err != nil || ja.ErrorCode != 0 {
			t.Fatalf("first member's JoinGroup: %v / %s", err, groupsCodeName(ja.ErrorCode))
		}
		a := ja.MemberID
		// B joins and parks until A rejoins; A rejoins once the group is
		// preparing a rebalance.
		type joined struct {
			resp *kmsg.JoinGroupResponse
			err  error
		}
		bJoin := make(chan joined, 1)
		go func() {
			r, err := groupsJoinMember(ctx, clB, group, meta, session, rebalance)
			bJoin <- joined{r, err}
		}()
		checkFor(t, 20*time.Second, 20*time.Millisecond, func() error {
			dgs, err := adm.DescribeGroups(ctx, group)
			if err != nil {
				return err
			}
			if st := dgs[group].State; st != "PreparingRebalance" {
				return fmt.Errorf("group is %s, waiting for PreparingRebalance", st)
			}
			return nil
		})
		ja2, err := groupsJoin(ctx, clA, group, a, meta, session, rebalance)
		if err != nil || ja2.ErrorCode != 0 {
			t.Fatalf("A's rejoin: %v / %s", err, groupsCodeName(ja2.ErrorCode))
		}
		jb := <-bJoin
		if jb.err != nil || jb.resp.ErrorCode != 0 {
			t.Fatalf("B's JoinGroup: %v / %v", jb.err, jb.resp)
		}
		bID, gen := jb.resp.MemberID, ja2.Generation
		if jb.resp.Generation != gen || gen <= ja.Generation {
			t.Fatalf("generations: A first %d, A rejoin %d, B %d", ja.Generation, gen, jb.resp.Generation)
		}
		leader, follower := a, bID
		leaderCl, followerCl := clA, clB
		if ja2.LeaderID != a {
			leader, follower = bID, a
			leaderCl, followerCl = clB, clA
		}
		if ja2.LeaderID != leader || jb.resp.LeaderID != leader {
			t.Fatalf("leaders disagree: %q / %q", ja2.LeaderID, jb.resp.LeaderID)
		}

		// The leader's SyncGroup also assigns to two members that do not
		// exist; the follower's SyncGroup carries nothing.
		assignments := map[string][]byte{
			leader:                   groupsConsumerAssignment(topic, 0, 1, 2),
			follower:                 groupsConsumerAssignment(topic, 3, 4, 5),
			"ghost-member":           groupsConsumerAssignment(topic, 0, 1, 2, 3, 4, 5),
			leader + "-not-a-member": groupsConsumerAssignment(topic, 5),
		}
		type synced struct {
			resp *kmsg.SyncGroupResponse
			err  error
		}
		followerSync := make(chan synced, 1)
		go func() {
			r, err := groupsSync(ctx, followerCl, group, follower, gen, nil)
			followerSync <- synced{r, err}
		}()
		ls, err := groupsSync(ctx, leaderCl, group, leader, gen, assignments)
		if err != nil || ls.ErrorCode != 0 {
			t.Fatalf("leader's SyncGroup: %v / %v", err, ls)
		}
		fs := <-followerSync
		if fs.err != nil || fs.resp.ErrorCode != 0 {
			t.Fatalf("follower's SyncGroup: %v / %v", fs.err, fs.resp)
		}
		if got := groupsDecodeAssignment(t, ls.MemberAssignment); fmt.Sprint(got) != fmt.Sprint(map[string][]int32{topic: {0, 1, 2}}) {
			t.Errorf("leader got assignment %v, want %s [0 1 2]", got, topic)
		}
		if got := groupsDecodeAssignment(t, fs.resp.MemberAssignment); fmt.Sprint(got) != fmt.Sprint(map[string][]int32{topic: {3, 4, 5}}) {
			t.Errorf("follower got assignment %v, want %s [3 4 5]", got, topic)
		}
		dgs, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		dg := dgs[group]
		var described []string
		for _, m := range dg.Members {
			ca, _ := m.Assigned.AsConsumer()
			var ps []int32
			if ca != nil {
				for _, tp := range ca.Topics {
					ps = append(ps, tp.Partitions...)
				}
			}
			described = append(described, fmt.Sprintf("%s=%v", m.MemberID, ps))
		}
		sort.Strings(described)
		want := []string{fmt.Sprintf("%s=%v", leader, []int32{0, 1, 2}), fmt.Sprintf("%s=%v", follower, []int32{3, 4, 5})}
		sort.Strings(want)
		if dg.State != "Stable" || strings.Join(described, " ") != strings.Join(want, " ") {
			t.Errorf("DescribeGroups: %s %v, want Stable %v", dg.State, described, want)
		}

		// A valid commit, then fenced ones.
		codes, err := groupsCommit(ctx, cl, group, a, gen, topic, map[int32]int64{0: 5})
		if err != nil || codes[0] != 0 {
			t.Fatalf("valid OffsetCommit: %v / %s", err, groupsCodeName(codes[0]))
		}
		bad := []struct {
			name     string
			member   string
			gen      int32
			wantCode int16
		}{
			{"previous generation", a, gen - 1, kerr.IllegalGeneration.Code},
			{"future generation", a, gen + 1, kerr.IllegalGeneration.Code},
			{"unknown member", "no-such-member", gen, kerr.UnknownMemberID.Code},
			{"unknown member, unknown generation", "no-such-member", gen + 7, kerr.UnknownMemberID.Code},
		}
		for _, c := range bad {
			codes, err := groupsCommit(ctx, cl, group, c.member, c.gen, topic, map[int32]int64{0: 9, 1: 9})
			if err != nil {
				t.Fatalf("%s: OffsetCommit: %v", c.name, err)
			}
			for p := int32(0); p < 2; p++ {
				if codes[p] != c.wantCode {
					t.Errorf("%s: OffsetCommit partition %d answered %s, want %s", c.name, p, groupsCodeName(codes[p]), groupsCodeName(c.wantCode))
				}
			}
		}
		got, err := groupsFetchOffsets(ctx, cl, group, topic, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != 5 || got[1] != -1 {
			t.Errorf("after the refused commits OffsetFetch shows %v, want partition 0 at 5 and nothing for partition 1", got)
		}

		// A heartbeat from a fenced generation is refused too.
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.MemberID, hb.Generation = group, a, gen-1
		if r, err := hb.RequestWith(ctx, cl); err != nil || r.ErrorCode != kerr.IllegalGeneration.Code {
			t.Errorf("Heartbeat with the previous generation: %v / %v, want ILLEGAL_GENERATION", err, r)
		}

		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Group = group
		leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a}, {MemberID: bID}}
		if r, err := leave.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
			t.Fatalf("LeaveGroup: %v / %v", err, r)
		}
		checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			dgs, err := adm.DescribeGroups(ctx, group)
			if err != nil {
				return err
			}
			if st := dgs[group].State; st != "Empty" {
				return fmt.Errorf("group is %s after both members left", st)
			}
			return nil
		})
		if got, err := groupsFetchOffsets(ctx, cl, group, topic, 0); err != nil || got[0] != 5 {
			t.Errorf("OffsetFetch after the members left: %v / %v, want partition 0 at 5", got, err)
		}
	})

	t.Run("empty-group-id", func(t *testing.T) {
		ctx := testContext(t, 30*time.Second)
		want := kerr.InvalidGroupID.Code
		jr, err := groupsJoin(ctx, cl, "", "", groupsConsumerMetadata(topic, nil), 10*time.Second, 10*time.Second)
		if err != nil || jr.ErrorCode != want {
			t.Errorf("JoinGroup with an empty group id: %v / %v, want INVALID_GROUP_ID", err, jr)
		}
		sr, err := groupsSync(ctx, cl, "", "some-member", 1, nil)
		if err != nil || sr.ErrorCode != want {
			t.Errorf("SyncGroup with an empty group id: %v / %v, want INVALID_GROUP_ID", err, sr)
		}
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.MemberID, hb.Generation = "some-member", 1
		if r, err := hb.RequestWith(ctx, cl); err != nil || r.ErrorCode != want {
			t.Errorf("Heartbeat with an empty group id: %v / %v, want INVALID_GROUP_ID", err, r)
		}
		lg := kmsg.NewPtrLeaveGroupRequest()
		lg.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "some-member"}}
		if r, err := lg.RequestWith(ctx, cl); err != nil || r.ErrorCode != want {
			t.Errorf("LeaveGroup with an empty group id: %v / %v, want INVALID_GROUP_ID", err, r)
		}
	})

	t.Run("oversized-protocol-metadata", func(t *testing.T) {
		const group = "bad-big"
		ctx := testContext(t, 90*time.Second)
		prod := newGroupsProducer(t, b, topic, "big")
		if err := prod.produce(ctx, 60); err != nil {
			t.Fatal(err)
		}
		// The member's subscription carries 20000 bytes of user data,
		// twice message.max.bytes: the group metadata record that would
		// hold it cannot be written. Alone in the group, it is the leader
		// and its SyncGroup is the one that fails: UNKNOWN_SERVER_ERROR,
		// Kafka's answer for a group metadata record too large to store.
		meta := groupsConsumerMetadata(topic, make([]byte, 20000))
		code, where := groupsOversizedMember(ctx, t, b.Client(t), group, meta, groupsConsumerAssignment(topic, 0, 1, 2, 3, 4, 5))
		if code != kerr.UnknownServerError.Code {
			t.Errorf("oversized leader: %s answered %s, want SyncGroup UNKNOWN_SERVER_ERROR", where, groupsCodeName(code))
		}
		// Two real members (franz-go, eager range balancer) join; the
		// group must drop the oversized member, which neither heartbeats
		// nor rejoins, and settle with them.
		var mu sync.Mutex
		seen := make(map[string]int)
		var wg sync.WaitGroup
		pollCtx, stopPolling := context.WithCancel(ctx)
		for _, id := range []string{"r1", "r2"} {
			m := b.Client(t,
				kgo.ClientID(id),
				kgo.ConsumerGroup(group),
				kgo.ConsumeTopics(topic),
				kgo.Balancers(kgo.RangeBalancer()),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.SessionTimeout(groupsSessionTimeout),
				kgo.HeartbeatInterval(groupsHeartbeat),
				kgo.RebalanceTimeout(5*time.Second),
				kgo.FetchMaxWait(groupsFetchMaxWait),
			)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for pollCtx.Err() == nil {
					fs := m.PollFetches(pollCtx)
					fs.EachRecord(func(r *kgo.Record) {
						mu.Lock()
						seen[string(r.Value)]++
						mu.Unlock()
					})
				}
			}()
		}
		defer func() {
			stopPolling()
			wg.Wait()
		}()
		consumedAll := func(what string) {
			t.Helper()
			checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
				mu.Lock()
				defer mu.Unlock()
				missing := 0
				for _, v := range prod.snapshot() {
					if seen[v] == 0 {
						missing++
					}
				}
				if missing > 0 {
					return fmt.Errorf("%s: %d produced records not consumed", what, missing)
				}
				return nil
			})
		}
		groupAssignment(t, adm, group, topic, []string{"r1", "r2"}, 30*time.Second)
		consumedAll("after the oversized leader")

		// The second oversized member joins the live group as a follower.
		// The leader's SyncGroup then fails to store the assignment; the
		// oversized member's own SyncGroup gets that error if it was
		// parked before, or REBALANCE_IN_PROGRESS if it came after.
		rogueCtx, cancelRogue := context.WithTimeout(ctx, 30*time.Second)
		defer cancelRogue()
		code, where = groupsOversizedMember(rogueCtx, t, b.Client(t), group, meta, nil)
		if code == 0 {
			t.Errorf("a member with %d bytes of protocol metadata (message.max.bytes=10000) joined and synced without error", len(meta))
		} else {
			t.Logf("oversized member in a live group: %s answered %s", where, groupsCodeName(code))
		}
		// The rogue neither heartbeats nor rejoins: the group drops it
		// and the real members settle again and keep consuming.
		groupAssignment(t, adm, group, topic, []string{"r1", "r2"}, 30*time.Second)
		if err := prod.produce(ctx, 60); err != nil {
			t.Fatal(err)
		}
		consumedAll("after the oversized follower")
	})
}

// groupsOversizedMember joins group with meta and sends its SyncGroup (with
// assignment as leader, or as follower) and returns the first error code
// and the request that answered it.
func groupsOversizedMember(ctx context.Context, t *testing.T, cl *kgo.Client, group string, meta, assignment []byte) (int16, string) {
	t.Helper()
	jr, err := groupsJoinMember(ctx, cl, group, meta, 2*time.Second, 2*time.Second)
	if err != nil {
		t.Fatalf("oversized JoinGroup: %v", err)
	}
	if jr.ErrorCode != 0 {
		return jr.ErrorCode, "JoinGroup"
	}
	var assignments map[string][]byte
	if jr.LeaderID == jr.MemberID {
		if assignment == nil {
			t.Fatalf("the oversized member became leader of a live group")
		}
		assignments = map[string][]byte{jr.MemberID: assignment}
	} else if assignment != nil {
		t.Fatalf("the oversized member is not the leader of its own group (leader %s)", jr.LeaderID)
	}
	sr, err := groupsSync(ctx, cl, group, jr.MemberID, jr.Generation, assignments)
	if err != nil {
		t.Fatalf("oversized member's SyncGroup: %v", err)
	}
	return sr.ErrorCode, "SyncGroup"
}
