package share

// Manager is a partition leader's share state (Kafka's SharePartitionManager
// and ShareSessionCache): the share partitions of the groups fetching from
// this broker and the members' share sessions.
//
// Locking: Manager.mu guards the tables; each PartitionState has its own mu
// guarding its Partition. Lock order: Manager.mu, then PartitionState.mu;
// nothing blocks while holding either.

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Key names one share partition: a group's view of one topic partition.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// TP is one topic partition in a share session.
type TP struct {
	TopicID   [16]byte
	Partition int32
}

// PartitionState is one share partition with its lock and a channel closed
// whenever records become deliverable again (released, lock expired).
type PartitionState struct {
	Key Key

	mu sync.Mutex
	// p is nil until the partition is initialised (its start offset read
	// from the durable state or chosen by share.auto.offset.reset).
	p       *Partition
	changed chan struct{}
	// leaderEpoch is the partition leader epoch the state was loaded in: a
	// new leadership reloads it from the durable state. stateEpoch is the
	// durable state's epoch this leader writes with (one above the epoch
	// it loaded): an older writer is fenced, and a newer stored epoch (an
	// operator's AlterShareGroupOffsets) means the state must be reloaded.
	leaderEpoch int32
	stateEpoch  int32
}

// Lock locks the partition state.
func (ps *PartitionState) Lock() { ps.mu.Lock() }

// Unlock unlocks it.
func (ps *PartitionState) Unlock() { ps.mu.Unlock() }

// PartitionLocked returns the partition (nil: not initialised) and the
// leader epoch it was loaded in. Call with the lock held.
func (ps *PartitionState) PartitionLocked() (*Partition, int32) { return ps.p, ps.leaderEpoch }

// SetLocked installs an initialised partition for leaderEpoch, written
// with stateEpoch (nil: forget it, to be loaded again).
func (ps *PartitionState) SetLocked(p *Partition, leaderEpoch, stateEpoch int32) {
	ps.p, ps.leaderEpoch, ps.stateEpoch = p, leaderEpoch, stateEpoch
	ps.notifyLocked()
}

// StateEpochLocked is the epoch this leader writes the state with.
func (ps *PartitionState) StateEpochLocked() int32 { return ps.stateEpoch }

// Changed returns a channel closed at the next release of records.
func (ps *PartitionState) Changed() <-chan struct{} {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.changed
}

// NotifyLocked wakes the fetches waiting for records of this partition.
func (ps *PartitionState) NotifyLocked() { ps.notifyLocked() }

func (ps *PartitionState) notifyLocked() {
	close(ps.changed)
	ps.changed = make(chan struct{})
}

// Session is one member's share session on this broker.
type Session struct {
	Group, Member string
	Epoch         int32 // the epoch the next request must carry
	Partitions    map[TP]struct{}
	order         []TP
	// conn is the connection that opened the session (0: none known):
	// its closing ends the session (Kafka's ShareSessionCache
	// connectionDisconnectListener).
	conn uint64
}

// Parts returns the session's partitions in the order they were added.
func (s *Session) Parts() []TP { return append([]TP(nil), s.order...) }

func (s *Session) add(tp TP) {
	if _, ok := s.Partitions[tp]; ok {
		return
	}
	s.Partitions[tp] = struct{}{}
	s.order = append(s.order, tp)
}

func (s *Session) forget(tp TP) {
	if _, ok := s.Partitions[tp]; !ok {
		return
	}
	delete(s.Partitions, tp)
	for i, o := range s.order {
		if o == tp {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}

// Session errors (the server maps them to Kafka's codes).
var (
	ErrSessionNotFound     = errors.New("share session not found")      // SHARE_SESSION_NOT_FOUND
	ErrInvalidSessionEpoch = errors.New("invalid share session epoch")  // INVALID_SHARE_SESSION_EPOCH
	ErrSessionLimit        = errors.New("too many share sessions here") // SHARE_SESSION_LIMIT_REACHED
)

// Manager holds a broker's share partitions and sessions.
type Manager struct {
	mu          sync.Mutex
	parts       map[Key]*PartitionState // guarded by mu
	sessions    map[[2]string]*Session  // (group, member) -> session; guarded by mu
	maxSessions int
}

// NewManager returns an empty manager; maxSessions bounds the share
// sessions (Kafka's group.share.max.share.sessions, default 2000).
func NewManager(maxSessions int) *Manager {
	if maxSessions <= 0 {
		maxSessions = 2000
	}
	return &Manager{parts: map[Key]*PartitionState{}, sessions: map[[2]string]*Session{}, maxSessions: maxSessions}
}

// Partition returns the share partition k, creating it uninitialised.
func (m *Manager) Partition(k Key) *PartitionState {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.parts[k]
	if ps == nil {
		ps = &PartitionState{Key: k, changed: make(chan struct{})}
		m.parts[k] = ps
	}
	return ps
}

// Partitions returns every share partition (for lock sweeps and group
// deletion).
func (m *Manager) Partitions() []*PartitionState {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*PartitionState, 0, len(m.parts))
	for _, ps := range m.parts {
		out = append(out, ps)
	}
	return out
}

// Drop forgets share partition k (its leadership moved away, or its
// group's share state was deleted).
func (m *Manager) Drop(k Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.parts, k)
}

// SessionRequest is the session part of a ShareFetch / ShareAcknowledge.
type SessionRequest struct {
	Group, Member string
	Epoch         int32
	Add, Forget   []TP
	// Ack is a ShareAcknowledge: it cannot open a session (epoch 0).
	Ack bool
	// Conn identifies the client connection the request came on (0:
	// none): a session belongs to the connection that opened it.
	Conn uint64
}

// OpenSession applies Kafka's share session epoch rules and returns the
// session the request acts on. Epoch 0 opens a new session (replacing the
// member's old one, whose partitions are returned in replaced so the
// caller releases the member's records there); -1 closes the session
// (returned so the request's acknowledgements are applied, then the caller
// releases the member's records); any other epoch must be the session's
// next one and moves it on.
func (m *Manager) OpenSession(r SessionRequest) (s *Session, replaced []TP, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := [2]string{r.Group, r.Member}
	cur := m.sessions[key]
	switch {
	case r.Epoch == 0:
		if r.Ack {
			return nil, nil, fmt.Errorf("%w: a ShareAcknowledge cannot open a session", ErrInvalidSessionEpoch)
		}
		if cur != nil {
			replaced = cur.Parts()
		} else if len(m.sessions) >= m.maxSessions {
			return nil, nil, ErrSessionLimit
		}
		s = &Session{Group: r.Group, Member: r.Member, Epoch: 1, Partitions: map[TP]struct{}{}, conn: r.Conn}
		for _, tp := range r.Add {
			s.add(tp)
		}
		m.sessions[key] = s
		return s, replaced, nil
	case r.Epoch == -1:
		if cur == nil {
			return nil, nil, ErrSessionNotFound
		}
		delete(m.sessions, key)
		return cur, nil, nil
	case r.Epoch < -1:
		return nil, nil, fmt.Errorf("%w: %d", ErrInvalidSessionEpoch, r.Epoch)
	}
	if cur == nil {
		return nil, nil, ErrSessionNotFound
	}
	if r.Epoch != cur.Epoch {
		return nil, nil, fmt.Errorf("%w: %d, expected %d", ErrInvalidSessionEpoch, r.Epoch, cur.Epoch)
	}
	cur.Epoch++
	if cur.Epoch < 0 {
		cur.Epoch = 1
	}
	for _, tp := range r.Add {
		cur.add(tp)
	}
	for _, tp := range r.Forget {
		cur.forget(tp)
	}
	return cur, nil, nil
}

// CloseConn ends the sessions opened on connection conn, which has
// closed, and returns them so the caller releases their members' records
// (Kafka releases them when the connection drops, not when the locks
// expire).
func (m *Manager) CloseConn(conn uint64) []*Session {
	if conn == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Session
	for key, s := range m.sessions {
		if s.conn == conn {
			delete(m.sessions, key)
			out = append(out, s)
		}
	}
	return out
}

// ExpireAll releases every expired acquisition lock at now and wakes the
// fetches waiting on those partitions. It returns the next expiry (zero:
// none) so the caller's sweep knows when to run again.
func (m *Manager) ExpireAll(now time.Time) (next time.Time, changed []*PartitionState) {
	for _, ps := range m.Partitions() {
		ps.mu.Lock()
		if ps.p != nil {
			if ps.p.ExpireLocks(now) {
				ps.notifyLocked()
				changed = append(changed, ps)
			}
			if e := ps.p.NextLockExpiry(); !e.IsZero() && (next.IsZero() || e.Before(next)) {
				next = e
			}
		}
		ps.mu.Unlock()
	}
	return next, changed
}
