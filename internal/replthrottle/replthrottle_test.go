package replthrottle

import (
	"math"
	"testing"
	"time"
)

func TestListed(t *testing.T) {
	for _, tc := range []struct {
		value     string
		partition int32
		broker    int32
		want      bool
	}{
		{"", 0, 1, false},
		{"*", 7, 3, true},
		{"0:1,1:2", 0, 1, true},
		{"0:1,1:2", 1, 2, true},
		{"0:1,1:2", 1, 1, false},
		{" 0 : 1 , 2:3", 2, 3, true},
		{"0:1", 10, 1, false},
	} {
		if got := Listed(tc.value, tc.partition, tc.broker); got != tc.want {
			t.Errorf("Listed(%q, %d, %d) = %v", tc.value, tc.partition, tc.broker, got)
		}
	}
}

func TestQuota(t *testing.T) {
	var q Quota
	now := time.Unix(1000, 0)
	q.Record(100<<20, now)
	if q.Exceeded(now) {
		t.Fatal("exceeded without a bound")
	}
	q.SetBound(math.MaxInt64)
	if q.Exceeded(now) {
		t.Fatal("exceeded with Kafka's default bound (unlimited)")
	}
	// 1 MiB/s: the window is at least 10 s, so 10 MiB at once is at the
	// bound, a little more is over it, and it drains as time passes.
	q = Quota{}
	q.SetBound(1 << 20)
	q.Record(10<<20, now)
	if q.Exceeded(now) {
		t.Fatal("10 MiB over a 10 s window is not above 1 MiB/s")
	}
	q.Record(1<<20, now.Add(100*time.Millisecond))
	if !q.Exceeded(now.Add(200 * time.Millisecond)) {
		t.Fatal("11 MiB within 10 s is above 1 MiB/s")
	}
	if q.Exceeded(now.Add(12 * time.Second)) {
		t.Fatal("still exceeded after the windows passed")
	}
}
