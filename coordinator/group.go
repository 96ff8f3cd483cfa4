package coordinator

import (
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupState is Kafka's GroupState. Valid transitions (GroupMetadata.scala):
//
//	Empty               -> PreparingRebalance (first join), Dead (deleted / expired)
//	PreparingRebalance  -> CompletingRebalance (join done), Empty (no member rejoined)
//	CompletingRebalance -> Stable (leader's assignment stored), PreparingRebalance
//	Stable              -> PreparingRebalance
//	Dead                -> (terminal; the group is being or has been removed)
type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

func (s groupState) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	default:
		return "Dead"
	}
}

// topicPartition names one committed partition.
type topicPartition struct {
	topic     string
	partition int32
}

// offsetEntry is one committed offset.
type offsetEntry struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitTime  time.Time
	expireTime  time.Time // zero unless an old (v1 value) record set one
	// appendOffset is the log offset of the batch that stored this commit
	// (Kafka's appendedBatchOffset). A committed transaction replaces the
	// current offset only if its batch is newer (txn_offsets.go); snapshots
	// keep it across rewrites.
	appendOffset int64
}

// timerToken identifies one scheduled timer; a callback whose token is no
// longer the current one is stale and does nothing.
type timerToken struct{}

// group is one consumer group. mu guards every field below it; id,
// partition, c and writeTok are immutable.
type group struct {
	c         *Coordinator
	id        string
	partition int32
	// writeTok serialises this group's log writes so the order of records in
	// the log is the order in which they are applied in memory. Hold it
	// (send to acquire, receive to release) from validation until the
	// in-memory state is updated; never hold mu while waiting for it.
	writeTok chan struct{}

	mu sync.Mutex
	// unloadCode is non-zero once the group's partition was resigned or the
	// coordinator closed: the group object is detached and answers this code.
	unloadCode   int16
	state        groupState
	stateTime    time.Time // Kafka's currentStateTimestamp
	generation   int32
	protocolType string // "" = none (a simple group that only commits)
	protocol     string // selected protocol; "" unless members exist
	leader       string
	members      map[string]*member
	pending      map[string]*member  // got MEMBER_ID_REQUIRED, not joined yet
	pendingSync  map[string]struct{} // members of this generation yet to SyncGroup
	static       map[string]string   // group.instance.id -> member id
	joinSeq      uint64              // orders members by first join
	initialDelay bool                // the join timer is an InitialDelayedJoin
	newMember    bool                // a member joined during the initial delay
	delayLeft    time.Duration       // rebalance time left after initial delays
	joinTimer    *time.Timer         // DelayedJoin / InitialDelayedJoin
	joinTok      *timerToken         // current joinTimer
	syncTimer    *time.Timer         // pending-sync expiry
	syncTok      *timerToken         // current syncTimer
	subscribed   map[string]struct{} // consumer topics of this generation
	subsKnown    bool                // subscribed could be decoded
	offsets      map[topicPartition]offsetEntry
	syncStoreGen int32 // generation whose leader assignment is being or was written
	// storedMeta is the value of the newest group metadata record durably
	// in the log (nil: none). It can differ from the in-memory membership,
	// which is only written at SyncGroup, on becoming Empty and on static
	// member replacement; snapshots rewrite this, never the live state.
	storedMeta []byte
	// pendingTxn holds, per producer id, the transactional offsets appended
	// by TxnOffsetCommit whose transaction has not ended (Kafka's
	// pendingTransactionalOffsetCommits): invisible to OffsetFetch until
	// CompleteTxn commits them.
	pendingTxn map[int64]*openTxn
	// inflight counts, per partition, commits (plain or transactional)
	// being written: with pendingTxn, what makes OffsetFetch with
	// require_stable answer UNSTABLE_OFFSET_COMMIT.
	inflight map[topicPartition]int
	// cg is the state of a consumer (KIP-848) group, nil for a classic
	// group (consumer_group.go); it is replaced, never mutated, and only
	// after its records are durable. cgTimers holds its members' session
	// and rebalance timers.
	cg       *cgState
	cgTimers map[string]*cgMemberTimers
	// sg is the membership of a share (KIP-932) group, nil otherwise
	// (share_group.go). shareStates are its share partitions' durable
	// states (share_state.go), published once stored.
	sg          *sgState
	shareStates map[shareStateKey]ShareState
	// shareLeaderEpochs: the newest partition leader epoch that read or
	// wrote each share partition's state (in memory; share_state.go).
	shareLeaderEpochs map[shareStateKey]int32
	// configs are the group's dynamic configs (share_group_config.go),
	// published once stored.
	configs map[string]string
}

func newGroup(c *Coordinator, id string, partition int32, now time.Time) *group {
	return &group{
		c:          c,
		id:         id,
		partition:  partition,
		writeTok:   make(chan struct{}, 1),
		state:      stateEmpty,
		stateTime:  now,
		members:    map[string]*member{},
		pending:    map[string]*member{},
		static:     map[string]string{},
		offsets:    map[topicPartition]offsetEntry{},
		pendingTxn: map[int64]*openTxn{},
		inflight:   map[topicPartition]int{},
	}
}

func (g *group) transitionLocked(s groupState, now time.Time) {
	g.state = s
	g.stateTime = now
}

// membersInOrder returns the members by join order, for stable responses.
func (g *group) membersInOrder() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].seq < ms[j].seq })
	return ms
}

// rebalanceTimeout is the largest rebalance timeout of the members
// (GroupMetadata.rebalanceTimeoutMs).
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		if m.rebalanceTimeout > d {
			d = m.rebalanceTimeout
		}
	}
	return d
}

// addMemberLocked adds m to the group (GroupMetadata.add).
func (g *group) addMemberLocked(m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.joinSeq++
	m.seq = g.joinSeq
	g.members[m.id] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
}

// removeMemberLocked removes m (GroupMetadata.remove): its timers stop, a
// waiting JoinGroup is answered UNKNOWN_MEMBER_ID, and the leadership moves
// to the earliest remaining member.
func (g *group) removeMemberLocked(m *member) {
	m.stopHeartbeat()
	if m.joinWait != nil {
		resp := m.joinWait.req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.MemberID = m.id
		resp.Generation = -1
		resp.ErrorCode = errUnknownMemberID
		m.answerJoin(resp)
	}
	if m.syncWait != nil {
		resp := m.syncWait.req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = errUnknownMemberID
		m.answerSync(resp)
	}
	delete(g.members, m.id)
	delete(g.pendingSync, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
		if ms := g.membersInOrder(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
}

// supportsProtocols is GroupMetadata.supportsProtocols: an Empty group
// accepts any non-empty protocol set; otherwise the type must match and one
// of the member's protocols must be supported by every current member.
func (g *group) supportsProtocols(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if g.state == stateEmpty {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		all := true
		for _, m := range g.members {
			if !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// allJoined is GroupMetadata.hasAllMembersJoined.
func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinWait == nil {
			return false
		}
	}
	return true
}

// maybePrepareRebalanceLocked starts a rebalance if the state allows it
// (Stable, CompletingRebalance, Empty), as GroupCoordinator.maybePrepareRebalance.
func (g *group) maybePrepareRebalanceLocked(now time.Time, reason string) {
	switch g.state {
	case stateStable, stateCompletingRebalance, stateEmpty:
		g.prepareRebalanceLocked(now, reason)
	}
}

// prepareRebalanceLocked is GroupCoordinator.prepareRebalance: members
// waiting in SyncGroup are told REBALANCE_IN_PROGRESS, and a DelayedJoin (or,
// for an Empty group, an InitialDelayedJoin) is scheduled.
func (g *group) prepareRebalanceLocked(now time.Time, reason string) {
	if g.state == stateCompletingRebalance {
		g.resetAndPropagateAssignmentErrorLocked(now, errRebalanceInProgress)
	}
	g.stopSyncTimer()
	g.pendingSync = nil
	initial := g.state == stateEmpty
	g.transitionLocked(statePreparingRebalance, now)
	g.c.logger.Info("preparing to rebalance group", "group", g.id, "generation", g.generation,
		"members", len(g.members), "reason", reason)
	if initial {
		delay := g.c.cfg.InitialRebalanceDelay
		g.initialDelay = true
		g.newMember = false
		g.delayLeft = max(g.rebalanceTimeout()-delay, 0)
		g.scheduleJoinLocked(delay)
		return
	}
	g.initialDelay = false
	g.scheduleJoinLocked(g.rebalanceTimeout())
	g.tryCompleteJoinLocked(now)
}

// scheduleJoinLocked (re)arms the join timer.
func (g *group) scheduleJoinLocked(d time.Duration) {
	g.stopJoinTimer()
	tok := new(timerToken)
	g.joinTok = tok
	g.joinTimer = time.AfterFunc(d, func() { g.onJoinTimer(tok) })
}

func (g *group) stopJoinTimer() {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
		g.joinTimer = nil
	}
	g.joinTok = nil
}

func (g *group) stopSyncTimer() {
	if g.syncTimer != nil {
		g.syncTimer.Stop()
		g.syncTimer = nil
	}
	g.syncTok = nil
}

// onJoinTimer is the expiry of DelayedJoin (complete with whoever rejoined)
// or InitialDelayedJoin (wait another delay while new members keep coming,
// bounded by the rebalance timeout).
func (g *group) onJoinTimer(tok *timerToken) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.joinTok != tok || g.state != statePreparingRebalance || g.unloadCode != 0 {
		return
	}
	g.joinTimer, g.joinTok = nil, nil
	now := g.c.now()
	if g.initialDelay && g.newMember && g.delayLeft > 0 {
		delay := min(g.c.cfg.InitialRebalanceDelay, g.delayLeft)
		g.delayLeft -= delay
		g.newMember = false
		g.scheduleJoinLocked(delay)
		return
	}
	g.completeJoinLocked(now)
}

// tryCompleteJoinLocked completes the join phase early when every member
// has rejoined (DelayedJoin.tryComplete). It does nothing during an initial
// delay, which always runs to its end.
func (g *group) tryCompleteJoinLocked(now time.Time) {
	if g.state != statePreparingRebalance || g.joinTok == nil {
		return
	}
	if g.initialDelay {
		return
	}
	if g.allJoined() {
		g.completeJoinLocked(now)
	}
}

// completeJoinLocked is GroupCoordinator.onCompleteJoin: dynamic members
// that did not rejoin are removed (static ones stay, until their session
// times out), the next generation starts, and every waiting JoinGroup is
// answered (the leader with all members' metadata). When only static
// members remain and none rejoined, the join phase waits another rebalance
// timeout instead.
func (g *group) completeJoinLocked(now time.Time) {
	g.stopJoinTimer()
	g.initialDelay = false
	joined := false
	for _, m := range g.membersInOrder() {
		switch {
		case m.joinWait != nil:
			joined = true
		case m.instanceID == nil:
			g.c.logger.Info("removing member that did not rejoin", "group", g.id, "member", m.id)
			g.removeMemberLocked(m)
		}
	}
	if g.state == stateDead {
		return
	}
	if !joined && len(g.members) > 0 {
		g.c.logger.Warn("no member rejoined; waiting for static members", "group", g.id,
			"generation", g.generation, "members", len(g.members))
		g.scheduleJoinLocked(g.rebalanceTimeout())
		return
	}
	g.electJoinedLeaderLocked()
	g.generation++
	if len(g.members) == 0 {
		g.protocol = ""
		g.subscribed, g.subsKnown = nil, false
		g.transitionLocked(stateEmpty, now)
		g.c.logger.Info("group is now empty", "group", g.id, "generation", g.generation)
		g.storeGroupAsync(g.generation)
		return
	}
	g.protocol = selectProtocol(g.membersInOrder())
	g.subscribed, g.subsKnown = subscribedTopics(g.protocolType, g.protocol, g.members)
	g.transitionLocked(stateCompletingRebalance, now)
	g.c.logger.Info("group rebalanced", "group", g.id, "generation", g.generation,
		"protocol", g.protocol, "leader", g.leader, "members", len(g.members))
	g.pendingSync = make(map[string]struct{}, len(g.members))
	for _, m := range g.membersInOrder() {
		g.pendingSync[m.id] = struct{}{}
		if m.joinWait != nil {
			resp := m.joinWait.req.ResponseKind().(*kmsg.JoinGroupResponse)
			g.fillJoinResponseLocked(resp, m.id)
			m.answerJoin(resp)
		}
		g.scheduleHeartbeatLocked(m, now)
	}
	g.scheduleSyncTimerLocked()
}

// electJoinedLeaderLocked keeps the leader if it rejoined, else picks the
// earliest member that did (GroupMetadata.maybeElectNewJoinedLeader).
func (g *group) electJoinedLeaderLocked() {
	if m, ok := g.members[g.leader]; ok && m.joinWait != nil {
		return
	}
	for _, m := range g.membersInOrder() {
		if m.joinWait != nil {
			g.leader = m.id
			return
		}
	}
	if _, ok := g.members[g.leader]; !ok {
		g.leader = ""
		if ms := g.membersInOrder(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
}

// fillJoinResponseLocked answers a member with the current generation.
func (g *group) fillJoinResponseLocked(resp *kmsg.JoinGroupResponse, memberID string) {
	resp.ErrorCode = 0
	resp.Generation = g.generation
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(g.protocol)
	resp.LeaderID = g.leader
	resp.MemberID = memberID
	resp.Members = nil
	if memberID == g.leader {
		for _, m := range g.membersInOrder() {
			resp.Members = append(resp.Members, kmsg.JoinGroupResponseMember{
				MemberID:         m.id,
				InstanceID:       m.instanceID,
				ProtocolMetadata: m.metadata(g.protocol),
			})
		}
	}
}

// scheduleSyncTimerLocked removes, after the rebalance timeout, members of
// this generation that never sent SyncGroup (GroupCoordinator.schedulePendingSync).
func (g *group) scheduleSyncTimerLocked() {
	g.stopSyncTimer()
	tok := new(timerToken)
	g.syncTok = tok
	gen := g.generation
	g.syncTimer = time.AfterFunc(g.rebalanceTimeout(), func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.syncTok != tok || g.generation != gen || g.unloadCode != 0 {
			return
		}
		g.syncTimer, g.syncTok = nil, nil
		if g.state != stateCompletingRebalance && g.state != stateStable {
			return
		}
		if len(g.pendingSync) == 0 {
			return
		}
		for id := range g.pendingSync {
			if m := g.members[id]; m != nil {
				g.c.logger.Info("removing member that did not sync", "group", g.id, "member", id)
				g.removeMemberLocked(m)
			}
		}
		g.pendingSync = nil
		g.prepareRebalanceLocked(g.c.now(), "members failed to sync")
	})
}

// resetAndPropagateAssignmentErrorLocked clears all assignments and answers
// every waiting SyncGroup with code.
func (g *group) resetAndPropagateAssignmentErrorLocked(now time.Time, code int16) {
	for _, m := range g.members {
		m.assignment = nil
	}
	g.propagateAssignmentLocked(now, code)
}

// propagateAssignmentLocked answers waiting SyncGroups with the members'
// assignments (or code) and restarts their sessions.
func (g *group) propagateAssignmentLocked(now time.Time, code int16) {
	for _, m := range g.membersInOrder() {
		if m.syncWait == nil {
			continue
		}
		resp := m.syncWait.req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		if code == 0 {
			resp.ProtocolType = kmsg.StringPtr(g.protocolType)
			resp.Protocol = kmsg.StringPtr(g.protocol)
			resp.MemberAssignment = m.assignment
		}
		m.answerSync(resp)
		g.scheduleHeartbeatLocked(m, now)
	}
}

// unloadLocked detaches the group when its partition is resigned or the
// coordinator closes: timers stop and waiters are answered code.
func (g *group) unloadLocked(code int16) {
	g.unloadCode = code
	g.stopJoinTimer()
	g.stopSyncTimer()
	g.stopAllCGTimersLocked()
	g.stopAllShareTimersLocked()
	for _, m := range g.members {
		m.stopHeartbeat()
		if m.joinWait != nil {
			resp := m.joinWait.req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.MemberID = m.id
			resp.Generation = -1
			resp.ErrorCode = code
			m.answerJoin(resp)
		}
		if m.syncWait != nil {
			resp := m.syncWait.req.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = code
			m.answerSync(resp)
		}
	}
	for _, m := range g.pending {
		m.stopHeartbeat()
	}
}

// statusLocked is the code every request for g answers before looking at
// members: detached groups answer their unload code, Dead groups
// COORDINATOR_NOT_AVAILABLE (Kafka: the group was just removed; the client
// retries and finds a fresh one).
func (g *group) statusLocked() int16 {
	if g.unloadCode != 0 {
		return g.unloadCode
	}
	if g.state == stateDead {
		return errCoordinatorNotAvailable
	}
	return 0
}
