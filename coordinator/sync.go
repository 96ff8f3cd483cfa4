package coordinator

// SyncGroup, versions 0-5 (Kafka's GroupCoordinator.handleSyncGroup).
//
//   - While CompletingRebalance, every member parks; the leader's request
//     carries the assignment, which is written to __consumer_offsets as the
//     group's metadata record before anyone is answered. Assignments naming
//     non-members are ignored and members the leader left out get an empty
//     assignment, as Kafka does.
//   - A failed write answers all parked members with the mapped error and
//     starts a new rebalance; an assignment too large for MaxRecordBytes is
//     such a failure (UNKNOWN_SERVER_ERROR, Kafka's mapping of
//     MESSAGE_TOO_LARGE for group metadata): nothing is stored and the group
//     stays usable for the next rebalance.
//   - Stable: the member's current assignment is returned.
//   - While the partition loads, REBALANCE_IN_PROGRESS (not
//     COORDINATOR_LOAD_IN_PROGRESS, which old clients do not expect).
//   - v3+ group.instance.id: FENCED_INSTANCE_ID when it maps to another
//     member id (static.go).
//   - v5 protocol type / name are checked (INCONSISTENT_GROUP_PROTOCOL).

import (
	"context"
	"time"

	"github.com/kbroker/kbroker/internal/quota"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup serves a SyncGroupRequest; it blocks until the leader's
// assignment is stored or ctx is done.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	fail := func(code int16) *kmsg.SyncGroupResponse {
		resp.ErrorCode = code
		return resp
	}
	if req.Group == "" {
		return fail(errInvalidGroupID)
	}
	g, code := c.lookup(req.Group, false)
	if code == errCoordinatorLoadInProgress {
		return fail(errRebalanceInProgress)
	}
	if code != 0 {
		return fail(code)
	}
	if g == nil {
		return fail(errUnknownMemberID)
	}

	g.mu.Lock()
	if code := g.statusLocked(); code != 0 {
		g.mu.Unlock()
		return fail(code)
	}
	instanceID := req.InstanceID
	if req.Version < 3 {
		instanceID = nil
	}
	m := g.members[req.MemberID]
	code = g.validateCurrentMemberLocked(req.MemberID, instanceID)
	switch {
	case code != 0:
	case req.Generation != g.generation:
		code = errIllegalGeneration
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType,
		req.Protocol != nil && *req.Protocol != g.protocol:
		code = errInconsistentGroupProtocol
	}
	if code != 0 {
		g.mu.Unlock()
		return fail(code)
	}
	now := c.now()
	switch g.state {
	case statePreparingRebalance:
		g.mu.Unlock()
		return fail(errRebalanceInProgress)
	case stateStable:
		delete(g.pendingSync, m.id)
		resp.ProtocolType = kmsg.StringPtr(g.protocolType)
		resp.Protocol = kmsg.StringPtr(g.protocol)
		resp.MemberAssignment = m.assignment
		g.scheduleHeartbeatLocked(m, now)
		g.mu.Unlock()
		return resp
	case stateCompletingRebalance:
	default:
		g.mu.Unlock()
		return fail(errUnknownMemberID)
	}

	if m.syncWait != nil {
		old := m.syncWait.req.ResponseKind().(*kmsg.SyncGroupResponse)
		old.ErrorCode = errRebalanceInProgress
		m.answerSync(old)
	}
	w := newSyncWaiter(req)
	m.syncWait = w
	delete(g.pendingSync, m.id)
	if m.id == g.leader && g.syncStoreGen != g.generation {
		g.syncStoreGen = g.generation
		assignments := make(map[string][]byte, len(g.members))
		for id := range g.members {
			assignments[id] = []byte{}
		}
		for _, a := range req.GroupAssignment {
			if _, ok := assignments[a.MemberID]; ok {
				assignments[a.MemberID] = append([]byte{}, a.MemberAssignment...)
			}
		}
		gen := g.generation
		c.goBackground(func(ctx context.Context) { g.storeAssignment(ctx, gen, assignments) })
	}
	g.mu.Unlock()

	// Parked, not busy: no request quota is charged for the wait.
	defer quota.Parked(ctx, time.Now())
	select {
	case <-w.done:
		return w.resp
	case <-ctx.Done():
		select {
		case <-w.done:
			return w.resp
		default:
		}
		return fail(errRebalanceInProgress)
	}
}

// storeAssignment writes the leader's assignment of generation gen and,
// once it is durable, makes the group Stable and answers the parked
// SyncGroups (the storeGroup callback of GroupCoordinator.doSyncGroup).
func (g *group) storeAssignment(ctx context.Context, gen int32, assignments map[string][]byte) {
	c := g.c
	if err := g.acquireWrite(ctx); err != nil {
		g.finishAssignment(gen, assignments, err)
		return
	}
	defer g.releaseWrite()
	g.mu.Lock()
	if g.state != stateCompletingRebalance || g.generation != gen || g.unloadCode != 0 {
		g.mu.Unlock()
		return
	}
	now := c.now()
	rec := groupRecord(g.id, g.metadataValueLocked(now, assignments))
	g.mu.Unlock()

	c.writeGroup(ctx, g, now, []record{rec}, func(err error) {
		if err == nil {
			g.mu.Lock()
			g.storedMeta = rec.value
			g.mu.Unlock()
		}
		g.finishAssignment(gen, assignments, err)
	})
}

func (g *group) finishAssignment(gen int32, assignments map[string][]byte, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != stateCompletingRebalance || g.generation != gen || g.unloadCode != 0 {
		return
	}
	now := g.c.now()
	if err != nil {
		code := appendErrorCode(err, false)
		g.c.logger.Warn("failed to store group assignment", "group", g.id, "generation", gen, "err", err, "code", code)
		g.resetAndPropagateAssignmentErrorLocked(now, code)
		g.maybePrepareRebalanceLocked(now, "error storing group assignment")
		return
	}
	for id, m := range g.members {
		m.assignment = assignments[id]
	}
	g.propagateAssignmentLocked(now, 0)
	g.transitionLocked(stateStable, now)
	g.c.logger.Info("group stable", "group", g.id, "generation", gen, "members", len(g.members))
}

// metadataValueLocked is the group's metadata record
// (GroupMetadataManager.groupMetadataValue) with the given assignments
// (nil: the members' current ones).
func (g *group) metadataValueLocked(now time.Time, assignments map[string][]byte) *kmsg.GroupMetadataValue {
	v := kmsg.NewGroupMetadataValue()
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	v.CurrentStateTimestamp = now.UnixMilli()
	if g.protocol != "" {
		v.Protocol = kmsg.StringPtr(g.protocol)
	}
	if g.leader != "" && len(g.members) > 0 {
		v.Leader = kmsg.StringPtr(g.leader)
	}
	for _, m := range g.membersInOrder() {
		a := m.assignment
		if assignments != nil {
			a = assignments[m.id]
		}
		if a == nil {
			a = []byte{}
		}
		sub := m.metadata(g.protocol)
		if sub == nil {
			sub = []byte{}
		}
		v.Members = append(v.Members, kmsg.GroupMetadataValueMember{
			MemberID:               m.id,
			InstanceID:             m.instanceID,
			ClientID:               m.clientID,
			ClientHost:             m.clientHost,
			RebalanceTimeoutMillis: int32(m.rebalanceTimeout / time.Millisecond),
			SessionTimeoutMillis:   int32(m.sessionTimeout / time.Millisecond),
			Subscription:           sub,
			Assignment:             a,
		})
	}
	return &v
}

// storeGroupAsync writes the group's metadata in the background, for a
// group that became Empty in generation gen. Kafka only logs a failure.
func (g *group) storeGroupAsync(gen int32) {
	g.c.goBackground(func(ctx context.Context) {
		if err := g.acquireWrite(ctx); err != nil {
			return
		}
		defer g.releaseWrite()
		g.mu.Lock()
		if g.state != stateEmpty || g.generation != gen || g.unloadCode != 0 {
			g.mu.Unlock()
			return
		}
		now := g.c.now()
		rec := groupRecord(g.id, g.metadataValueLocked(now, nil))
		g.mu.Unlock()
		g.c.writeGroup(ctx, g, now, []record{rec}, func(err error) {
			if err != nil {
				g.c.logger.Warn("failed to store empty group", "group", g.id, "generation", gen, "err", err)
				return
			}
			g.mu.Lock()
			g.storedMeta = rec.value
			g.mu.Unlock()
		})
	})
}

// acquireWrite takes the group's write token, or fails when ctx ends first.
func (g *group) acquireWrite(ctx context.Context) error {
	select {
	case g.writeTok <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *group) releaseWrite() { <-g.writeTok }
