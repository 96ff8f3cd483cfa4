package verify

import (
	"maps"
	"slices"
	"testing"
)

// Hand-made histories of the compacted topic.

func csend(proc string, seq int64, p int32, key string, tomb bool, out Outcome, off int64) Event {
	return Event{Kind: KindSend, Topic: CompactTopicName, Proc: proc, Seq: seq, Partition: p, Key: key,
		Value: compactRecordID(proc, seq), Tombstone: tomb, Outcome: out, Offset: off}
}

// crec is a record as read: the send's id, key and kind at offset o.
func crec(kind Kind, proc string, s Event, o int64) Event {
	return Event{Kind: kind, Topic: CompactTopicName, Proc: proc, Partition: s.Partition, Offset: o, Key: s.Key, Value: s.Value, Tombstone: s.Tombstone}
}

func cassign(proc string) Event {
	return Event{Kind: KindAssign, Topic: CompactTopicName, Proc: proc, Partitions: []int32{0}}
}

func cfinal(recs ...Event) []Event {
	out := []Event{cassign("final")}
	for _, r := range recs {
		out = append(out, crec(KindFinal, "final", r, r.Offset))
	}
	return append(out, Event{Kind: KindFinalDone, Topic: CompactTopicName, Proc: "final", Partition: 0, Offset: 100})
}

// compactSends: producer "w" writes keys a, b, c, d of partition 0.
//
//	#1 a=v @0   #2 b=v @1   #3 a=v @2   #4 b=tomb @3   #5 c=v info (written at 5)
//	#6 a=v fail #7 d=v @4   #8 d=tomb info (not written)  #9 c=v @6
//	#10 e=v @7  #11 e=tomb info (written at 8, then cleaned away)
func compactSends() []Event {
	return []Event{
		csend("w", 1, 0, "a", false, OK, 0),
		csend("w", 2, 0, "b", false, OK, 1),
		csend("w", 3, 0, "a", false, OK, 2),
		csend("w", 4, 0, "b", true, OK, 3),
		csend("w", 5, 0, "c", false, Info, -1),
		csend("w", 6, 0, "a", false, Fail, -1),
		csend("w", 7, 0, "d", false, OK, 4),
		csend("w", 8, 0, "d", true, Info, -1),
		csend("w", 9, 0, "c", false, OK, 6),
		csend("w", 10, 0, "e", false, OK, 7),
		csend("w", 11, 0, "e", true, Info, -1),
	}
}

// at is send s placed at offset o (for sends whose acknowledgement gave
// none).
func at(s Event, o int64) Event { s.Offset = o; return s }

// compactClean: a reader reads the log before cleaning (older values,
// the tombstone of b, the indefinite c #5 at 5) and after; the final read
// holds each key's latest: a #3, c #9, d #7 (its later tombstone was not
// written), b and e gone (e's indefinite tombstone was written, then
// cleaned away together with e #10).
func compactClean() []Event {
	s := compactSends()
	var e []Event
	e = append(e, Event{Kind: KindPhase, Detail: "workload-start", Time: 0})
	e = append(e, s...)
	e = append(e, cassign("creader"),
		crec(KindRead, "creader", s[0], 0), crec(KindRead, "creader", s[1], 1), crec(KindRead, "creader", s[2], 2),
		crec(KindRead, "creader", s[3], 3), crec(KindRead, "creader", s[6], 4), crec(KindRead, "creader", at(s[4], 5), 5),
		crec(KindRead, "creader", s[8], 6),
		cassign("creader"), // a new client after cleaning: holes
		crec(KindRead, "creader", s[2], 2), crec(KindRead, "creader", s[3], 3), crec(KindRead, "creader", s[6], 4),
		crec(KindRead, "creader", s[8], 6),
		Event{Kind: KindPhase, Detail: "workload-end", Time: 10},
	)
	return append(e, cfinal(s[2], s[6], s[8])...)
}

func TestCheckCompactClean(t *testing.T) {
	res := Check(compactClean())
	if !res.Valid() {
		t.Fatalf("anomalies in a clean compacted history: %v", res.Anomalies)
	}
	st := res.Compact
	if st.Sends != 11 || st.Tombstones != 3 || st.Keys != 5 || st.Final != 3 || st.LiveKeys != 3 || st.Reads != 11 {
		t.Errorf("stats %+v", st)
	}
}

// TestCheckCompactAnomalies: each anomaly, alone, from a variation of the
// clean history.
func TestCheckCompactAnomalies(t *testing.T) {
	s := compactSends()
	base := func() []Event {
		var e []Event
		e = append(e, s...)
		return e
	}
	withFinal := func(recs ...Event) []Event { return append(base(), cfinal(recs...)...) }
	tests := []struct {
		name    string
		history []Event
		want    string
	}{
		{"an older value of a is last", withFinal(s[0], s[6], s[8]), LostLatestValue},
		{"a missing, no later tombstone", withFinal(s[6], s[8]), LostLatestValue},
		{"c's indefinite #5 last although #9 was acknowledged", withFinal(s[2], s[6], at(s[4], 5)), LostLatestValue},
		{"b's value back after its tombstone went", withFinal(s[1], s[2], s[6], s[8]), ResurrectedKey},
		{"b's tombstone kept", withFinal(s[2], s[3], s[6], s[8]), TombstoneRetained},
		{"a's acknowledged #1 read after #3",
			append(base(), cassign("creader"), crec(KindRead, "creader", s[2], 2), Event(crec(KindRead, "creader", s[0], 5))), ReorderedKey},
		{"the failed a #6 read", withFinal(s[6], s[8], at(s[5], 9)), AbortedRead},
		{"a record nobody sent", withFinal(s[2], s[6], s[8], Event{Key: "z", Value: "w-99", Offset: 12}), PhantomRecord},
		{"a tombstone read as a value", withFinal(s[2], func() Event { r := s[3]; r.Tombstone = false; return r }(), s[6], s[8]), PhantomRecord},
		{"c #9 read at another offset than acknowledged", withFinal(s[2], s[6], at(s[8], 9)), InconsistentOffsets},
		{"one record at two offsets",
			append(base(), cassign("creader"), crec(KindRead, "creader", at(s[4], 5), 5), cassign("creader"), crec(KindRead, "creader", at(s[4], 6), 6)), Duplicate},
		{"offsets going back", append(base(), cassign("creader"), crec(KindRead, "creader", s[6], 4), crec(KindRead, "creader", s[2], 2)), NonmonotonicPoll},
		{"no final read", base(), FinalReadMissing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.history)
			if !res.Has(tc.want) {
				t.Fatalf("want %s, got %v", tc.want, res.Anomalies)
			}
			for name := range res.ByName {
				if name != tc.want && name != FinalReadMissing && name != InconsistentOffsets {
					t.Errorf("also %s: %v", name, res.Anomalies)
				}
			}
		})
	}
}

// TestCheckCompactIndefinite: an indefinite later write may or may not be
// there: either final state passes.
func TestCheckCompactIndefinite(t *testing.T) {
	s := compactSends()
	for _, tc := range []struct {
		name  string
		final []Event
	}{
		{"c's indefinite #5 was never written", []Event{s[2], s[6], s[8]}},
		{"d's indefinite tombstone was written and is gone", []Event{s[2], s[8]}},
		{"e's value is there (its indefinite tombstone was not written)", []Event{s[2], s[6], s[8], s[9]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := append(append([]Event{}, s...), cfinal(tc.final...)...)
			if res := Check(h); !res.Valid() {
				t.Fatalf("anomalies: %v", res.Anomalies)
			}
		})
	}
}

// TestCheckCompactIgnoresOtherTopics: the compacted topic's rules do not
// see the main topic's events, nor the other way round.
func TestCheckCompactIgnoresOtherTopics(t *testing.T) {
	history := append(clean(), compactClean()...)
	if res := Check(history); !res.Valid() {
		t.Fatalf("anomalies: %v", res.Anomalies)
	}
}

func TestCompareCompactedViews(t *testing.T) {
	view := func(recs map[int64]compactedRecord) compactedView {
		v := compactedView{records: recs, live: map[string]int64{}}
		last := map[string]int64{}
		for _, o := range slices.Sorted(maps.Keys(recs)) {
			last[recs[o].key] = o
		}
		for k, o := range last {
			if !recs[o].tombstone {
				v.live[k] = o
			}
		}
		return v
	}
	a1, b2, a3 := compactedRecord{"a", "w-1", false}, compactedRecord{"b", "w-2", false}, compactedRecord{"a", "w-3", false}
	btomb := compactedRecord{"b", "w-4", true}
	leader := view(map[int64]compactedRecord{2: a3}) // cleaned, b's tombstone gone
	for _, tc := range []struct {
		name     string
		follower compactedView
		differ   bool
	}{
		{"not cleaned yet", view(map[int64]compactedRecord{0: a1, 1: b2, 2: a3, 3: btomb}), false},
		{"cleaned, tombstone kept", view(map[int64]compactedRecord{2: a3, 3: btomb}), false},
		{"same", view(map[int64]compactedRecord{2: a3}), false},
		{"another record at offset 2", view(map[int64]compactedRecord{2: a1}), true},
		{"b still live", view(map[int64]compactedRecord{1: b2, 2: a3}), true},
		{"a missing", view(map[int64]compactedRecord{3: btomb}), true},
	} {
		if got := compareCompactedViews(tc.follower, leader); (got != "") != tc.differ {
			t.Errorf("%s: difference %q, want one: %v", tc.name, got, tc.differ)
		}
	}
}

func TestIdleCleanings(t *testing.T) {
	log := []byte(`time=2026-12-02T00:29:09.501Z level=INFO msg="log cleaned" partition=kverify-compact-2 first_dirty=0 end_offset=48 dirty_ratio=1 bytes_read=9744 bytes_written=1969 took=1ms
time=2026-12-02T00:30:08.194Z level=INFO msg="log cleaned" partition=kverify-compact-1 first_dirty=3060 end_offset=3060 dirty_ratio=1 bytes_read=0 bytes_written=0 took=0s
time=2026-12-02T00:30:08.194Z level=INFO msg="log cleaned" partition=kverify-compact-1 first_dirty=3060 end_offset=3060 dirty_ratio=1 bytes_read=0 bytes_written=0 took=0s
time=2026-12-02T00:30:08.195Z level=INFO msg="log cleaning aborted" partition=kverify-compact-1 first_dirty=7 end_offset=7
`)
	if n := idleCleanings(log); n != 2 {
		t.Fatalf("idle cleanings %d, want 2", n)
	}
}
