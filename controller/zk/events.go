package zk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// The cluster's event history. The controller records every decision it
// makes (brokers joining and leaving, controller changes, leader
// elections, ISR changes) as one persistent sequential znode each:
//
//	/kbroker/events/event-<seq>   {"version":1,"time_ms":...,"kind":"leader_elected",...}
//
// written in a transaction fenced on the controller epoch, and trims the
// oldest beyond a bound. ZooKeeper's sequence number orders the events
// across controllers and never repeats (it counts the parent's child
// creations), so it is the event's id. Every broker reads (and watches)
// the znodes for its console. Kafka has nothing equivalent; its tools
// ignore the path.

// EventsPath is the parent of the event znodes.
const EventsPath = "/kbroker/events"

// EventPrefix starts every event znode's name; the sequence follows.
const EventPrefix = "event-"

// ClusterEvent is one event of the cluster's history, as the controller
// decided it. Fields that do not apply to a kind are zero (or -1 for
// broker ids and offsets).
type ClusterEvent struct {
	// Seq is the event's id: its znode's sequence number (set by the
	// store, not encoded).
	Seq  int64     `json:"-"`
	Time time.Time `json:"-"`
	Kind string    `json:"kind"`
	// ControllerEpoch is the epoch of the controller that decided it.
	ControllerEpoch int32 `json:"controller_epoch"`
	// Broker is the broker concerned: the one that joined or left, the
	// new controller, the new leader, the replica that left or joined
	// the ISR (the first one).
	Broker    int32  `json:"broker"`
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	// Election is how a leader was chosen: clean, unclean, preferred,
	// controlled_shutdown (or empty).
	Election    string  `json:"election,omitempty"`
	OldLeader   int32   `json:"old_leader"`
	NewLeader   int32   `json:"new_leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	OldISR      []int32 `json:"old_isr,omitempty"`
	NewISR      []int32 `json:"new_isr,omitempty"`
	// LeaderLogEnd is, for an unclean election, the new leader's log end
	// offset at the election when known (-1: not known to the
	// controller).
	LeaderLogEnd int64 `json:"leader_log_end"`
	// TruncatedFrom and TruncatedTo: for a "truncation" (a replica that
	// followed a new leader and dropped the offsets [from, to) of its log),
	// the range dropped; CommittedLost, how many of them were below its
	// high watermark (committed records lost: an unclean election's loss;
	// a lower bound, as a replica restarted after a crash knows only its
	// checkpointed high watermark).
	TruncatedFrom int64 `json:"truncated_from,omitempty"`
	TruncatedTo   int64 `json:"truncated_to,omitempty"`
	CommittedLost int64 `json:"committed_lost,omitempty"`
	// Text says what happened in one sentence.
	Text string `json:"text"`
}

// eventJSON is ClusterEvent's znode form: a version and the time in
// milliseconds, Kafka's habit in its znodes.
type eventJSON struct {
	Version int   `json:"version"`
	TimeMs  int64 `json:"time_ms"`
	ClusterEvent
}

// EncodeEvent encodes an event znode.
func EncodeEvent(e ClusterEvent) []byte {
	data, _ := json.Marshal(eventJSON{Version: 1, TimeMs: e.Time.UnixMilli(), ClusterEvent: e})
	return data
}

// DecodeEvent decodes the event znode of sequence seq.
func DecodeEvent(seq int64, data []byte) (ClusterEvent, error) {
	path := EventPath(seq)
	var raw eventJSON
	if err := unmarshal(path, data, &raw); err != nil {
		return ClusterEvent{}, err
	}
	if raw.Version != 1 {
		return ClusterEvent{}, malformed(path, data, "unsupported version %d", raw.Version)
	}
	if raw.Kind == "" {
		return ClusterEvent{}, malformed(path, data, "no kind")
	}
	e := raw.ClusterEvent
	e.Seq, e.Time = seq, time.UnixMilli(raw.TimeMs)
	return e, nil
}

// EventPath is /kbroker/events/event-<seq>, the sequence zero-padded to
// ten digits as ZooKeeper writes it.
func EventPath(seq int64) string { return fmt.Sprintf("%s/%s%010d", EventsPath, EventPrefix, seq) }

// ParseEventName is the sequence of an event znode's name (ok false for
// another name).
func ParseEventName(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, EventPrefix)
	if !ok {
		return 0, false
	}
	seq, err := strconv.ParseInt(digits, 10, 64)
	return seq, err == nil && seq >= 0
}

// eventSeqs lists the event znodes' sequences, oldest first.
func (s *Store) eventSeqs(ctx context.Context) ([]int64, error) {
	names, err := s.children(ctx, EventsPath)
	if err != nil {
		return nil, err
	}
	return sortedEventSeqs(names), nil
}

func sortedEventSeqs(names []string) []int64 {
	seqs := make([]int64, 0, len(names))
	for _, name := range names {
		if seq, ok := ParseEventName(name); ok {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	return seqs
}

// AppendEvents writes events as new event znodes in one transaction
// fenced on the controller epoch, and returns them with their sequences.
// A retry after a connection loss may write them twice (a sequential
// create cannot be made idempotent): a duplicate on the timeline, never a
// loss.
func (s *Store) AppendEvents(ctx context.Context, epochZkVersion int32, events []ClusterEvent) ([]ClusterEvent, error) {
	if len(events) == 0 {
		return nil, nil
	}
	ops := make([]any, 0, len(events))
	for _, e := range events {
		ops = append(ops, s.createOp(EventsPath+"/"+EventPrefix, EncodeEvent(e), gozk.FlagSequence))
	}
	res, err := s.fencedMulti(ctx, epochZkVersion, ops...)
	if err != nil {
		return nil, fmt.Errorf("record %d cluster events: %w", len(events), err)
	}
	out := slices.Clone(events)
	for i, r := range res {
		name := r.String[strings.LastIndexByte(r.String, '/')+1:]
		seq, ok := ParseEventName(name)
		if !ok {
			return nil, fmt.Errorf("record cluster events: ZooKeeper created %q", r.String)
		}
		out[i].Seq = seq
	}
	return out, nil
}

// AppendBrokerEvent writes one event a broker observed itself (not a
// controller decision, so not fenced on the controller epoch): a
// replica's truncation after following a new leader.
func (s *Store) AppendBrokerEvent(ctx context.Context, e ClusterEvent) (ClusterEvent, error) {
	res, err := s.multi(ctx, s.createOp(EventsPath+"/"+EventPrefix, EncodeEvent(e), gozk.FlagSequence))
	if err != nil {
		return e, fmt.Errorf("record a %s event: %w", e.Kind, err)
	}
	name := res[0].String[strings.LastIndexByte(res[0].String, '/')+1:]
	seq, ok := ParseEventName(name)
	if !ok {
		return e, fmt.Errorf("record a %s event: ZooKeeper created %q", e.Kind, res[0].String)
	}
	e.Seq = seq
	return e, nil
}

// Events reads the events with a sequence above after, oldest first, at
// most limit of the newest (limit <= 0: all). Malformed znodes are
// skipped (logged): a damaged event must not hide the others.
func (s *Store) Events(ctx context.Context, after int64, limit int) ([]ClusterEvent, error) {
	seqs, err := s.eventSeqs(ctx)
	if err != nil {
		return nil, err
	}
	seqs = slices.DeleteFunc(seqs, func(seq int64) bool { return seq <= after })
	if limit > 0 && len(seqs) > limit {
		seqs = seqs[len(seqs)-limit:]
	}
	out := make([]ClusterEvent, 0, len(seqs))
	for _, seq := range seqs {
		data, _, err := s.get(ctx, EventPath(seq))
		if errors.Is(err, ErrNoNode) {
			continue // trimmed meanwhile
		}
		if err != nil {
			return nil, err
		}
		e, err := DecodeEvent(seq, data)
		if err != nil {
			s.logger.Warn("ignoring a malformed cluster event znode", "err", s.malformedAt(err))
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// trimBatch bounds the deletions of one transaction.
const trimBatch = 500

// TrimEvents deletes the oldest event znodes beyond the newest keep,
// fenced on the controller epoch. It returns how many are left.
func (s *Store) TrimEvents(ctx context.Context, epochZkVersion int32, keep int) (int, error) {
	seqs, err := s.eventSeqs(ctx)
	if err != nil {
		return 0, err
	}
	drop := seqs[:max(0, len(seqs)-keep)]
	for len(drop) > 0 {
		n := min(len(drop), trimBatch)
		ops := make([]any, 0, n)
		for _, seq := range drop[:n] {
			ops = append(ops, s.deleteOp(EventPath(seq), -1))
		}
		if _, err := s.fencedMulti(ctx, epochZkVersion, ops...); err != nil {
			var me *MultiError
			if !errors.As(err, &me) || !errors.Is(me.Err, gozk.ErrNoNode) {
				return 0, fmt.Errorf("trim cluster events: %w", err)
			}
			// Another (deposed) writer trimmed some: list again next time.
		}
		drop = drop[n:]
	}
	return min(len(seqs), keep), nil
}

// WatchEvents delivers the newest event's sequence (-1: none) now and
// after every change of /kbroker/events, until ctx ends.
func (s *Store) WatchEvents(ctx context.Context) (<-chan int64, error) {
	return watchLoop(ctx, s, func() (int64, <-chan gozk.Event, error) {
		names, _, ev, err := s.conn.ChildrenW(s.abs(EventsPath))
		if errors.Is(err, gozk.ErrNoNode) {
			var exists bool
			exists, _, ev, err = s.conn.ExistsW(s.abs(EventsPath))
			if err == nil && exists {
				closed := make(chan gozk.Event)
				close(closed)
				return -1, closed, nil
			}
			return -1, ev, err
		}
		if err != nil {
			return -1, nil, err
		}
		newest := int64(-1)
		if seqs := sortedEventSeqs(names); len(seqs) > 0 {
			newest = seqs[len(seqs)-1]
		}
		return newest, ev, nil
	}, func(a, b int64) bool { return a == b })
}
