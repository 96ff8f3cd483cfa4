package console

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"
)

// Source gives the console the cluster as the broker sees it.
type Source interface {
	Snapshot(ctx context.Context) Snapshot
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context) Snapshot

// Snapshot calls f.
func (f SourceFunc) Snapshot(ctx context.Context) Snapshot { return f(ctx) }

const (
	// pollEvery is how often the hub looks at the view: a change reaches
	// the page within about this plus the browser's handling.
	pollEvery = 200 * time.Millisecond
	// stateEvery is how often unchanged views are pushed anyway (offsets,
	// lag and rates move without a view change).
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
type Hub struct {
	src    Source
	logger *slog.Logger

	// mu guards the fields below.
	mu        sync.Mutex
	latest    *Snapshot
	stateMsg  []byte // the SSE message for latest (with rates)
	lastState time.Time
	lastStats Stats
	lastRate  time.Time
	rates     []Rate
	events    []Event
	seq       uint64
	subs      map[chan []byte]struct{}
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

// Poll takes one snapshot: it records what changed since the last one in
// the timeline and pushes the state when the view changed or stateEvery
// passed.
func (h *Hub) Poll(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	snap := h.src.Snapshot(sctx)
	cancel()
	if snap.Time.IsZero() {
		snap.Time = time.Now()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.latest
	viewChanged := old == nil || old.ViewVersion != snap.ViewVersion
	var fresh []Event
	if old != nil && viewChanged {
		for _, e := range Diff(old, &snap) {
			h.seq++
			e.Seq = h.seq
			fresh = append(fresh, e)
		}
		h.events = append(h.events, fresh...)
		if over := len(h.events) - keepEvents; over > 0 {
			h.events = append(h.events[:0:0], h.events[over:]...)
		}
	}
	if h.lastRate.IsZero() {
		h.lastRate, h.lastStats = snap.Time, snap.Stats
	} else if d := snap.Time.Sub(h.lastRate); d >= stateEvery {
		h.rates = append(h.rates, rateBetween(h.lastStats, snap.Stats, d, snap.Time))
		if over := len(h.rates) - keepRates; over > 0 {
			h.rates = append(h.rates[:0:0], h.rates[over:]...)
		}
		h.lastRate, h.lastStats = snap.Time, snap.Stats
	}
	h.latest = &snap
	if len(fresh) > 0 {
		h.broadcastLocked(sseMessage("timeline", fresh))
	}
	if viewChanged || snap.Time.Sub(h.lastState) >= stateEvery {
		h.stateMsg = sseMessage("state", h.statePayloadLocked())
		h.lastState = snap.Time
		h.broadcastLocked(h.stateMsg)
	}
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
