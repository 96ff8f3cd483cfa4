package verify

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParseFaultKinds: kverify --faults takes known kinds, once each;
// empty is every kind; an unknown kind is refused by name.
func TestParseFaultKinds(t *testing.T) {
	for _, tc := range []struct {
		list    string
		want    []string
		wantErr string
	}{
		{list: "", want: AllFaults},
		{list: "kill-leader", want: []string{KillLeader}},
		{list: "isolate-leader-kill, pause-long,isolate-leader-kill", want: []string{IsolateLeaderKill, PauseLong}},
		{list: "kill-leader,kill-everything", wantErr: `unknown fault kind "kill-everything"`},
		{list: ",", wantErr: `unknown fault kind ""`},
	} {
		got, err := ParseFaultKinds(tc.list)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err %v, want %q", tc.list, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v %v, want %v", tc.list, got, err, tc.want)
		}
	}
}

// TestSchedulesDrawOnlyTheKindsAsked: both schedules keep to the kinds
// given, and the same seed gives the same long schedule.
func TestSchedulesDrawOnlyTheKindsAsked(t *testing.T) {
	timing := Timing{Lag: 1500 * time.Millisecond, Session: 3 * time.Second}
	kinds := []string{IsolateLeaderKill, PauseLong}
	long := LongSchedule(7, timing, 3, 2*time.Minute, kinds)
	if len(long) < 3 {
		t.Fatalf("2 minutes of faults: %d", len(long))
	}
	seen := map[string]bool{}
	for _, f := range long {
		if !slices.Contains(kinds, f.Kind) {
			t.Fatalf("long schedule drew %s, not asked for", f.Kind)
		}
		seen[f.Kind] = true
	}
	if len(seen) != 2 {
		t.Errorf("long schedule of %d faults drew only %v", len(long), seen)
	}
	if again := LongSchedule(7, timing, 3, 2*time.Minute, kinds); !slices.Equal(again, long) {
		t.Error("the same seed drew another schedule")
	}
	short := ShortSchedule(7, timing, 3, kinds)
	var got []string
	for _, f := range short {
		got = append(got, f.Kind)
	}
	slices.Sort(got)
	if want := []string{IsolateLeaderKill, PauseLong}; !slices.Equal(got, want) {
		t.Fatalf("short schedule %v, want each of %v once", got, want)
	}
}

// Overlapping faults (RunStreams) claim the brokers they act on: a fault
// whose broker another holds is skipped (and recorded so); a cluster-wide
// fault waits until every claim is released and holds all brokers, and
// no fault claims one while it waits.
func TestNemesisClaims(t *testing.T) {
	b1, b2, b3 := &Broker{ID: 1}, &Broker{ID: 2}, &Broker{ID: 3}
	n := &Nemesis{C: &Cluster{Brokers: []*Broker{b1, b2, b3}}, Rec: NewRecorder(time.Now(), nil)}
	kill := Fault{Kind: KillLeader}
	if !n.claim(kill, b1) {
		t.Fatal("first claim of b1 refused")
	}
	if n.claim(Fault{Kind: PauseLong}, b1) {
		t.Fatal("b1 claimed twice")
	}
	if !n.claim(Fault{Kind: PartitionClients}, b2) {
		t.Fatal("b2 refused while only b1 is held")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan bool, 1)
	go func() { got <- n.claimAll(ctx) }()
	// While the cluster-wide fault waits, a free broker is refused too.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n.claimMu.Lock()
		waiting := n.exclusiveWaiting
		n.claimMu.Unlock()
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("claimAll never waited")
		}
		runtime.Gosched()
	}
	if n.claim(Fault{Kind: PauseShort}, b3) {
		t.Fatal("b3 claimed while a cluster-wide fault waits")
	}
	n.release(b1)
	n.release(b2)
	if !<-got {
		t.Fatal("claimAll failed once every broker was free")
	}
	if n.claim(kill, b3) {
		t.Fatal("b3 claimed while a cluster-wide fault holds every broker")
	}
	n.release()
	if !n.claim(kill, b3) {
		t.Fatal("b3 refused after the cluster-wide fault ended")
	}
	skips := 0
	for _, e := range n.Rec.Events() {
		if e.Kind == KindFault && e.Phase == "skip" {
			skips++
		}
	}
	if skips != 3 {
		t.Fatalf("%d skips recorded, want 3", skips)
	}
}
