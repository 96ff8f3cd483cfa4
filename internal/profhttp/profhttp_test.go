package profhttp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

func TestCheckLoopback(t *testing.T) {
	for _, c := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:0", true},
		{"127.0.0.2:6060", true},
		{"[::1]:6060", true},
		{"localhost:6060", true},
		{":6060", false},
		{"0.0.0.0:6060", false},
		{"10.0.0.1:6060", false},
		{"example.com:6060", false},
		{"127.0.0.1", false},
	} {
		if err := CheckLoopback(c.addr); (err == nil) != c.ok {
			t.Errorf("CheckLoopback(%q) = %v, want ok=%v", c.addr, err, c.ok)
		}
	}
}

// A CPU profile bracketed by start and stop requests comes back as a
// gzipped profile; a second start while one runs, and a stop without one,
// are refused.
func TestBracketedCPUProfile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, err := Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr.String() + "/debug/pprof/cpu/"
	post := func(what string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+what, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	if code, _ := post("stop"); code != http.StatusConflict {
		t.Fatalf("stop without a profile: %d", code)
	}
	if code, body := post("start"); code != http.StatusNoContent {
		t.Fatalf("start: %d %s", code, body)
	}
	if code, _ := post("start"); code != http.StatusConflict {
		t.Fatalf("second start: %d", code)
	}
	code, body := post("stop")
	if code != http.StatusOK || !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
		t.Fatalf("stop: %d, %d bytes starting %x", code, len(body), body[:min(len(body), 4)])
	}
	// And again: the profiler was released.
	if code, body := post("start"); code != http.StatusNoContent {
		t.Fatalf("start after stop: %d %s", code, body)
	}
	if code, _ := post("stop"); code != http.StatusOK {
		t.Fatalf("second stop: %d", code)
	}
	// A GET does not start one (pprof's index answers it: no such profile).
	resp, err := http.Get(base + "start")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("GET start: %d", resp.StatusCode)
	}
	if _, err := Start(ctx, "0.0.0.0:0"); err == nil {
		t.Fatal("a non-loopback address was accepted")
	}
}
