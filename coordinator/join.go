package coordinator

// JoinGroup, versions 0-9 (Kafka's GroupCoordinator.handleJoinGroup).
//
//   - v0 has no rebalance timeout: the session timeout is used (as Kafka).
//   - v4+: a first join (empty member id) is answered MEMBER_ID_REQUIRED
//     with a generated member id; the member is pending until it rejoins
//     with that id or its session timeout passes (KIP-394).
//   - v5+ group.instance.id: static membership (static.go). A static member
//     is never answered MEMBER_ID_REQUIRED; one that restarts replaces its
//     old member id, without a rebalance when the group is Stable.
//   - v7+ returns the protocol type, v9 skip_assignment is always false.
//
// A join parks until the join phase completes (every member rejoined or the
// rebalance timeout passed), like Kafka's DelayedJoin.

import (
	"context"
	"time"

	"github.com/kbroker/kbroker/internal/quota"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClientInfo is what the coordinator records about the connection a
// JoinGroup came from: Kafka uses the client id in member ids, and both in
// DescribeGroups.
type ClientInfo struct {
	ClientID   string
	ClientHost string
}

type clientInfoKey struct{}

// WithClientInfo returns ctx carrying ci, for JoinGroup.
func WithClientInfo(ctx context.Context, ci ClientInfo) context.Context {
	return context.WithValue(ctx, clientInfoKey{}, ci)
}

func clientInfoFrom(ctx context.Context) ClientInfo {
	ci, _ := ctx.Value(clientInfoKey{}).(ClientInfo)
	return ci
}

// JoinGroup serves a JoinGroupRequest; it blocks until the group's join
// phase completes or ctx is done.
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	fail := func(code int16) *kmsg.JoinGroupResponse {
		resp.ErrorCode = code
		resp.Generation = -1
		if resp.MemberID == "" {
			resp.MemberID = req.MemberID
		}
		return resp
	}
	if req.Group == "" {
		return fail(errInvalidGroupID)
	}
	g, code := c.lookup(req.Group, false)
	if code != 0 {
		return fail(code)
	}
	if !validSessionTimeout(req.SessionTimeoutMillis, c.cfg.MinSessionTimeout, c.cfg.MaxSessionTimeout) {
		return fail(errInvalidSessionTimeout)
	}
	if g != nil {
		// An empty consumer (KIP-848) group becomes classic again.
		if code := c.convertEmptyConsumerGroup(ctx, g); code != 0 {
			return fail(code)
		}
	}
	if g == nil {
		if req.MemberID != "" {
			return fail(errUnknownMemberID)
		}
		if g, code = c.lookup(req.Group, true); code != 0 {
			return fail(code)
		}
	}

	g.mu.Lock()
	if code := g.statusLocked(); code != 0 {
		g.mu.Unlock()
		return fail(code)
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		g.mu.Unlock()
		return fail(errInconsistentGroupProtocol)
	}
	now := c.now()
	instanceID := req.InstanceID
	if req.Version < 5 {
		instanceID = nil
	}
	var m *member
	var w *joinWaiter
	if req.MemberID == "" {
		ci := clientInfoFrom(ctx)
		newID := newMemberID(ci.ClientID, instanceID)
		if instanceID != nil {
			if old := g.members[g.static[*instanceID]]; old != nil {
				// GroupCoordinator.doStaticNewMemberJoinGroup, known instance.
				w = g.updateStaticMemberAndRebalanceLocked(old, newID, req, now)
				g.mu.Unlock()
				return waitJoin(ctx, w, fail)
			}
		}
		m = &member{id: newID, instanceID: cloneString(instanceID), clientID: ci.ClientID, clientHost: ci.ClientHost}
		m.update(req)
		if req.Version >= 4 && instanceID == nil {
			g.pending[m.id] = m
			g.scheduleHeartbeatLocked(m, now)
			g.mu.Unlock()
			resp.MemberID = m.id
			return fail(errMemberIDRequired)
		}
		w = g.addMemberAndRebalanceLocked(m, req, now)
	} else if pm := g.pending[req.MemberID]; pm != nil {
		delete(g.pending, pm.id)
		pm.stopHeartbeat()
		if instanceID != nil {
			// Kafka throws here (a pending member is never static); the
			// member starts over.
			g.mu.Unlock()
			return fail(errUnknownMemberID)
		}
		m = pm
		m.update(req)
		w = g.addMemberAndRebalanceLocked(m, req, now)
	} else {
		if code := g.validateCurrentMemberLocked(req.MemberID, instanceID); code != 0 {
			g.mu.Unlock()
			return fail(code)
		}
		m = g.members[req.MemberID]
		switch g.state {
		case statePreparingRebalance:
			w = g.updateMemberAndRebalanceLocked(m, req, now)
		case stateCompletingRebalance, stateStable:
			// A follower rejoining with unchanged metadata (it may have
			// missed the JoinGroup response) gets the current generation;
			// the leader rejoining in Stable, or any change, rebalances.
			if m.matches(req.Protocols) && (g.state == stateCompletingRebalance || m.id != g.leader) {
				g.fillJoinResponseLocked(resp, m.id)
				g.mu.Unlock()
				return resp
			}
			w = g.updateMemberAndRebalanceLocked(m, req, now)
		default:
			g.mu.Unlock()
			return fail(errUnknownMemberID)
		}
	}
	g.mu.Unlock()
	return waitJoin(ctx, w, fail)
}

// waitJoin waits for a parked JoinGroup's answer.
func waitJoin(ctx context.Context, w *joinWaiter, fail func(int16) *kmsg.JoinGroupResponse) *kmsg.JoinGroupResponse {
	// Parked, not busy: no request quota is charged for the wait.
	defer quota.Parked(ctx, time.Now())
	select {
	case <-w.done:
		return w.resp
	case <-ctx.Done():
		// Like Kafka, the member stays in the join phase (its response is
		// lost); the rebalance timeout bounds how long that matters.
		select {
		case <-w.done:
			return w.resp
		default:
		}
		return fail(errCoordinatorNotAvailable)
	}
}

func cloneString(s *string) *string {
	if s == nil {
		return nil
	}
	c := *s
	return &c
}

// update copies the join request's member settings into m.
func (m *member) update(req *kmsg.JoinGroupRequest) {
	m.sessionTimeout = time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	m.rebalanceTimeout = m.sessionTimeout
	if req.Version >= 1 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	m.protocolType = req.ProtocolType
	m.protocols = copyProtocols(req.Protocols)
}

// addMemberAndRebalanceLocked is GroupCoordinator.addMemberAndRebalance:
// m joins parked on req.
func (g *group) addMemberAndRebalanceLocked(m *member, req *kmsg.JoinGroupRequest, now time.Time) *joinWaiter {
	w := newJoinWaiter(req)
	m.joinWait = w
	if g.state == statePreparingRebalance && g.initialDelay && g.generation == 0 {
		g.newMember = true
	}
	g.addMemberLocked(m)
	g.maybePrepareRebalanceLocked(now, "adding new member "+m.id)
	g.tryCompleteJoinLocked(now)
	return w
}

// updateMemberAndRebalanceLocked is GroupCoordinator.updateMemberAndRebalance:
// a known member rejoins with possibly new metadata. A join the member
// already had parked is superseded.
func (g *group) updateMemberAndRebalanceLocked(m *member, req *kmsg.JoinGroupRequest, now time.Time) *joinWaiter {
	if m.joinWait != nil {
		old := m.joinWait.req.ResponseKind().(*kmsg.JoinGroupResponse)
		old.MemberID = m.id
		old.Generation = -1
		old.ErrorCode = errRebalanceInProgress
		m.answerJoin(old)
	}
	m.update(req)
	w := newJoinWaiter(req)
	m.joinWait = w
	g.maybePrepareRebalanceLocked(now, "member "+m.id+" rejoining")
	g.tryCompleteJoinLocked(now)
	return w
}
