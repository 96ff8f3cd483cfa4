package verify

import (
	"slices"
	"testing"
	"time"
)

const rt = "kverify-recreate"

func rsend(seq int64, p int32, inc int32, out Outcome, off int64) Event {
	e := send("recreate-p0", seq, p, incarnationValue(inc, "recreate-p0", seq), out, off)
	e.Topic = rt
	return e
}

func rread(proc string, p int32, o int64, v string) Event {
	e := read(proc, 1, p, o, v)
	e.Topic = rt
	return e
}

func rassign(proc string, inc int32) Event {
	return Event{Kind: KindAssign, Topic: rt, Proc: proc, Partitions: []int32{0}, Incarnation: inc}
}

func rfinal(p int32, vs ...string) []Event {
	out := final(p, vs...)
	for i := range out {
		out[i].Topic, out[i].Proc = rt, "final"
	}
	return out
}

func v(inc int32, seq int64) string { return incarnationValue(inc, "recreate-p0", seq) }

func isRecreatedFinal(x Event) bool {
	return x.Topic == rt && (x.Kind == KindFinal || x.Kind == KindFinalDone)
}

// withFinal replaces the re-created topic's final read.
func withFinal(e h, vs ...string) h {
	return append(replace(e, isRecreatedFinal), rfinal(0, vs...)...)
}

// recreated is the clean main-topic history with a re-created topic added:
// incarnation 1 gets three records (an indefinite one among them), is
// deleted while the consumer's first client still reads it, incarnation 2
// starts again at offset 0, a new client reads it, and the final read
// holds exactly incarnation 2's records. Both incarnations use offsets
// 0-2, which the main topic's rules would call inconsistent.
func recreated() h {
	e := clean()
	n := len(e)
	e = append(e,
		rassign("recreate", 1),
		rsend(1, 0, 1, OK, 0), rsend(2, 0, 1, OK, 1), rsend(3, 0, 1, Info, -1),
		rread("recreate", 0, 0, v(1, 1)), rread("recreate", 0, 1, v(1, 2)),
		Event{Kind: KindFault, Fault: RecreateTopic, Phase: "delete"},
		// The first client reads on after the deletion: allowed.
		rread("recreate", 0, 2, v(1, 3)),
		Event{Kind: KindFault, Fault: RecreateTopic, Phase: "create", Incarnation: 2},
		rsend(4, 0, 2, OK, 0), rsend(5, 0, 2, Fail, -1), rsend(6, 0, 2, OK, 1),
		rassign("recreate", 2),
		rread("recreate", 0, 0, v(2, 4)), rread("recreate", 0, 1, v(2, 6)),
		rsend(7, 0, 2, OK, 2),
		rassign("final", 2),
	)
	e = append(e, rfinal(0, v(2, 4), v(2, 6), v(2, 7))...)
	e = append(e, Event{Kind: KindReplica, Topic: rt, Partition: 0, Offset: 3, Outcome: OK, Proc: "b1"})
	for i := n; i < len(e); i++ {
		e[i].Time = int64(100 + i)
	}
	return e
}

func TestCheckRecreatedClean(t *testing.T) {
	r := Check(recreated())
	if !r.Valid() {
		t.Fatalf("clean history flagged: %v", r.Anomalies)
	}
	if r.SendsByProc["recreate-p0"][OK] != 5 || r.Sends[OK] != 3+5 {
		t.Errorf("sends %v, by proc %v", r.Sends, r.SendsByProc)
	}
	// The re-created topic is not counted in the availability: its writes
	// stop during the fault on purpose.
	if r.Unavailable != Check(clean()).Unavailable {
		t.Errorf("unavailable %v, want %v as without the re-created topic", r.Unavailable, Check(clean()).Unavailable)
	}
}

func TestCheckRecreatedAnomalies(t *testing.T) {
	tests := []struct {
		name    string
		history h
		want    []string
	}{
		{"the second client reads an incarnation 1 record", append(recreated(),
			rread("recreate", 0, 5, v(1, 2))), []string{StaleIncarnationRead}},
		{"a replica kept incarnation 1 and led: the final read holds it before incarnation 2",
			withFinal(recreated(), v(1, 1), v(1, 2), v(2, 4), v(2, 6), v(2, 7)), []string{StaleIncarnationRead, InconsistentOffsets}},
		{"acknowledged incarnation 2 record missing from the final read", withFinal(recreated(), v(2, 4), v(2, 6)), []string{LostWrite}},
		{"definitely failed send read", append(recreated(), rread("recreate", 0, 3, v(2, 5))), []string{AbortedRead}},
		{"no final read of the re-created topic", replace(recreated(), isRecreatedFinal), []string{FinalReadMissing}},
		{"the re-created topic's replicas differ", append(recreated(),
			Event{Kind: KindReplica, Topic: rt, Partition: 0, Offset: 3, Outcome: Fail, Proc: "b2", Detail: "differs"}), []string{ReplicaDivergence}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.history)
			var got []string
			for _, a := range r.Anomalies {
				if a.Topic != rt {
					t.Errorf("anomaly without the topic: %v", a)
				}
				if !slices.Contains(got, a.Name) {
					got = append(got, a.Name)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Fatalf("want %v, got %v", want, r.Anomalies)
			}
		})
	}
}

func TestCheckRecreatedNotFlagged(t *testing.T) {
	tests := []struct {
		name    string
		history h
	}{
		// The request may have sat in a buffer and been applied after
		// the re-creation.
		{"indefinite incarnation 1 send read by the second client", append(recreated(), rread("recreate", 0, 5, v(1, 3)))},
		{"incarnation 1 records read by the first client after the re-creation", replace(recreated(),
			func(x Event) bool { return x.Kind == KindAssign && x.Proc == "recreate" && x.Incarnation == 2 },
			rread("recreate", 0, 0, v(1, 1)), rassign("recreate", 2))},
		{"acknowledged incarnation 1 records are gone", replace(recreated(),
			func(x Event) bool { return x.Kind == KindRead && x.Topic == rt && x.Value == v(1, 1) })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if r := Check(tc.history); !r.Valid() {
				t.Fatalf("flagged: %v", r.Anomalies)
			}
		})
	}
}

func TestIncarnationValue(t *testing.T) {
	for _, inc := range []int32{1, 2, 17} {
		k, ok := incarnationOf(incarnationValue(inc, "recreate-p1", 42))
		if !ok || k != inc {
			t.Errorf("incarnation %d read back as %d, %v", inc, k, ok)
		}
	}
	for _, v := range []string{"raw-p0-3", "i-x", "ix-1", ""} {
		if _, ok := incarnationOf(v); ok {
			t.Errorf("%q parsed as an incarnation value", v)
		}
	}
}

func TestIncarnationsAdvance(t *testing.T) {
	g := NewIncarnations(rt, 2)
	inc, next := g.Current()
	if inc != 1 {
		t.Fatalf("starts at %d", inc)
	}
	k := g.hold()
	advanced := make(chan int32)
	go func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		advanced <- g.lockedAdvance()
	}()
	select {
	case <-advanced:
		t.Fatal("advanced while a producer held incarnation", k)
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	select {
	case n := <-advanced:
		if n != 2 {
			t.Fatalf("advanced to %d", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not advanced after the release")
	}
	select {
	case <-next:
	default:
		t.Fatal("incarnation 1's channel not closed")
	}
}

func TestShortScheduleHasEveryFault(t *testing.T) {
	var kinds []string
	for _, f := range ShortSchedule(1, Timing{Lag: 1500 * time.Millisecond, Session: 3 * time.Second}, 3, nil) {
		kinds = append(kinds, f.Kind)
		if f.Kind == RecreateTopicPaused && (f.Duration < 1500*time.Millisecond || f.Duration >= 3*time.Second) {
			t.Errorf("recreate pause %v: want at least half the session, shorter than it", f.Duration)
		}
	}
	slices.Sort(kinds)
	if want := slices.Sorted(slices.Values(AllFaults)); !slices.Equal(kinds, want) {
		t.Fatalf("short schedule %v, want each of %v once", kinds, want)
	}
}
