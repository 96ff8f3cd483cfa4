package verify

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Anomalies of the transactional workload (txn_workload.go), after the
// ones Jepsen's Kafka analysis names. The workload's events are the
// txn-* kinds of history.go. Aborted-read, duplicate, inconsistent-offsets,
// nonmonotonic-poll, poll-skip, unseen-after-healing and
// final-read-incomplete keep their names from check.go, with the
// transactional meanings given at checkTxn.
const (
	// LostCommittedWrite: a record of a transaction whose commit was
	// acknowledged is missing from the final read_committed read; or an
	// input record whose offset the consume-transform-produce group
	// committed has no output.
	LostCommittedWrite = "lost-committed-write"
	// IntermediateRead (G1b): a transaction's records observed in part.
	IntermediateRead = "intermediate-read"
	// ReadPastLSO: a read_committed consumer read a record of a
	// transaction before its commit was even requested.
	ReadPastLSO = "read-past-lso"
)

// TxnAnomalies lists the anomalies only the transactional checker
// reports, in report order.
var TxnAnomalies = []string{LostCommittedWrite, IntermediateRead, ReadPastLSO}

// EtlValue is the value the consume-transform-produce loop writes for an
// input value.
func EtlValue(v string) string { return "etl:" + v }

// TxnStatus is what the history says of a transaction's outcome.
type TxnStatus string

// Transaction outcomes.
const (
	// TxnCommitted: an EndTxn(commit) returned success.
	TxnCommitted TxnStatus = "committed"
	// TxnAborted: no commit was ever requested (the producer aborted, gave
	// up before ending, or its client refused to send the commit), so
	// the transaction can never commit.
	TxnAborted TxnStatus = "aborted"
	// TxnUnknown: a commit was requested and its outcome is unknown
	// (timeout, lost connection, fencing while committing): the
	// transaction may be committed or aborted.
	TxnUnknown TxnStatus = "unknown"
)

// TxnStats summarises a transactional history.
type TxnStats struct {
	ByStatus map[TxnStatus]int
	Writes   int // records produced (sends of every outcome)
	Reads    int // records read by read_committed consumers
	Final    int // records of the final read
}

// txnInfo is one transaction as the history shows it.
type txnInfo struct {
	id, proc     string
	writes       []Event // its txn-send events
	commitStart  int64   // time the first commit was requested; -1: never
	commitStarts int     // commit requests
	commitFails  int     // commit requests the client certainly did not send
	committed    bool    // a commit returned success
}

func (t *txnInfo) status() TxnStatus {
	switch {
	case t.committed:
		return TxnCommitted
	case t.commitStarts > t.commitFails:
		return TxnUnknown
	}
	return TxnAborted
}

// tv is a value of a topic (values are unique per topic).
type tv struct{ topic, v string }

// tpo is an offset of a topic's partition.
type tpo struct {
	topic string
	p     int32
	o     int64
}

// checkTxn checks the transactional workload's events. Every rule reads a
// transaction's status as txnInfo.status defines it; a transaction of
// unknown outcome may be either committed or aborted, so it is never the
// subject of aborted-read or lost-committed-write. Observations are the
// records read_committed consumers polled during the run (txn-read) and
// the final read_committed read after healing (txn-final), which started
// only once every partition's last stable offset had reached its high
// watermark, so no transaction was still open.
//
//   - aborted-read (G1a): an observation of a record written by an
//     aborted transaction.
//   - read-past-lso: a txn-read of a record of transaction T recorded
//     before T's producer requested its commit (the txn-end start event).
//     The commit marker is written only after the coordinator receives
//     EndTxn(commit), so at the time of that fetch T was open on the
//     partition, the LSO was at or below T's first offset there, and a
//     read_committed fetch returned a record at or above the LSO. (A
//     record of an aborted transaction is an aborted-read instead.)
//   - intermediate-read (G1b, as Kafka's transactions make it appear): a
//     transaction observed in part. (a) In the final read: some, not all,
//     of its acknowledged records are present (also for unknown
//     outcomes: whichever way it ended, it ended for all its records).
//     (b) By a consumer: between two consecutive records it polled on a
//     partition it stepped over a record of transaction T that the final
//     read holds, while it polled other records of T.
//   - poll-skip: (b) when the consumer polled nothing else of T.
//   - nonmonotonic-poll: a consumer's offsets on a partition did not
//     strictly increase since its last txn-assign.
//   - lost-committed-write: a record of a committed transaction,
//     acknowledged at an offset, that the final read does not hold.
//   - inconsistent-offsets: one offset with two values (among
//     acknowledgements, polls and the final read), or a committed record
//     in the final read at an offset other than its acknowledged one.
//   - duplicate: one value at two offsets among the observations
//     (exactly-once broken, for the producers' idempotence or the
//     consume-transform-produce loop).
//   - unseen-after-healing: a committed record in the final read that no
//     consumer polled.
//   - consume-transform-produce (when txn-offsets are recorded): each
//     input record below the group's committed offset has its output
//     (EtlValue) in the final read of the output topic, else
//     lost-committed-write; each output in the final read comes from an
//     input record in the final read (else aborted-read: the loop
//     committed the output of a record that was never committed) below
//     the committed offset (else duplicate: a restarted loop would write
//     it again).
//   - final-read-incomplete: a partition written to without a complete
//     final read.
func (c *checker) checkTxn(events []Event) {
	txns := map[string]*txnInfo{}
	get := func(e Event) *txnInfo {
		t := txns[e.Txn]
		if t == nil {
			t = &txnInfo{id: e.Txn, proc: e.Proc, commitStart: -1}
			txns[e.Txn] = t
		}
		return t
	}
	ackedAt := map[tpo]*txnInfo{}                // offset -> the transaction whose write was acknowledged there
	ackedValue := map[tpo]string{}               // offset -> the value acknowledged there
	unacked := map[tv][]*txnInfo{}               // value -> transactions whose write of it was not acknowledged
	valuePartition := map[tv]int32{}             // value -> partition it was observed in
	offsetValues := map[tpo]map[string]bool{}    // offset -> values seen there
	valueOffsets := map[tv]map[int64]bool{}      // value -> offsets observed (polls and final)
	final := map[tpo]string{}                    // the final read
	finalOffset := map[tv]int64{}                // value -> offset in the final read
	finalDone := map[string]map[int32]bool{}     // topic -> partitions read to the end
	written := map[string]map[int32]bool{}       // topic -> partitions written
	polledBy := map[tv]map[string]bool{}         // value -> consumers that polled it
	procTxns := map[string]map[*txnInfo]bool{}   // consumer -> transactions it polled records of
	etlCommitted := map[string]map[int32]int64{} // input topic -> partition -> group's committed offset
	var reads, finals []Event
	var commitOKs []int64
	seen := false

	at := func(topic string, p int32, o int64, v string) {
		k := tpo{topic, p, o}
		if offsetValues[k] == nil {
			offsetValues[k] = map[string]bool{}
		}
		offsetValues[k][v] = true
	}
	observed := func(e Event) {
		at(e.Topic, e.Partition, e.Offset, e.Value)
		k := tv{e.Topic, e.Value}
		if valueOffsets[k] == nil {
			valueOffsets[k] = map[int64]bool{}
		}
		valueOffsets[k][e.Offset] = true
		valuePartition[k] = e.Partition
	}
	for _, e := range events {
		switch e.Kind {
		case KindTxnSend:
			seen = true
			t := get(e)
			t.writes = append(t.writes, e)
			if written[e.Topic] == nil {
				written[e.Topic] = map[int32]bool{}
			}
			written[e.Topic][e.Partition] = true
			if e.Outcome == OK {
				k := tpo{e.Topic, e.Partition, e.Offset}
				ackedAt[k], ackedValue[k] = t, e.Value
				at(e.Topic, e.Partition, e.Offset, e.Value)
			} else {
				unacked[tv{e.Topic, e.Value}] = append(unacked[tv{e.Topic, e.Value}], t)
			}
		case KindTxnEnd:
			seen = true
			t := get(e)
			if e.Detail != "commit" {
				continue
			}
			switch {
			case e.Phase == "start":
				t.commitStarts++
				if t.commitStart < 0 {
					t.commitStart = e.Time
				}
			case e.Outcome == OK:
				t.committed = true
				commitOKs = append(commitOKs, e.Time)
			case e.Outcome == Fail:
				t.commitFails++
			}
		case KindTxnRead:
			seen = true
			reads = append(reads, e)
			observed(e)
			k := tv{e.Topic, e.Value}
			if polledBy[k] == nil {
				polledBy[k] = map[string]bool{}
			}
			polledBy[k][e.Proc] = true
		case KindTxnFinal:
			seen = true
			finals = append(finals, e)
			observed(e)
			final[tpo{e.Topic, e.Partition, e.Offset}] = e.Value
			finalOffset[tv{e.Topic, e.Value}] = e.Offset
		case KindTxnFinalDone:
			seen = true
			if finalDone[e.Topic] == nil {
				finalDone[e.Topic] = map[int32]bool{}
			}
			finalDone[e.Topic][e.Partition] = true
		case KindTxnOffsets:
			if etlCommitted[e.Topic] == nil {
				etlCommitted[e.Topic] = map[int32]int64{}
			}
			etlCommitted[e.Topic][e.Partition] = e.Offset
		}
	}
	if !seen {
		return
	}
	st := &c.res.Txn
	st.ByStatus = map[TxnStatus]int{}
	for _, t := range txns {
		st.ByStatus[t.status()]++
		st.Writes += len(t.writes)
	}
	st.Reads, st.Final = len(reads), len(finals)
	// The transaction a record observed at an offset belongs to: the one
	// whose write was acknowledged there; else one whose write of that
	// value was not acknowledged (a value is written again when the loop
	// retries after an abort), the least suspect if several.
	resolve := func(topic string, p int32, o int64, v string) *txnInfo {
		k := tpo{topic, p, o}
		if t := ackedAt[k]; t != nil && ackedValue[k] == v {
			return t
		}
		cands := unacked[tv{topic, v}]
		if len(cands) == 0 {
			return nil
		}
		rank := map[TxnStatus]int{TxnCommitted: 0, TxnUnknown: 1, TxnAborted: 2}
		return slices.MinFunc(cands, func(a, b *txnInfo) int {
			return cmp.Or(cmp.Compare(rank[a.status()], rank[b.status()]), cmp.Compare(a.commitStart, b.commitStart))
		})
	}
	for _, e := range reads {
		if t := resolve(e.Topic, e.Partition, e.Offset, e.Value); t != nil {
			if procTxns[e.Proc] == nil {
				procTxns[e.Proc] = map[*txnInfo]bool{}
			}
			procTxns[e.Proc][t] = true
		}
	}

	// Aborted reads and reads past the LSO.
	for _, e := range append(slices.Clone(reads), finals...) {
		t := resolve(e.Topic, e.Partition, e.Offset, e.Value)
		if t == nil {
			continue
		}
		who := fmt.Sprintf("read by %s at t=%s", e.Proc, us(e.Time))
		if e.Kind == KindTxnFinal {
			who = "held by the final read"
		}
		switch {
		case t.status() == TxnAborted:
			c.flag(Anomaly{Name: AbortedRead, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
				Detail: fmt.Sprintf("%s; transaction %s of %s never requested a commit (%s)", who, t.id, t.proc, t.endSummary(events))})
		case e.Kind == KindTxnRead && (t.commitStart < 0 || e.Time < t.commitStart):
			c.flag(Anomaly{Name: ReadPastLSO, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
				Detail: fmt.Sprintf("%s in poll %d; transaction %s (%s) requested its commit only at t=%s", who, e.Poll, t.id, t.status(), us(t.commitStart))})
		}
	}

	// The final read against the transactions' outcomes.
	done := func(topic string, p int32) bool { return finalDone[topic][p] }
	for _, t := range sortedTxns(txns) {
		var present, missing []Event
		for _, w := range t.writes {
			if w.Outcome != OK || !done(w.Topic, w.Partition) {
				continue
			}
			if final[tpo{w.Topic, w.Partition, w.Offset}] == w.Value {
				present = append(present, w)
			} else {
				missing = append(missing, w)
			}
		}
		s := t.status()
		if s == TxnAborted {
			continue // its present records are aborted reads
		}
		if len(present) > 0 && len(missing) > 0 {
			m := missing[0]
			c.flag(Anomaly{Name: IntermediateRead, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Value: m.Value, Proc: t.proc,
				Detail: fmt.Sprintf("transaction %s (%s): the final read holds %s but not %s", t.id, s, valueList(present), valueList(missing))})
		}
		if s != TxnCommitted {
			continue
		}
		for _, w := range missing {
			if o, ok := finalOffset[tv{w.Topic, w.Value}]; ok {
				c.flag(Anomaly{Name: InconsistentOffsets, Topic: w.Topic, Partition: w.Partition, Offset: w.Offset, Value: w.Value, Proc: t.proc,
					Detail: fmt.Sprintf("transaction %s committed, record acknowledged at offset %d, the final read has it at %d and %q there", t.id, w.Offset, o, final[tpo{w.Topic, w.Partition, w.Offset}])})
				continue
			}
			c.flag(Anomaly{Name: LostCommittedWrite, Topic: w.Topic, Partition: w.Partition, Offset: w.Offset, Value: w.Value, Proc: t.proc,
				Detail: fmt.Sprintf("transaction %s committed, record acknowledged at offset %d (t=%s), absent from the final read (offset %d holds %q)",
					t.id, w.Offset, us(w.Time), w.Offset, final[tpo{w.Topic, w.Partition, w.Offset}])})
		}
		for _, w := range present {
			if len(polledBy[tv{w.Topic, w.Value}]) == 0 {
				c.flag(Anomaly{Name: UnseenAfterHealing, Topic: w.Topic, Partition: w.Partition, Offset: w.Offset, Value: w.Value, Proc: t.proc,
					Detail: fmt.Sprintf("transaction %s committed, record in the final read, never polled by any consumer", t.id)})
			}
		}
	}
	for _, topic := range slices.Sorted(maps.Keys(written)) {
		for _, p := range slices.Sorted(maps.Keys(written[topic])) {
			if !done(topic, p) {
				c.flag(Anomaly{Name: FinalReadMissing, Topic: topic, Partition: p, Offset: -1, Detail: "no complete final read of this partition"})
			}
		}
	}

	// One offset, one value; one value, one offset.
	for _, k := range slices.SortedFunc(maps.Keys(offsetValues), cmpTPO) {
		if vs := offsetValues[k]; len(vs) > 1 {
			c.flag(Anomaly{Name: InconsistentOffsets, Topic: k.topic, Partition: k.p, Offset: k.o,
				Detail: fmt.Sprintf("values %q observed at this offset", sortedKeys(vs))})
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(valueOffsets), func(a, b tv) int { return cmp.Or(strings.Compare(a.topic, b.topic), strings.Compare(a.v, b.v)) }) {
		if offs := valueOffsets[k]; len(offs) > 1 {
			c.flag(Anomaly{Name: Duplicate, Topic: k.topic, Partition: valuePartition[k], Offset: minKey(offs), Value: k.v,
				Detail: fmt.Sprintf("value observed at offsets %v", sortedKeys(offs))})
		}
	}

	c.checkTxnPolls(events, final, resolve, procTxns)
	c.checkEtl(etlCommitted, finals, finalDone)

	// In a transactional run, availability is the longest stretch without
	// a committed transaction.
	if c.res.Sends[OK] == 0 {
		c.res.Unavailable, c.res.UnavailableFrom = 0, 0
		start, end := workloadSpan(events)
		c.availabilityOf(commitOKs, start, end)
	}
}

// checkTxnPolls: within one assignment, a consumer's offsets on a partition
// strictly increase, and it steps over no record the final read holds
// (intermediate-read when it polled other records of that record's
// transaction, poll-skip otherwise).
func (c *checker) checkTxnPolls(events []Event, final map[tpo]string, resolve func(string, int32, int64, string) *txnInfo, procTxns map[string]map[*txnInfo]bool) {
	type key struct {
		proc, topic string
		p           int32
	}
	finalOffsets := map[key][]int64{} // proc "" -> the final read's offsets
	for k := range final {
		finalOffsets[key{"", k.topic, k.p}] = append(finalOffsets[key{"", k.topic, k.p}], k.o)
	}
	for _, offs := range finalOffsets {
		slices.Sort(offs)
	}
	last := map[key]int64{}
	for _, e := range events {
		switch e.Kind {
		case KindTxnAssign:
			for _, p := range e.Partitions {
				delete(last, key{e.Proc, e.Topic, p})
			}
		case KindTxnRead:
			k := key{e.Proc, e.Topic, e.Partition}
			prev, ok := last[k]
			last[k] = e.Offset
			if !ok {
				continue
			}
			if e.Offset <= prev {
				c.flag(Anomaly{Name: NonmonotonicPoll, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
					Detail: fmt.Sprintf("poll %d read offset %d after offset %d (t=%s)", e.Poll, e.Offset, prev, us(e.Time))})
				continue
			}
			offs := finalOffsets[key{"", e.Topic, e.Partition}]
			i, _ := slices.BinarySearch(offs, prev+1)
			for ; i < len(offs) && offs[i] < e.Offset; i++ {
				v := final[tpo{e.Topic, e.Partition, offs[i]}]
				t := resolve(e.Topic, e.Partition, offs[i], v)
				if t != nil && procTxns[e.Proc][t] {
					c.flag(Anomaly{Name: IntermediateRead, Topic: e.Topic, Partition: e.Partition, Offset: offs[i], Value: v, Proc: e.Proc,
						Detail: fmt.Sprintf("poll %d jumped from offset %d to %d over %q of transaction %s (t=%s), of which it read other records", e.Poll, prev, e.Offset, v, t.id, us(e.Time))})
				} else {
					c.flag(Anomaly{Name: PollSkip, Topic: e.Topic, Partition: e.Partition, Offset: offs[i], Value: v, Proc: e.Proc,
						Detail: fmt.Sprintf("poll %d jumped from offset %d to %d over %q (t=%s)", e.Poll, prev, e.Offset, v, us(e.Time))})
				}
			}
		}
	}
}

// checkEtl checks the consume-transform-produce loop against the final
// reads of its input and output topics: every input record below the
// group's committed offset has exactly one output, and every output comes
// from such a record. Outputs are found by value (EtlValue) in whichever
// topic holds them.
func (c *checker) checkEtl(committed map[string]map[int32]int64, finals []Event, finalDone map[string]map[int32]bool) {
	if len(committed) == 0 {
		return
	}
	outputs := map[string]Event{} // input value -> its output's final read event
	outTopics := map[string]bool{}
	for _, e := range finals {
		if in, ok := strings.CutPrefix(e.Value, "etl:"); ok {
			outputs[in] = e
			outTopics[e.Topic] = true
		}
	}
	outDone := len(outTopics) > 0
	for t := range outTopics {
		for _, d := range finalDone[t] {
			outDone = outDone && d
		}
	}
	inDone := true
	for t, ps := range committed {
		for p := range ps {
			inDone = inDone && finalDone[t][p]
		}
	}
	inputOf := map[string]Event{}
	for _, e := range finals {
		upTo, ok := committed[e.Topic][e.Partition]
		if !ok {
			continue
		}
		inputOf[e.Value] = e
		if e.Offset < upTo && outDone {
			if _, ok := outputs[e.Value]; !ok {
				c.flag(Anomaly{Name: LostCommittedWrite, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: "etl",
					Detail: fmt.Sprintf("input below the group's committed offset %d, no output %q in the final read", upTo, EtlValue(e.Value))})
			}
		}
	}
	for _, in := range slices.Sorted(maps.Keys(outputs)) {
		out := outputs[in]
		src, ok := inputOf[in]
		switch {
		case !ok && inDone:
			c.flag(Anomaly{Name: AbortedRead, Topic: out.Topic, Partition: out.Partition, Offset: out.Offset, Value: out.Value, Proc: "etl",
				Detail: fmt.Sprintf("output of %q, which the final read of the input does not hold", in)})
		case ok && src.Offset >= committed[src.Topic][src.Partition]:
			c.flag(Anomaly{Name: Duplicate, Topic: out.Topic, Partition: out.Partition, Offset: out.Offset, Value: out.Value, Proc: "etl",
				Detail: fmt.Sprintf("output committed, but its input at offset %d is not below the group's committed offset %d: it would be written again", src.Offset, committed[src.Topic][src.Partition])})
		}
	}
}

// endSummary describes how t's end attempts went.
func (t *txnInfo) endSummary(events []Event) string {
	var parts []string
	for _, e := range events {
		if e.Kind == KindTxnEnd && e.Txn == t.id && e.Phase == "end" {
			s := fmt.Sprintf("%s %s", e.Detail, e.Outcome)
			if e.Err != "" {
				s += ": " + e.Err
			}
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "no end recorded"
	}
	return strings.Join(parts, "; ")
}

func sortedTxns(m map[string]*txnInfo) []*txnInfo {
	out := slices.Collect(maps.Values(m))
	slices.SortFunc(out, func(a, b *txnInfo) int { return strings.Compare(a.id, b.id) })
	return out
}

func valueList(es []Event) string {
	var vs []string
	for _, e := range es {
		vs = append(vs, fmt.Sprintf("%s@p%d", e.Value, e.Partition))
	}
	return strings.Join(vs, ", ")
}

func cmpTPO(a, b tpo) int {
	return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.p, b.p), cmp.Compare(a.o, b.o))
}

// availabilityOf sets the longest stretch between start, the times in oks
// and end.
func (c *checker) availabilityOf(oks []int64, start, end int64) {
	slices.Sort(oks)
	if start < 0 && len(oks) > 0 {
		start = oks[0]
	}
	if end < 0 && len(oks) > 0 {
		end = oks[len(oks)-1]
	}
	prev := start
	for _, t := range append(oks, end) {
		if t < start || t > end {
			continue
		}
		if d := time.Duration(t-prev) * time.Microsecond; d > c.res.Unavailable {
			c.res.Unavailable, c.res.UnavailableFrom = d, prev
		}
		prev = t
	}
}
