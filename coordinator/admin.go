package coordinator

// ListGroups v0-5, DescribeGroups v0-5, DeleteGroups v0-2, OffsetDelete v0
// (GroupCoordinator.handleListGroups / handleDescribeGroup /
// handleDeleteGroups / handleDeleteOffsets).
//
// ListGroups: every loaded group of this broker, COORDINATOR_LOAD_IN_PROGRESS
// alongside the loaded ones while a partition loads. v4 states filter
// (case-insensitive); v5 types filter ("classic", "consumer").
//
// DescribeGroups: a group that does not exist is "Dead" without error (as
// Kafka before v6). Member metadata and assignments only in Stable.
//
// DeleteGroups: only Empty groups (NON_EMPTY_GROUP otherwise,
// GROUP_ID_NOT_FOUND when absent); tombstones for the group and all its
// offsets are appended before it disappears.
//
// OffsetDelete: an Empty group loses the named offsets; a consumer group
// with members answers GROUP_SUBSCRIBED_TO_TOPIC for topics it subscribes
// to and deletes the rest; other non-empty groups answer NON_EMPTY_GROUP.
// KIP-848 consumer groups: as classic consumer groups, their members'
// subscriptions (names and resolved regexes) deciding.
//
// ListGroups lists consumer (KIP-848) groups with type "consumer" and
// their state (Empty, Assigning, Reconciling, Stable); DescribeGroups
// answers them Dead, as Kafka does before v6; DeleteGroups deletes one
// without members with all its records.
//
// Pending transactional offsets (Kafka's GroupMetadata.removeOffsets /
// removeAllOffsets): they do not keep a group from being deleted; deleting
// a group drops them, and OffsetDelete drops those of the partitions it
// deletes, committed or not. Only committed offsets get tombstones: the
// transactional batches stay in the log until a snapshot passes them, so
// a reload before that brings those pending offsets back, as in Kafka.

import (
	"context"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups serves a ListGroupsRequest.
func (c *Coordinator) ListGroups(_ context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	groups, loading := c.allGroups()
	if loading {
		resp.ErrorCode = errCoordinatorLoadInProgress
	}
	wantType := func(string) bool { return true }
	if len(req.TypesFilter) > 0 {
		wantType = func(typ string) bool {
			for _, t := range req.TypesFilter {
				if strings.EqualFold(t, typ) {
					return true
				}
			}
			return false
		}
	}
	for _, g := range groups {
		g.mu.Lock()
		if g.unloadCode != 0 || g.state == stateDead {
			g.mu.Unlock()
			continue
		}
		lg := kmsg.ListGroupsResponseGroup{
			Group:        g.id,
			ProtocolType: g.protocolType,
			GroupState:   g.state.String(),
			GroupType:    "classic",
		}
		if g.cg != nil {
			lg.ProtocolType = "consumer"
			lg.GroupState = g.cg.stateName()
			lg.GroupType = "consumer"
		}
		if g.sg != nil {
			lg.ProtocolType = "share"
			lg.GroupState = g.sg.stateName()
			lg.GroupType = "share"
		}
		g.mu.Unlock()
		if !wantType(lg.GroupType) {
			continue
		}
		if len(req.StatesFilter) > 0 {
			keep := false
			for _, s := range req.StatesFilter {
				keep = keep || strings.EqualFold(s, lg.GroupState)
			}
			if !keep {
				continue
			}
		}
		resp.Groups = append(resp.Groups, lg)
	}
	sort.Slice(resp.Groups, func(i, j int) bool { return resp.Groups[i].Group < resp.Groups[j].Group })
	return resp
}

// DescribeGroups serves a DescribeGroupsRequest.
func (c *Coordinator) DescribeGroups(_ context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		resp.Groups = append(resp.Groups, c.describeGroup(id))
	}
	return resp
}

func (c *Coordinator) describeGroup(id string) kmsg.DescribeGroupsResponseGroup {
	dg := kmsg.NewDescribeGroupsResponseGroup()
	dg.Group = id
	g, code := c.lookup(id, false)
	if code != 0 {
		dg.ErrorCode = code
		return dg
	}
	dg.State = stateDead.String()
	if g == nil {
		return dg
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unloadCode != 0 {
		dg.ErrorCode = g.unloadCode
		dg.State = ""
		return dg
	}
	dg.State = g.state.String()
	if g.state == stateDead || g.cg != nil || g.sg != nil {
		// A consumer (KIP-848) group is not a classic group: Kafka
		// describes it as Dead before DescribeGroups v6.
		dg.State = stateDead.String()
		return dg
	}
	dg.ProtocolType = g.protocolType
	stable := g.state == stateStable
	if stable {
		dg.Protocol = g.protocol
	}
	for _, m := range g.membersInOrder() {
		dm := kmsg.DescribeGroupsResponseGroupMember{
			MemberID:   m.id,
			InstanceID: m.instanceID,
			ClientID:   m.clientID,
			ClientHost: m.clientHost,
		}
		if stable {
			dm.ProtocolMetadata = m.metadata(g.protocol)
			dm.MemberAssignment = m.assignment
		}
		dg.Members = append(dg.Members, dm)
	}
	return dg
}

// DeleteGroups serves a DeleteGroupsRequest.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		resp.Groups = append(resp.Groups, kmsg.DeleteGroupsResponseGroup{Group: id, ErrorCode: c.deleteGroup(ctx, id)})
	}
	return resp
}

func (c *Coordinator) deleteGroup(ctx context.Context, id string) int16 {
	g, code := c.lookup(id, false)
	if code != 0 {
		return code
	}
	if g == nil {
		return errGroupIDNotFound
	}
	if err := g.acquireWrite(ctx); err != nil {
		return errCoordinatorNotAvailable
	}
	defer g.releaseWrite()
	g.mu.Lock()
	switch {
	case g.unloadCode != 0:
		g.mu.Unlock()
		return g.unloadCode
	case g.state == stateDead:
		g.mu.Unlock()
		return errGroupIDNotFound
	case g.state != stateEmpty || (g.cg != nil && len(g.cg.members) > 0) || (g.sg != nil && len(g.sg.members) > 0):
		g.mu.Unlock()
		return errNonEmptyGroup
	}
	records := g.allTombstonesLocked()
	g.state = stateDead // joins and commits now answer COORDINATOR_NOT_AVAILABLE
	now := c.now()
	g.mu.Unlock()

	code = 0
	c.writeGroup(ctx, g, now, records, func(err error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if err != nil {
			g.state = stateEmpty // nothing could change while Dead
			code = appendErrorCode(err, false)
			c.logger.Warn("failed to delete group", "group", id, "err", err, "code", code)
			return
		}
		g.killLocked()
		c.logger.Info("deleted group", "group", id)
	})
	return code
}

// allTombstonesLocked deletes every offset of the group and the group.
func (g *group) allTombstonesLocked() []record {
	tps := sortedPartitions(g.offsets)
	records := make([]record, 0, len(tps)+1)
	for _, tp := range tps {
		records = append(records, offsetTombstone(g.id, tp))
	}
	records = append(records, g.shareStateTombstonesLocked()...)
	records = append(records, g.groupConfigTombstonesLocked()...)
	if g.cg != nil {
		return append(records, cgDeleteGroupRecords(g.id, g.cg)...)
	}
	return append(records, groupTombstone(g.id))
}

// killLocked finishes a removal whose tombstones are durable: the group is
// Dead, forgets its offsets and pending members, and leaves the table.
func (g *group) killLocked() {
	g.state = stateDead
	g.offsets = map[topicPartition]offsetEntry{}
	g.pendingTxn = map[int64]*openTxn{}
	g.storedMeta = nil
	g.stopAllCGTimersLocked()
	g.cg = nil
	g.stopAllShareTimersLocked()
	g.sg, g.shareStates, g.shareLeaderEpochs, g.configs = nil, nil, nil, nil
	for id, pm := range g.pending {
		pm.stopHeartbeat()
		delete(g.pending, id)
	}
	g.stopJoinTimer()
	g.stopSyncTimer()
	g.c.removeGroup(g)
}

// OffsetDelete serves an OffsetDeleteRequest.
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	codes := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
	}
	answer := func(top int16) *kmsg.OffsetDeleteResponse {
		resp.ErrorCode = top
		if top != 0 {
			return resp
		}
		for i, t := range req.Topics {
			rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic}
			for j, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition, ErrorCode: codes[i][j]})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	if req.Group == "" {
		return answer(errInvalidGroupID)
	}
	g, code := c.lookup(req.Group, false)
	if code != 0 {
		return answer(code)
	}
	if g == nil {
		return answer(errGroupIDNotFound)
	}
	if err := g.acquireWrite(ctx); err != nil {
		return answer(errCoordinatorNotAvailable)
	}
	defer g.releaseWrite()

	g.mu.Lock()
	switch {
	case g.unloadCode != 0:
		g.mu.Unlock()
		return answer(g.unloadCode)
	case g.state == stateDead:
		g.mu.Unlock()
		return answer(errGroupIDNotFound)
	case g.state != stateEmpty && g.protocolType != "consumer":
		g.mu.Unlock()
		return answer(errNonEmptyGroup)
	}
	var deleting, eligible []topicPartition
	var records []record
	var cgSubscribed map[string]struct{}
	if g.cg != nil && len(g.cg.members) > 0 {
		cgSubscribed = groupSubscribedTopics(g.cg.members, resolveRegexes(g.cg.members, c.topicImage()))
	}
	for i, t := range req.Topics {
		subscribed := false
		if cgSubscribed != nil {
			_, subscribed = cgSubscribed[t.Topic]
		} else if g.state != stateEmpty {
			// Kafka's isSubscribedToTopic: unknown subscriptions count as
			// subscribed to everything.
			_, sub := g.subscribed[t.Topic]
			subscribed = !g.subsKnown || sub
		}
		for j, p := range t.Partitions {
			if subscribed {
				codes[i][j] = errGroupSubscribedToTopic
				continue
			}
			tp := topicPartition{t.Topic, p.Partition}
			eligible = append(eligible, tp)
			if _, ok := g.offsets[tp]; ok {
				deleting = append(deleting, tp)
				records = append(records, offsetTombstone(g.id, tp))
			}
		}
	}
	now := c.now()
	if len(records) == 0 {
		g.dropPendingLocked(eligible)
		g.mu.Unlock()
		return answer(0)
	}
	g.mu.Unlock()
	var appendErr error
	c.writeGroup(ctx, g, now, records, func(err error) {
		appendErr = err
		if err != nil {
			return
		}
		g.mu.Lock()
		for _, tp := range deleting {
			delete(g.offsets, tp)
		}
		g.dropPendingLocked(eligible)
		g.mu.Unlock()
	})
	if appendErr != nil {
		code := appendErrorCode(appendErr, true)
		c.logger.Warn("failed to delete offsets", "group", g.id, "err", appendErr, "code", code)
		fillUnset(codes, code)
	}
	return answer(0)
}
