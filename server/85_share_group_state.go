package server

// Durable share-partition state (KIP-932's share coordinator and
// __share_group_state, in kbroker's form): a partition leader stores a
// share partition's start offset and its finished and released in-flight
// records before it answers the acknowledgements that changed them, and
// loads them when it becomes the partition's leader.

import (
	"context"
	"sync"

	"github.com/kbroker/kbroker/internal/share"
)

// shareStateStore keeps share partitions' durable state.
type shareStateStore interface {
	// Load returns the stored state of k (found false: none).
	Load(ctx context.Context, k share.Key) (start int64, batches []share.StateBatch, found bool, err error)
	// Save replaces k's stored state once it is durable.
	Save(ctx context.Context, k share.Key, start int64, batches []share.StateBatch) error
}

// memShareStateStore keeps the state in this process only.
type memShareStateStore struct {
	mu     sync.Mutex
	states map[share.Key]memShareState // guarded by mu
}

type memShareState struct {
	start   int64
	batches []share.StateBatch
}

func (s *memShareStateStore) Load(_ context.Context, k share.Key) (int64, []share.StateBatch, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.states[k]
	return st.start, append([]share.StateBatch(nil), st.batches...), ok, nil
}

func (s *memShareStateStore) Save(_ context.Context, k share.Key, start int64, batches []share.StateBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states[k] = memShareState{start: start, batches: append([]share.StateBatch(nil), batches...)}
	return nil
}

func newShareStateStore(_ *Broker) shareStateStore {
	return &memShareStateStore{states: map[share.Key]memShareState{}}
}
