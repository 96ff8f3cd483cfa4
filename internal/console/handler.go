package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// statePlaceholder in index.html is replaced by the first state's JSON, so
// the page renders without waiting for a request. encoding/json escapes
// <, > and & (and U+2028/9), so the data cannot end the script element.
var statePlaceholder = []byte("__KBROKER_INITIAL_STATE__")

// tokenPlaceholder in index.html is replaced by the actions token (hex)
// when actions are enabled, by nothing otherwise: the page offers actions
// only when it has a token.
var tokenPlaceholder = []byte("__KBROKER_ACTIONS_TOKEN__")

// heartbeatEvery keeps idle event streams (and proxies) alive.
const heartbeatEvery = 15 * time.Second

// Options configure Handler.
type Options struct {
	// Actions performs the console's actions; nil leaves the console
	// read-only (every method but GET and HEAD refused: 405).
	Actions Actions
	// Token must accompany every action (header X-Kbroker-Console-Token);
	// the page carries it. Required with Actions: a random secret per
	// broker run.
	Token string
}

// TokenHeader is the header an action carries the page's token in.
const TokenHeader = "X-Kbroker-Console-Token"

// Handler serves the console: GET / (the page), /console/app.js and
// /console/app.css (embedded), /api/snapshot (the latest state as JSON),
// /api/timeline?after=SEQ and /api/events (server-sent events: "state"
// and "timeline"). With opts.Actions, also POST
// /api/actions/elect-preferred and /api/actions/delete-records (see
// actions.go); every other method is refused.
func Handler(h *Hub, opts Options) http.Handler {
	index, _ := assets.ReadFile("assets/index.html")
	js, _ := assets.ReadFile("assets/app.js")
	css, _ := assets.ReadFile("assets/app.css")
	if opts.Actions != nil && opts.Token == "" {
		opts.Actions = nil // no token, no actions: refuse rather than run unprotected
	}
	var token []byte
	if opts.Actions != nil {
		token = []byte(opts.Token)
	}
	index = bytes.Replace(index, tokenPlaceholder, token, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		h.Refresh(r.Context())
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
		h.Refresh(r.Context())
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
	if opts.Actions == nil {
		return readOnly(mux)
	}
	mux.Handle("/api/actions/", actionsHandler(opts.Actions, opts.Token))
	return readOnlyExcept("/api/actions/", mux)
}

// readOnly refuses every method that could change something.
func readOnly(next http.Handler) http.Handler { return readOnlyExcept("", next) }

// readOnlyExcept refuses every method but GET and HEAD outside the path
// prefix (none when empty), where the handler checks methods itself.
func readOnlyExcept(prefix string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && (prefix == "" || !strings.HasPrefix(r.URL.Path, prefix)) {
			w.Header().Set("Allow", "GET, HEAD")
			msg := "the kbroker console is read-only (no actions are enabled: kbroker.console.actions.enable)"
			if prefix != "" {
				msg = "only " + prefix + "* takes POST"
			}
			http.Error(w, msg, http.StatusMethodNotAllowed)
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
	// The stream starts with a current state, not the last one taken
	// while nobody watched.
	h.Refresh(r.Context())
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
