package verify

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// h builds hand-made histories.
type h []Event

func send(proc string, seq int64, p int32, v string, out Outcome, off int64) Event {
	return Event{Kind: KindSend, Proc: proc, Seq: seq, Partition: p, Value: v, Outcome: out, Offset: off}
}

func read(proc string, poll int64, p int32, o int64, v string) Event {
	return Event{Kind: KindRead, Proc: proc, Poll: poll, Partition: p, Offset: o, Value: v}
}

func final(p int32, vs ...string) []Event {
	var out []Event
	for i, v := range vs {
		out = append(out, Event{Kind: KindFinal, Partition: p, Offset: int64(i), Value: v})
	}
	return append(out, Event{Kind: KindFinalDone, Partition: p, Offset: int64(len(vs))})
}

func assign(proc string, ps ...int32) Event {
	return Event{Kind: KindAssign, Proc: proc, Partitions: ps}
}

// clean is a history with every kind of event and no anomaly: three
// acknowledged sends, an indefinite one that made it and one that did not,
// a definite failure, two consumers (one reassigned and rewound), epochs
// moving forward and identical replicas.
func clean() h {
	var e h
	e = append(e,
		Event{Kind: KindPhase, Detail: "workload-start", Time: 0},
		assign("c1", 0), assign("c2", 0),
		Event{Kind: KindEpoch, Partition: -1, ControllerEpoch: 1},
		Event{Kind: KindEpoch, Partition: 0, Leader: 1, LeaderEpoch: 0, ISR: []int32{1, 2, 3}},
		send("a", 1, 0, "a1", OK, 0),
		send("a", 2, 0, "a2", OK, 1),
		send("b", 1, 0, "b1", Info, -1),
		send("a", 3, 0, "a3", OK, 3),
		send("b", 2, 0, "b2", Info, -1),
		send("b", 3, 0, "b3", Fail, -1),
		read("c1", 1, 0, 0, "a1"), read("c1", 1, 0, 1, "a2"), read("c1", 2, 0, 2, "b1"), read("c1", 2, 0, 3, "a3"),
		read("c2", 1, 0, 0, "a1"), read("c2", 1, 0, 1, "a2"),
		assign("c2", 0), // rebalance: rewinds to the committed offset
		read("c2", 2, 0, 1, "a2"), read("c2", 2, 0, 2, "b1"), read("c2", 3, 0, 3, "a3"),
		Event{Kind: KindEpoch, Partition: -1, ControllerEpoch: 2},
		Event{Kind: KindEpoch, Partition: 0, Leader: 2, LeaderEpoch: 1, ISR: []int32{2, 3}},
		Event{Kind: KindPhase, Detail: "workload-end", Time: 10},
	)
	e = append(e, final(0, "a1", "a2", "b1", "a3")...)
	e = append(e, Event{Kind: KindReplica, Partition: 0, Offset: 4, Outcome: OK, Proc: "b2"})
	for i := range e {
		if e[i].Time == 0 && i > 0 {
			e[i].Time = int64(i)
		}
	}
	return e
}

func TestCheckClean(t *testing.T) {
	r := Check(clean())
	if !r.Valid() {
		t.Fatalf("clean history flagged: %v", r.Anomalies)
	}
	if r.Sends[OK] != 3 || r.Sends[Info] != 2 || r.Sends[Fail] != 1 {
		t.Errorf("sends by outcome %v", r.Sends)
	}
}

// edit returns the clean history changed by fn.
func edit(fn func(h) h) h { return fn(clean()) }

func replace(e h, match func(Event) bool, with ...Event) h {
	var out h
	for _, x := range e {
		if match(x) {
			out = append(out, with...)
			continue
		}
		out = append(out, x)
	}
	return out
}

func isFinal(p int32) func(Event) bool {
	return func(e Event) bool { return (e.Kind == KindFinal || e.Kind == KindFinalDone) && e.Partition == p }
}

func TestCheckAnomalies(t *testing.T) {
	tests := []struct {
		name    string
		history h
		want    string
	}{
		{"acknowledged a3 missing from the final read", edit(func(e h) h {
			return replace(e, isFinal(0), final(0, "a1", "a2", "b1")...)
		}), LostWrite},
		{"offset 2 holds b1 for one consumer and b2 finally", edit(func(e h) h {
			return replace(e, isFinal(0), final(0, "a1", "a2", "b2", "a3", "b1")...)
		}), InconsistentOffsets},
		{"ack says a3 at 3, final read has b2 there", edit(func(e h) h {
			return replace(e, isFinal(0), final(0, "a1", "a2", "b1", "b2", "a3")...)
		}), InconsistentOffsets},
		{"a2 written twice", edit(func(e h) h {
			return replace(e, isFinal(0), final(0, "a1", "a2", "b1", "a3", "a2")...)
		}), Duplicate},
		{"a's third send acknowledged below its second", edit(func(e h) h {
			return replace(e, func(x Event) bool { return x.Kind == KindSend && x.Value == "a3" }, send("a", 3, 0, "a3", OK, 1), send("a", 4, 0, "a4", OK, 0))
		}), NonmonotonicSend},
		{"c1 reads offset 1 again without a reassignment", edit(func(e h) h {
			return append(e, read("c1", 9, 0, 1, "a2"))
		}), NonmonotonicPoll},
		{"c1 jumps from offset 0 to 3 over a2 and b1", edit(func(e h) h {
			return replace(e, func(x Event) bool { return x.Kind == KindRead && x.Proc == "c1" && (x.Offset == 1 || x.Offset == 2) })
		}), PollSkip},
		{"definitely failed b3 read by the final read", edit(func(e h) h {
			return replace(e, isFinal(0), final(0, "a1", "a2", "b1", "a3", "b3")...)
		}), AbortedRead},
		{"definitely failed b3 polled by a consumer", edit(func(e h) h {
			return append(e, read("c1", 5, 0, 4, "b3"))
		}), AbortedRead},
		{"acknowledged a3 never polled", edit(func(e h) h {
			return replace(e, func(x Event) bool { return x.Kind == KindRead && x.Value == "a3" })
		}), UnseenAfterHealing},
		{"consumer read b2 which the final read does not hold", edit(func(e h) h {
			return append(e, read("c1", 5, 0, 4, "b2"))
		}), DirtyRead},
		{"no final read of partition 0", edit(func(e h) h {
			return replace(e, isFinal(0))
		}), FinalReadMissing},
		{"leader epoch 1 then 0", edit(func(e h) h {
			return append(e, Event{Kind: KindEpoch, Partition: 0, Leader: 1, LeaderEpoch: 0, ISR: []int32{1}})
		}), LeaderEpochBack},
		{"controller epoch 2 then 1", edit(func(e h) h {
			return append(e, Event{Kind: KindEpoch, Partition: -1, ControllerEpoch: 1})
		}), ControllerEpochBack},
		{"empty ISR", edit(func(e h) h {
			return append(e, Event{Kind: KindEpoch, Partition: 0, Leader: -1, LeaderEpoch: 2})
		}), EmptyISR},
		{"replica logs differ", edit(func(e h) h {
			return append(e, Event{Kind: KindReplica, Partition: 0, Offset: 4, Outcome: Fail, Proc: "b3", Detail: "differs"})
		}), ReplicaDivergence},
		{"the re-created topic's deleted incarnation read by a client started after the re-creation", append(recreated(),
			rread("recreate", 0, 5, v(1, 2))), StaleIncarnationRead},
	}
	covered := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.history)
			if !r.Has(tc.want) {
				t.Fatalf("want %s, got %v", tc.want, r.Anomalies)
			}
		})
		covered[tc.want] = true
	}
	for _, name := range AllAnomalies {
		if !covered[name] {
			t.Errorf("no test makes the checker report %s", name)
		}
	}
}

func TestCheckAvailability(t *testing.T) {
	e := h{
		{Kind: KindPhase, Detail: "workload-start", Time: 0},
		{Kind: KindSend, Outcome: OK, Time: 1_000_000, Value: "x"},
		{Kind: KindSend, Outcome: Info, Time: 2_000_000, Value: "y"},
		{Kind: KindSend, Outcome: OK, Time: 5_000_000, Value: "z"},
		{Kind: KindPhase, Detail: "workload-end", Time: 6_000_000},
	}
	r := Check(e)
	if r.Unavailable != 4*time.Second || r.UnavailableFrom != 1_000_000 {
		t.Fatalf("unavailable %v from %d, want 4s from 1s", r.Unavailable, r.UnavailableFrom)
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(time.Now(), f)
	for _, e := range clean() {
		rec.Add(e)
	}
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err := ReadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(Check(got).Anomalies) != fmt.Sprint(Check(clean()).Anomalies) || len(got) != len(clean()) {
		t.Fatalf("history changed in the round trip")
	}
}
