package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

//go:embed assets
var assets embed.FS

// statePlaceholder in index.html is replaced by the first state's JSON, so
// the page renders without waiting for a request. encoding/json escapes
// <, > and & (and U+2028/9), so the data cannot end the script element.
var statePlaceholder = []byte("__KBROKER_INITIAL_STATE__")

// heartbeatEvery keeps idle event streams (and proxies) alive.
const heartbeatEvery = 15 * time.Second

// Handler serves the console: GET / (the page), /console/app.js and
// /console/app.css (embedded), /api/snapshot (the latest state as JSON),
// /api/timeline?after=SEQ and /api/events (server-sent events: "state"
// and "timeline"). Every other method is refused: the console is
// read-only.
func Handler(h *Hub) http.Handler {
	index, _ := assets.ReadFile("assets/index.html")
	js, _ := assets.ReadFile("assets/app.js")
	css, _ := assets.ReadFile("assets/app.css")
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		state := h.State()
		if state == nil {
			state = []byte("null")
		}
		secureHeaders(w)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(bytes.Replace(index, statePlaceholder, state, 1))
	})
	static := func(body []byte, ctype string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			secureHeaders(w)
			w.Header().Set("Content-Type", ctype)
			w.Write(body)
		}
	}
	mux.HandleFunc("/console/app.js", static(js, "text/javascript; charset=utf-8"))
	mux.HandleFunc("/console/app.css", static(css, "text/css; charset=utf-8"))
	mux.HandleFunc("/api/snapshot", func(w http.ResponseWriter, r *http.Request) {
		state := h.State()
		if state == nil {
			http.Error(w, "no snapshot yet", http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, json.RawMessage(state))
	})
	mux.HandleFunc("/api/timeline", func(w http.ResponseWriter, r *http.Request) {
		var after uint64
		if s := r.URL.Query().Get("after"); s != "" {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				http.Error(w, "after: not a sequence number", http.StatusBadRequest)
				return
			}
			after = v
		}
		events := h.Timeline(after)
		if events == nil {
			events = []Event{}
		}
		writeJSON(w, events)
	})
	mux.HandleFunc("/api/events", func(w http.ResponseWriter, r *http.Request) { serveEvents(h, w, r) })
	return readOnly(mux)
}

// readOnly refuses every method that could change something.
func readOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the kbroker console is read-only (no actions are enabled)", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// secureHeaders: nothing but our own script and style runs on the page.
func secureHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
}

func writeJSON(w http.ResponseWriter, v any) {
	secureHeaders(w)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}

// serveEvents streams the hub's messages until the client goes away.
func serveEvents(h *Hub, w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	secureHeaders(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// Reconnect soon after the broker restarts.
	w.Write([]byte("retry: 1000\n\n"))
	flusher.Flush()
	ch, cancel := h.subscribe()
	defer cancel()
	rc := http.NewResponseController(w)
	heartbeat := time.NewTicker(heartbeatEvery)
	defer heartbeat.Stop()
	for {
		var msg []byte
		select {
		case <-r.Context().Done():
			return
		case m, ok := <-ch:
			if !ok {
				return // too slow, or the broker stops: the browser reconnects
			}
			msg = m
		case <-heartbeat.C:
			msg = []byte(": keepalive\n\n")
		}
		// A client that stops reading must not hold the writer forever.
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := w.Write(msg); err != nil {
			return
		}
		flusher.Flush()
	}
}
