package verify

import (
	"testing"
)

// Hand-made transactional histories: topic "in" (2 partitions) written by
// transactional producers t0, t1 and t2, read_committed by consumer "rc";
// topic "out" written by the consume-transform-produce loop "etl" and
// read by "rc-out".

func tsend(txn string, seq int64, topic string, p int32, v string, out Outcome, off int64) Event {
	return Event{Kind: KindTxnSend, Proc: txn[:2], Txn: txn, Seq: seq, Topic: topic, Partition: p, Value: v, Outcome: out, Offset: off}
}

// tend is a commit or abort attempt: its start, then its end with out.
func tend(txn, what string, out Outcome) []Event {
	return []Event{
		{Kind: KindTxnEnd, Proc: txn[:2], Txn: txn, Detail: what, Phase: "start"},
		{Kind: KindTxnEnd, Proc: txn[:2], Txn: txn, Detail: what, Phase: "end", Outcome: out},
	}
}

func tread(proc, topic string, poll int64, p int32, o int64, v string) Event {
	return Event{Kind: KindTxnRead, Proc: proc, Topic: topic, Poll: poll, Partition: p, Offset: o, Value: v}
}

// tfinal is the final read of topic/p: values at offsets, up to end.
func tfinal(topic string, p int32, end int64, at map[int64]string) []Event {
	var out []Event
	for o := int64(0); o < end; o++ {
		if v, ok := at[o]; ok {
			out = append(out, Event{Kind: KindTxnFinal, Proc: "final", Topic: topic, Partition: p, Offset: o, Value: v})
		}
	}
	return append(out, Event{Kind: KindTxnFinalDone, Proc: "final", Topic: topic, Partition: p, Offset: end})
}

// cleanTxn: t0-1 committed (a, b), t0-2 aborted (c, d), t1-1 commit of
// unknown outcome that took effect (e, f), t1-2 commit of unknown outcome
// that did not (g), t1-3 whose commit the client did not send (h), t2-1
// committed (x). Offsets between are markers. The loop copied a, b, e, f
// in one committed transaction and committed input offsets 5 and 10.
func cleanTxn() h {
	var e h
	e = append(e, Event{Kind: KindPhase, Detail: "workload-start"},
		Event{Kind: KindTxnAssign, Proc: "rc", Topic: "in", Partitions: []int32{0, 1}},
		tsend("t0-1", 1, "in", 0, "a", OK, 0), tsend("t0-1", 2, "in", 1, "b", OK, 0))
	e = append(e, tend("t0-1", "commit", OK)...)
	e = append(e, tsend("t0-2", 1, "in", 0, "c", OK, 2), tsend("t0-2", 2, "in", 1, "d", OK, 2))
	e = append(e, tend("t0-2", "abort", OK)...)
	e = append(e, tread("rc", "in", 1, 0, 0, "a"), tread("rc", "in", 1, 1, 0, "b"))
	e = append(e, tsend("t1-1", 1, "in", 0, "e", OK, 4), tsend("t1-1", 2, "in", 1, "f", OK, 4))
	e = append(e, tend("t1-1", "commit", Info)...)
	e = append(e, tsend("t1-2", 1, "in", 0, "g", OK, 6))
	e = append(e, tend("t1-2", "commit", Info)...)
	e = append(e, tsend("t1-3", 1, "in", 1, "h", OK, 6))
	e = append(e, tend("t1-3", "commit", Fail)...)
	e = append(e, tsend("t2-1", 1, "in", 1, "x", OK, 8))
	e = append(e, tend("t2-1", "commit", OK)...)
	e = append(e, tread("rc", "in", 2, 0, 4, "e"), tread("rc", "in", 2, 1, 4, "f"), tread("rc", "in", 3, 1, 8, "x"))
	// The loop.
	e = append(e, Event{Kind: KindTxnAssign, Proc: "etl", Topic: "in", Partitions: []int32{0, 1}},
		tread("etl", "in", 1, 0, 0, "a"), tread("etl", "in", 1, 0, 4, "e"), tread("etl", "in", 1, 1, 0, "b"), tread("etl", "in", 1, 1, 4, "f"),
		tsend("etl-1", 1, "out", 0, EtlValue("a"), OK, 0), tsend("etl-1", 2, "out", 0, EtlValue("e"), OK, 1),
		tsend("etl-1", 3, "out", 1, EtlValue("b"), OK, 0), tsend("etl-1", 4, "out", 1, EtlValue("f"), OK, 1))
	e = append(e, tend("etl-1", "commit", OK)...)
	e = append(e, tread("etl", "in", 2, 1, 8, "x"), tsend("etl-2", 1, "out", 1, EtlValue("x"), OK, 3))
	e = append(e, tend("etl-2", "commit", OK)...)
	e = append(e, tread("rc-out", "out", 1, 0, 0, EtlValue("a")), tread("rc-out", "out", 1, 0, 1, EtlValue("e")),
		tread("rc-out", "out", 1, 1, 0, EtlValue("b")), tread("rc-out", "out", 1, 1, 1, EtlValue("f")),
		tread("rc-out", "out", 2, 1, 3, EtlValue("x")),
		Event{Kind: KindPhase, Detail: "workload-end"})
	e = append(e, Event{Kind: KindTxnOffsets, Proc: "etl", Topic: "in", Partition: 0, Offset: 5},
		Event{Kind: KindTxnOffsets, Proc: "etl", Topic: "in", Partition: 1, Offset: 10})
	e = append(e, tfinal("in", 0, 8, map[int64]string{0: "a", 4: "e"})...)
	e = append(e, tfinal("in", 1, 10, map[int64]string{0: "b", 4: "f", 8: "x"})...)
	e = append(e, tfinal("out", 0, 3, map[int64]string{0: EtlValue("a"), 1: EtlValue("e")})...)
	e = append(e, tfinal("out", 1, 5, map[int64]string{0: EtlValue("b"), 1: EtlValue("f"), 3: EtlValue("x")})...)
	for i := range e {
		e[i].Time = int64(i+1) * 1000
	}
	return e
}

func TestCheckTxnClean(t *testing.T) {
	r := Check(cleanTxn())
	if !r.Valid() {
		t.Fatalf("clean transactional history flagged: %v", r.Anomalies)
	}
	s := r.Txn
	if s.ByStatus[TxnCommitted] != 4 || s.ByStatus[TxnAborted] != 2 || s.ByStatus[TxnUnknown] != 2 {
		t.Errorf("transactions by status %v, want 4 committed (t0-1, t2-1, etl-1, etl-2), 2 aborted (t0-2, t1-3), 2 unknown (t1-1, t1-2)", s.ByStatus)
	}
	if s.Writes != 14 || s.Reads != 15 || s.Final != 10 {
		t.Errorf("writes %d reads %d final %d, want 14, 15, 10", s.Writes, s.Reads, s.Final)
	}
}

// txnEdit returns the clean transactional history changed by fn.
func txnEdit(fn func(h) h) h { return fn(cleanTxn()) }

func isTxnFinal(topic string, p int32) func(Event) bool {
	return func(e Event) bool {
		return (e.Kind == KindTxnFinal || e.Kind == KindTxnFinalDone) && e.Topic == topic && e.Partition == p
	}
}

func isValue(kind Kind, proc, v string) func(Event) bool {
	return func(e Event) bool { return e.Kind == kind && (proc == "" || e.Proc == proc) && e.Value == v }
}

// replaceAll replaces the events that match by with, placed where the
// first was.
func replaceAll(e h, match func(Event) bool, with ...Event) h {
	var out h
	done := false
	for _, x := range e {
		if !match(x) {
			out = append(out, x)
		} else if !done {
			out, done = append(out, with...), true
		}
	}
	return out
}

// later appends x to e, stamped after e's last event.
func later(e h, x Event) h { return append(e, withTime(x, e[len(e)-1].Time+1)) }

// withTime sets e's time (histories are stamped in order; a read can be
// placed earlier in time than where it sits).
func withTime(e Event, t int64) Event { e.Time = t; return e }

func TestCheckTxnAnomalies(t *testing.T) {
	tests := []struct {
		name    string
		history h
		want    string
		notWant []string
	}{
		{"rc polls c of aborted t0-2", txnEdit(func(e h) h {
			return later(e, tread("rc3", "in", 1, 0, 2, "c"))
		}), AbortedRead, nil},
		{"the final read holds h of t1-3, whose commit was not sent", txnEdit(func(e h) h {
			return replaceAll(e, isTxnFinal("in", 1), tfinal("in", 1, 10, map[int64]string{0: "b", 4: "f", 6: "h", 8: "x"})...)
		}), AbortedRead, nil},
		{"the loop copied d of aborted t0-2", txnEdit(func(e h) h {
			return replaceAll(e, isTxnFinal("out", 1), tfinal("out", 1, 5, map[int64]string{0: EtlValue("b"), 1: EtlValue("f"), 2: EtlValue("d"), 3: EtlValue("x")})...)
		}), AbortedRead, nil},
		{"the final read holds e but not f of t1-1 (unknown outcome)", txnEdit(func(e h) h {
			e = replace(e, isValue(KindTxnRead, "", "f"))
			return replaceAll(e, isTxnFinal("in", 1), tfinal("in", 1, 10, map[int64]string{0: "b", 8: "x"})...)
		}), IntermediateRead, []string{LostCommittedWrite}},
		{"rc read e of t1-1 but stepped over f", txnEdit(func(e h) h {
			return replace(e, isValue(KindTxnRead, "rc", "f"))
		}), IntermediateRead, []string{PollSkip}},
		{"rc stepped over f and read nothing else of t1-1", txnEdit(func(e h) h {
			return replace(e, func(x Event) bool {
				return x.Kind == KindTxnRead && x.Proc == "rc" && (x.Value == "f" || x.Value == "e")
			})
		}), PollSkip, []string{IntermediateRead}},
		{"x of committed t2-1 missing from the final read", txnEdit(func(e h) h {
			return replaceAll(e, isTxnFinal("in", 1), tfinal("in", 1, 10, map[int64]string{0: "b", 4: "f"})...)
		}), LostCommittedWrite, []string{IntermediateRead}},
		{"b of committed t0-1 missing from the final read, a present", txnEdit(func(e h) h {
			return replaceAll(e, isTxnFinal("in", 1), tfinal("in", 1, 10, map[int64]string{4: "f", 8: "x"})...)
		}), LostCommittedWrite, nil},
		{"input e below the loop's committed offset has no output", txnEdit(func(e h) h {
			e = replace(e, func(x Event) bool { return x.Value == EtlValue("e") })
			return replaceAll(e, isTxnFinal("out", 0), tfinal("out", 0, 3, map[int64]string{0: EtlValue("a")})...)
		}), LostCommittedWrite, nil},
		{"rc2 reads a before t0-1 requested its commit", txnEdit(func(e h) h {
			return append(e, withTime(tread("rc2", "in", 1, 0, 0, "a"), 1500))
		}), ReadPastLSO, nil},
		{"rc reads g of t1-2 before its commit was requested", txnEdit(func(e h) h {
			return append(e, withTime(tread("rc", "in", 9, 0, 6, "g"), e[0].Time+1))
		}), ReadPastLSO, nil},
		{"a at offsets 0 and 8 in the final read", txnEdit(func(e h) h {
			return replaceAll(e, isTxnFinal("in", 0), tfinal("in", 0, 9, map[int64]string{0: "a", 4: "e", 8: "a"})...)
		}), Duplicate, nil},
		{"the loop wrote a twice", txnEdit(func(e h) h {
			return replaceAll(e, isTxnFinal("out", 0), tfinal("out", 0, 4, map[int64]string{0: EtlValue("a"), 1: EtlValue("e"), 3: EtlValue("a")})...)
		}), Duplicate, nil},
		{"output of e committed while the loop's committed offset is below e", txnEdit(func(e h) h {
			return replaceAll(e, func(x Event) bool { return x.Kind == KindTxnOffsets && x.Partition == 0 },
				Event{Kind: KindTxnOffsets, Proc: "etl", Topic: "in", Partition: 0, Offset: 3})
		}), Duplicate, nil},
		{"a of committed t0-1 acknowledged at offset 0, in the final read at 3", txnEdit(func(e h) h {
			e = replace(e, isValue(KindTxnRead, "", "a"))
			return replaceAll(e, isTxnFinal("in", 0), tfinal("in", 0, 8, map[int64]string{3: "a", 4: "e"})...)
		}), InconsistentOffsets, []string{LostCommittedWrite}},
		{"rc reads a again", txnEdit(func(e h) h {
			return later(e, tread("rc", "in", 9, 0, 0, "a"))
		}), NonmonotonicPoll, nil},
		{"nobody polled x of committed t2-1", txnEdit(func(e h) h {
			return replace(e, func(x Event) bool { return x.Kind == KindTxnRead && x.Value == "x" })
		}), UnseenAfterHealing, nil},
		{"no final read of in/1", txnEdit(func(e h) h {
			return replaceAll(e, isTxnFinal("in", 1))
		}), FinalReadMissing, nil},
	}
	covered := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.history)
			if !r.Has(tc.want) {
				t.Fatalf("want %s, got %v", tc.want, r.Anomalies)
			}
			for _, n := range tc.notWant {
				if r.Has(n) {
					t.Errorf("%s flagged too: %v", n, r.Anomalies)
				}
			}
		})
		covered[tc.want] = true
	}
	for _, name := range TxnAnomalies {
		if !covered[name] {
			t.Errorf("no test makes the checker report %s", name)
		}
	}
}

// Transactions of unknown outcome may have gone either way: visible in
// full or not at all, neither is an anomaly; polled before the commit was
// requested still is.
func TestCheckTxnUnknownOutcome(t *testing.T) {
	for _, vis := range []bool{false, true} {
		e := cleanTxn()
		at := map[int64]string{0: "a", 4: "e"}
		if vis {
			at[6] = "g" // t1-2 took effect after all
			e = append(e, withTime(tread("rc", "in", 8, 0, 6, "g"), e[len(e)-1].Time+1))
		}
		e = replaceAll(e, isTxnFinal("in", 0), tfinal("in", 0, 8, at)...)
		if r := Check(e); !r.Valid() {
			t.Errorf("t1-2 visible %v: flagged %v", vis, r.Anomalies)
		}
	}
	// A commit the client reported as not sent, then one of unknown
	// outcome: unknown.
	e := cleanTxn()
	e = append(e, tend("t1-3", "commit", Info)...)
	r := Check(e)
	if !r.Valid() || r.Txn.ByStatus[TxnUnknown] != 3 {
		t.Errorf("t1-3 with an unknown second commit: %v, %v", r.Txn.ByStatus, r.Anomalies)
	}
}

// The loop writes a value again after an abort: the aborted write at one
// offset and the committed one at another are two records, and only the
// committed one is visible.
func TestCheckTxnRewrite(t *testing.T) {
	e := cleanTxn()
	var out h
	for _, x := range e {
		if x.Kind == KindTxnSend && x.Txn == "etl-1" {
			// etl-0: the same writes, aborted, where etl-1 was.
			y := x
			y.Txn = "etl-0"
			out = append(out, y)
		}
		out = append(out, x)
	}
	out = append(out, tend("etl-0", "commit", Fail)...)
	// Shift etl-1's writes and the output's final read by two.
	for i, x := range out {
		if x.Topic == "out" && x.Txn != "etl-0" && (x.Kind == KindTxnSend || x.Kind == KindTxnRead || x.Kind == KindTxnFinal || x.Kind == KindTxnFinalDone) {
			out[i].Offset += 2
		}
	}
	if r := Check(out); !r.Valid() {
		t.Fatalf("flagged: %v", r.Anomalies)
	}
}
