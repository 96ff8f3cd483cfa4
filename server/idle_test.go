package server

import (
	"testing"
	"time"
)

func TestIdleExpired(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name     string
		idleFor  time.Duration
		inFlight int32
		maxIdle  time.Duration
		want     bool
	}{
		{"fresh", 0, 0, 2 * time.Second, false},
		{"at the limit", 2 * time.Second, 0, 2 * time.Second, false},
		{"past the limit", 2*time.Second + 1, 0, 2 * time.Second, true},
		{"long-poll in flight", time.Hour, 1, 2 * time.Second, false},
		{"disabled", time.Hour, 0, -time.Millisecond, false},
		{"zero closes any idle", time.Millisecond, 0, 0, true},
	} {
		if got := idleExpired(t0, t0.Add(tc.idleFor), tc.inFlight, tc.maxIdle); got != tc.want {
			t.Errorf("%s: idleExpired = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIdleCheckEvery(t *testing.T) {
	for _, tc := range []struct{ maxIdle, want time.Duration }{
		{0, 50 * time.Millisecond},
		{2 * time.Second, 200 * time.Millisecond},
		{10 * time.Minute, time.Second},
	} {
		if got := idleCheckEvery(tc.maxIdle); got != tc.want {
			t.Errorf("idleCheckEvery(%v) = %v, want %v", tc.maxIdle, got, tc.want)
		}
	}
}
