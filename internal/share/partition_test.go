package share

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func cfg() Config {
	return Config{LockDuration: 30 * time.Second, DeliveryLimit: 3, MaxInFlight: 100}
}

// window renders the in-flight records as "offset:STATE/deliveries[@owner]".
func window(p *Partition) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "spso=%d speo=%d", p.StartOffset(), p.EndOffset())
	for off := p.StartOffset(); off < p.EndOffset(); off++ {
		st, d := p.State(off)
		fmt.Fprintf(&sb, " %d:%s/%d", off, st, d)
		if o := p.Owner(off); o != "" {
			fmt.Fprintf(&sb, "@%s", o)
		}
	}
	return sb.String()
}

func ranges(rs []Range) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("[%d-%d]x%d", r.First, r.Last, r.Deliveries))
	}
	return strings.Join(parts, " ")
}

// TestTranscripts runs each scenario's steps in order and checks the state
// after every step: acquisition, lock timeout, delivery count, archive and
// acknowledgement transitions.
func TestTranscripts(t *testing.T) {
	type step struct {
		do   func(p *Partition) string // returns what the step answered
		want string                    // the answer
		win  string                    // the window after
	}
	acq := func(member string, max int, at time.Duration, bs ...Batch) func(*Partition) string {
		return func(p *Partition) string {
			p.ExpireLocks(t0.Add(at))
			return ranges(p.Acquire(member, max, false, bs, t0.Add(at)))
		}
	}
	ack := func(member string, first, last int64, at time.Duration, types ...AckType) func(*Partition) string {
		return func(p *Partition) string {
			if err := p.Acknowledge(member, first, last, types, t0.Add(at)); err != nil {
				switch {
				case errors.Is(err, ErrInvalidRecordState):
					return "INVALID_RECORD_STATE"
				case errors.Is(err, ErrInvalidRequest):
					return "INVALID_REQUEST"
				}
				return err.Error()
			}
			return "ok"
		}
	}
	expire := func(at time.Duration) func(*Partition) string {
		return func(p *Partition) string { return fmt.Sprint(p.ExpireLocks(t0.Add(at))) }
	}
	b := func(first, last int64) Batch { return Batch{First: first, Last: last} }
	skip := func(first, last int64) Batch { return Batch{First: first, Last: last, Skip: true} }
	for _, tc := range []struct {
		name  string
		start int64
		steps []step
	}{
		{"two members get distinct records", 0, []step{
			{acq("a", 2, 0, b(0, 1), b(2, 3)), "[0-1]x1", "spso=0 speo=2 0:ACQUIRED/1@a 1:ACQUIRED/1@a"},
			{acq("b", 10, 0, b(0, 1), b(2, 3)), "[2-3]x1", "spso=0 speo=4 0:ACQUIRED/1@a 1:ACQUIRED/1@a 2:ACQUIRED/1@b 3:ACQUIRED/1@b"},
			{acq("c", 10, 0, b(0, 1), b(2, 3)), "", "spso=0 speo=4 0:ACQUIRED/1@a 1:ACQUIRED/1@a 2:ACQUIRED/1@b 3:ACQUIRED/1@b"},
			{ack("b", 2, 3, 0, AckAccept), "ok", "spso=0 speo=4 0:ACQUIRED/1@a 1:ACQUIRED/1@a 2:ACKNOWLEDGED/1 3:ACKNOWLEDGED/1"},
			{ack("a", 0, 1, 0, AckAccept), "ok", "spso=4 speo=4"},
		}},
		{"whole batches past max records", 10, []step{
			{acq("a", 1, 0, b(10, 14)), "[10-14]x1", "spso=10 speo=15 10:ACQUIRED/1@a 11:ACQUIRED/1@a 12:ACQUIRED/1@a 13:ACQUIRED/1@a 14:ACQUIRED/1@a"},
		}},
		{"record limit splits a batch", 10, []step{
			{func(p *Partition) string { return ranges(p.Acquire("a", 2, true, []Batch{{First: 10, Last: 14}}, t0)) }, "[10-11]x1", "spso=10 speo=12 10:ACQUIRED/1@a 11:ACQUIRED/1@a"},
			{func(p *Partition) string { return ranges(p.Acquire("b", 2, true, []Batch{{First: 10, Last: 14}}, t0)) }, "[12-13]x1", "spso=10 speo=14 10:ACQUIRED/1@a 11:ACQUIRED/1@a 12:ACQUIRED/1@b 13:ACQUIRED/1@b"},
		}},
		{"batch straddling the start", 5, []step{
			{acq("a", 10, 0, b(3, 7)), "[5-7]x1", "spso=5 speo=8 5:ACQUIRED/1@a 6:ACQUIRED/1@a 7:ACQUIRED/1@a"},
		}},
		{"hole in the log archived", 0, []step{
			{acq("a", 10, 0, b(0, 0), b(3, 3)), "[0-0]x1 [3-3]x1", "spso=0 speo=4 0:ACQUIRED/1@a 1:ARCHIVED/0 2:ARCHIVED/0 3:ACQUIRED/1@a"},
			{ack("a", 0, 0, 0, AckAccept), "ok", "spso=3 speo=4 3:ACQUIRED/1@a"},
		}},
		// Control batches and aborted transactions' batches (Skip) are
		// archived where they stand, so the SPSO moves past them even
		// when nothing follows them yet.
		{"skipped batches archived", 0, []step{
			{acq("a", 10, 0, b(0, 1), skip(2, 3), b(4, 4)), "[0-1]x1 [4-4]x1", "spso=0 speo=5 0:ACQUIRED/1@a 1:ACQUIRED/1@a 2:ARCHIVED/0 3:ARCHIVED/0 4:ACQUIRED/1@a"},
			{ack("a", 0, 1, 0, AckAccept), "ok", "spso=4 speo=5 4:ACQUIRED/1@a"},
		}},
		{"trailing skipped batch moves the start", 0, []step{
			{acq("a", 10, 0, b(0, 0), skip(3, 4)), "[0-0]x1", "spso=0 speo=5 0:ACQUIRED/1@a 1:ARCHIVED/0 2:ARCHIVED/0 3:ARCHIVED/0 4:ARCHIVED/0"},
			{ack("a", 0, 0, 0, AckAccept), "ok", "spso=5 speo=5"},
			{acq("a", 10, 0, skip(5, 7)), "", "spso=8 speo=8"},
		}},
		{"skipped batch archives available records, not acquired ones", 0, []step{
			{acq("a", 10, 0, b(0, 1)), "[0-1]x1", "spso=0 speo=2 0:ACQUIRED/1@a 1:ACQUIRED/1@a"},
			{ack("a", 0, 0, 0, AckRelease), "ok", "spso=0 speo=2 0:AVAILABLE/1 1:ACQUIRED/1@a"},
			{acq("b", 10, 0, skip(0, 1)), "", "spso=1 speo=2 1:ACQUIRED/1@a"},
		}},
		{"lock timeout redelivers to another member", 0, []step{
			{acq("a", 10, 0, b(0, 2)), "[0-2]x1", "spso=0 speo=3 0:ACQUIRED/1@a 1:ACQUIRED/1@a 2:ACQUIRED/1@a"},
			{acq("b", 10, 29*time.Second, b(0, 2)), "", "spso=0 speo=3 0:ACQUIRED/1@a 1:ACQUIRED/1@a 2:ACQUIRED/1@a"},
			{acq("b", 10, 30*time.Second, b(0, 2)), "[0-2]x2", "spso=0 speo=3 0:ACQUIRED/2@b 1:ACQUIRED/2@b 2:ACQUIRED/2@b"},
			// The old holder's late acknowledgement is refused, state unchanged.
			{ack("a", 0, 2, 31*time.Second, AckAccept), "INVALID_RECORD_STATE", "spso=0 speo=3 0:ACQUIRED/2@b 1:ACQUIRED/2@b 2:ACQUIRED/2@b"},
		}},
		{"release up to the delivery limit archives", 0, []step{
			{acq("a", 10, 0, b(0, 0)), "[0-0]x1", "spso=0 speo=1 0:ACQUIRED/1@a"},
			{ack("a", 0, 0, 0, AckRelease), "ok", "spso=0 speo=1 0:AVAILABLE/1"},
			{acq("a", 10, 0, b(0, 0)), "[0-0]x2", "spso=0 speo=1 0:ACQUIRED/2@a"},
			{ack("a", 0, 0, 0, AckRelease), "ok", "spso=0 speo=1 0:AVAILABLE/2"},
			{acq("b", 10, 0, b(0, 0), b(1, 1)), "[0-0]x3 [1-1]x1", "spso=0 speo=2 0:ACQUIRED/3@b 1:ACQUIRED/1@b"},
			{ack("b", 0, 0, 0, AckRelease), "ok", "spso=1 speo=2 1:ACQUIRED/1@b"},
			{acq("c", 10, 0, b(0, 0), b(1, 1)), "", "spso=1 speo=2 1:ACQUIRED/1@b"},
		}},
		{"lock expiry at the delivery limit archives", 0, []step{
			{acq("a", 10, 0, b(0, 0)), "[0-0]x1", "spso=0 speo=1 0:ACQUIRED/1@a"},
			{acq("a", 10, 30*time.Second, b(0, 0)), "[0-0]x2", "spso=0 speo=1 0:ACQUIRED/2@a"},
			{acq("a", 10, 60*time.Second, b(0, 0)), "[0-0]x3", "spso=0 speo=1 0:ACQUIRED/3@a"},
			{expire(90 * time.Second), "true", "spso=1 speo=1"},
		}},
		{"reject archives at once", 0, []step{
			{acq("a", 10, 0, b(0, 1)), "[0-1]x1", "spso=0 speo=2 0:ACQUIRED/1@a 1:ACQUIRED/1@a"},
			{ack("a", 0, 1, 0, AckReject, AckAccept), "ok", "spso=2 speo=2"},
		}},
		{"per-offset types and gaps", 0, []step{
			{acq("a", 10, 0, b(0, 3)), "[0-3]x1", "spso=0 speo=4 0:ACQUIRED/1@a 1:ACQUIRED/1@a 2:ACQUIRED/1@a 3:ACQUIRED/1@a"},
			{ack("a", 0, 3, 0, AckAccept, AckGap, AckRelease, AckAccept), "ok", "spso=2 speo=4 2:AVAILABLE/1 3:ACKNOWLEDGED/1"},
			{acq("b", 10, 0, b(0, 3)), "[2-2]x2", "spso=2 speo=4 2:ACQUIRED/2@b 3:ACKNOWLEDGED/1"},
		}},
		{"renew extends the lock", 0, []step{
			{acq("a", 10, 0, b(0, 0)), "[0-0]x1", "spso=0 speo=1 0:ACQUIRED/1@a"},
			{ack("a", 0, 0, 20*time.Second, AckRenew), "ok", "spso=0 speo=1 0:ACQUIRED/1@a"},
			{expire(40 * time.Second), "false", "spso=0 speo=1 0:ACQUIRED/1@a"},
			{expire(50 * time.Second), "true", "spso=0 speo=1 0:AVAILABLE/1"},
		}},
		{"bad acknowledgements change nothing", 0, []step{
			{acq("a", 10, 0, b(0, 2)), "[0-2]x1", "spso=0 speo=3 0:ACQUIRED/1@a 1:ACQUIRED/1@a 2:ACQUIRED/1@a"},
			{ack("b", 0, 0, 0, AckAccept), "INVALID_RECORD_STATE", "spso=0 speo=3 0:ACQUIRED/1@a 1:ACQUIRED/1@a 2:ACQUIRED/1@a"},
			{ack("a", 1, 5, 0, AckAccept), "INVALID_RECORD_STATE", "spso=0 speo=3 0:ACQUIRED/1@a 1:ACQUIRED/1@a 2:ACQUIRED/1@a"},
			{ack("a", 2, 1, 0, AckAccept), "INVALID_REQUEST", "spso=0 speo=3 0:ACQUIRED/1@a 1:ACQUIRED/1@a 2:ACQUIRED/1@a"},
			{ack("a", 0, 2, 0, AckAccept, AckAccept), "INVALID_REQUEST", "spso=0 speo=3 0:ACQUIRED/1@a 1:ACQUIRED/1@a 2:ACQUIRED/1@a"},
			{ack("a", 0, 0, 0, 9), "INVALID_REQUEST", "spso=0 speo=3 0:ACQUIRED/1@a 1:ACQUIRED/1@a 2:ACQUIRED/1@a"},
			{ack("a", 0, 0, 0, AckAccept), "ok", "spso=1 speo=3 1:ACQUIRED/1@a 2:ACQUIRED/1@a"},
			{ack("a", 0, 0, 0, AckAccept), "INVALID_RECORD_STATE", "spso=1 speo=3 1:ACQUIRED/1@a 2:ACQUIRED/1@a"},
		}},
		{"max in-flight bounds new acquisitions", 0, []step{
			{func(p *Partition) string {
				p.SetConfig(Config{LockDuration: time.Second, DeliveryLimit: 3, MaxInFlight: 2})
				return ""
			}, "", "spso=0 speo=0"},
			{acq("a", 10, 0, b(0, 0), b(1, 1), b(2, 2)), "[0-1]x1", "spso=0 speo=2 0:ACQUIRED/1@a 1:ACQUIRED/1@a"},
			{ack("a", 0, 0, 0, AckAccept), "ok", "spso=1 speo=2 1:ACQUIRED/1@a"},
			{acq("b", 10, 0, b(0, 0), b(1, 1), b(2, 2)), "[2-2]x1", "spso=1 speo=3 1:ACQUIRED/1@a 2:ACQUIRED/1@b"},
		}},
		{"member release on session close", 0, []step{
			{acq("a", 1, 0, b(0, 0)), "[0-0]x1", "spso=0 speo=1 0:ACQUIRED/1@a"},
			{acq("b", 1, 0, b(0, 0), b(1, 1)), "[1-1]x1", "spso=0 speo=2 0:ACQUIRED/1@a 1:ACQUIRED/1@b"},
			{func(p *Partition) string { return fmt.Sprint(p.ReleaseMember("a")) }, "true", "spso=0 speo=2 0:AVAILABLE/1 1:ACQUIRED/1@b"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(cfg(), tc.start)
			for i, s := range tc.steps {
				if got := s.do(p); got != s.want {
					t.Fatalf("step %d answered %q, want %q", i, got, s.want)
				}
				if got := window(p); got != s.win {
					t.Fatalf("step %d left\n  %s\nwant\n  %s", i, got, s.win)
				}
			}
		})
	}
}

// TestSnapshotRestore: the durable form keeps finished and released
// records and their delivery counts; locks become Available.
func TestSnapshotRestore(t *testing.T) {
	p := New(cfg(), 0)
	p.Acquire("a", 10, false, []Batch{{First: 0, Last: 5}}, t0)
	if err := p.Acknowledge("a", 0, 5, []AckType{AckAccept, AckRelease, AckAccept, AckReject, AckRelease, 1}, t0); err != nil {
		t.Fatal(err)
	}
	p.Acquire("b", 10, false, []Batch{{First: 0, Last: 5}, {First: 6, Last: 7}}, t0)
	start, batches := p.Snapshot()
	q := Restore(cfg(), start, batches)
	want := "spso=1 speo=8 1:AVAILABLE/2 2:ACKNOWLEDGED/1 3:ARCHIVED/1 4:AVAILABLE/2 5:ACKNOWLEDGED/1 6:AVAILABLE/1 7:AVAILABLE/1"
	if got := window(q); got != want {
		t.Fatalf("restored\n  %s\nwant\n  %s", got, want)
	}
	// An acknowledged record is never delivered again after a restore.
	got := ranges(q.Acquire("c", 100, false, []Batch{{First: 0, Last: 5}, {First: 6, Last: 7}}, t0))
	if got != "[1-1]x3 [4-4]x3 [6-7]x2" {
		t.Fatalf("restored partition acquired %s", got)
	}
}
