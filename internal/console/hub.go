package console

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"
)

// Source gives the console the cluster as the broker sees it. The hub
// calls ViewVersion and Events every poll and Stats every second whether
// or not anybody watches, so those must be cheap; Snapshot is called when
// the view changed (with full false) and, while a page is open or asks
// for it, with full true.
type Source interface {
	// ViewVersion changes whenever the cluster view does.
	ViewVersion() uint64
	// Stats are the running traffic totals the sparklines come from.
	Stats() Stats
	// Snapshot is the cluster now. With full false only the view is
	// filled: brokers, controller, topics with leaders, replicas and
	// ISRs (offsets -1, no groups, no stats).
	Snapshot(ctx context.Context, full bool) Snapshot
	// Events are the timeline's entries with a sequence above after,
	// oldest first: the cluster's history as its controller recorded it
	// (sequences are the controller's, the same on every broker and
	// across restarts).
	Events(after uint64) []Event
}

const (
	// pollEvery is how often the hub looks at the view version: a change
	// reaches the timeline (and an open page) within about this plus the
	// browser's handling.
	pollEvery = 200 * time.Millisecond
	// stateEvery is how often unchanged views are pushed anyway to open
	// pages (offsets, lag and rates move without a view change), and how
	// often the traffic totals are sampled for the sparklines.
	stateEvery = time.Second
	// keepEvents and keepRates bound the timeline and the sparklines.
	keepEvents = 1000
	keepRates  = 120
	// backlogEvents is how much of the timeline a new stream starts with.
	backlogEvents = 200
	// subscriberBuffer is how many messages a slow stream may fall
	// behind before it is dropped (the browser reconnects).
	subscriberBuffer = 32
)

// Hub polls the Source, keeps the timeline and the rates, and fans
// messages out to the event streams. One goroutine (Run) does the work
// whatever the number of streams, so 100 open pages cost 100 writes of
// the same bytes.
//
// Nobody watching costs little: each poll compares the view version and
// asks the source for events past the last one (an in-memory read), and
// the traffic totals are read once a second. The timeline is the
// controller's (the source's Events), not derived here: the hub misses
// nothing between two polls and a restarted broker still shows the
// history. The snapshot (offsets, lag, groups) is taken only while an
// event stream is open or when a page or /api/snapshot asks.
type Hub struct {
	src    Source
	logger *slog.Logger

	// pollMu serializes polls (Run's and the handlers' refreshes), so
	// views are diffed in the order they were taken.
	pollMu sync.Mutex

	// mu guards the fields below.
	mu        sync.Mutex
	latest    *Snapshot // the last full snapshot
	lastView  *Snapshot // the last snapshot taken
	stateMsg  []byte    // the SSE message for latest (with rates)
	lastState time.Time
	lastStats Stats
	lastRate  time.Time
	rates     []Rate
	events    []Event
	seq       uint64
	subs      map[chan []byte]struct{}
	// polls counts polls by what they read, for tests and the idle cost.
	polls PollCounts
}

// PollCounts counts what the hub's polls read.
type PollCounts struct {
	Polls, Stats, ViewSnapshots, FullSnapshots int
}

// NewHub returns a hub over src; Run makes it live.
func NewHub(src Source, logger *slog.Logger) *Hub {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Hub{src: src, logger: logger, subs: map[chan []byte]struct{}{}}
}

// Run polls until ctx ends, then closes every stream.
func (h *Hub) Run(ctx context.Context) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		h.Poll(ctx)
		select {
		case <-ctx.Done():
			h.closeAll()
			return
		case <-t.C:
		}
	}
}

// pollPlan is what one poll reads, decided by pollNeeds.
type pollPlan struct {
	stats, view, full bool
}

// pollNeeds decides what a poll at now reads: the traffic totals once a
// stateEvery; a full snapshot when a stream is open and the view moved or
// stateEvery passed since the last push, or when forced (a page asks).
// Nobody watching, a moved view is not read: the timeline does not come
// from views.
func pollNeeds(now time.Time, versionMoved, watched, force bool, lastRate, lastState time.Time) pollPlan {
	var p pollPlan
	p.stats = lastRate.IsZero() || now.Sub(lastRate) >= stateEvery
	p.full = force || (watched && (versionMoved || now.Sub(lastState) >= stateEvery))
	p.view = p.full
	return p
}

// Poll looks at the source once: it takes the controller's new events
// into the timeline (and pushes them), samples the rates, and pushes the
// state to open streams when the view changed or stateEvery passed.
func (h *Hub) Poll(ctx context.Context) { h.poll(ctx, false) }

// Refresh makes the state current for a page or /api/snapshot: a full
// snapshot unless one is younger than pollEvery.
func (h *Hub) Refresh(ctx context.Context) {
	h.mu.Lock()
	fresh := h.latest != nil && time.Since(h.latest.Time) < pollEvery && h.lastView != nil && h.lastView.ViewVersion == h.latest.ViewVersion
	h.mu.Unlock()
	if !fresh {
		h.poll(ctx, true)
	}
}

func (h *Hub) poll(ctx context.Context, force bool) {
	h.pollMu.Lock()
	defer h.pollMu.Unlock()
	version := h.src.ViewVersion()
	now := time.Now()
	h.mu.Lock()
	moved := h.lastView == nil || h.lastView.ViewVersion != version
	plan := pollNeeds(now, moved, len(h.subs) > 0, force, h.lastRate, h.lastState)
	h.polls.Polls++
	h.mu.Unlock()

	h.mu.Lock()
	seq := h.seq
	h.mu.Unlock()
	fresh := h.src.Events(seq) // only this goroutine (pollMu) moves h.seq
	var stats Stats
	if plan.stats {
		stats = h.src.Stats()
	}
	var snap Snapshot
	if plan.view {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		snap = h.src.Snapshot(sctx, plan.full)
		cancel()
		if snap.Time.IsZero() {
			snap.Time = now
		}
		if plan.full {
			snap.Stats = stats
			if !plan.stats {
				snap.Stats = h.src.Stats()
			}
		}
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if len(fresh) > 0 {
		h.seq = fresh[len(fresh)-1].Seq
		h.events = append(h.events, fresh...)
		if over := len(h.events) - keepEvents; over > 0 {
			h.events = append(h.events[:0:0], h.events[over:]...)
		}
		h.broadcastLocked(sseMessage("timeline", fresh))
	}
	if plan.stats {
		h.polls.Stats++
		if h.lastRate.IsZero() {
			h.lastRate, h.lastStats = now, stats
		} else {
			h.rates = append(h.rates, rateBetween(h.lastStats, stats, now.Sub(h.lastRate), now))
			if over := len(h.rates) - keepRates; over > 0 {
				h.rates = append(h.rates[:0:0], h.rates[over:]...)
			}
			h.lastRate, h.lastStats = now, stats
		}
	}
	if !plan.view {
		return
	}
	if plan.full {
		h.polls.FullSnapshots++
	} else {
		h.polls.ViewSnapshots++
	}
	h.lastView = &snap
	if plan.full {
		h.latest = &snap
		h.stateMsg = sseMessage("state", h.statePayloadLocked())
		if !force {
			// A page's refresh does not push: open streams keep Run's
			// rhythm (and a new stream gets stateMsg first).
			h.lastState = snap.Time
			h.broadcastLocked(h.stateMsg)
		}
	}
}

// Polls returns what the hub's polls have read so far.
func (h *Hub) Polls() PollCounts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.polls
}

// rateBetween is the per-second rates from a to b over d.
func rateBetween(a, b Stats, d time.Duration, at time.Time) Rate {
	s := d.Seconds()
	r := Rate{At: at,
		BytesIn:    max(b.BytesIn-a.BytesIn, 0) / s,
		BytesOut:   max(b.BytesOut-a.BytesOut, 0) / s,
		MessagesIn: max(b.MessagesIn-a.MessagesIn, 0) / s,
		Requests:   max(b.Requests-a.Requests, 0) / s,
	}
	if n := b.Requests - a.Requests; n > 0 {
		r.LatencyMeanMs = max(b.RequestTimeMs-a.RequestTimeMs, 0) / n
	}
	return r
}

// statePayload is what a "state" message and /api/snapshot carry.
type statePayload struct {
	Snapshot *Snapshot `json:"snapshot"`
	Rates    []Rate    `json:"rates"`
}

func (h *Hub) statePayloadLocked() statePayload {
	return statePayload{Snapshot: h.latest, Rates: h.rates}
}

// State returns the JSON of the latest state (nil before the first poll).
func (h *Hub) State() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.latest == nil {
		return nil
	}
	data, _ := json.Marshal(h.statePayloadLocked())
	return data
}

// Timeline returns the timeline entries after seq, oldest first.
func (h *Hub) Timeline(after uint64) []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Event
	for _, e := range h.events {
		if e.Seq > after {
			out = append(out, e)
		}
	}
	return out
}

// subscribe returns a stream of SSE messages starting with the current
// state and the recent timeline; cancel ends it.
func (h *Hub) subscribe() (ch chan []byte, cancel func()) {
	ch = make(chan []byte, subscriberBuffer)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stateMsg != nil {
		ch <- h.stateMsg
	}
	if n := len(h.events); n > 0 {
		ch <- sseMessage("timeline", h.events[max(0, n-backlogEvents):])
	}
	h.subs[ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// Streams is the number of open event streams.
func (h *Hub) Streams() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// broadcastLocked queues msg on every stream; a stream that fell
// subscriberBuffer messages behind is closed rather than waited for.
func (h *Hub) broadcastLocked(msg []byte) {
	for ch := range h.subs {
		select {
		case ch <- msg:
		default:
			delete(h.subs, ch)
			close(ch)
		}
	}
}

func (h *Hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}

// sseMessage encodes one server-sent event. JSON has no raw newlines, so
// one data line holds it.
func sseMessage(event string, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte(`null`)
	}
	var b bytes.Buffer
	b.Grow(len(data) + len(event) + 16)
	b.WriteString("event: ")
	b.WriteString(event)
	b.WriteString("\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	return b.Bytes()
}
