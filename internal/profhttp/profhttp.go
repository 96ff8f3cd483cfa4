// Package profhttp serves a process's Go runtime profiles over HTTP, for
// performance work: net/http/pprof's handlers under /debug/pprof/, and a
// CPU profile bracketed by two requests (POST /debug/pprof/cpu/start, then
// POST /debug/pprof/cpu/stop answers the profile), so that a benchmark can
// profile exactly one phase of a run whose length it does not know in
// advance (net/http/pprof's /profile needs the duration up front).
package profhttp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	runpprof "runtime/pprof"
	"sync"
	"time"
)

// Handler returns the profile endpoints. A CPU profile started by
// /debug/pprof/cpu/start runs until /debug/pprof/cpu/stop (or until the
// process ends); only one CPU profile runs at a time in a process, so a
// start while one runs (this one's, /debug/pprof/profile's or a
// --cpuprofile's) answers 409 Conflict.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	var cpu bracketed
	mux.HandleFunc("POST /debug/pprof/cpu/start", cpu.start)
	mux.HandleFunc("POST /debug/pprof/cpu/stop", cpu.stop)
	return mux
}

// bracketed is the CPU profile between a start and a stop request.
type bracketed struct {
	mu  sync.Mutex
	buf *bytes.Buffer // non-nil while a profile runs
}

func (b *bracketed) start(w http.ResponseWriter, _ *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf != nil {
		http.Error(w, "a CPU profile started here is already running", http.StatusConflict)
		return
	}
	buf := &bytes.Buffer{}
	if err := runpprof.StartCPUProfile(buf); err != nil {
		http.Error(w, fmt.Sprintf("starting the CPU profile: %v", err), http.StatusConflict)
		return
	}
	b.buf = buf
	w.WriteHeader(http.StatusNoContent)
}

func (b *bracketed) stop(w http.ResponseWriter, _ *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf == nil {
		http.Error(w, "no CPU profile started here is running", http.StatusConflict)
		return
	}
	runpprof.StopCPUProfile() // flushes the profile into b.buf
	buf := b.buf
	b.buf = nil
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="cpu.pprof"`)
	_, _ = w.Write(buf.Bytes())
}

// CheckLoopback returns an error unless addr (host:port) names a loopback
// address: the profiles show the process's code paths and goroutine
// stacks, and a profile request costs CPU, so they are for the machine's
// own user only.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("profile address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("profile address %q: the host must be a loopback address (127.0.0.1, ::1 or localhost)", addr)
	}
	return nil
}

// Start serves Handler on addr (a loopback address; port 0 for any free
// one) until ctx ends, and returns the address it listens on.
func Start(ctx context.Context, addr string) (net.Addr, error) {
	if err := CheckLoopback(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("profile listener: %w", err)
	}
	srv := &http.Server{Handler: Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() { _ = srv.Serve(ln) }() // ends with ErrServerClosed at Shutdown
	return ln.Addr(), nil
}
