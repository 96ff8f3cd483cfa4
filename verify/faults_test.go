package verify

import (
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
