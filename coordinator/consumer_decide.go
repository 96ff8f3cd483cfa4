package coordinator

// The decisions of ConsumerGroupHeartbeat (Kafka 4.0's
// GroupMetadataManager.consumerGroupHeartbeat / consumerGroupLeave /
// consumerGroupFenceMember) as pure functions: given the group's state,
// the request and the topics of the cluster, they return the next state,
// the records that make it durable (in Kafka's order) and the answer. The
// driver (consumer_heartbeat.go) appends the records and only then
// publishes the state.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// cgConfig is the group.consumer.* configuration.
type cgConfig struct {
	sessionTimeout    time.Duration // group.consumer.session.timeout.ms
	heartbeatInterval time.Duration // group.consumer.heartbeat.interval.ms
	assignors         []string      // group.consumer.assignors; the first is the default
	maxSize           int           // group.consumer.max.size
}

// hbRequest is a ConsumerGroupHeartbeat, version neutral.
type hbRequest struct {
	version            int16
	group              string
	memberID           string
	epoch              int32
	instanceID         *string
	rackID             *string
	rebalanceTimeoutMs int32
	topics             []string // nil: not sent
	regex              *string  // nil: not sent
	assignor           *string
	owned              tpSet // partitions the member owns; nil when not sent
	clientID           string
	clientHost         string
}

// rebalanceTimer asks the driver to fence member unless it leaves epoch
// within timeout.
type rebalanceTimer struct {
	epoch   int32
	timeout time.Duration
}

// hbResult is a heartbeat's outcome.
type hbResult struct {
	code int16
	msg  string

	state   *cgState // the next state (nil with an error)
	records []record

	memberID       string
	memberEpoch    int32
	assignment     tpSet
	sendAssignment bool

	// Timers for the driver: sessionFor restarts that member's session;
	// rebalance schedules (cancelRebalance cancels) its rebalance timeout;
	// removed members' timers stop.
	sessionFor      string
	rebalance       *rebalanceTimer
	cancelRebalance bool
	removed         []string
}

func hbError(code int16, format string, args ...any) hbResult {
	return hbResult{code: code, msg: fmt.Sprintf(format, args...)}
}

// validateHeartbeat is throwIfConsumerGroupHeartbeatRequestIsInvalid (4.0).
func validateHeartbeat(r hbRequest, assignors []string) (int16, string) {
	invalid := kerr.InvalidRequest.Code
	if (r.version >= 1 || r.epoch > 0 || r.epoch == leaveGroupMemberEpoch) && r.memberID == "" {
		return invalid, "MemberId can't be empty."
	}
	if r.instanceID != nil && *r.instanceID == "" {
		return invalid, "InstanceId can't be empty."
	}
	if r.rackID != nil && *r.rackID == "" {
		return invalid, "RackId can't be empty."
	}
	switch {
	case r.epoch == 0:
		if r.rebalanceTimeoutMs == -1 {
			return invalid, "RebalanceTimeoutMs must be provided in first request."
		}
		if r.owned == nil || len(r.owned) > 0 {
			return invalid, "TopicPartitions must be empty when (re-)joining."
		}
		if r.topics == nil && r.regex == nil {
			return invalid, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
		}
	case r.epoch == leaveGroupStaticMemberEpoch:
		if r.instanceID == nil {
			return invalid, "InstanceId can't be null."
		}
	case r.epoch < leaveGroupStaticMemberEpoch:
		return invalid, "MemberEpoch is invalid."
	}
	if r.assignor != nil && !slices.Contains(assignors, *r.assignor) {
		return kerr.UnsupportedAssignor.Code, fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: %v.", *r.assignor, assignors)
	}
	return 0, ""
}

// checkMemberEpoch is throwIfConsumerGroupMemberEpochIsInvalid: an epoch
// ahead of the member's, or behind it, is fenced, except the previous epoch
// with owned partitions that are a subset of the assignment (the response
// that carried the new epoch may have been lost).
func checkMemberEpoch(m *cgMember, received int32, owned tpSet) (int16, string) {
	fenced := kerr.FencedMemberEpoch.Code
	switch {
	case received > m.epoch:
		return fenced, fmt.Sprintf("The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", received, m.epoch)
	case received < m.epoch:
		if received != m.prevEpoch || !isSubset(owned, m.assigned) {
			return fenced, fmt.Sprintf("The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", received, m.epoch)
		}
	}
	return 0, ""
}

// isSubset: owned (nil: not reported) only holds partitions of target.
func isSubset(owned, target tpSet) bool {
	if owned == nil {
		return false
	}
	for id, ps := range owned {
		for _, p := range ps {
			if !target.has(id, p) {
				return false
			}
		}
	}
	return true
}

func newCGMember(id string) *cgMember {
	return &cgMember{id: id, rebalanceTimeoutMs: -1, assigned: tpSet{}, revoking: tpSet{}}
}

// newUUIDString is a random UUID in Java's Uuid.toString form, for v0
// members that ask the coordinator for an id.
func newUUIDString() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// preferredAssignor is ConsumerGroup.computePreferredServerAssignor: the
// assignor most members ask for, ties to the earlier in the configured
// list, else the default (the first configured).
func preferredAssignor(members map[string]*cgMember, assignors []string) string {
	counts := map[string]int{}
	for _, m := range members {
		if m.assignor != "" {
			counts[m.assignor]++
		}
	}
	best := ""
	for _, a := range assignors {
		if counts[a] > counts[best] {
			best = a
		}
	}
	if best == "" && len(assignors) > 0 {
		best = assignors[0]
	}
	return best
}

// decideHeartbeat handles a heartbeat of epoch >= 0 (join or regular).
// st is nil when the group does not exist (it is created by a join).
func decideHeartbeat(st *cgState, r hbRequest, im *TopicImage, cfg cgConfig) hbResult {
	group := r.group
	create := r.epoch == 0
	if st == nil {
		if !create {
			return hbError(kerr.GroupIDNotFound.Code, "Consumer group %s not found.", group)
		}
		st = newCGState()
	}
	if len(st.members) >= cfg.maxSize && (r.memberID == "" || st.members[r.memberID] == nil) {
		return hbError(kerr.GroupMaxSizeReached.Code, "The consumer group has reached its maximum capacity of %d members.", cfg.maxSize)
	}
	next := st.clone()
	memberID := r.memberID
	if memberID == "" {
		memberID = newUUIDString()
	}
	var res hbResult
	var records []record
	var member *cgMember // the member before this request's updates
	isNew := false
	if r.instanceID == nil {
		member = next.members[memberID]
		if member == nil {
			if !create {
				return hbError(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", memberID, group)
			}
			member, isNew = newCGMember(memberID), true
		}
		if code, msg := checkMemberEpoch(member, r.epoch, r.owned); code != 0 {
			return hbResult{code: code, msg: msg}
		}
	} else {
		inst := *r.instanceID
		existing := next.members[next.static[inst]]
		switch {
		case create && existing == nil:
			member = next.members[memberID]
			if member == nil {
				member, isNew = newCGMember(memberID), true
			}
		case create:
			// A static member rejoins: it replaces the member that holds
			// its instance id, which must have left temporarily (-2).
			if existing.epoch != leaveGroupStaticMemberEpoch {
				return hbError(kerr.UnreleasedInstanceID.Code, "Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", memberID, inst, existing.id)
			}
			repl := existing.clone()
			repl.id = memberID
			repl.epoch, repl.prevEpoch = 0, 0
			target := next.target[existing.id]
			records = append(records, cgRemoveMemberRecords(group, existing.id)...)
			records = append(records,
				cgMemberMetadataRecord(group, repl),
				cgTargetMemberRecord(group, memberID, target),
				cgCurrentAssignmentRecord(group, repl))
			delete(next.members, existing.id)
			delete(next.target, existing.id)
			if target != nil {
				next.target[memberID] = target
			}
			next.members[memberID] = repl
			next.static[inst] = memberID
			if existing.id != memberID {
				res.removed = append(res.removed, existing.id)
			}
			member = repl
		default:
			if existing == nil {
				return hbError(kerr.UnknownMemberID.Code, "Instance id %s is unknown.", inst)
			}
			if existing.id != memberID {
				return hbError(kerr.FencedInstanceID.Code, "Static member %s with instance id %s was fenced by member %s.", memberID, inst, existing.id)
			}
			if code, msg := checkMemberEpoch(existing, r.epoch, r.owned); code != 0 {
				return hbResult{code: code, msg: msg}
			}
			member = existing
		}
	}

	// 1. The member's new metadata; a changed subscription bumps the epoch.
	upd := member.clone()
	if r.instanceID != nil {
		upd.instanceID = cloneString(r.instanceID)
	}
	if r.rackID != nil {
		upd.rackID = cloneString(r.rackID)
	}
	if r.rebalanceTimeoutMs != -1 {
		upd.rebalanceTimeoutMs = r.rebalanceTimeoutMs
	}
	if r.assignor != nil {
		upd.assignor = *r.assignor
	}
	if r.topics != nil {
		upd.topics = slices.Compact(slices.Sorted(slices.Values(r.topics)))
	}
	if r.regex != nil {
		upd.regex = *r.regex
	}
	upd.clientID, upd.clientHost = r.clientID, r.clientHost
	bump := next.epoch == 0
	if isNew || !upd.sameMetadata(member) {
		if upd.regex != member.regex && upd.regex != "" {
			if _, err := compileSubscriptionRegex(upd.regex); err != nil {
				return hbError(kerr.InvalidRegularExpression.Code, "SubscribedTopicRegex `%s` is not a valid regular expression: %v.", upd.regex, err)
			}
		}
		records = append(records, cgMemberMetadataRecord(group, upd))
		if !slices.Equal(upd.topics, member.topics) || upd.regex != member.regex {
			bump = true
		}
	}
	next.members[upd.id] = upd
	if upd.instanceID != nil {
		next.static[*upd.instanceID] = upd.id
	}

	// The subscribed topics as the cluster has them now: a topic created,
	// deleted or grown bumps the epoch too (Kafka refreshes this on
	// metadata changes).
	resolved := resolveRegexes(next.members, im)
	meta := subscriptionMetadata(groupSubscribedTopics(next.members, resolved), im)
	if !sameSubscriptionMetadata(meta, next.subMeta) {
		next.subMeta = meta
		records = append(records, cgSubscriptionMetadataRecord(group, meta))
		bump = true
	}
	if bump {
		next.epoch++
		records = append(records, cgEpochRecord(group, next.epoch))
	}

	// 2. A new target assignment for a new group epoch.
	if next.epoch > next.assignmentEpoch {
		records = append(records, updateTarget(next, group, resolved, cfg)...)
	}

	// 3. Reconcile the member towards its target.
	cur := next.members[upd.id]
	if !cur.reconciledTo(next.assignmentEpoch) {
		rec, err := reconcile(reconcileInput{
			member:      cur,
			targetEpoch: next.assignmentEpoch,
			target:      next.target[cur.id],
			owners:      partitionOwners(next.members, cur.id),
			owned:       r.owned,
			ownedKnown:  r.owned != nil,
		})
		if err != nil {
			return hbError(kerr.FencedMemberEpoch.Code, "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.")
		}
		if !rec.sameAssignmentState(cur) {
			records = append(records, cgCurrentAssignmentRecord(group, rec))
			next.members[rec.id] = rec
			if rec.state == memberUnrevokedPartitions {
				res.rebalance = &rebalanceTimer{epoch: rec.epoch, timeout: time.Duration(max(rec.rebalanceTimeoutMs, 0)) * time.Millisecond}
			} else {
				res.cancelRebalance = true
			}
			cur = rec
		}
	}

	res.state = next
	res.records = records
	res.memberID = cur.id
	res.memberEpoch = cur.epoch
	res.sessionFor = cur.id
	full := r.epoch == 0 || (r.rebalanceTimeoutMs != -1 && (r.topics != nil || r.regex != nil) && r.owned != nil)
	if full || !cur.assigned.equal(member.assigned) {
		res.sendAssignment = true
		res.assignment = cur.assigned
	}
	return res
}

// updateTarget computes the target assignment of next's epoch with the
// preferred assignor and returns the records of the members whose target
// changed, then the new target epoch (TargetAssignmentBuilder).
func updateTarget(next *cgState, group string, resolved map[string][]string, cfg cgConfig) []record {
	assign := assignorByName(preferredAssignor(next.members, cfg.assignors))
	if assign == nil {
		assign = assignUniform
	}
	subs := make(map[string]map[string]struct{}, len(next.members))
	for id, m := range next.members {
		subs[id] = subscribedTopicsOf(m, resolved)
	}
	target := assign(subs, next.subMeta, next.target)
	var records []record
	for _, id := range sortedKeys(target) {
		if !target[id].equal(next.target[id]) {
			records = append(records, cgTargetMemberRecord(group, id, target[id]))
		}
	}
	for _, id := range sortedKeys(next.target) {
		if _, ok := target[id]; !ok {
			records = append(records, cgTombstone(cgTargetMemberKeyVersion, group, id))
		}
	}
	next.target = target
	next.assignmentEpoch = next.epoch
	return append(records, cgTargetEpochRecord(group, next.epoch))
}

// decideLeave handles epochs -1 (leave) and -2 (a static member leaving
// for now, keeping its partitions until its session expires).
func decideLeave(st *cgState, r hbRequest, im *TopicImage) hbResult {
	if st == nil {
		return hbError(kerr.GroupIDNotFound.Code, "Consumer group %s not found.", r.group)
	}
	var m *cgMember
	if r.instanceID == nil {
		if m = st.members[r.memberID]; m == nil {
			return hbError(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", r.memberID, r.group)
		}
	} else {
		inst := *r.instanceID
		if m = st.members[st.static[inst]]; m == nil {
			return hbError(kerr.UnknownMemberID.Code, "Instance id %s is unknown.", inst)
		}
		if m.id != r.memberID {
			return hbError(kerr.FencedInstanceID.Code, "Static member %s with instance id %s was fenced by member %s.", r.memberID, inst, m.id)
		}
		if r.epoch == leaveGroupStaticMemberEpoch {
			next := st.clone()
			left := next.members[m.id]
			left.epoch = leaveGroupStaticMemberEpoch
			left.revoking = tpSet{}
			return hbResult{
				state:       next,
				records:     []record{cgCurrentAssignmentRecord(r.group, left)},
				memberID:    m.id,
				memberEpoch: leaveGroupStaticMemberEpoch,
			}
		}
	}
	next, records := fenceMember(st, r.group, m.id, im)
	return hbResult{state: next, records: records, memberID: r.memberID, memberEpoch: r.epoch, removed: []string{m.id}}
}

// fenceMember removes member id (consumerGroupFenceMember): its records are
// tombstoned, the subscription metadata is recomputed and the group epoch
// bumped, so the next heartbeat of another member computes a new target.
func fenceMember(st *cgState, group, id string, im *TopicImage) (*cgState, []record) {
	next := st.clone()
	m := next.members[id]
	records := cgRemoveMemberRecords(group, id)
	delete(next.members, id)
	delete(next.target, id)
	if m != nil && m.instanceID != nil && next.static[*m.instanceID] == id {
		delete(next.static, *m.instanceID)
	}
	resolved := resolveRegexes(next.members, im)
	meta := subscriptionMetadata(groupSubscribedTopics(next.members, resolved), im)
	if !sameSubscriptionMetadata(meta, next.subMeta) {
		next.subMeta = meta
		records = append(records, cgSubscriptionMetadataRecord(group, meta))
	}
	next.epoch++
	return next, append(records, cgEpochRecord(group, next.epoch))
}
