package console

import (
	"bufio"
	"context"
	"encoding/json"
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

func TestDiff(t *testing.T) {
	r := []int32{1, 2, 3}
	tests := []struct {
		name      string
		old, next *Snapshot
		want      []string
	}{
		{"nothing changed", snap(1, 1, r, part(1, 0, r, r)), snap(2, 1, r, part(1, 0, r, r)), nil},
		{"no history", nil, snap(1, 1, r, part(1, 0, r, r)), nil},
		{"leader died: clean election and shrink", snap(1, 1, r, part(1, 0, r, r)), snap(2, 2, []int32{2, 3}, part(2, 1, r, []int32{2, 3})),
			[]string{EventBrokerDied, EventControllerChanged, EventElection, EventISRShrink}},
		{"unclean", snap(1, 1, r, part(1, 0, r, []int32{1})), snap(2, 1, r, part(3, 1, r, []int32{3})),
			[]string{EventUncleanElection, EventISRShrink, EventISRExpand}},
		{"preferred", snap(1, 1, r, part(2, 1, r, r)), snap(2, 1, r, part(1, 2, r, r)), []string{EventPreferredElection}},
		{"offline", snap(1, 1, r, part(1, 0, r, []int32{1})), snap(2, 1, []int32{2, 3}, part(-1, 1, r, []int32{1})),
			[]string{EventBrokerDied, EventOffline}},
		{"expand after return", snap(1, 2, []int32{2, 3}, part(2, 1, r, []int32{2, 3})), snap(2, 2, r, part(2, 1, r, r)),
			[]string{EventBrokerJoined, EventISRExpand}},
	}
	for _, tc := range tests {
		got := kinds(Diff(tc.old, tc.next))
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: Diff kinds %v, want %v", tc.name, got, tc.want)
		}
	}
	created := snap(2, 1, []int32{1})
	created.Topics = append(created.Topics, Topic{Name: "new"})
	old := snap(1, 1, []int32{1})
	old.Topics = append(old.Topics, Topic{Name: "gone"})
	if got := kinds(Diff(old, created)); strings.Join(got, ",") != EventTopicCreated+","+EventTopicDeleted {
		t.Errorf("topics: %v", got)
	}
	ev := Diff(snap(1, 1, r, part(1, 0, r, r)), snap(2, 1, r, part(2, 1, r, []int32{2, 3})))
	if ev[0].Topic != "t" || ev[0].Partition != 0 || ev[0].Broker != 2 || !strings.Contains(ev[0].Text, "t-0") || !ev[0].Time.Equal(time.Unix(100, 0)) {
		t.Errorf("election event %+v", ev[0])
	}
}

// fakeSource returns the snapshots it is given.
type fakeSource struct {
	mu sync.Mutex
	s  Snapshot
}

func (f *fakeSource) Snapshot(context.Context) Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.s
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
	srv := httptest.NewServer(Handler(hub))
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
	srv := httptest.NewServer(Handler(hub))
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
