package integration

// KIP-848 consumer groups (group.protocol=consumer) with franz-go's
// next-generation consumer (kgo.ServerSideBalancer), issue 17:
//
//   - TestKIP848Members: three member processes share six partitions; one
//     leaves cleanly, one is SIGKILLed and its partitions move to the
//     survivor after group.consumer.session.timeout.ms; the broker restarts
//     and a new member resumes from the committed offsets. The records and
//     committed offsets are checked as for the classic clients
//     (checkGroupRun: nothing lost, nothing below a committed offset read
//     again, duplicates only after the kill).
//   - TestKIP848KeepsFetchingDuringJoin: while a second member joins, the
//     first keeps fetching the partitions it keeps; the longest pause on
//     them is measured (and, for comparison, the classic eager protocol's).
//   - TestKIP848BadInput: stale member epoch, unknown member, invalid regex
//     against a live group: Kafka's errors, group unchanged.
//   - TestKIP848ClassicSideBySide: a classic and a consumer group on the
//     same topic, each consuming everything; ListGroups tells their types.
//   - TestKIP848Cluster: a 3-broker ZooKeeper cluster; members keep their
//     assignments (same epochs, same partitions) when the group's
//     coordinator is killed with -9, and a killed member's partitions move.
//   - TestKIP848RegexCluster: on a 3-broker cluster the coordinator
//     resolves a member's regex (SubscribedTopicRegex) against the
//     cluster's topics, including one created while the member runs.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kip848Overrides: members' sessions are the broker's (3s, as the classic
// members' groupsSessionTimeout), heartbeats every 500ms.
var kip848Overrides = []string{
	"group.initial.rebalance.delay.ms=0",
	"group.min.session.timeout.ms=1000",
	"group.consumer.session.timeout.ms=3000",
	"group.consumer.heartbeat.interval.ms=500",
	"num.partitions=1",
}

// cg848Describe describes group with ConsumerGroupDescribe v1.
func cg848Describe(ctx context.Context, cl *kgo.Client, group string) (kmsg.ConsumerGroupDescribeResponseGroup, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kmsg.ConsumerGroupDescribeResponseGroup{}, err
	}
	if len(resp.Groups) != 1 {
		return kmsg.ConsumerGroupDescribeResponseGroup{}, fmt.Errorf("%d groups described", len(resp.Groups))
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return g, fmt.Errorf("describing %s: %w", group, err)
	}
	return g, nil
}

// cg848Assignment waits until group is Stable with exactly the members
// whose client ids are want, every partition of topic assigned once, and
// returns client id -> partitions (and the described group).
func cg848Assignment(t *testing.T, cl *kgo.Client, group, topic string, partitions int32, want []string, within time.Duration) (map[string][]int32, kmsg.ConsumerGroupDescribeResponseGroup) {
	t.Helper()
	return cg848AssignmentVia(t, func(ctx context.Context) (kmsg.ConsumerGroupDescribeResponseGroup, error) {
		return cg848Describe(ctx, cl, group)
	}, group, topic, partitions, want, within)
}

// cg848AssignmentVia is cg848Assignment with the group described by describe.
func cg848AssignmentVia(t *testing.T, describe func(context.Context) (kmsg.ConsumerGroupDescribeResponseGroup, error), group, topic string, partitions int32, want []string, within time.Duration) (map[string][]int32, kmsg.ConsumerGroupDescribeResponseGroup) {
	t.Helper()
	var got map[string][]int32
	var last kmsg.ConsumerGroupDescribeResponseGroup
	checkFor(t, within, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dg, err := describe(ctx)
		if err != nil {
			return err
		}
		last = dg
		if dg.State != "Stable" {
			return fmt.Errorf("group %s is %s (epoch %d, assignment epoch %d)", group, dg.State, dg.Epoch, dg.AssignmentEpoch)
		}
		got = map[string][]int32{}
		owner := map[int32]string{}
		var ids []string
		for _, m := range dg.Members {
			ids = append(ids, m.ClientID)
			if _, dup := got[m.ClientID]; dup {
				return fmt.Errorf("two members with client id %s", m.ClientID)
			}
			got[m.ClientID] = nil
			if m.MemberEpoch != dg.Epoch {
				return fmt.Errorf("member %s at epoch %d, group at %d", m.ClientID, m.MemberEpoch, dg.Epoch)
			}
			for _, tp := range m.Assignment.TopicPartitions {
				if tp.Topic != topic {
					return fmt.Errorf("member %s assigned foreign topic %s", m.ClientID, tp.Topic)
				}
				for _, p := range tp.Partitions {
					if prev, taken := owner[p]; taken {
						return fmt.Errorf("partition %d assigned to both %s and %s", p, prev, m.ClientID)
					}
					owner[p] = m.ClientID
					got[m.ClientID] = append(got[m.ClientID], p)
				}
			}
		}
		sort.Strings(ids)
		w := slices.Clone(want)
		sort.Strings(w)
		if strings.Join(ids, ",") != strings.Join(w, ",") {
			return fmt.Errorf("group %s members %v, want %v", group, ids, w)
		}
		for p := int32(0); p < partitions; p++ {
			if _, ok := owner[p]; !ok {
				return fmt.Errorf("partition %d unassigned (assignment %v)", p, got)
			}
		}
		return nil
	})
	return got, last
}

// cg848MemberGone waits until no member of group has client id name and
// returns how long that took.
func cg848MemberGone(t *testing.T, cl *kgo.Client, group, name string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	checkFor(t, within, 20*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dg, err := cg848Describe(ctx, cl, group)
		if err != nil {
			return err
		}
		for _, m := range dg.Members {
			if m.ClientID == name {
				return fmt.Errorf("member %s still in group %s (%s)", name, group, dg.State)
			}
		}
		return nil
	})
	return time.Since(start)
}

func cg848WaitEmpty(t *testing.T, cl *kgo.Client, group string, within time.Duration) {
	t.Helper()
	checkFor(t, within, 50*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dg, err := cg848Describe(ctx, cl, group)
		if err != nil {
			return err
		}
		if dg.State != "Empty" || len(dg.Members) != 0 {
			return fmt.Errorf("group %s is %s with %d members, want Empty", group, dg.State, len(dg.Members))
		}
		return nil
	})
}

func TestKIP848Members(t *testing.T) {
	b := StartBroker(t, kip848Overrides...)
	c := groupsClient{name: "franz-848", cmd: groupsGoMember("franz-848"), closedLine: true}
	topic, group := "kip848-members", "kip848-members"
	adm := b.Admin(t)
	cl := b.Client(t)
	groupsCreateTopic(t, adm, topic)
	prod := newGroupsProducer(t, b, topic, c.name)
	if err := prod.produce(testContext(t, 30*time.Second), groupsInitial); err != nil {
		t.Fatal(err)
	}
	poller := startGroupCommitPoller(t, b, group, topic)
	log := &groupRecordLog{}
	spec := func(id string) groupMemberSpec {
		return groupMemberSpec{Addr: b.Addr(), Topic: topic, Group: group, ClientID: id}
	}
	members := map[string]*groupMember{}
	for _, id := range []string{"m1", "m2", "m3"} {
		members[id] = startGroupMember(t, id, c.cmd(t, spec(id)), log)
	}
	tPhase := time.Now()
	phase := func(what string) {
		t.Logf("%-50s %v", what, time.Since(tPhase).Round(time.Millisecond))
		tPhase = time.Now()
	}
	a3, _ := cg848Assignment(t, cl, group, topic, groupsPartitions, []string{"m1", "m2", "m3"}, 60*time.Second)
	phase(fmt.Sprintf("3 members assigned %v", a3))
	for id, ps := range a3 {
		if len(ps) != 2 {
			t.Errorf("member %s owns %v: the uniform assignor gives each of 3 members 2 of 6", id, ps)
		}
	}
	waitGroupConsumedAll(t, prod, log, 60*time.Second, "3 members")
	phase("3 members consumed the first records")

	stopBackground := prod.background(t)
	members["m1"].Leave(t, c.closedLine)
	if took := cg848MemberGone(t, cl, group, "m1", 30*time.Second); took > 2*time.Second {
		t.Errorf("m1 left the group %v after its clean exit: its leave heartbeat (epoch -1) was not honoured", took)
	}
	a2, _ := cg848Assignment(t, cl, group, topic, groupsPartitions, []string{"m2", "m3"}, 60*time.Second)
	phase(fmt.Sprintf("m1 left, 2 members assigned %v", a2))
	nBefore := groupsCountBy(log.snapshot(), "m2")
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if n := groupsCountBy(log.snapshot(), "m2"); n < nBefore+20 {
			return fmt.Errorf("m2 consumed %d records since the rebalance", n-nBefore)
		}
		return nil
	})
	members["m2"].Kill(t)
	tKill := time.Now()
	a1, _ := cg848Assignment(t, cl, group, topic, groupsPartitions, []string{"m3"}, 60*time.Second)
	took := time.Since(tKill)
	phase(fmt.Sprintf("m2 killed, m3 owns %v after %v", a1["m3"], took.Round(time.Millisecond)))
	if took < 2*time.Second {
		t.Errorf("m2's partitions moved %v after its kill, before its 3s session could expire", took)
	}
	if err := stopBackground(); err != nil {
		t.Fatal(err)
	}
	if err := prod.produce(testContext(t, 30*time.Second), groupsMore); err != nil {
		t.Fatal(err)
	}
	waitGroupConsumedAll(t, prod, log, 60*time.Second, "after takeover")
	waitGroupCommittedEnd(t, adm, group, topic, 30*time.Second)
	members["m3"].Leave(t, c.closedLine)
	cg848WaitEmpty(t, cl, group, 30*time.Second)
	phase("m3 consumed everything, committed, left")

	ctx := testContext(t, 30*time.Second)
	before, err := groupsFetchCommitted(ctx, adm, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	b.Restart()
	checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		after, err := groupsFetchCommitted(ctx, adm, group, topic)
		if err != nil {
			return err
		}
		for p := int32(0); p < groupsPartitions; p++ {
			if after[p] != before[p] {
				return fmt.Errorf("committed offsets after restart %v, before %v", after, before)
			}
		}
		return nil
	})
	// The empty consumer group itself survived the restart.
	cg848WaitEmpty(t, cl, group, 30*time.Second)
	phase(fmt.Sprintf("broker restarted, group and offsets intact %v", before))
	if err := prod.produce(testContext(t, 30*time.Second), groupsAfterBoot); err != nil {
		t.Fatal(err)
	}
	members["m4"] = startGroupMember(t, "m4", c.cmd(t, spec("m4")), log)
	cg848Assignment(t, cl, group, topic, groupsPartitions, []string{"m4"}, 60*time.Second)
	waitGroupConsumedAll(t, prod, log, 60*time.Second, "after restart")
	waitGroupCommittedEnd(t, adm, group, topic, 30*time.Second)
	members["m4"].Leave(t, c.closedLine)
	phase("m4 resumed after the restart and consumed the rest")
	poller.Stop()

	recs := log.snapshot()
	for p := int32(0); p < groupsPartitions; p++ {
		first := int64(-1)
		for _, r := range recs {
			if r.member == "m4" && r.partition == p {
				first = r.offset
				break
			}
		}
		if first != before[p] {
			t.Errorf("partition %d: the member joining after the restart started at offset %d, want the committed offset %d", p, first, before[p])
		}
	}
	checkGroupRun(t, prod.snapshot(), recs, poller.snapshot(), "m2", false)
}

// fetchGaps records when each record of each partition reached a consumer.
type fetchGaps struct {
	mu sync.Mutex
	at map[int32][]time.Time
}

func (f *fetchGaps) add(p int32, at time.Time) {
	f.mu.Lock()
	f.at[p] = append(f.at[p], at)
	f.mu.Unlock()
}

// maxGap is the longest time in [from, to] during which partition p
// delivered nothing (the edges count: a partition silent since before from
// has a gap from from).
func (f *fetchGaps) maxGap(p int32, from, to time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := from
	var gap time.Duration
	for _, at := range f.at[p] {
		if at.Before(from) {
			continue
		}
		if at.After(to) {
			break
		}
		gap = max(gap, at.Sub(prev))
		prev = at
	}
	return max(gap, to.Sub(prev))
}

// joinPause runs member A alone until it consumes every partition, then
// member B joins; it returns the longest pause, on the partitions A kept,
// between B's start and the group being stable again plus a second.
func joinPause(t *testing.T, b *Broker, name string, opts ...kgo.Opt) (pause time.Duration, kept, revoked []int32, rebalance time.Duration) {
	topic, group := "kip848-pause-"+name, "kip848-pause-"+name
	adm := b.Admin(t)
	groupsCreateTopic(t, adm, topic)
	prod := newGroupsProducer(t, b, topic, name)
	stop := prod.background(t)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	gaps := &fetchGaps{at: map[int32][]time.Time{}}
	var revokedMu sync.Mutex
	revokedFromA := map[int32]bool{}
	newMember := func(id string, record bool) (*kgo.Client, *sync.WaitGroup, context.CancelFunc) {
		cl := b.Client(t, append([]kgo.Opt{
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				if !record {
					return
				}
				revokedMu.Lock()
				defer revokedMu.Unlock()
				for _, p := range m[topic] {
					revokedFromA[p] = true
				}
			}),
			kgo.ClientID(id), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(groupsFetchMaxWait),
		}, opts...)...)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				now := time.Now()
				fs.EachRecord(func(r *kgo.Record) {
					if record {
						gaps.add(r.Partition, now)
					}
				})
			}
		}()
		return cl, &wg, cancel
	}
	clA, wgA, cancelA := newMember("a", true)
	defer func() { cancelA(); wgA.Wait() }()
	// A consumes all six partitions.
	checkFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		now := time.Now()
		for p := int32(0); p < groupsPartitions; p++ {
			if gaps.maxGap(p, now.Add(-time.Second), now) >= time.Second {
				return fmt.Errorf("a is not consuming partition %d yet", p)
			}
		}
		return nil
	})
	tJoin := time.Now()
	_, wgB, cancelB := newMember("b", false)
	defer func() { cancelB(); wgB.Wait() }()
	// Stable again: B owns some partitions. Read the assignment from
	// DescribeGroups (classic) or ConsumerGroupDescribe (KIP-848).
	var keptByA []int32
	checkFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		byClient := map[string][]int32{}
		if dg, err := cg848Describe(ctx, clA, group); err == nil {
			if dg.State != "Stable" {
				return fmt.Errorf("group %s", dg.State)
			}
			for _, m := range dg.Members {
				for _, tp := range m.Assignment.TopicPartitions {
					byClient[m.ClientID] = append(byClient[m.ClientID], tp.Partitions...)
				}
			}
		} else {
			dgs, err := kadm.NewClient(clA).DescribeGroups(ctx, group)
			if err != nil {
				return err
			}
			dg := dgs[group]
			if dg.State != "Stable" {
				return fmt.Errorf("group %s", dg.State)
			}
			for _, m := range dg.Members {
				if ca, ok := m.Assigned.AsConsumer(); ok {
					for _, tp := range ca.Topics {
						byClient[m.ClientID] = append(byClient[m.ClientID], tp.Partitions...)
					}
				}
			}
		}
		if len(byClient["b"]) == 0 || len(byClient["a"]) == 0 {
			return fmt.Errorf("assignment %v", byClient)
		}
		keptByA = byClient["a"]
		return nil
	})
	rebalance = time.Since(tJoin)
	time.Sleep(time.Second) // the window measured ends a second after the group is stable again
	tEnd := time.Now()
	for _, p := range keptByA {
		pause = max(pause, gaps.maxGap(p, tJoin, tEnd))
	}
	sort.Slice(keptByA, func(i, j int) bool { return keptByA[i] < keptByA[j] })
	revokedMu.Lock()
	for p := range revokedFromA {
		revoked = append(revoked, p)
	}
	revokedMu.Unlock()
	slices.Sort(revoked)
	return pause, keptByA, revoked, rebalance
}

func TestKIP848KeepsFetchingDuringJoin(t *testing.T) {
	b := StartBroker(t, kip848Overrides...)
	pause848, kept848, revoked848, took848 := joinPause(t, b, "848", kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer())
	pauseEager, keptEager, revokedEager, tookEager := joinPause(t, b, "eager", kgo.Balancers(kgo.RangeBalancer()),
		kgo.SessionTimeout(groupsSessionTimeout), kgo.HeartbeatInterval(groupsHeartbeat))
	t.Logf("KIP-848: second member joined in %v; the first kept partitions %v (revoked %v), longest pause on them %v",
		took848.Round(time.Millisecond), kept848, revoked848, pause848.Round(time.Millisecond))
	t.Logf("classic eager range: second member joined in %v; the first kept partitions %v (revoked %v), longest pause on them %v",
		tookEager.Round(time.Millisecond), keptEager, revokedEager, pauseEager.Round(time.Millisecond))
	// Only the partitions that move are revoked (the eager protocol revokes
	// them all, then hands some back).
	for _, p := range kept848 {
		if slices.Contains(revoked848, p) {
			t.Errorf("KIP-848: partition %d, kept by the first member, was revoked from it during the join", p)
		}
	}
	if len(revoked848) != groupsPartitions-len(kept848) {
		t.Errorf("KIP-848: revoked %v from the first member, which kept %v", revoked848, kept848)
	}
	// Records flow every 20ms and a fetch waits at most 500ms: a member
	// that keeps fetching never pauses a second.
	if pause848 >= time.Second {
		t.Errorf("KIP-848: the first member stopped fetching its kept partitions for %v during the join", pause848)
	}
}

func TestKIP848BadInput(t *testing.T) {
	b := StartBroker(t, kip848Overrides...)
	adm := b.Admin(t)
	cl := b.Client(t)
	topic, group := "kip848-bad", "kip848-bad"
	groupsCreateTopic(t, adm, topic)
	member := b.Client(t, kgo.ClientID("live"), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer())
	ctx := testContext(t, 60*time.Second)
	go func() {
		for ctx.Err() == nil {
			member.PollFetches(ctx)
		}
	}()
	cg848Assignment(t, cl, group, topic, groupsPartitions, []string{"live"}, 60*time.Second)
	// A second member comes and goes, so the live member's epoch is past 1
	// and an older one is not a join (epoch 0).
	visitor := b.Client(t, kgo.ClientID("visitor"), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer())
	go visitor.PollFetches(ctx)
	cg848Assignment(t, cl, group, topic, groupsPartitions, []string{"live", "visitor"}, 60*time.Second)
	visitor.Close()
	_, before := cg848Assignment(t, cl, group, topic, groupsPartitions, []string{"live"}, 60*time.Second)
	live := before.Members[0]
	if live.MemberEpoch < 2 {
		t.Fatalf("live member at epoch %d", live.MemberEpoch)
	}

	hb := func(mod func(*kmsg.ConsumerGroupHeartbeatRequest)) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = group, live.MemberID, live.MemberEpoch
		req.RebalanceTimeoutMillis = -1
		mod(req)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	cases := []struct {
		name string
		mod  func(*kmsg.ConsumerGroupHeartbeatRequest)
		want *kerr.Error
	}{
		{"stale member epoch", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = live.MemberEpoch - 1 }, kerr.FencedMemberEpoch},
		{"member epoch ahead", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = live.MemberEpoch + 5 }, kerr.FencedMemberEpoch},
		{"unknown member", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "nobody" }, kerr.UnknownMemberID},
		{"invalid regex", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "regex-member", 0, 10000
			r.SubscribedTopicRegex = kmsg.StringPtr("kip848-(bad")
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}, kerr.InvalidRegularExpression},
		{"unknown assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "assignor-member", 0, 10000
			r.SubscribedTopicNames, r.ServerAssignor = []string{topic}, kmsg.StringPtr("cooperative-sticky")
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}, kerr.UnsupportedAssignor},
		{"join with owned partitions", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "owner", 0, 10000
			r.SubscribedTopicNames = []string{topic}
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: live.Assignment.TopicPartitions[0].TopicID, Partitions: []int32{0}}}
		}, kerr.InvalidRequest},
		{"stale epoch commit", nil, kerr.StaleMemberEpoch},
		{"unknown member commit", nil, kerr.UnknownMemberID},
	}
	for _, tc := range cases {
		var got int16
		if tc.mod != nil {
			got = hb(tc.mod).ErrorCode
		} else {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Group, req.MemberID, req.Generation = group, live.MemberID, live.MemberEpoch-1
			if tc.want == kerr.UnknownMemberID {
				req.MemberID, req.Generation = "nobody", live.MemberEpoch
			}
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = 0, 1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			got = resp.Topics[0].Partitions[0].ErrorCode
		}
		if got != tc.want.Code {
			t.Errorf("%s: got %v, want %v", tc.name, kerr.ErrorForCode(got), tc.want)
		}
	}
	// The group is as it was: same members, epochs and assignment.
	after, err := cg848Describe(ctx, cl, group)
	if err != nil {
		t.Fatal(err)
	}
	if after.Epoch != before.Epoch || len(after.Members) != 1 || after.Members[0].MemberID != live.MemberID ||
		after.Members[0].MemberEpoch != live.MemberEpoch {
		t.Fatalf("group changed by refused requests:\nbefore %+v\nafter  %+v", before, after)
	}
	// No committed offset was written by the refused commits.
	if off, err := groupsFetchCommitted(ctx, adm, group, topic); err != nil || off[0] == 1 {
		t.Fatalf("committed offsets %v (%v)", off, err)
	}
}

func TestKIP848ClassicSideBySide(t *testing.T) {
	b := StartBroker(t, kip848Overrides...)
	adm := b.Admin(t)
	topic := "kip848-both"
	groupsCreateTopic(t, adm, topic)
	prod := newGroupsProducer(t, b, topic, "both")
	if err := prod.produce(testContext(t, 30*time.Second), 600); err != nil {
		t.Fatal(err)
	}
	consumeAll := func(group string, opts ...kgo.Opt) {
		cl := b.Client(t, append([]kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID(group)}, opts...)...)
		seen := map[groupPO]bool{}
		ctx := testContext(t, 60*time.Second)
		for len(seen) < 600 {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("%s consumed %d of 600 records: %v", group, len(seen), err)
			}
			fs.EachRecord(func(r *kgo.Record) { seen[groupPO{r.Partition, r.Offset}] = true })
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("%s commit: %v", group, err)
		}
	}
	consumeAll("side-classic", kgo.Balancers(kgo.CooperativeStickyBalancer()))
	consumeAll("side-consumer", kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer())

	ctx := testContext(t, 30*time.Second)
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, g := range listed.Sorted() {
		types[g.Group] = g.GroupType
	}
	if types["side-classic"] != "classic" || types["side-consumer"] != "consumer" {
		t.Fatalf("ListGroups types: %v", types)
	}
	byType, err := adm.ListGroupsByType(ctx, []string{"consumer"})
	if err != nil {
		t.Fatal(err)
	}
	if names := byType.Groups(); len(names) != 1 || names[0] != "side-consumer" {
		t.Fatalf("ListGroups types filter consumer: %v", names)
	}
	for _, g := range []string{"side-classic", "side-consumer"} {
		if off, err := groupsFetchCommitted(ctx, adm, g, topic); err != nil || off[0] != 100 {
			t.Fatalf("%s committed %v (%v), want 100 per partition", g, off, err)
		}
	}
	// DescribeGroups (classic) tells the consumer group is not one of its
	// kind as Kafka does before v6: Dead.
	dgs, err := adm.DescribeGroups(ctx, "side-consumer")
	if err != nil {
		t.Fatal(err)
	}
	if dg := dgs["side-consumer"]; dg.State != "Dead" {
		t.Fatalf("DescribeGroups of a consumer group: %+v", dg)
	}
}

// TestKIP848Cluster: members on a 3-broker ZooKeeper cluster keep their
// assignments across kill -9 of the group's coordinator; a killed member's
// partitions move after its session.
func TestKIP848Cluster(t *testing.T) {
	// Sessions of 10s: a member must find the new coordinator (after the
	// 2s ZooKeeper session of the dead one expires and the new leader of
	// the group's __consumer_offsets partition loads it) within a session,
	// or it is fenced and rejoins (Kafka's default is 45s).
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second,
		extra: append(slices.Clone(kip848Overrides), "group.consumer.session.timeout.ms=10000")})
	topic, group := "kip848-cluster", "kip848-cluster"
	c.createTopic(topic, groupsPartitions, nil)
	entry := c.broker(1)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = group, []string{group}
	// describe asks a live broker for the coordinator, then the
	// coordinator itself (the test's own routing, independent of a
	// client's cached coordinator).
	coordinatorVia := func(via int32) (int32, error) {
		resp, err := c.request(via, 5*time.Second, fc)
		if err != nil {
			return -1, err
		}
		fresp := resp.(*kmsg.FindCoordinatorResponse)
		if len(fresp.Coordinators) == 1 { // v4+
			fresp.NodeID, fresp.ErrorCode = fresp.Coordinators[0].NodeID, fresp.Coordinators[0].ErrorCode
		}
		if err := kerr.ErrorForCode(fresp.ErrorCode); err != nil {
			return -1, err
		}
		return fresp.NodeID, nil
	}
	var dead []int32
	describe := func(context.Context) (kmsg.ConsumerGroupDescribeResponseGroup, error) {
		coord, err := coordinatorVia(otherThan(3, dead...)[0])
		if err != nil {
			return kmsg.ConsumerGroupDescribeResponseGroup{}, err
		}
		if slices.Contains(dead, coord) || coord < 1 {
			return kmsg.ConsumerGroupDescribeResponseGroup{}, fmt.Errorf("coordinator still %d", coord)
		}
		dreq := kmsg.NewPtrConsumerGroupDescribeRequest()
		dreq.Groups = []string{group}
		resp, err := c.request(coord, 5*time.Second, dreq)
		if err != nil {
			return kmsg.ConsumerGroupDescribeResponseGroup{}, err
		}
		dg := resp.(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
		return dg, kerr.ErrorForCode(dg.ErrorCode)
	}
	prod := newGroupsProducer(t, entry, topic, "cluster")
	if err := prod.produce(testContext(t, 30*time.Second), 1200); err != nil {
		t.Fatal(err)
	}
	log := &groupRecordLog{}
	spec := func(id string) groupMemberSpec {
		return groupMemberSpec{Client: "franz-848", Addr: entry.Addr(), Topic: topic, Group: group, ClientID: id}
	}
	members := map[string]*groupMember{}
	for _, id := range []string{"m1", "m2", "m3"} {
		members[id] = startGroupMember(t, id, goMemberCmd(t, spec(id)), log)
	}
	a3, before := cg848AssignmentVia(t, describe, group, topic, groupsPartitions, []string{"m1", "m2", "m3"}, 60*time.Second)
	waitGroupConsumedAll(t, prod, log, 60*time.Second, "3 members")
	t.Logf("3 members assigned %v at epoch %d", a3, before.Epoch)

	// Kill -9 the coordinator of the group.
	coord, err := coordinatorVia(1)
	if err != nil {
		t.Fatal(err)
	}
	stop := prod.background(t)
	c.broker(coord).Kill()
	dead = append(dead, coord)
	tKill := time.Now()
	var after kmsg.ConsumerGroupDescribeResponseGroup
	checkFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		after, err = describe(context.Background())
		return err
	})
	t.Logf("coordinator %d killed; the group was loaded by another broker %v later", coord, time.Since(tKill).Round(time.Millisecond))
	if after.Epoch != before.Epoch || len(after.Members) != 3 {
		t.Fatalf("after the failover: epoch %d with %d members, before %d with 3", after.Epoch, len(after.Members), before.Epoch)
	}
	byID := map[string]kmsg.ConsumerGroupDescribeResponseGroupMember{}
	for _, m := range before.Members {
		byID[m.MemberID] = m
	}
	for _, m := range after.Members {
		was, ok := byID[m.MemberID]
		if !ok || was.MemberEpoch != m.MemberEpoch || fmt.Sprint(was.Assignment.TopicPartitions) != fmt.Sprint(m.Assignment.TopicPartitions) {
			t.Fatalf("member %s (%s) after the failover: epoch %d %v, before %+v", m.MemberID, m.ClientID, m.MemberEpoch, m.Assignment.TopicPartitions, was)
		}
	}
	// The members keep heartbeating to the new coordinator: still the same
	// group a session later.
	time.Sleep(11 * time.Second)
	a3after, still := cg848AssignmentVia(t, describe, group, topic, groupsPartitions, []string{"m1", "m2", "m3"}, 30*time.Second)
	if still.Epoch != before.Epoch {
		t.Errorf("group epoch moved from %d to %d after the coordinator failover: members rejoined", before.Epoch, still.Epoch)
	}
	t.Logf("a session after the failover: epoch %d, assignment %v", still.Epoch, a3after)

	// A member killed: its partitions move after its session.
	members["m2"].Kill(t)
	tKill = time.Now()
	a2, _ := cg848AssignmentVia(t, describe, group, topic, groupsPartitions, []string{"m1", "m3"}, 60*time.Second)
	t.Logf("m2 killed; m1 and m3 own %v after %v", a2, time.Since(tKill).Round(time.Millisecond))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	waitGroupConsumedAll(t, prod, log, 90*time.Second, "after the failovers")
	for _, id := range []string{"m1", "m3"} {
		members[id].Leave(t, true)
	}
	recs := log.snapshot()
	produced := prod.snapshot()
	seen := map[groupPO]bool{}
	for _, r := range recs {
		if want, ok := produced[groupPO{r.partition, r.offset}]; ok && want != r.value {
			t.Fatalf("partition %d offset %d: consumed %q, produced %q", r.partition, r.offset, r.value, want)
		}
		seen[groupPO{r.partition, r.offset}] = true
	}
	for po := range produced {
		if !seen[po] {
			t.Fatalf("record %v produced but never consumed", po)
		}
	}
}

// TestKIP848RegexCluster: a member subscribed by regex consumes the
// matching topics whose leaders are spread over a 3-broker cluster, never
// the others, and a matching topic created later is assigned to it. It
// stands in for franz-go's Test848RegexBrokerResolves on the cluster, which
// stops polling once it has seen as many topics as it wants, counting
// __consumer_offsets (the regex names it too), and so fails on a cluster
// whenever an offsets partition's leader answers before an orders topic's
// (2 of 25 runs alone on a 3-broker cluster).
func TestKIP848RegexCluster(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second, extra: slices.Clone(kip848Overrides)})
	want := map[string]int32{"rx-orders": 3, "rx-orders-v2": 2}
	for topic, partitions := range want {
		c.createTopic(topic, partitions, nil)
	}
	c.createTopic("rx-other", 1, nil)
	prod := c.client(kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	defer prod.Close()
	const perTopic = 30
	produce := func(topics ...string) {
		t.Helper()
		ctx := testContext(t, 30*time.Second)
		for _, topic := range topics {
			for i := range perTopic {
				r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("%s-%d", topic, i))}
				if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatalf("produce to %s: %v", topic, err)
				}
			}
		}
	}
	produce("rx-orders", "rx-orders-v2", "rx-other")

	cons := c.client(kgo.ServerSideBalancer(), kgo.ConsumerGroup("rx-group"), kgo.ConsumeRegex(),
		kgo.ConsumeTopics("rx-orders.*"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250*time.Millisecond), kgo.DisableAutoCommit())
	defer cons.Close()
	counts := map[string]int{}
	consumeUntil := func(topics ...string) {
		t.Helper()
		ctx := testContext(t, 60*time.Second)
		done := func() bool {
			for _, topic := range topics {
				if counts[topic] < perTopic {
					return false
				}
			}
			return true
		}
		for !done() {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %v, want %d records of each of %v", counts, perTopic, topics)
			}
			fs.EachRecord(func(r *kgo.Record) { counts[r.Topic]++ })
		}
	}
	consumeUntil("rx-orders", "rx-orders-v2")

	// A topic the regex matches, created while the member runs.
	c.createTopic("rx-orders-v3", 2, nil)
	produce("rx-orders-v3")
	consumeUntil("rx-orders-v3")
	for topic, n := range counts {
		if !strings.HasPrefix(topic, "rx-orders") || n != perTopic {
			t.Errorf("consumed %d records of %s, want %d of each rx-orders topic and none of the others (%v)", n, topic, perTopic, counts)
		}
	}
}
