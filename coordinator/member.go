package coordinator

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// member is one group member (Kafka's MemberMetadata). Its fields are
// guarded by the owning group's mu.
type member struct {
	id               string
	instanceID       *string // static membership (group.instance.id)
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocolType     string
	protocols        []kmsg.JoinGroupRequestProtocol // in the member's preference order
	assignment       []byte
	seq              uint64 // join order in the group

	joinWait *joinWaiter // a JoinGroup parked until the join phase completes
	syncWait *syncWaiter // a SyncGroup parked until the leader's assignment is stored

	hbTimer *time.Timer
	hbTok   *timerToken
}

// joinWaiter is a parked JoinGroup. resp is written under the group's mu
// before done is closed; the waiting handler reads it after <-done.
type joinWaiter struct {
	req  *kmsg.JoinGroupRequest
	done chan struct{}
	resp *kmsg.JoinGroupResponse
}

// syncWaiter is a parked SyncGroup, as joinWaiter.
type syncWaiter struct {
	req  *kmsg.SyncGroupRequest
	done chan struct{}
	resp *kmsg.SyncGroupResponse
}

func newJoinWaiter(req *kmsg.JoinGroupRequest) *joinWaiter {
	return &joinWaiter{req: req, done: make(chan struct{})}
}

func newSyncWaiter(req *kmsg.SyncGroupRequest) *syncWaiter {
	return &syncWaiter{req: req, done: make(chan struct{})}
}

// answerJoin completes the member's parked JoinGroup, if any.
func (m *member) answerJoin(resp *kmsg.JoinGroupResponse) {
	if w := m.joinWait; w != nil {
		w.resp = resp
		close(w.done)
		m.joinWait = nil
	}
}

// answerSync completes the member's parked SyncGroup, if any.
func (m *member) answerSync(resp *kmsg.SyncGroupResponse) {
	if w := m.syncWait; w != nil {
		w.resp = resp
		close(w.done)
		m.syncWait = nil
	}
}

func (m *member) supports(protocol string) bool {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return true
		}
	}
	return false
}

// metadata is the member's metadata for protocol.
func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// matches reports whether protocols equal the member's (MemberMetadata.matches):
// same names, same order, same metadata bytes.
func (m *member) matches(protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(protocols) != len(m.protocols) {
		return false
	}
	for i := range protocols {
		if protocols[i].Name != m.protocols[i].Name || !bytes.Equal(protocols[i].Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// copyProtocols keeps the request's protocols without aliasing the request.
func copyProtocols(ps []kmsg.JoinGroupRequestProtocol) []kmsg.JoinGroupRequestProtocol {
	out := make([]kmsg.JoinGroupRequestProtocol, len(ps))
	for i, p := range ps {
		out[i] = kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)}
	}
	return out
}

func (m *member) stopHeartbeat() {
	if m.hbTimer != nil {
		m.hbTimer.Stop()
		m.hbTimer = nil
	}
	m.hbTok = nil
}

// newMemberID is Kafka's GroupMetadata.generateMemberId: clientId (or the
// group instance id for static members) + "-" + a random UUID.
func newMemberID(clientID string, instanceID *string) string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	return prefix + "-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// scheduleHeartbeatLocked restarts m's session timer
// (completeAndScheduleNextHeartbeatExpiration). When it fires without a
// heartbeat in between, m is removed and the group rebalances, unless m is
// parked in JoinGroup or SyncGroup, which counts as alive.
func (g *group) scheduleHeartbeatLocked(m *member, _ time.Time) {
	m.stopHeartbeat()
	tok := new(timerToken)
	m.hbTok = tok
	m.hbTimer = time.AfterFunc(m.sessionTimeout, func() { g.onSessionExpired(m, tok) })
}

func (g *group) onSessionExpired(m *member, tok *timerToken) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.hbTok != tok || g.unloadCode != 0 {
		return
	}
	m.hbTimer, m.hbTok = nil, nil
	now := g.c.now()
	if g.pending[m.id] == m {
		delete(g.pending, m.id)
		if g.state == statePreparingRebalance {
			g.tryCompleteJoinLocked(now)
		}
		return
	}
	if g.members[m.id] != m || g.state == stateDead {
		return
	}
	if m.joinWait != nil || m.syncWait != nil {
		return // parked: the session restarts when the wait ends
	}
	g.c.logger.Info("member session expired", "group", g.id, "member", m.id, "generation", g.generation)
	g.removeMemberAndUpdateLocked(m, now, "session timeout of member "+m.id)
}

// removeMemberAndUpdateLocked removes m and moves the group on
// (GroupCoordinator.removeMemberAndUpdateGroup).
func (g *group) removeMemberAndUpdateLocked(m *member, now time.Time, reason string) {
	g.removeMemberLocked(m)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.maybePrepareRebalanceLocked(now, reason)
	case statePreparingRebalance:
		g.tryCompleteJoinLocked(now)
	}
}
