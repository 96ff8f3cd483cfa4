package server

import (
	"testing"
	"time"
)

func TestAcceptBackoff(t *testing.T) {
	var a acceptBackoff
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	for i, w := range want {
		if got := a.failed(); got != w*time.Millisecond {
			t.Fatalf("failure %d: wait %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	a.succeeded()
	if got := a.failed(); got != acceptBackoffMin {
		t.Fatalf("after a success: wait %v, want %v", got, acceptBackoffMin)
	}
	// Out of descriptors for a minute: at most ~60 accept attempts after
	// the first second, not millions.
	a.succeeded()
	var total time.Duration
	attempts := 0
	for total < time.Minute {
		total += a.failed()
		attempts++
	}
	if attempts > 70 {
		t.Fatalf("%d accept attempts in a minute", attempts)
	}
}
