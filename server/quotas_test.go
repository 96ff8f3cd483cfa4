package server

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/internal/quota"
)

func TestSlotAvailable(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		listenerCount, listenerMax int
		total, brokerMax           int
		protected                  bool
		want                       bool
	}{
		{"empty", 0, 100, 0, 10, false, true},
		{"under both", 5, 100, 9, 10, false, true},
		{"broker full", 5, 100, 10, 10, false, false},
		{"broker full, protected listener", 5, 100, 10, 10, true, true},
		{"listener full", 3, 3, 3, 10, false, false},
		{"listener full, protected listener", 3, 3, 3, 10, true, false},
		{"max.connections 0", 0, 0, 0, 0, false, false},
	} {
		if got := slotAvailable(tc.listenerCount, tc.listenerMax, tc.total, tc.brokerMax, tc.protected); got != tc.want {
			t.Errorf("%s: slotAvailable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestProtectedListener(t *testing.T) {
	for _, tc := range []struct {
		listeners int
		want      bool
	}{{1, false}, {2, true}, {3, true}} {
		if got := protectedListener("BROKER", tc.listeners); got != tc.want {
			t.Errorf("protectedListener with %d listeners = %v", tc.listeners, got)
		}
	}
}

// Kafka's connection rate arithmetic with 2 windows of 1 s: the rate is
// measured over at least one whole window, so a burst of 10 at 10/s
// passes, the 11th waits (11-10)/10 of a second, and the wait never
// exceeds a window. The protected listener records no broker-wide rate.
func TestConnectionThrottle(t *testing.T) {
	cfg := quota.Config{Samples: 2, Window: time.Second}
	var broker, listener quota.Rate
	var throttles []time.Duration
	for range 12 {
		throttles = append(throttles, connectionThrottle(cfg, &broker, 10, &listener, 1000, false, 0, time.Second))
	}
	for i, d := range throttles[:10] {
		if d != 0 {
			t.Fatalf("connection %d throttled %v within the rate", i+1, d)
		}
	}
	if throttles[10] != 100*time.Millisecond || throttles[11] != 200*time.Millisecond {
		t.Fatalf("11th and 12th throttled %v, %v; want 100ms, 200ms", throttles[10], throttles[11])
	}
	// The listener's own rate, the longer of the two.
	var b2, l2 quota.Rate
	for range 5 {
		connectionThrottle(cfg, &b2, 1000, &l2, 5, false, 0, time.Second)
	}
	if d := connectionThrottle(cfg, &b2, 1000, &l2, 5, false, 0, time.Second); d != 200*time.Millisecond {
		t.Fatalf("listener rate 5: 6th throttled %v, want 200ms", d)
	}
	// At most one window.
	var b3, l3 quota.Rate
	for range 100 {
		connectionThrottle(cfg, &b3, 10, &l3, 1000, false, 0, time.Second)
	}
	if d := connectionThrottle(cfg, &b3, 10, &l3, 1000, false, 0, time.Second); d != time.Second {
		t.Fatalf("far over the rate: throttled %v, want the 1 s bound", d)
	}
	// Protected: the broker-wide rate neither applies nor records.
	var b4, l4 quota.Rate
	for range 50 {
		if d := connectionThrottle(cfg, &b4, 10, &l4, 1000, true, 0, time.Second); d != 0 {
			t.Fatalf("protected listener throttled %v by the broker rate", d)
		}
	}
	if r := b4.Measure(cfg, 0); r != 0 {
		t.Fatalf("protected connections recorded in the broker rate: %v/s", r)
	}
}

func TestConnQuotasPerIP(t *testing.T) {
	cfg := config.Default()
	cfg.MaxConnectionsPerIP = 2
	cfg.MaxConnectionsPerIPOverrides = map[string]int32{"10.0.0.9": 0, "10.0.0.8": 3}
	q := newConnQuotas(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	add := func(a netip.Addr) bool {
		within, ok := q.admit(ctx, "PLAINTEXT", a)
		if !ok {
			t.Fatal("admit failed")
		}
		return within
	}
	a := netip.MustParseAddr("10.0.0.1")
	for i := range 2 {
		if !add(a) {
			t.Fatalf("connection %d refused", i+1)
		}
	}
	if add(a) {
		t.Fatal("third from one address allowed")
	}
	q.release("PLAINTEXT", a) // the refused one is closed
	q.release("PLAINTEXT", a)
	if !add(a) {
		t.Fatal("refused after one closed")
	}
	if add(netip.MustParseAddr("10.0.0.9")) {
		t.Fatal("override 0 allowed a connection")
	}
	o := netip.MustParseAddr("10.0.0.8")
	for i := range 4 {
		if got := add(o); got != (i < 3) {
			t.Fatalf("override 3: connection %d allowed %v", i+1, got)
		}
	}
}

func twoListenerConfig() config.Config {
	cfg := config.Default()
	cfg.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "REPLICATION://127.0.0.1:0"}
	cfg.InterBrokerListenerName = "REPLICATION"
	return cfg
}

// blocks reports whether f blocks for 50 ms; if so it calls wake and
// checks that f then finishes, successfully.
func blocks(t *testing.T, f func() bool, wake func()) bool {
	t.Helper()
	got := make(chan bool, 1)
	go func() { got <- f() }()
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("failed without waiting")
		}
		return false
	case <-time.After(50 * time.Millisecond):
	}
	wake()
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("failed after waiting")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not woken")
	}
	return true
}

func TestConnQuotasWaitSlot(t *testing.T) {
	cfg := twoListenerConfig()
	cfg.MaxConnections = 1
	q := newConnQuotas(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	a := netip.MustParseAddr("10.0.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, ok := q.admit(ctx, "PLAINTEXT", a); !ok {
		t.Fatal("first connection")
	}
	if !q.waitSlot(ctx, "REPLICATION") {
		t.Fatal("the inter-broker listener waited")
	}
	if !blocks(t, func() bool { return q.waitSlot(ctx, "PLAINTEXT") }, func() { q.release("PLAINTEXT", a) }) {
		t.Fatal("a second client connection did not wait")
	}
	// The inter-broker listener takes the broker past max.connections:
	// another listener's connection must close.
	if _, ok := q.admit(ctx, "PLAINTEXT", a); !ok {
		t.Fatal("client connection")
	}
	if _, ok := q.admit(ctx, "REPLICATION", a); !ok || !q.overLimit() {
		t.Fatalf("inter-broker connection admitted %v, over the limit %v; want both", ok, q.overLimit())
	}
}

func TestConnQuotasListenerLimit(t *testing.T) {
	cfg := twoListenerConfig()
	cfg.Security = map[string]string{"listener.name.plaintext.max.connections": "2", "listener.name.replication.max.connections": "1"}
	q := newConnQuotas(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	a := netip.MustParseAddr("10.0.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 {
		if _, ok := q.admit(ctx, "PLAINTEXT", a); !ok {
			t.Fatal("admit")
		}
	}
	if !blocks(t, func() bool { return q.waitSlot(ctx, "PLAINTEXT") }, func() { q.release("PLAINTEXT", a) }) {
		t.Fatal("third PLAINTEXT connection did not wait at listener.name.plaintext.max.connections=2")
	}
	if _, ok := q.admit(ctx, "REPLICATION", a); !ok {
		t.Fatal("admit")
	}
	// The protected listener is exempt from max.connections, not from
	// its own limit.
	if !blocks(t, func() bool { return q.waitSlot(ctx, "REPLICATION") }, func() { q.release("REPLICATION", a) }) {
		t.Fatal("second REPLICATION connection did not wait at its own limit 1")
	}
}

// Over the creation rate, admit waits out the throttle and counts it;
// nothing is refused.
func TestConnQuotasAdmitThrottles(t *testing.T) {
	cfg := twoListenerConfig()
	cfg.QuotaWindowNum = 2
	cfg.QuotaWindowSize = time.Second
	cfg.Security = map[string]string{"listener.name.plaintext.max.connection.creation.rate": "20"}
	q := newConnQuotas(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	a := netip.MustParseAddr("10.0.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	for range 22 {
		if within, ok := q.admit(ctx, "PLAINTEXT", a); !ok || !within {
			t.Fatal("admit refused")
		}
	}
	// The 21st waits (21-20)/20 of the 1 s window, the 22nd about as
	// long again (22 over 1.05 s).
	if took := time.Since(start); took < 95*time.Millisecond {
		t.Fatalf("22 connections at 20/s admitted in %v, want >= 100 ms of throttles", took)
	}
	st, _ := q.stats()
	if s := st["PLAINTEXT"]; s.throttled != 2 || s.throttleTime < 95*time.Millisecond || s.throttleTime > 110*time.Millisecond || s.connections != 22 {
		t.Fatalf("PLAINTEXT stats %+v; want 2 throttled for about 100ms, 22 connections", s)
	}
	// The other listener is not throttled by PLAINTEXT's rate.
	for range 30 {
		q.admit(ctx, "REPLICATION", a)
	}
	if st, _ := q.stats(); st["REPLICATION"].throttled != 0 {
		t.Fatalf("REPLICATION throttled %d times", st["REPLICATION"].throttled)
	}
}
