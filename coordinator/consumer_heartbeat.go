package coordinator

// ConsumerGroupHeartbeat v0-v1 and ConsumerGroupDescribe v0-v1 (KIP-848).
//
//   - Decisions are consumer_decide.go's; this file validates the request,
//     finds (or creates) the group, serialises the write with the group's
//     write token, appends the records (acks=all) and publishes the next
//     state only once they are durable. A failed append answers Kafka's
//     mapping (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...) and changes
//     nothing.
//   - A join (epoch 0) to an empty classic group converts it: its group
//     metadata is tombstoned and a consumer group takes its place, keeping
//     its committed offsets (Kafka's maybeDeleteEmptyClassicGroup). A
//     classic group with members answers GROUP_ID_NOT_FOUND ("not a
//     consumer group"): Kafka's online upgrade of a live classic group is
//     not implemented.
//   - Session timeout (group.consumer.session.timeout.ms): a member without
//     a successful heartbeat for that long is fenced (removed, epoch bumped).
//     Rebalance timeout (the member's RebalanceTimeoutMs): a member asked to
//     revoke partitions that has not left that epoch in time is fenced.
//   - v1 requires a client-generated member id (KIP-1082) and carries the
//     regex subscription; v0 members may ask the coordinator for an id.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// cgMemberTimers are one member's timers; tokens make stale callbacks no-ops.
type cgMemberTimers struct {
	session      *time.Timer
	sessionTok   *timerToken
	rebalance    *time.Timer
	rebalanceTok *timerToken
}

func (c *Coordinator) cgConfig() cgConfig {
	return cgConfig{
		sessionTimeout:    c.cfg.ConsumerSessionTimeout,
		heartbeatInterval: c.cfg.ConsumerHeartbeatInterval,
		assignors:         c.cfg.ConsumerAssignors,
		maxSize:           int(c.cfg.ConsumerMaxSize),
	}
}

func (c *Coordinator) topicImage() *TopicImage {
	if c.cfg.Topics == nil {
		return emptyTopicImage
	}
	if im := c.cfg.Topics(); im != nil {
		return im
	}
	return emptyTopicImage
}

func toHBRequest(req *kmsg.ConsumerGroupHeartbeatRequest, ci ClientInfo) hbRequest {
	r := hbRequest{
		version:            req.Version,
		group:              req.Group,
		memberID:           req.MemberID,
		epoch:              req.MemberEpoch,
		instanceID:         req.InstanceID,
		rackID:             req.RackID,
		rebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		topics:             req.SubscribedTopicNames,
		assignor:           req.ServerAssignor,
		clientID:           ci.ClientID,
		clientHost:         ci.ClientHost,
	}
	if req.Version >= 1 {
		r.regex = req.SubscribedTopicRegex
	}
	if req.Topics != nil {
		r.owned = tpSet{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				r.owned.add(t.TopicID, p)
			}
		}
	}
	return r
}

// ConsumerGroupHeartbeat serves a ConsumerGroupHeartbeatRequest.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	}
	if req.Group == "" {
		return fail(errInvalidGroupID, "")
	}
	cfg := c.cgConfig()
	r := toHBRequest(req, clientInfoFrom(ctx))
	if code, msg := validateHeartbeat(r, cfg.assignors); code != 0 {
		return fail(code, msg)
	}
	join := r.epoch == 0
	g, code := c.lookup(req.Group, join)
	if code != 0 {
		return fail(code, "")
	}
	if g == nil {
		return fail(errGroupIDNotFound, "Consumer group "+req.Group+" not found.")
	}
	if err := g.acquireWrite(ctx); err != nil {
		return fail(errCoordinatorNotAvailable, "")
	}
	defer g.releaseWrite()

	g.mu.Lock()
	if code := g.statusLocked(); code != 0 {
		g.mu.Unlock()
		return fail(code, "")
	}
	var prefix []record
	converting := g.cg == nil
	if converting {
		if !join || !g.isEmptyClassicLocked() {
			g.dropIfShellLocked()
			g.mu.Unlock()
			return fail(errGroupIDNotFound, "Group "+req.Group+" is not a consumer group.")
		}
		if g.storedMeta != nil {
			prefix = append(prefix, groupTombstone(g.id))
		}
	}
	im := c.topicImage()
	var res hbResult
	if r.epoch < 0 {
		res = decideLeave(g.cg, r, im)
	} else {
		res = decideHeartbeat(g.cg, r, im, cfg)
	}
	if res.code != 0 {
		if converting {
			g.dropIfShellLocked()
		}
		g.mu.Unlock()
		return fail(res.code, res.msg)
	}
	g.mu.Unlock()

	records := append(prefix, res.records...)
	if len(records) == 0 {
		g.mu.Lock()
		g.applyCGLocked(res, false)
		g.mu.Unlock()
	} else {
		var appendErr error
		c.writeGroup(ctx, g, c.now(), records, func(err error) {
			appendErr = err
			if err != nil {
				return
			}
			g.mu.Lock()
			g.applyCGLocked(res, converting)
			g.mu.Unlock()
		})
		if appendErr != nil {
			code := appendErrorCode(appendErr, false)
			c.logger.Warn("failed to store consumer group heartbeat", "group", g.id, "member", r.memberID, "err", appendErr, "code", code)
			g.mu.Lock()
			if converting && g.cg == nil {
				g.dropIfShellLocked()
			}
			g.mu.Unlock()
			return fail(code, "")
		}
	}
	if converting {
		c.logger.Info("created consumer group", "group", g.id, "member", res.memberID)
	}
	resp.MemberID = kmsg.StringPtr(res.memberID)
	resp.MemberEpoch = res.memberEpoch
	if r.epoch >= 0 {
		resp.HeartbeatIntervalMillis = int32(cfg.heartbeatInterval.Milliseconds())
	}
	if res.sendAssignment {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, id := range res.assignment.topicIDs() {
			t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			t.TopicID = id
			t.Partitions = append([]int32(nil), res.assignment[id]...)
			a.Topics = append(a.Topics, t)
		}
		if a.Topics == nil {
			a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		}
		resp.Assignment = &a
	}
	return resp
}

// isEmptyClassicLocked: a classic group a consumer group may replace
// (Kafka's isEmptyClassicGroup): no members, none joining.
func (g *group) isEmptyClassicLocked() bool {
	return g.cg == nil && g.sg == nil && g.state == stateEmpty && len(g.members) == 0 && len(g.pending) == 0
}

// dropIfShellLocked removes g if it holds nothing at all (a request created
// it and then failed), so no phantom group is listed.
func (g *group) dropIfShellLocked() {
	if g.cg != nil || !g.isEmptyClassicLocked() || g.protocolType != "" || g.storedMeta != nil ||
		len(g.offsets) > 0 || len(g.pendingTxn) > 0 || len(g.inflight) > 0 {
		return
	}
	g.state = stateDead
	g.c.removeGroup(g)
}

// applyCGLocked publishes a heartbeat's durable outcome and arms its timers.
func (g *group) applyCGLocked(res hbResult, converting bool) {
	if res.state != nil {
		if converting {
			g.storedMeta = nil
			g.protocolType, g.protocol = "", ""
			g.subscribed, g.subsKnown = nil, false
		}
		g.cg = res.state
	}
	if g.unloadCode != 0 {
		return
	}
	for _, id := range res.removed {
		g.stopCGTimersLocked(id)
	}
	if res.sessionFor != "" {
		g.armSessionLocked(res.sessionFor)
	}
	switch {
	case res.rebalance != nil:
		g.armRebalanceLocked(res.memberID, res.rebalance.epoch, res.rebalance.timeout)
	case res.cancelRebalance:
		if t := g.cgTimers[res.memberID]; t != nil && t.rebalance != nil {
			t.rebalance.Stop()
			t.rebalance, t.rebalanceTok = nil, nil
		}
	}
}

func (g *group) cgTimer(id string) *cgMemberTimers {
	if g.cgTimers == nil {
		g.cgTimers = map[string]*cgMemberTimers{}
	}
	t := g.cgTimers[id]
	if t == nil {
		t = &cgMemberTimers{}
		g.cgTimers[id] = t
	}
	return t
}

func (g *group) stopCGTimersLocked(id string) {
	t := g.cgTimers[id]
	if t == nil {
		return
	}
	if t.session != nil {
		t.session.Stop()
	}
	if t.rebalance != nil {
		t.rebalance.Stop()
	}
	delete(g.cgTimers, id)
}

func (g *group) stopAllCGTimersLocked() {
	for id := range g.cgTimers {
		g.stopCGTimersLocked(id)
	}
}

// armSessionLocked (re)starts member id's session timeout.
func (g *group) armSessionLocked(id string) {
	t := g.cgTimer(id)
	if t.session != nil {
		t.session.Stop()
	}
	tok := new(timerToken)
	t.sessionTok = tok
	t.session = time.AfterFunc(g.c.cfg.ConsumerSessionTimeout, func() {
		g.fenceOnTimer(id, func(t *cgMemberTimers, _ *cgMember) bool { return t.sessionTok == tok }, "session timeout")
	})
}

// armRebalanceLocked fences member id unless it leaves epoch within timeout.
func (g *group) armRebalanceLocked(id string, epoch int32, timeout time.Duration) {
	t := g.cgTimer(id)
	if t.rebalance != nil {
		t.rebalance.Stop()
	}
	tok := new(timerToken)
	t.rebalanceTok = tok
	t.rebalance = time.AfterFunc(timeout, func() {
		g.fenceOnTimer(id, func(t *cgMemberTimers, m *cgMember) bool {
			return t.rebalanceTok == tok && m.epoch == epoch
		}, "rebalance timeout")
	})
}

// fenceOnTimer fences member id if current(its timers, the member) still
// holds once the write token is held: a heartbeat that re-armed the timer
// in between wins.
func (g *group) fenceOnTimer(id string, current func(*cgMemberTimers, *cgMember) bool, reason string) {
	c := g.c
	c.goBackground(func(ctx context.Context) {
		if err := g.acquireWrite(ctx); err != nil {
			return
		}
		defer g.releaseWrite()
		g.mu.Lock()
		t := g.cgTimers[id]
		if g.unloadCode != 0 || g.state == stateDead || g.cg == nil || t == nil {
			g.mu.Unlock()
			return
		}
		m := g.cg.members[id]
		if m == nil || !current(t, m) {
			g.mu.Unlock()
			return
		}
		next, records := fenceMember(g.cg, g.id, id, c.topicImage())
		g.mu.Unlock()
		c.writeGroup(ctx, g, c.now(), records, func(err error) {
			g.mu.Lock()
			defer g.mu.Unlock()
			if err != nil {
				c.logger.Warn("failed to fence consumer group member", "group", g.id, "member", id, "reason", reason, "err", err)
				return
			}
			g.cg = next
			g.stopCGTimersLocked(id)
			c.logger.Info("fenced consumer group member", "group", g.id, "member", id, "reason", reason, "group_epoch", next.epoch)
		})
	})
}

// onLoadedCGLocked starts the timers of a consumer group rebuilt by a load:
// every member must heartbeat within its session timeout, and members
// revoking partitions within their rebalance timeout.
func (g *group) onLoadedCGLocked() {
	if g.cg == nil {
		return
	}
	for id, m := range g.cg.members {
		g.armSessionLocked(id)
		if m.state == memberUnrevokedPartitions {
			g.armRebalanceLocked(id, m.epoch, time.Duration(max(m.rebalanceTimeoutMs, 0))*time.Millisecond)
		}
	}
}

// ConsumerGroupDescribe serves a ConsumerGroupDescribeRequest.
func (c *Coordinator) ConsumerGroupDescribe(_ context.Context, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	im := c.topicImage()
	for _, id := range req.Groups {
		resp.Groups = append(resp.Groups, c.describeConsumerGroup(id, req.Version, im))
	}
	return resp
}

func (c *Coordinator) describeConsumerGroup(id string, version int16, im *TopicImage) kmsg.ConsumerGroupDescribeResponseGroup {
	dg := kmsg.NewConsumerGroupDescribeResponseGroup()
	dg.Group = id
	if id == "" {
		dg.ErrorCode = errInvalidGroupID
		return dg
	}
	g, code := c.lookup(id, false)
	if code != 0 {
		dg.ErrorCode = code
		return dg
	}
	if g == nil {
		dg.ErrorCode = errGroupIDNotFound
		dg.ErrorMessage = kmsg.StringPtr("Group " + id + " not found.")
		return dg
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if code := g.statusLocked(); code != 0 {
		dg.ErrorCode = code
		return dg
	}
	st := g.cg
	if st == nil {
		dg.ErrorCode = errGroupIDNotFound
		dg.ErrorMessage = kmsg.StringPtr("Group " + id + " is not a consumer group.")
		return dg
	}
	dg.State = st.stateName()
	dg.Epoch = st.epoch
	dg.AssignmentEpoch = st.assignmentEpoch
	dg.AssignorName = preferredAssignor(st.members, c.cfg.ConsumerAssignors)
	for _, mid := range st.memberIDs() {
		m := st.members[mid]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID = m.id
		dm.InstanceID = cloneString(m.instanceID)
		dm.RackID = cloneString(m.rackID)
		dm.MemberEpoch = m.epoch
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		dm.SubscribedTopics = append([]string{}, m.topics...)
		if m.regex != "" {
			dm.SubscribedTopicRegex = kmsg.StringPtr(m.regex)
		}
		dm.Assignment = describeAssignment(m.assigned, im)
		dm.TargetAssignment = describeAssignment(st.target[mid], im)
		if version >= 1 {
			dm.MemberType = 1 // consumer protocol (0 would be classic)
		}
		dg.Members = append(dg.Members, dm)
	}
	return dg
}

// describeAssignment names the topics of s; topics no longer in the cluster
// are left out, as Kafka does.
func describeAssignment(s tpSet, im *TopicImage) kmsg.Assignment {
	var a kmsg.Assignment
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, id := range s.topicIDs() {
		name, ok := im.byID[id]
		if !ok {
			continue
		}
		a.TopicPartitions = append(a.TopicPartitions, kmsg.AssignmentTopicPartition{
			TopicID: id, Topic: name, Partitions: append([]int32(nil), s[id]...),
		})
	}
	return a
}
