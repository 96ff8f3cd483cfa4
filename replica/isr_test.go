package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestFollowerCaughtUpRules(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var f followerState
	f.updateFetch(10, 10, t0) // fetched from the leader's end: caught up now
	if !f.lastCaughtUp.Equal(t0) {
		t.Fatalf("caught up at %v", f.lastCaughtUp)
	}
	// The leader appended; the follower fetches what the leader had at
	// the previous fetch: it was caught up at that previous fetch time.
	f.updateFetch(10, 20, t0.Add(time.Second))
	if !f.lastCaughtUp.Equal(t0) {
		t.Fatalf("not yet at the new end: caught up stays %v", f.lastCaughtUp)
	}
	f.updateFetch(20, 30, t0.Add(2*time.Second))
	if !f.lastCaughtUp.Equal(t0.Add(time.Second)) {
		t.Fatalf("reached the end of the previous fetch: caught up at %v", f.lastCaughtUp)
	}
	// Falling behind: no progress past the previous end.
	f.updateFetch(25, 40, t0.Add(3*time.Second))
	if !f.lastCaughtUp.Equal(t0.Add(time.Second)) {
		t.Fatalf("behind: caught up must not move, got %v", f.lastCaughtUp)
	}
}

func TestHighWatermarkIsMinimumOfISR(t *testing.T) {
	fs := map[int32]*followerState{2: {logEndOffset: 7}, 3: {logEndOffset: 4}}
	cases := []struct {
		name    string
		isr     []int32
		current int64
		want    int64
	}{
		{"leader alone", []int32{1}, 0, 10},
		{"two followers", []int32{1, 2, 3}, 0, 4},
		{"slow follower left the ISR", []int32{1, 2}, 4, 7},
		{"never decreases", []int32{1, 3}, 6, 6},
		{"unknown follower holds it", []int32{1, 9}, 5, 5},
	}
	for _, c := range cases {
		if got := highWatermarkFor(1, 10, c.current, c.isr, fs); got != c.want {
			t.Errorf("%s: HW %d, want %d", c.name, got, c.want)
		}
	}
}

func TestOutOfSyncByTimeNotCount(t *testing.T) {
	now := time.Unix(2000, 0)
	lag := 10 * time.Second
	fs := map[int32]*followerState{
		2: {lastCaughtUp: now.Add(-5 * time.Second), logEndOffset: 0},    // far behind in count, but recently caught up
		3: {lastCaughtUp: now.Add(-11 * time.Second), logEndOffset: 99},  // close in count, but not caught up for 11 s
		5: {lastCaughtUp: now.Add(-60 * time.Second), logEndOffset: 100}, // silent for a minute, but at the leader's end
	}
	got := outOfSync(1, []int32{1, 2, 3, 4, 5}, fs, 100, now, lag)
	if !slices.Equal(got, []int32{3, 4}) {
		t.Fatalf("out of sync %v, want [3 4] (4: never fetched; 5: has everything the leader has)", got)
	}
	// Once the leader appends, the silent follower is behind and its last
	// caught-up time counts.
	if got := outOfSync(1, []int32{1, 5}, fs, 101, now, lag); !slices.Equal(got, []int32{5}) {
		t.Fatalf("after an append: out of sync %v, want [5]", got)
	}
}

func TestCanJoinISR(t *testing.T) {
	now := time.Unix(1000, 0)
	f := &followerState{logEndOffset: 50}
	if !canJoinISR([]int32{1}, 2, f, 50, 40, now) {
		t.Fatal("caught up to HW and epoch start: may join")
	}
	if canJoinISR([]int32{1}, 2, f, 51, 40, now) || canJoinISR([]int32{1}, 2, f, 50, 60, now) || canJoinISR([]int32{1, 2}, 2, f, 0, 0, now) {
		t.Fatal("below HW, below epoch start, or already in: may not join")
	}
	// Refused as ineligible by the controller: not proposed again until
	// the pause ends.
	f.ineligibleUntil = now.Add(ineligibleBackoff)
	if canJoinISR([]int32{1}, 2, f, 50, 40, now.Add(ineligibleBackoff-time.Millisecond)) {
		t.Fatal("proposed again while the controller's refusal holds")
	}
	if !canJoinISR([]int32{1}, 2, f, 50, 40, now.Add(ineligibleBackoff)) {
		t.Fatal("not proposed once the pause ended")
	}
}

// Retries start fast and double up to the cap; a success starts over.
func TestRetryBackoff(t *testing.T) {
	var b retryBackoff
	var got []time.Duration
	for i := 0; i < 7; i++ {
		got = append(got, b.next())
	}
	want := []time.Duration{10, 20, 40, 80, 160, 200, 200}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("backoffs %v, want %v ms", got, want)
		}
	}
	b.reset()
	if d := b.next(); d != minFollowerBackoff {
		t.Fatalf("after reset %v, want %v", d, minFollowerBackoff)
	}
}

// refusingISRWriter refuses every ISR change as INELIGIBLE_REPLICA, as the
// controller does for a broker that is not live to it yet, and counts them.
type refusingISRWriter struct {
	mu    sync.Mutex
	calls int
}

func (w *refusingISRWriter) AlterISR(context.Context, TopicPartition, [16]byte, int32, int32, []int32) ([]int32, int32, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	return nil, 0, fmt.Errorf("t-0: %w: replica 2 may not join the ISR", kerr.IneligibleReplica)
}

func (w *refusingISRWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls
}

// A caught-up follower the controller refused as ineligible is proposed
// again only after ineligibleBackoff, not on its next fetch: without the
// pause a leader sent thousands of refused AlterPartitions a second while
// a restarted broker was not yet live to the controller.
func TestIneligibleFollowerNotProposedOnEveryFetch(t *testing.T) {
	w := &refusingISRWriter{}
	m, err := Open(Config{LogDir: t.TempDir(), BrokerID: 1, ISRWriter: w}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p, err := m.MakeLeader(TopicPartition{"t", 0}, [16]byte{1}, 0, 0, []int32{1}, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(now time.Time) {
		t.Helper()
		if _, err := p.ReadForFollower(2, 0, 1<<20, 0, now); err != nil {
			t.Fatal(err)
		}
	}
	// settled waits (bounded) until no ISR change is in flight.
	settled := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for p.isrChangePending() {
			if time.Now().After(deadline) {
				t.Fatal("an ISR change still in flight after 10s")
			}
			time.Sleep(time.Millisecond)
		}
	}
	now := time.Now()
	fetch(now)
	settled()
	if n := w.count(); n != 1 {
		t.Fatalf("%d ISR changes sent by the first fetch, want 1", n)
	}
	for i := 1; i <= 20; i++ {
		fetch(now.Add(time.Duration(i) * time.Millisecond))
		settled()
	}
	if n := w.count(); n != 1 {
		t.Fatalf("%d ISR changes sent within the pause, want 1", n)
	}
	fetch(time.Now().Add(ineligibleBackoff))
	settled()
	if n := w.count(); n != 2 {
		t.Fatalf("%d ISR changes sent after the pause, want 2", n)
	}
}

func (p *Partition) isrChangePending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.isrChangeInFlight
}
