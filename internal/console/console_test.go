package console

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func snap(version uint64, controller int32, alive []int32, parts ...Partition) *Snapshot {
	s := &Snapshot{Time: time.Unix(100, 0), ControllerID: controller, ViewVersion: version}
	for _, id := range alive {
		s.Brokers = append(s.Brokers, Broker{ID: id, Alive: true})
	}
	s.Topics = []Topic{{Name: "t", Partitions: parts}}
	return s
}

func part(leader, epoch int32, replicas, isr []int32) Partition {
	return Partition{Leader: leader, LeaderEpoch: epoch, Replicas: replicas, ISR: isr}
}

func kinds(events []Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Kind)
	}
	return out
}

// fakeSource returns the snapshots and events it is given.
type fakeSource struct {
	mu                 sync.Mutex
	s                  Snapshot
	events             []Event
	views, full, stats int // calls by kind
}

// Events implements Source.
func (f *fakeSource) Events(after uint64) []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Event
	for _, e := range f.events {
		if e.Seq > after {
			out = append(out, e)
		}
	}
	return out
}

// record adds events of the given kinds, numbered on from the last.
func (f *fakeSource) record(kinds ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range kinds {
		f.events = append(f.events, Event{Seq: uint64(len(f.events) + 1), Kind: k, Topic: "t", Partition: -1, Broker: -1, Text: k})
	}
}

func (f *fakeSource) Snapshot(_ context.Context, full bool) Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	if full {
		f.full++
	} else {
		f.views++
	}
	return f.s
}

func (f *fakeSource) ViewVersion() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.s.ViewVersion
}

func (f *fakeSource) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats++
	return f.s.Stats
}

func (f *fakeSource) counts() (views, full, stats int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.views, f.full, f.stats
}

func (f *fakeSource) set(s *Snapshot) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s = *s
	f.s.Time = time.Now()
}

func TestHandlerReadOnlyAndEscaped(t *testing.T) {
	src := &fakeSource{}
	evil := "<script>alert(1)</script>"
	s := snap(1, 1, []int32{1}, part(1, 0, []int32{1}, []int32{1}))
	s.Topics[0].Name = evil
	s.Groups = []Group{{Name: "</script><img src=x onerror=alert(1)>", Members: []Member{{ClientID: "<b>bold</b>"}}}}
	src.set(s)
	hub := NewHub(src, nil)
	hub.Poll(context.Background())
	srv := httptest.NewServer(Handler(hub, Options{}))
	defer srv.Close()

	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		req, _ := http.NewRequest(method, srv.URL+"/api/snapshot", strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /api/snapshot: %s, want 405", method, resp.Status)
		}
	}

	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(page), "<script>alert") || strings.Contains(string(page), "<img") || strings.Contains(string(page), "<b>") {
		t.Errorf("the page carries a name as markup:\n%s", page)
	}
	if !strings.Contains(string(page), `\u003cscript\u003ealert(1)\u003c/script\u003e`) {
		t.Errorf("the page lacks the escaped topic name")
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}

	resp, err = http.Get(srv.URL + "/api/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Snapshot Snapshot `json:"snapshot"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.Snapshot.Topics[0].Name != evil {
		t.Errorf("/api/snapshot: %v, topics %+v", err, st.Snapshot.Topics)
	}
	for _, p := range []string{"/console/app.js", "/console/app.css"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", p, err, resp.Status)
		}
		resp.Body.Close()
	}
	if resp, _ := http.Get(srv.URL + "/nope"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope: %s", resp.Status)
	}
	if resp, _ := http.Get(srv.URL + "/api/timeline?after=x"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET /api/timeline?after=x: %s", resp.Status)
	}
}

// readEvent reads one server-sent event (name and data).
func readEvent(r *bufio.Reader) (string, string, error) {
	var name, data string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if name != "" {
				return name, data, nil
			}
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		}
	}
}

// TestEventStreams opens 100 event streams: each gets the state at once,
// then the timeline entry of an election and the new state, while plain
// requests stay fast.
func TestEventStreams(t *testing.T) {
	r := []int32{1, 2, 3}
	src := &fakeSource{}
	src.set(snap(1, 1, r, part(1, 0, r, r)))
	hub := NewHub(src, nil)
	hub.Poll(context.Background())
	srv := httptest.NewServer(Handler(hub, Options{}))
	defer srv.Close()

	const streams = 100
	readers := make([]*bufio.Reader, streams)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range readers {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("stream %d: content type %q", i, ct)
		}
		readers[i] = bufio.NewReader(resp.Body)
		if name, _, err := readEvent(readers[i]); err != nil || name != "state" {
			t.Fatalf("stream %d: first event %q, %v", i, name, err)
		}
	}
	if n := hub.Streams(); n != streams {
		t.Fatalf("%d streams open, want %d", n, streams)
	}
	start := time.Now()
	resp, err := http.Get(srv.URL + "/api/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("/api/snapshot took %v with %d streams open", d, streams)
	}

	src.set(snap(2, 2, []int32{2, 3}, part(2, 1, r, []int32{2, 3})))
	src.record(EventBrokerDied, EventControllerChanged, EventElection, EventISRShrink)
	hub.Poll(context.Background())
	for i, rd := range readers {
		name, data, err := readEvent(rd)
		if err != nil || name != "timeline" {
			t.Fatalf("stream %d: %q %v, want the timeline", i, name, err)
		}
		var events []Event
		if err := json.Unmarshal([]byte(data), &events); err != nil || len(events) != 4 || events[2].Kind != EventElection {
			t.Fatalf("stream %d: timeline %s (%v)", i, data, err)
		}
		if name, data, err := readEvent(rd); err != nil || name != "state" || !strings.Contains(data, `"leader":2`) {
			t.Fatalf("stream %d: %q %.100s %v, want the new state", i, name, data, err)
		}
	}
	if got := hub.Timeline(0); len(got) != 4 || got[0].Seq != 1 || got[3].Seq != 4 {
		t.Errorf("timeline %+v", got)
	}
	if got := hub.Timeline(3); len(got) != 1 {
		t.Errorf("timeline after 3: %+v", got)
	}
}

func TestRateBetween(t *testing.T) {
	a := Stats{BytesIn: 100, BytesOut: 50, MessagesIn: 10, Requests: 4, RequestTimeMs: 8}
	b := Stats{BytesIn: 300, BytesOut: 50, MessagesIn: 30, Requests: 8, RequestTimeMs: 28}
	r := rateBetween(a, b, 2*time.Second, time.Unix(5, 0))
	if r.BytesIn != 100 || r.BytesOut != 0 || r.MessagesIn != 10 || r.Requests != 2 || r.LatencyMeanMs != 5 {
		t.Errorf("rateBetween = %+v", r)
	}
}

func TestSlowStreamIsDropped(t *testing.T) {
	src := &fakeSource{}
	src.set(snap(1, 1, []int32{1}))
	hub := NewHub(src, nil)
	hub.Poll(context.Background())
	ch, cancel := hub.subscribe()
	defer cancel()
	for i := 0; i < subscriberBuffer+2; i++ {
		src.set(snap(uint64(i+2), 1, []int32{1}))
		hub.Poll(context.Background())
	}
	n := 0
	for range ch {
		n++
	}
	if hub.Streams() != 0 || n != subscriberBuffer {
		t.Errorf("a stream that never reads: %d streams left, %d messages buffered", hub.Streams(), n)
	}
}

func TestPollNeeds(t *testing.T) {
	now := time.Unix(1000, 0)
	recent, old := now.Add(-100*time.Millisecond), now.Add(-2*time.Second)
	for _, tc := range []struct {
		name                  string
		moved, watched, force bool
		lastRate, lastState   time.Time
		wantStats, wantView   bool
		wantFull              bool
	}{
		{"idle, nothing moved", false, false, false, recent, old, false, false, false},
		{"idle, rates due", false, false, false, old, old, true, false, false},
		{"idle, view moved: no snapshot (the timeline is the source's)", true, false, false, recent, old, false, false, false},
		{"first poll", true, false, false, time.Time{}, time.Time{}, true, false, false},
		{"watched, nothing moved, state recent", false, true, false, recent, recent, false, false, false},
		{"watched, state due", false, true, false, recent, old, false, true, true},
		{"watched, view moved", true, true, false, recent, recent, false, true, true},
		{"a page asks", false, false, true, recent, recent, false, true, true},
	} {
		got := pollNeeds(now, tc.moved, tc.watched, tc.force, tc.lastRate, tc.lastState)
		if got != (pollPlan{stats: tc.wantStats, view: tc.wantView, full: tc.wantFull}) {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
}

// Nobody watching: polls read the view version and the source's new
// events only; no snapshot is taken for a view change, the controller's
// events still reach the timeline, and a page asking gets a full, current
// snapshot.
func TestIdleHubReadsLittle(t *testing.T) {
	r := []int32{1, 2, 3}
	src := &fakeSource{}
	src.set(snap(1, 1, r, part(1, 0, r, r)))
	hub := NewHub(src, nil)
	for range 20 {
		hub.Poll(context.Background())
	}
	if views, full, _ := src.counts(); views != 0 || full != 0 {
		t.Fatalf("20 idle polls of one view: %d view snapshots, %d full, want none", views, full)
	}
	src.set(snap(2, 2, []int32{2, 3}, part(2, 1, r, []int32{2, 3})))
	src.record(EventBrokerDied, EventControllerChanged)
	hub.Poll(context.Background())
	src.record(EventElection, EventISRShrink)
	hub.Poll(context.Background())
	if views, full, _ := src.counts(); views != 0 || full != 0 {
		t.Fatalf("a view change while idle: %d view snapshots, %d full, want none", views, full)
	}
	if got := kinds(hub.Timeline(0)); strings.Join(got, ",") != "broker_died,controller_changed,leader_elected,isr_shrink" {
		t.Fatalf("idle timeline %v", got)
	}
	if hub.State() != nil {
		t.Fatal("a state before anybody asked")
	}
	hub.Refresh(context.Background())
	hub.Refresh(context.Background()) // fresh: not taken again
	if _, full, _ := src.counts(); full != 1 {
		t.Fatalf("two refreshes: %d full snapshots, want 1", full)
	}
	if st := string(hub.State()); !strings.Contains(st, `"leader":2`) {
		t.Errorf("refreshed state %.200s", st)
	}
	// Watched: every poll after stateEvery takes a full one.
	_, cancel := hub.subscribe()
	defer cancel()
	hub.mu.Lock()
	hub.lastState = time.Now().Add(-2 * stateEvery)
	hub.mu.Unlock()
	hub.Poll(context.Background())
	if _, full, _ := src.counts(); full != 2 {
		t.Errorf("watched poll with the state due: %d full snapshots, want 2", full)
	}
}

// fakeActions records the actions it is asked for.
type fakeActions struct {
	mu    sync.Mutex
	calls []string
	err   error
}

func (f *fakeActions) ElectPreferredLeader(_ *http.Request, a ActionRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "elect "+a.Topic)
	return "elected", f.err
}

func (f *fakeActions) DeleteRecords(_ *http.Request, a ActionRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "delete "+a.Topic)
	return "deleted", f.err
}

func TestActions(t *testing.T) {
	src := &fakeSource{}
	src.set(snap(1, 1, []int32{1}, part(1, 0, []int32{1}, []int32{1})))
	hub := NewHub(src, nil)
	const token = "0123456789abcdef"

	type call struct {
		name   string
		method string
		path   string
		ctype  string
		origin string
		site   string
		host   string
		token  string
		body   string
		want   int
	}
	do := func(t *testing.T, base string, c call) int {
		t.Helper()
		req, _ := http.NewRequest(c.method, base+c.path, strings.NewReader(c.body))
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if c.site != "" {
			req.Header.Set("Sec-Fetch-Site", c.site)
		}
		if c.host != "" {
			req.Host = c.host
		}
		if c.token != "" {
			req.Header.Set(TokenHeader, c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	body := `{"topic":"t","partition":0}`

	t.Run("disabled", func(t *testing.T) {
		srv := httptest.NewServer(Handler(hub, Options{}))
		defer srv.Close()
		origin := srv.URL
		for _, p := range []string{"/api/actions/elect-preferred", "/api/actions/delete-records"} {
			if got := do(t, srv.URL, call{method: "POST", path: p, ctype: "application/json", origin: origin, token: token, body: body}); got != http.StatusMethodNotAllowed {
				t.Errorf("POST %s with actions off: %d, want 405", p, got)
			}
		}
		resp, _ := http.Get(srv.URL + "/")
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(page), `<meta name="kbroker-actions-token" content="">`) {
			t.Errorf("the read-only page carries a token or lacks the empty one")
		}
	})
	t.Run("no token, no actions", func(t *testing.T) {
		acts := &fakeActions{}
		srv := httptest.NewServer(Handler(hub, Options{Actions: acts}))
		defer srv.Close()
		if got := do(t, srv.URL, call{method: "POST", path: "/api/actions/elect-preferred", ctype: "application/json", origin: srv.URL, body: body}); got != http.StatusMethodNotAllowed || len(acts.calls) != 0 {
			t.Errorf("actions without a token: %d %v", got, acts.calls)
		}
	})

	acts := &fakeActions{}
	srv := httptest.NewServer(Handler(hub, Options{Actions: acts, Token: token}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ok := call{method: "POST", path: "/api/actions/elect-preferred", ctype: "application/json", origin: srv.URL, site: "same-origin", token: token, body: body, want: 200}
	with := func(name string, f func(*call)) call {
		c := ok
		c.name = name
		f(&c)
		return c
	}
	for _, c := range []call{
		with("allowed", func(c *call) {}),
		with("delete records allowed", func(c *call) {
			c.path = "/api/actions/delete-records"
			c.body = `{"topic":"t","partition":0,"offset":5}`
		}),
		with("no Sec-Fetch-Site (older browser) but same Origin", func(c *call) { c.site = "" }),
		with("GET", func(c *call) { c.method = "GET"; c.body = ""; c.want = 405 }),
		with("PUT", func(c *call) { c.method = "PUT"; c.want = 405 }),
		with("form post", func(c *call) { c.ctype = "application/x-www-form-urlencoded"; c.want = 415 }),
		with("text/plain", func(c *call) { c.ctype = "text/plain"; c.want = 415 }),
		with("cross-site", func(c *call) { c.site = "cross-site"; c.want = 403 }),
		with("same-site other port", func(c *call) { c.site = "same-site"; c.want = 403 }),
		with("other origin", func(c *call) { c.origin = "http://evil.example"; c.want = 403 }),
		with("no origin", func(c *call) { c.origin = ""; c.want = 403 }),
		with("rebound host name", func(c *call) {
			c.host = "evil.example:" + strings.Split(host, ":")[1]
			c.origin = "http://" + c.host
			c.want = 403
		}),
		with("localhost", func(c *call) { c.host = "localhost:" + strings.Split(host, ":")[1]; c.origin = "http://" + c.host }),
		with("no token", func(c *call) { c.token = ""; c.want = 403 }),
		with("wrong token", func(c *call) { c.token = "0123456789abcdeX"; c.want = 403 }),
		with("bad body", func(c *call) { c.body = `{"topic":`; c.want = 400 }),
		with("unknown field", func(c *call) { c.body = `{"topic":"t","partition":0,"x":1}`; c.want = 400 }),
		with("no topic", func(c *call) { c.body = `{"partition":0}`; c.want = 400 }),
		with("other write path", func(c *call) { c.path = "/api/snapshot"; c.want = 405 }),
		with("unknown action", func(c *call) { c.path = "/api/actions/delete-topic"; c.want = 404 }),
	} {
		if got := do(t, srv.URL, c); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	if strings.Join(acts.calls, ",") != "elect t,delete t,elect t,elect t" {
		t.Errorf("actions performed: %v", acts.calls)
	}
	acts.err = fmt.Errorf("%w: Alter on the cluster", ErrForbidden)
	if got := do(t, srv.URL, ok); got != http.StatusForbidden {
		t.Errorf("an action the authorizer refuses: %d, want 403", got)
	}
	acts.err = errors.New("ELECTION_NOT_NEEDED")
	if got := do(t, srv.URL, ok); got != http.StatusConflict {
		t.Errorf("a failed action: %d, want 409", got)
	}
	resp, _ := http.Get(srv.URL + "/")
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `<meta name="kbroker-actions-token" content="`+token+`">`) {
		t.Errorf("the page lacks the token")
	}
}
