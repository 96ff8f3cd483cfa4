package coordinator

// Heartbeat, versions 0-4 (GroupCoordinator.handleHeartbeat), and
// LeaveGroup, versions 0-5 (GroupCoordinator.handleLeaveGroup).
//
// Heartbeat: restarts the member's session; REBALANCE_IN_PROGRESS while
// PreparingRebalance tells the member to rejoin. While the partition loads
// the answer is NONE, as Kafka's. v3+ group.instance.id: FENCED_INSTANCE_ID
// when it maps to another member id.
//
// LeaveGroup: v0-v2 name one member; v3+ a batch, each with its own error
// and the top-level error for the group. A member named only by
// group.instance.id (empty member id) is removed by it; one named by both
// must match (FENCED_INSTANCE_ID otherwise). v5 reasons are logged.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat serves a HeartbeatRequest.
func (c *Coordinator) Heartbeat(_ context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if req.Group == "" {
		resp.ErrorCode = errInvalidGroupID
		return resp
	}
	g, code := c.lookup(req.Group, false)
	if code == errCoordinatorLoadInProgress {
		return resp
	}
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	if g == nil {
		resp.ErrorCode = errUnknownMemberID
		return resp
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	instanceID := req.InstanceID
	if req.Version < 3 {
		instanceID = nil
	}
	resp.ErrorCode = g.heartbeatLocked(req.MemberID, instanceID, req.Generation)
	return resp
}

func (g *group) heartbeatLocked(memberID string, instanceID *string, generation int32) int16 {
	if code := g.statusLocked(); code != 0 {
		return code
	}
	if code := g.validateCurrentMemberLocked(memberID, instanceID); code != 0 {
		return code
	}
	m := g.members[memberID]
	if generation != g.generation {
		return errIllegalGeneration
	}
	now := g.c.now()
	switch g.state {
	case stateCompletingRebalance, stateStable:
		g.scheduleHeartbeatLocked(m, now)
		return 0
	case statePreparingRebalance:
		g.scheduleHeartbeatLocked(m, now)
		return errRebalanceInProgress
	default:
		return errUnknownMemberID
	}
}

// LeaveGroup serves a LeaveGroupRequest.
func (c *Coordinator) LeaveGroup(_ context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	finish := func(top int16) *kmsg.LeaveGroupResponse {
		resp.ErrorCode = top
		if req.Version < 3 {
			if top == 0 && len(resp.Members) == 1 {
				resp.ErrorCode = resp.Members[0].ErrorCode
			}
			resp.Members = nil
		}
		return resp
	}
	if req.Group == "" {
		return finish(errInvalidGroupID)
	}
	g, code := c.lookup(req.Group, false)
	if code != 0 {
		return finish(code)
	}
	if g == nil {
		for _, l := range leaving {
			resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{
				MemberID: l.MemberID, InstanceID: l.InstanceID, ErrorCode: errUnknownMemberID,
			})
		}
		return finish(0)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if code := g.statusLocked(); code != 0 {
		return finish(code)
	}
	now := c.now()
	leave := func(m *member, l kmsg.LeaveGroupRequestMember) {
		reason := "member " + m.id + " left"
		if l.Reason != nil {
			reason += ": " + *l.Reason
		}
		g.c.logger.Info("member leaving group", "group", g.id, "member", m.id, "reason", reason)
		g.removeMemberAndUpdateLocked(m, now, reason)
	}
	for _, l := range leaving {
		r := kmsg.LeaveGroupResponseMember{MemberID: l.MemberID, InstanceID: l.InstanceID}
		switch pm := g.pending[l.MemberID]; {
		case l.MemberID == "" && l.InstanceID != nil:
			// Removal by instance id (GroupCoordinator.handleLeaveGroup).
			if m := g.members[g.static[*l.InstanceID]]; m != nil {
				leave(m, l)
			} else {
				r.ErrorCode = errUnknownMemberID
			}
		case pm != nil:
			pm.stopHeartbeat()
			delete(g.pending, pm.id)
			if g.state == statePreparingRebalance {
				g.tryCompleteJoinLocked(now)
			}
		default:
			if r.ErrorCode = g.validateCurrentMemberLocked(l.MemberID, l.InstanceID); r.ErrorCode == 0 {
				leave(g.members[l.MemberID], l)
			}
		}
		resp.Members = append(resp.Members, r)
	}
	return finish(0)
}
