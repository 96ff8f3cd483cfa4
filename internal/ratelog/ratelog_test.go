package ratelog

import (
	"testing"
	"time"
)

func TestDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name string
		last time.Time
		now  time.Time
		want bool
	}{
		{"first line", time.Time{}, t0, true},
		{"just after", t0, t0.Add(time.Millisecond), false},
		{"just before the interval", t0, t0.Add(5*time.Second - 1), false},
		{"at the interval", t0, t0.Add(5 * time.Second), true},
		{"long after", t0, t0.Add(time.Hour), true},
		{"clock stepped back", t0, t0.Add(-time.Second), true},
	} {
		if got := due(tc.last, tc.now, 5*time.Second); got != tc.want {
			t.Errorf("%s: due = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestLimiterCountsSuppressed(t *testing.T) {
	l := New(5 * time.Second)
	t0 := time.Unix(1000, 0)
	if ok, n := l.Allow(t0); !ok || n != 0 {
		t.Fatalf("first: %v %d", ok, n)
	}
	for i := 1; i <= 1000; i++ { // a spinning loop: 1000 lines in 1 s
		if ok, _ := l.Allow(t0.Add(time.Duration(i) * time.Millisecond)); ok {
			t.Fatalf("line %d allowed inside the interval", i)
		}
	}
	if ok, n := l.Allow(t0.Add(5 * time.Second)); !ok || n != 1000 {
		t.Fatalf("after the interval: %v %d, want true 1000", ok, n)
	}
	if ok, n := l.Allow(t0.Add(10 * time.Second)); !ok || n != 0 {
		t.Fatalf("next interval: %v %d, want true 0", ok, n)
	}
}
