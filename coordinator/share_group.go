package coordinator

// Share groups (KIP-932): membership and assignment. A share group's
// members each heartbeat (ShareGroupHeartbeat) with the topics they
// subscribe to; the coordinator assigns, as Kafka's share-group
// SimpleAssignor does when partitions are to be shared, every partition of
// a member's subscribed topics to that member: records are divided among
// members by acquisition at the partition leaders (ShareFetch), not by
// assignment. There is no reconciliation: a member's epoch moves to the
// group's assignment epoch on its next heartbeat.
//
// Group ids are shared with classic and consumer groups: a share group
// lives on the same group object (g.sg), and the other protocols refuse
// its id (GROUP_ID_NOT_FOUND / INCONSISTENT_GROUP_PROTOCOL), as Kafka.
//
// Membership is kept in memory on the coordinator (kbroker writes no
// ShareGroupMemberMetadata records): after a coordinator failover members
// get UNKNOWN_MEMBER_ID and join again with epoch 0, which Kafka clients
// do at once. What must survive, the share-partition state, is durable
// (see share_state.go).

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sgMember is one share group member.
type sgMember struct {
	id         string
	epoch      int32
	rackID     *string
	clientID   string
	clientHost string
	subscribed []string // sorted topic names
	// assigned is the assignment last sent (topic id -> partitions).
	assigned tpSet
}

// sgState is a share group's membership. Guarded by the group's mu.
type sgState struct {
	epoch           int32 // group epoch: bumped on every membership or subscription change
	assignmentEpoch int32
	members         map[string]*sgMember
	// subsMeta is the subscribed topics' metadata the assignment was
	// computed from; a topic created, deleted or grown bumps the epoch.
	subsMeta map[string]topicMeta
	timers   map[string]*sgTimer
}

type sgTimer struct {
	t   *time.Timer
	tok *timerToken
}

// sgConfig is the share-group settings.
type sgConfig struct {
	sessionTimeout    time.Duration // group.share.session.timeout.ms
	heartbeatInterval time.Duration // group.share.heartbeat.interval.ms
	maxSize           int           // group.share.max.size
}

func (c *Coordinator) sgConfig() sgConfig {
	return sgConfig{
		sessionTimeout:    c.cfg.ShareSessionTimeout,
		heartbeatInterval: c.cfg.ShareHeartbeatInterval,
		maxSize:           int(c.cfg.ShareMaxSize),
	}
}

// sgRequest is the part of a ShareGroupHeartbeat the decision needs.
type sgRequest struct {
	memberID   string
	epoch      int32
	rackID     *string
	topics     []string // nil: unchanged
	clientID   string
	clientHost string
}

// sgResult is the outcome of a share heartbeat decision.
type sgResult struct {
	code         int16
	msg          string
	memberEpoch  int32
	assignment   tpSet // non-nil: send it
	removeMember bool
}

// validateShareHeartbeat is Kafka's throwIfShareGroupHeartbeatRequestIsInvalid.
func validateShareHeartbeat(r sgRequest) (int16, string) {
	switch {
	case r.memberID == "":
		return kerr.InvalidRequest.Code, "MemberId can't be empty."
	case len(r.memberID) > 36:
		return kerr.InvalidRequest.Code, "MemberId can't be longer than 36 characters."
	case r.epoch == 0 && len(r.topics) == 0:
		return kerr.InvalidRequest.Code, "SubscribedTopicNames must be set in first request."
	case r.epoch < -1:
		return kerr.InvalidRequest.Code, "MemberEpoch is invalid."
	}
	return 0, ""
}

// subscriptionOf returns the metadata of the topics st's members subscribe to.
func (st *sgState) subscriptionOf(im *TopicImage) map[string]topicMeta {
	topics := map[string]struct{}{}
	for _, m := range st.members {
		for _, t := range m.subscribed {
			topics[t] = struct{}{}
		}
	}
	return subscriptionMetadata(topics, im)
}

// shareAssignment is member m's target assignment: every partition of
// every existing topic it subscribes to.
func shareAssignment(m *sgMember, im *TopicImage) tpSet {
	out := tpSet{}
	for _, t := range m.subscribed {
		ti, ok := im.byName[t]
		if !ok {
			continue
		}
		for p := int32(0); p < ti.Partitions; p++ {
			out.add(ti.ID, p)
		}
	}
	return out
}

// decideShareHeartbeat applies one heartbeat to st (mutating it; the
// caller holds the group's mu). now arms no timer: the caller does.
func decideShareHeartbeat(st *sgState, r sgRequest, im *TopicImage, cfg sgConfig) sgResult {
	m := st.members[r.memberID]
	switch {
	case r.epoch == -1:
		if m == nil {
			return sgResult{code: errUnknownMemberID, msg: "Member " + r.memberID + " is not a member of the group."}
		}
		delete(st.members, r.memberID)
		st.epoch++
		st.assignmentEpoch = st.epoch
		st.subsMeta = st.subscriptionOf(im)
		return sgResult{memberEpoch: -1, removeMember: true}
	case r.epoch == 0:
		if m == nil && len(st.members) >= cfg.maxSize {
			return sgResult{code: kerr.GroupMaxSizeReached.Code, msg: "The share group has reached its maximum capacity of " + itoa(cfg.maxSize) + " members."}
		}
		if m == nil {
			m = &sgMember{id: r.memberID}
			st.members[r.memberID] = m
		}
		// A rejoin with epoch 0 starts the member over: its assignment
		// is sent again.
		m.assigned = nil
	default:
		if m == nil {
			return sgResult{code: errUnknownMemberID, msg: "Member " + r.memberID + " is not a member of the group."}
		}
		if r.epoch != m.epoch {
			return sgResult{code: kerr.FencedMemberEpoch.Code, msg: "The share group member has a different epoch than expected."}
		}
	}
	changed := false
	if r.topics != nil {
		topics := append([]string(nil), r.topics...)
		sort.Strings(topics)
		topics = dedupSorted(topics)
		if !equalStrings(topics, m.subscribed) {
			m.subscribed, changed = topics, true
		}
	}
	if r.rackID != nil && !eqStringPtr(r.rackID, m.rackID) {
		m.rackID, changed = r.rackID, true
	}
	m.clientID, m.clientHost = r.clientID, r.clientHost
	if meta := st.subscriptionOf(im); changed || r.epoch == 0 || !sameSubscriptionMetadata(meta, st.subsMeta) {
		if changed || r.epoch == 0 || st.epoch == 0 || !sameSubscriptionMetadata(meta, st.subsMeta) {
			st.epoch++
		}
		st.subsMeta = meta
		st.assignmentEpoch = st.epoch
	}
	res := sgResult{}
	target := shareAssignment(m, im)
	m.epoch = st.assignmentEpoch
	if m.assigned == nil || !m.assigned.equal(target) {
		m.assigned = target
		res.assignment = target
	}
	res.memberEpoch = m.epoch
	return res
}

func dedupSorted(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var buf [20]byte
	i := len(buf)
	for n > 0 {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		buf[i] = '-'
	}
	return string(buf[i:])
}

// ShareGroupHeartbeat serves a ShareGroupHeartbeatRequest.
func (c *Coordinator) ShareGroupHeartbeat(ctx context.Context, req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(code int16, msg string) *kmsg.ShareGroupHeartbeatResponse {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	}
	if req.GroupID == "" {
		return fail(kerr.InvalidRequest.Code, "GroupId can't be empty.")
	}
	ci := clientInfoFrom(ctx)
	r := sgRequest{
		memberID: req.MemberID, epoch: req.MemberEpoch, rackID: req.RackID,
		topics: req.SubscribedTopicNames, clientID: ci.ClientID, clientHost: ci.ClientHost,
	}
	if code, msg := validateShareHeartbeat(r); code != 0 {
		return fail(code, msg)
	}
	g, code := c.lookup(req.GroupID, r.epoch == 0)
	if code != 0 {
		return fail(code, "")
	}
	if g == nil {
		if r.epoch == -1 {
			return fail(errUnknownMemberID, "")
		}
		return fail(errGroupIDNotFound, "Group "+req.GroupID+" not found.")
	}
	cfg := c.sgConfig()
	g.mu.Lock()
	defer g.mu.Unlock()
	if code := g.statusLocked(); code != 0 {
		return fail(code, "")
	}
	if g.sg == nil {
		// Only an empty classic group with nothing stored may become a
		// share group (it was just created by this lookup).
		if r.epoch != 0 || !g.isEmptyClassicLocked() || g.protocolType != "" || g.storedMeta != nil || len(g.offsets) > 0 {
			return fail(errGroupIDNotFound, "Group "+req.GroupID+" is not a share group.")
		}
		g.sg = &sgState{members: map[string]*sgMember{}, timers: map[string]*sgTimer{}}
		c.logger.Info("created share group", "group", g.id, "member", r.memberID)
	}
	cfg = g.shareConfigLocked(cfg)
	res := decideShareHeartbeat(g.sg, r, c.topicImage(), cfg)
	if res.code != 0 {
		return fail(res.code, res.msg)
	}
	if res.removeMember {
		g.stopShareTimerLocked(r.memberID)
		c.logger.Info("share group member left", "group", g.id, "member", r.memberID, "group_epoch", g.sg.epoch)
	} else {
		g.armShareSessionLocked(r.memberID, cfg.sessionTimeout)
	}
	resp.MemberID = kmsg.StringPtr(r.memberID)
	resp.MemberEpoch = res.memberEpoch
	resp.HeartbeatIntervalMillis = int32(cfg.heartbeatInterval.Milliseconds())
	if res.assignment != nil {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		for _, id := range res.assignment.topicIDs() {
			t := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			t.TopicID = id
			t.Partitions = append([]int32(nil), res.assignment[id]...)
			a.TopicPartitions = append(a.TopicPartitions, t)
		}
		if a.TopicPartitions == nil {
			a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
		}
		resp.Assignment = &a
	}
	return resp
}

// armShareSessionLocked (re)starts member id's session timeout: a member
// that does not heartbeat within it is removed (Kafka's share group
// session timeout).
func (g *group) armShareSessionLocked(id string, timeout time.Duration) {
	t := g.sg.timers[id]
	if t == nil {
		t = &sgTimer{}
		g.sg.timers[id] = t
	}
	if t.t != nil {
		t.t.Stop()
	}
	tok := new(timerToken)
	t.tok = tok
	t.t = time.AfterFunc(timeout, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.unloadCode != 0 || g.sg == nil {
			return
		}
		cur := g.sg.timers[id]
		if cur == nil || cur.tok != tok {
			return
		}
		delete(g.sg.timers, id)
		if g.sg.members[id] == nil {
			return
		}
		delete(g.sg.members, id)
		g.sg.epoch++
		g.sg.assignmentEpoch = g.sg.epoch
		g.sg.subsMeta = g.sg.subscriptionOf(g.c.topicImage())
		g.c.logger.Info("share group member removed: session timeout", "group", g.id, "member", id, "group_epoch", g.sg.epoch)
	})
}

func (g *group) stopShareTimerLocked(id string) {
	if g.sg == nil {
		return
	}
	if t := g.sg.timers[id]; t != nil && t.t != nil {
		t.t.Stop()
	}
	delete(g.sg.timers, id)
}

func (g *group) stopAllShareTimersLocked() {
	if g.sg == nil {
		return
	}
	for id := range g.sg.timers {
		g.stopShareTimerLocked(id)
	}
}

// shareStateName is the group's state as ListGroups / ShareGroupDescribe
// name it.
func (st *sgState) stateName() string {
	if len(st.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

// ShareGroupDescribe serves a ShareGroupDescribeRequest.
func (c *Coordinator) ShareGroupDescribe(_ context.Context, req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	im := c.topicImage()
	for _, id := range req.GroupIDs {
		resp.Groups = append(resp.Groups, c.describeShareGroup(id, im))
	}
	return resp
}

func (c *Coordinator) describeShareGroup(id string, im *TopicImage) kmsg.ShareGroupDescribeResponseGroup {
	dg := kmsg.NewShareGroupDescribeResponseGroup()
	dg.GroupID = id
	dg.AuthorizedOperations = -2147483648
	g, code := c.lookup(id, false)
	if code != 0 {
		dg.ErrorCode = code
		return dg
	}
	notFound := func() kmsg.ShareGroupDescribeResponseGroup {
		dg.ErrorCode = errGroupIDNotFound
		dg.ErrorMessage = kmsg.StringPtr("Group " + id + " not found.")
		return dg
	}
	if g == nil {
		return notFound()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unloadCode != 0 {
		dg.ErrorCode = g.unloadCode
		return dg
	}
	if g.sg == nil || g.state == stateDead {
		if g.sg == nil && g.state != stateDead {
			dg.ErrorMessage = kmsg.StringPtr("Group " + id + " is not a share group.")
			dg.ErrorCode = errGroupIDNotFound
			return dg
		}
		return notFound()
	}
	dg.GroupState = g.sg.stateName()
	dg.GroupEpoch = g.sg.epoch
	dg.AssignmentEpoch = g.sg.assignmentEpoch
	dg.Assignor = "simple"
	for _, mid := range sortedKeys(g.sg.members) {
		m := g.sg.members[mid]
		dm := kmsg.NewShareGroupDescribeResponseGroupMember()
		dm.MemberID = m.id
		dm.RackID = m.rackID
		dm.MemberEpoch = m.epoch
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		dm.SubscribedTopicNames = append([]string{}, m.subscribed...)
		a := describeAssignment(m.assigned, im)
		for _, t := range a.TopicPartitions {
			dt := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			dt.TopicID, dt.Topic, dt.Partitions = t.TopicID, t.Topic, t.Partitions
			dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, dt)
		}
		if dm.Assignment.TopicPartitions == nil {
			dm.Assignment.TopicPartitions = []kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{}
		}
		dg.Members = append(dg.Members, dm)
	}
	return dg
}

// ShareGroupExists reports whether group is a live share group here
// (false also when this broker is not its coordinator).
func (c *Coordinator) ShareGroupExists(id string) bool {
	g, code := c.lookup(id, false)
	if code != 0 || g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sg != nil && g.state != stateDead && g.unloadCode == 0
}

// shareConfigLocked applies the group's share.session.timeout.ms and
// share.heartbeat.interval.ms configs (share_group_config.go) to cfg.
func (g *group) shareConfigLocked(cfg sgConfig) sgConfig {
	if v, ok := g.configs["share.session.timeout.ms"]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			cfg.sessionTimeout = time.Duration(n) * time.Millisecond
		}
	}
	if v, ok := g.configs["share.heartbeat.interval.ms"]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			cfg.heartbeatInterval = time.Duration(n) * time.Millisecond
		}
	}
	return cfg
}
