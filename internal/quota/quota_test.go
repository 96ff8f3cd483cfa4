package quota

import (
	"context"
	"math"
	"testing"
	"time"
)

// Kafka's ClientQuotaManagerTest.testQuotaViolation with the default
// sampling (11 windows of 1 s): a steady 400 B/s stays within a 500 B/s
// quota; a 2300 B spike half a second into the next window makes
// 6300 B over 10.5 s = 600 B/s, throttled (600-500)/500*10.5 s = 2100 ms;
// once the spike's window has rolled out, nothing is throttled.
func TestQuotaViolation(t *testing.T) {
	cfg := DefaultConfig
	var r Rate
	now := int64(1_000_000)
	for i := 0; i < 10; i++ {
		if th := r.RecordAndThrottle(cfg, 400, 500, now); th != 0 {
			t.Fatalf("second %d: throttled %d ms under the quota", i, th)
		}
		now += 1000
	}
	now += 500
	if th := r.RecordAndThrottle(cfg, 2300, 500, now); th != 2100 {
		t.Fatalf("spike throttled %d ms, Kafka's test says 2100", th)
	}
	now += 2100
	for i := 0; i < 10; i++ {
		r.RecordAndThrottle(cfg, 400, 500, now)
		now += 1000
	}
	if th := r.RecordAndThrottle(cfg, 0, 500, now); th != 0 {
		t.Fatalf("throttled %d ms after the spike rolled out", th)
	}
}

// The window a rate is measured over (Rate.windowSize): never less than
// Samples-1 whole windows, growing with the oldest kept window up to
// Samples+1 windows' start, and back to the minimum after a quiet spell
// (obsolete windows purged).
func TestWindowSize(t *testing.T) {
	cfg := DefaultConfig
	var r Rate
	if w := r.WindowSize(cfg, 0); w != 10_000 {
		t.Fatalf("empty rate: window %d ms", w)
	}
	r.Record(cfg, 1000, 0)
	for _, tc := range []struct{ at, window int64 }{
		{0, 10_000}, {500, 10_500}, {9_999, 10_999}, {10_000, 10_000}, {10_700, 10_700},
	} {
		if w := r.WindowSize(cfg, tc.at); w != tc.window {
			t.Errorf("at %d ms: window %d, want %d", tc.at, w, tc.window)
		}
	}
	// 1000 B at 0 over the minimum 10 s: 100 B/s.
	if got := r.Measure(cfg, 0); got != 100 {
		t.Errorf("rate %v, want 100", got)
	}
	// A value every 100 ms for 30 s at 1000 B/s reads as 1000 B/s.
	var steady Rate
	now := int64(0)
	for ; now < 30_000; now += 100 {
		steady.Record(cfg, 100, now)
	}
	if got := steady.Measure(cfg, now); math.Abs(got-1000) > 1000*0.1 {
		t.Errorf("steady rate %v, want about 1000", got)
	}
	if w := steady.WindowSize(cfg, now); w < 11_000 || w > 12_000 {
		t.Errorf("steady window %d ms, want between 11 and 12 windows", w)
	}
	// Quiet for the Samples windows: everything is purged.
	if got := steady.Measure(cfg, now+11_000); got != 0 {
		t.Errorf("rate after a quiet spell %v", got)
	}
	if w := steady.WindowSize(cfg, now+11_000); w != 10_000 {
		t.Errorf("window after a quiet spell %d", w)
	}
}

// ThrottleTime is (O-T)/T*W rounded half up, as Math.round.
func TestThrottleTime(t *testing.T) {
	for _, tc := range []struct {
		observed, bound float64
		window          int64
		want            int64
	}{
		{600, 500, 10_500, 2100},
		{2 << 20, 1 << 20, 11_000, 11_000},
		{1 << 20, 1 << 20, 11_000, 0},
		{1500, 1000, 1, 1},       // 0.5 ms rounds up
		{1400, 1000, 1, 0},       // 0.4 ms rounds down
		{150, 100, 10_000, 5000}, // 50% over: half a window
		{100.001, 100, 1, 0},
	} {
		if got := ThrottleTime(tc.observed, tc.bound, tc.window); got != tc.want {
			t.Errorf("ThrottleTime(%v, %v, %d) = %d, want %d", tc.observed, tc.bound, tc.window, got, tc.want)
		}
	}
	if got := MaxValueInWindow(DefaultConfig, 1<<20); got != 10<<20 {
		t.Errorf("MaxValueInWindow = %v", got)
	}
	if got := MaxValueInWindow(Config{Samples: 3, Window: 2 * time.Second}, 100); got != 400 {
		t.Errorf("MaxValueInWindow with 3 windows of 2 s = %v", got)
	}
}

// A client at twice its quota converges: with the throttle honoured (no
// request until it ends), the rate over time comes out at the quota.
func TestThrottledClientConverges(t *testing.T) {
	cfg := DefaultConfig
	const bound = 1 << 20
	const batch = 64 << 10
	var r Rate
	now := int64(0)
	var sent float64
	var throttles int
	start := int64(-1)
	for now < 60_000 {
		th := r.RecordAndThrottle(cfg, batch, bound, now)
		if now >= 20_000 {
			if start < 0 {
				start = now
			}
			sent += batch
		}
		if th > 0 {
			throttles++
		}
		now += 10 + th // the client sends every 10 ms unless throttled
	}
	rate := sent / (float64(now-start) / 1000)
	if math.Abs(rate-bound)/bound > 0.05 || throttles == 0 {
		t.Fatalf("converged to %.0f B/s (%d throttles), want %d within 5%%", rate, throttles, bound)
	}
}

// Kafka's ClientQuotaManagerTest.testQuotaConfigPrecedence, on Resolve
// and one Rate per resolved Entity, every value recorded at one instant
// (MockTime does not move in that test), Samples times the value, so a
// value above the bound / 1.1 is throttled.
func TestQuotaConfigPrecedence(t *testing.T) {
	cfg := DefaultConfig
	quotas := map[Entity]float64{
		{Default, ""}:        1000,
		{"", Default}:        2000,
		{Default, Default}:   3000,
		{"userA", ""}:        4000,
		{"userA", "client1"}: 5000,
		{"userB", ""}:        6000,
		{"userB", "client1"}: 7000,
		{"userB", Default}:   8000,
		{"userC", ""}:        10000,
		{"", "client1"}:      9000,
	}
	lookup := func(u, c string) (float64, bool) {
		b, ok := quotas[Entity{u, c}]
		return b, ok
	}
	rates := map[Entity]*Rate{}
	check := func(user, client string, wantBound float64, value float64, wantThrottle bool) {
		t.Helper()
		e, bound, ok := Resolve(user, client, lookup)
		if !ok || bound != wantBound {
			t.Fatalf("%s/%s: bound %v (%v), want %v", user, client, bound, ok, wantBound)
		}
		if got, want := MaxValueInWindow(cfg, bound), 10*wantBound; got != want {
			t.Fatalf("%s/%s: max value in window %v, want %v", user, client, got, want)
		}
		r := rates[e]
		if r == nil {
			r = &Rate{}
			rates[e] = r
		}
		th := r.RecordAndThrottle(cfg, value*float64(cfg.Samples), bound, 0)
		if (th > 0) != wantThrottle {
			t.Fatalf("%s/%s (rate of %+v): throttle %d ms, want throttled %v", user, client, e, th, wantThrottle)
		}
	}
	check("userA", "client1", 5000, 4500, false) // <user, client> over <user>
	check("userA", "client2", 4000, 4500, true)  // <user> over <client> and defaults
	check("userA", "client3", 4000, 0, true)     // <user> shared across the user's clients
	check("userA", "client1", 5000, 0, false)    // <user, client> is its own

	check("userB", "client1", 7000, 8000, true)
	check("userB", "client2", 8000, 7000, false) // <user, default client>: each client its own
	check("userB", "client3", 8000, 7000, false)

	check("userD", "client1", 3000, 3500, true) // <default user, default client>
	check("userD", "client2", 3000, 2500, false)
	check("userE", "client1", 3000, 2500, false)

	delete(quotas, Entity{Default, Default})
	check("userD", "client1", 1000, 0, false) // new rate: its tags changed
	check("userE", "client4", 1000, 1500, true)
	check("userF", "client4", 1000, 800, false) // <default user> shared across a user's clients
	check("userF", "client5", 1000, 800, true)

	delete(quotas, Entity{Default, ""})
	check("userF", "client4", 2000, 0, false) // <default client>: shared by a client id's users
	check("userF", "client5", 2000, 0, false)
	check("userF", "client5", 2000, 2500, true)
	check("userG", "client5", 2000, 0, true)

	quotas[Entity{"userA", ""}] = 8000
	quotas[Entity{"userA", "client1"}] = 10000
	check("userA", "client2", 8000, 0, false)
	check("userA", "client2", 8000, 4500, true) // the new and the earlier values
	check("userA", "client1", 10000, 0, false)
	check("userA", "client1", 10000, 6000, true)
	delete(quotas, Entity{"userA", "client1"})
	check("userA", "client6", 8000, 0, true) // the shared user rate
	quotas[Entity{"userA", "client6"}] = 11000
	check("userA", "client6", 11000, 8500, false)
	quotas[Entity{"userA", Default}] = 12000
	delete(quotas, Entity{"userA", "client6"})
	check("userA", "client6", 12000, 4000, true)
}

// The precedence as a table: which configured entity wins, and which
// rate (Entity) the request is counted in.
func TestResolve(t *testing.T) {
	type cfg = map[Entity]float64
	for _, tc := range []struct {
		name         string
		quotas       cfg
		user, client string
		rate         Entity
		bound        float64 // 0: none applies
	}{
		{"nothing configured", cfg{}, "alice", "app", Entity{"", "app"}, 0},
		{"user+client", cfg{{"alice", "app"}: 1, {"alice", Default}: 2, {"alice", ""}: 3}, "alice", "app", Entity{"alice", "app"}, 1},
		{"user+default client", cfg{{"alice", Default}: 2, {"alice", ""}: 3, {Default, "app"}: 4}, "alice", "app", Entity{"alice", "app"}, 2},
		{"user", cfg{{"alice", ""}: 3, {Default, "app"}: 4, {Default, Default}: 5}, "alice", "app", Entity{"alice", ""}, 3},
		{"default user+client", cfg{{Default, "app"}: 4, {Default, Default}: 5, {Default, ""}: 6}, "alice", "app", Entity{"alice", "app"}, 4},
		{"default user+default client", cfg{{Default, Default}: 5, {Default, ""}: 6, {"", "app"}: 7}, "alice", "app", Entity{"alice", "app"}, 5},
		{"default user", cfg{{Default, ""}: 6, {"", "app"}: 7, {"", Default}: 8}, "alice", "app", Entity{"alice", ""}, 6},
		{"client", cfg{{"", "app"}: 7, {"", Default}: 8, {"bob", ""}: 1}, "alice", "app", Entity{"", "app"}, 7},
		{"default client", cfg{{"", Default}: 8, {"", "other"}: 1}, "alice", "app", Entity{"", "app"}, 8},
		{"another user's quota does not apply", cfg{{"bob", ""}: 1, {"bob", "app"}: 1}, "alice", "app", Entity{"", "app"}, 0},
		{"unauthenticated is user ANONYMOUS", cfg{{Default, ""}: 6}, "ANONYMOUS", "app", Entity{"ANONYMOUS", ""}, 6},
		{"an empty client id never matches a client id quota", cfg{{Default, ""}: 6, {"", Default}: 8}, "alice", "", Entity{"alice", ""}, 6},
		{"an empty client id under a client default: no quota", cfg{{"", Default}: 8}, "alice", "", Entity{"", ""}, 0},
		{"an empty client id under user+default client: looked up as the user", cfg{{"alice", Default}: 2, {"alice", ""}: 3}, "alice", "", Entity{"alice", ""}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, bound, ok := Resolve(tc.user, tc.client, func(u, c string) (float64, bool) {
				b, ok := tc.quotas[Entity{u, c}]
				return b, ok
			})
			if e != tc.rate || ok != (tc.bound != 0) || bound != tc.bound {
				t.Fatalf("Resolve = %+v, %v, %v; want %+v, %v", e, bound, ok, tc.rate, tc.bound)
			}
		})
	}
}

// Waits add up on the request's clock; without one, Parked does nothing.
func TestParkClock(t *testing.T) {
	Parked(context.Background(), time.Now().Add(-time.Second)) // no clock: no effect, no panic
	ctx, clock := WithParkClock(context.Background())
	Parked(ctx, time.Now().Add(-30*time.Millisecond))
	Parked(ctx, time.Now().Add(-20*time.Millisecond))
	if got := clock.Total(); got < 50*time.Millisecond || got > time.Second {
		t.Fatalf("parked %v, want about 50ms", got)
	}
	var none *ParkClock
	if none.Total() != 0 {
		t.Fatal("a nil clock parked")
	}
}
