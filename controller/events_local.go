package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/kbroker/kbroker/internal/atomicfile"
)

// localEventsFile holds the embedded node's event history next to its
// cluster state: a file of its own, so the history's writes do not rewrite
// the state (which holds the SCRAM keys) and a damaged history loses only
// the history.
const localEventsFile = "kbroker-events.json"

// localEvents is the embedded node's event history: what ZooKeeper's
// /kbroker/events holds in a cluster, with the same sequence rule (a
// counter that never goes back, also across trims and restarts).
type localEvents struct {
	// mu guards the fields below; loaded is set on first use.
	mu     sync.Mutex
	loaded bool
	file   localEventsState
}

// localEventsState is the file's content.
type localEventsState struct {
	// NextSeq is the sequence the next event gets.
	NextSeq int64             `json:"next_seq"`
	Events  []localEventEntry `json:"events"`
}

type localEventEntry struct {
	Seq    int64           `json:"seq"`
	TimeMs int64           `json:"time_ms"`
	Event  json.RawMessage `json:"event"` // zk.EncodeEvent's form
}

func (s *localStore) eventsPath() string {
	if s.path == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(s.path), localEventsFile)
}

// eventsLocked loads the history on first use (s.events.mu held). A
// damaged file starts the history over rather than stopping the broker.
func (s *localStore) eventsLocked() *localEventsState {
	ev := &s.events
	if ev.loaded {
		return &ev.file
	}
	ev.loaded = true
	path := s.eventsPath()
	if path == "" {
		return &ev.file
	}
	data, err := os.ReadFile(path)
	if err == nil {
		var st localEventsState
		if json.Unmarshal(data, &st) == nil {
			ev.file = st
		}
	}
	return &ev.file
}

func (s *localStore) saveEventsLocked(st *localEventsState) error {
	path := s.eventsPath()
	if path == "" {
		return nil
	}
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode event history: %w", err)
	}
	if err := atomicfile.WritePrivate(path, data); err != nil {
		return fmt.Errorf("write event history: %w", err)
	}
	return nil
}

func (s *localStore) fenced(epochZkVersion int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if epochZkVersion != s.epochZkVersion {
		return fmt.Errorf("controller epoch version %d, current %d: %w", epochZkVersion, s.epochZkVersion, zk.ErrControllerMoved)
	}
	return nil
}

// AppendEvents implements metadataStore.
func (s *localStore) AppendEvents(_ context.Context, epochZkVersion int32, events []zk.ClusterEvent) ([]zk.ClusterEvent, error) {
	if err := s.fenced(epochZkVersion); err != nil {
		return nil, err
	}
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	cur := s.eventsLocked()
	next := localEventsState{NextSeq: cur.NextSeq, Events: slices.Clone(cur.Events)}
	out := slices.Clone(events)
	for i := range out {
		out[i].Seq = next.NextSeq
		next.NextSeq++
		next.Events = append(next.Events, localEventEntry{Seq: out[i].Seq, TimeMs: out[i].Time.UnixMilli(), Event: zk.EncodeEvent(out[i])})
	}
	if err := s.saveEventsLocked(&next); err != nil {
		return nil, err
	}
	*cur = next
	return out, nil
}

// AppendBrokerEvent implements metadataStore.
func (s *localStore) AppendBrokerEvent(_ context.Context, e zk.ClusterEvent) (zk.ClusterEvent, error) {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	cur := s.eventsLocked()
	next := localEventsState{NextSeq: cur.NextSeq + 1, Events: slices.Clone(cur.Events)}
	e.Seq = cur.NextSeq
	next.Events = append(next.Events, localEventEntry{Seq: e.Seq, TimeMs: e.Time.UnixMilli(), Event: zk.EncodeEvent(e)})
	if err := s.saveEventsLocked(&next); err != nil {
		return e, err
	}
	*cur = next
	return e, nil
}

// Events implements metadataStore.
func (s *localStore) Events(_ context.Context, after int64, limit int) ([]zk.ClusterEvent, error) {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	var out []zk.ClusterEvent
	for _, entry := range s.eventsLocked().Events {
		if entry.Seq <= after {
			continue
		}
		e, err := zk.DecodeEvent(entry.Seq, entry.Event)
		if err != nil {
			continue
		}
		e.Time = time.UnixMilli(entry.TimeMs)
		out = append(out, e)
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

// TrimEvents implements metadataStore.
func (s *localStore) TrimEvents(_ context.Context, epochZkVersion int32, keep int) (int, error) {
	if err := s.fenced(epochZkVersion); err != nil {
		return 0, err
	}
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	cur := s.eventsLocked()
	if len(cur.Events) <= keep {
		return len(cur.Events), nil
	}
	next := localEventsState{NextSeq: cur.NextSeq, Events: slices.Clone(cur.Events[len(cur.Events)-keep:])}
	if err := s.saveEventsLocked(&next); err != nil {
		return 0, err
	}
	*cur = next
	return keep, nil
}
