package server

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Fetch sessions (KIP-227): a client that opens a session then sends only
// the partitions whose fetch position changed, and the broker answers only
// partitions with news.
const (
	maxFetchSessions = 1000
	fetchSessionIdle = 2 * time.Minute
)

// sessionPartition is one partition in a fetch session with what the client
// last asked for and what the broker last told it.
type sessionPartition struct {
	topic              string
	topicID            [16]byte
	partition          int32
	fetchOffset        int64
	maxBytes           int32
	currentLeaderEpoch int32
	// last sent values, so incremental responses can skip unchanged ones
	sentHighWatermark  int64
	sentLogStartOffset int64
}

type sessionKey struct {
	topic     string
	partition int32
}

type fetchSession struct {
	id       int32
	epoch    int32 // the epoch the next request must carry
	parts    map[sessionKey]*sessionPartition
	order    []sessionKey
	lastUsed time.Time
}

func (s *fetchSession) upsert(sp sessionPartition) {
	k := sessionKey{sp.topic, sp.partition}
	if old, ok := s.parts[k]; ok {
		old.fetchOffset = sp.fetchOffset
		old.maxBytes = sp.maxBytes
		old.currentLeaderEpoch = sp.currentLeaderEpoch
		return
	}
	// A copy made here, not &sp: taking sp's address would move every
	// call's sp to the heap, updates included.
	p := new(sessionPartition)
	*p = sp
	p.sentHighWatermark, p.sentLogStartOffset = -1, -1
	s.parts[k] = p
	s.order = append(s.order, k)
}

func (s *fetchSession) forget(k sessionKey) {
	if _, ok := s.parts[k]; !ok {
		return
	}
	delete(s.parts, k)
	for i, o := range s.order {
		if o == k {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}

// fetchSessions is the broker's fetch session cache.
type fetchSessions struct {
	// mu guards every field.
	mu       sync.Mutex
	nextID   int32
	sessions map[int32]*fetchSession
}

func newFetchSessions() *fetchSessions {
	return &fetchSessions{nextID: 1, sessions: make(map[int32]*fetchSession)}
}

// create opens a new session; it returns nil when the cache is full even
// after evicting idle sessions (the fetch then runs without a session).
func (f *fetchSessions) create(now time.Time) *fetchSession {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.sessions) >= maxFetchSessions {
		for id, s := range f.sessions {
			if now.Sub(s.lastUsed) > fetchSessionIdle {
				delete(f.sessions, id)
			}
		}
		if len(f.sessions) >= maxFetchSessions {
			return nil
		}
	}
	id := f.nextID
	for f.sessions[id] != nil || id <= 0 {
		id++
		if id <= 0 {
			id = 1
		}
	}
	f.nextID = id + 1
	s := &fetchSession{id: id, epoch: 1, parts: make(map[sessionKey]*sessionPartition), lastUsed: now}
	f.sessions[id] = s
	return s
}

// get returns the session for an incremental fetch at epoch, checking the
// epoch, and advances the expected epoch. A session is used by one
// connection at a time, so the caller may use it without the lock until it
// answers.
func (f *fetchSessions) get(id, epoch int32, now time.Time) (*fetchSession, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[id]
	if !ok {
		return nil, kerr.FetchSessionIDNotFound
	}
	if s.epoch != epoch {
		return nil, kerr.InvalidFetchSessionEpoch
	}
	s.epoch++
	if s.epoch <= 0 {
		s.epoch = 1
	}
	s.lastUsed = now
	return s, nil
}

func (f *fetchSessions) remove(id int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sessions, id)
}
