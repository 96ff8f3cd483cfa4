package server

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/kbroker/kbroker/config"
)

func TestSlotAvailable(t *testing.T) {
	for _, tc := range []struct {
		total, max int
		protected  bool
		want       bool
	}{
		{0, 10, false, true},
		{9, 10, false, true},
		{10, 10, false, false},
		{10, 10, true, true},
		{0, 0, false, false},
	} {
		if got := slotAvailable(tc.total, tc.max, tc.protected); got != tc.want {
			t.Errorf("slotAvailable(%d, %d, %v) = %v", tc.total, tc.max, tc.protected, got)
		}
	}
}

func TestConnQuotasPerIP(t *testing.T) {
	cfg := config.Default()
	cfg.MaxConnectionsPerIP = 2
	cfg.MaxConnectionsPerIPOverrides = map[string]int32{"10.0.0.9": 0, "10.0.0.8": 3}
	q := newConnQuotas(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	a := netip.MustParseAddr("10.0.0.1")
	for i := range 2 {
		if !q.add(a) {
			t.Fatalf("connection %d refused", i+1)
		}
	}
	if q.add(a) {
		t.Fatal("third from one address allowed")
	}
	q.release(a) // the refused one is closed
	q.release(a)
	if !q.add(a) {
		t.Fatal("refused after one closed")
	}
	if q.add(netip.MustParseAddr("10.0.0.9")) {
		t.Fatal("override 0 allowed a connection")
	}
	o := netip.MustParseAddr("10.0.0.8")
	for i := range 4 {
		if got := q.add(o); got != (i < 3) {
			t.Fatalf("override 3: connection %d allowed %v", i+1, got)
		}
	}
}

func TestConnQuotasWaitSlot(t *testing.T) {
	cfg := config.Default()
	cfg.MaxConnections = 1
	cfg.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "REPLICATION://127.0.0.1:0"}
	cfg.InterBrokerListenerName = "REPLICATION"
	q := newConnQuotas(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	a := netip.MustParseAddr("10.0.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !q.waitSlot(ctx, "PLAINTEXT") || !q.add(a) {
		t.Fatal("first connection")
	}
	if !q.waitSlot(ctx, "REPLICATION") {
		t.Fatal("the inter-broker listener waited")
	}
	got := make(chan bool, 1)
	go func() { got <- q.waitSlot(ctx, "PLAINTEXT") }()
	select {
	case <-got:
		t.Fatal("a second client connection did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	q.release(a)
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("waitSlot failed")
		}
	case <-ctx.Done():
		t.Fatal("waitSlot not woken by a release")
	}
}
