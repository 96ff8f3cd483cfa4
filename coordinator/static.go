package coordinator

// Static membership (KIP-345), as Kafka 3.x's GroupCoordinator does it.
//
//   - A JoinGroup (v5+) with a group.instance.id and no member id never gets
//     MEMBER_ID_REQUIRED: a new instance joins (and rebalances) at once; a
//     known instance (restarted) gets a new member id that replaces the old
//     one (updateStaticMemberAndRebalanceLocked). In a Stable group whose
//     selected protocol would not change, that is no rebalance: the group's
//     metadata is stored with the new member id and the member is answered
//     with the current generation (and, before v9, the old leader id, so it
//     does not try to assign; from v9 a leader gets skip_assignment).
//   - Requests naming an instance id with another member id than the one it
//     maps to answer FENCED_INSTANCE_ID (validateCurrentMemberLocked):
//     JoinGroup, SyncGroup, Heartbeat, OffsetCommit and LeaveGroup. A
//     JoinGroup or SyncGroup the replaced member had parked is answered
//     FENCED_INSTANCE_ID at once.
//   - A static member that does not rejoin during a rebalance is kept (only
//     dynamic ones are removed); its session timeout removes it, as any
//     member's. LeaveGroup v3+ removes a member by instance id alone.
//   - Instance ids are stored in the group metadata (GroupMetadataValue v3)
//     and come back with it on load.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// validateCurrentMemberLocked is GroupCoordinator.validateCurrentMember:
// with an instance id, it must map to memberID (else FENCED_INSTANCE_ID, or
// UNKNOWN_MEMBER_ID when unknown); memberID must be a member.
func (g *group) validateCurrentMemberLocked(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		switch {
		case !ok:
			return errUnknownMemberID
		case cur != memberID:
			return errFencedInstanceID
		}
	}
	if g.members[memberID] == nil {
		return errUnknownMemberID
	}
	return 0
}

// replaceStaticMemberLocked is GroupMetadata.replaceStaticMember: m keeps
// everything but its id, which becomes newID; a JoinGroup or SyncGroup
// parked under the old id is fenced.
func (g *group) replaceStaticMemberLocked(m *member, newID string) {
	oldID := m.id
	if m.joinWait != nil {
		resp := m.joinWait.req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.MemberID = oldID
		resp.Generation = -1
		resp.ErrorCode = errFencedInstanceID
		m.answerJoin(resp)
	}
	if m.syncWait != nil {
		resp := m.syncWait.req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = errFencedInstanceID
		m.answerSync(resp)
	}
	delete(g.members, oldID)
	m.id = newID
	g.members[newID] = m
	if g.leader == oldID {
		g.leader = newID
	}
	// Unlike Kafka, a pending SyncGroup expectation moves to the new id, so
	// the new member's SyncGroup satisfies it instead of a rebalance.
	if _, ok := g.pendingSync[oldID]; ok {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = struct{}{}
	}
	g.static[*m.instanceID] = newID
}

// memberSettings is what a static rejoin changes, to restore after a
// failed store.
type memberSettings struct {
	protocols        []kmsg.JoinGroupRequestProtocol
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
}

func (m *member) settings() memberSettings {
	return memberSettings{m.protocols, m.sessionTimeout, m.rebalanceTimeout}
}

func (m *member) restore(s memberSettings) {
	m.protocols, m.sessionTimeout, m.rebalanceTimeout = s.protocols, s.sessionTimeout, s.rebalanceTimeout
}

// updateStaticMemberAndRebalanceLocked is
// GroupCoordinator.updateStaticMemberAndRebalance: the known static member m
// rejoins with an unknown member id and becomes newID, parked on req.
func (g *group) updateStaticMemberAndRebalanceLocked(m *member, newID string, req *kmsg.JoinGroupRequest, now time.Time) *joinWaiter {
	oldID := m.id
	oldLeader := g.leader
	g.replaceStaticMemberLocked(m, newID)
	old := m.settings()
	m.update(req)
	w := newJoinWaiter(req)
	m.joinWait = w
	g.scheduleHeartbeatLocked(m, now)
	g.c.logger.Info("static member rejoined with a new member id", "group", g.id,
		"instance", *m.instanceID, "old_member", oldID, "member", newID, "state", g.state.String())

	switch g.state {
	case stateStable:
		if selectProtocol(g.membersInOrder()) == g.protocol {
			gen := g.generation
			g.c.goBackground(func(ctx context.Context) {
				g.storeStaticReplacement(ctx, m, w, gen, oldID, oldLeader, old)
			})
			return w
		}
		g.maybePrepareRebalanceLocked(now, "static member "+newID+" rejoined with other protocols")
	case stateCompletingRebalance:
		// The leader may have been given the old member id: rebalance so
		// the assignment names the new one.
		g.prepareRebalanceLocked(now, "static member "+newID+" rejoined during CompletingRebalance")
	case statePreparingRebalance:
		g.tryCompleteJoinLocked(now)
	}
	return w
}

// storeStaticReplacement persists the group with a replaced static member's
// new id and answers its JoinGroup with the current generation; when the
// store fails the replacement is undone and the join answered with the
// error (the storeGroup callback of updateStaticMemberAndRebalance). If the
// group moved on meanwhile (a rebalance started), nothing is written: the
// rebalance answers the member and stores the group itself.
func (g *group) storeStaticReplacement(ctx context.Context, m *member, w *joinWaiter, gen int32, oldID, oldLeader string, old memberSettings) {
	c := g.c
	if err := g.acquireWrite(ctx); err != nil {
		g.finishStaticReplacement(m, w, gen, oldID, oldLeader, old, err)
		return
	}
	defer g.releaseWrite()
	g.mu.Lock()
	if !g.staticReplacementCurrentLocked(m, w, gen) {
		g.mu.Unlock()
		return
	}
	now := c.now()
	rec := groupRecord(g.id, g.metadataValueLocked(now, nil))
	g.mu.Unlock()
	c.writeGroup(ctx, g, now, []record{rec}, func(err error) {
		if err == nil {
			g.mu.Lock()
			g.storedMeta = rec.value
			g.mu.Unlock()
		}
		g.finishStaticReplacement(m, w, gen, oldID, oldLeader, old, err)
	})
}

// staticReplacementCurrentLocked reports whether the group is still as the
// replacement left it: Stable in generation gen, m the member, w its join.
func (g *group) staticReplacementCurrentLocked(m *member, w *joinWaiter, gen int32) bool {
	return g.unloadCode == 0 && g.state == stateStable && g.generation == gen &&
		g.members[m.id] == m && m.joinWait == w
}

func (g *group) finishStaticReplacement(m *member, w *joinWaiter, gen int32, oldID, oldLeader string, old memberSettings, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.staticReplacementCurrentLocked(m, w, gen) {
		return
	}
	now := g.c.now()
	resp := w.req.ResponseKind().(*kmsg.JoinGroupResponse)
	if err != nil {
		code := appendErrorCode(err, false)
		g.c.logger.Warn("failed to store static member replacement", "group", g.id,
			"member", m.id, "err", err, "code", code)
		m.joinWait = nil
		m.restore(old)
		g.replaceStaticMemberLocked(m, oldID)
		g.scheduleHeartbeatLocked(m, now)
		resp.ErrorCode = code
		resp.MemberID = ""
		resp.Generation = g.generation
		resp.ProtocolType = kmsg.StringPtr(g.protocolType)
		resp.Protocol = kmsg.StringPtr(g.protocol)
		resp.LeaderID = oldLeader
		w.resp = resp
		close(w.done)
		return
	}
	g.fillJoinResponseLocked(resp, m.id)
	if w.req.Version >= 9 {
		resp.SkipAssignment = m.id == g.leader
	} else {
		// The old leader id: the member does not believe it leads, so it
		// does not compute an assignment a Stable group would ignore.
		resp.Members = nil
		resp.LeaderID = oldLeader
	}
	m.answerJoin(resp)
	g.scheduleHeartbeatLocked(m, now)
}
