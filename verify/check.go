package verify

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"
)

// Anomaly names, as in Jepsen's Kafka workload where one exists.
const (
	LostWrite           = "lost-write"           // an acknowledged record missing from the final read
	InconsistentOffsets = "inconsistent-offsets" // one offset, two values
	Duplicate           = "duplicate"            // one value at two offsets
	NonmonotonicSend    = "nonmonotonic-send"    // a producer's later send acknowledged at a lower offset
	NonmonotonicPoll    = "nonmonotonic-poll"    // a consumer's offsets went backwards (or repeated) within one assignment
	PollSkip            = "poll-skip"            // a consumer jumped over records that exist
	AbortedRead         = "aborted-read"         // a definitely failed send shows up
	UnseenAfterHealing  = "unseen-after-healing" // an acknowledged record no consumer saw by the end
	DirtyRead           = "dirty-read"           // a consumer saw a record the final read does not hold (read past the HW)
	FinalReadMissing    = "final-read-incomplete"
	LeaderEpochBack     = "leader-epoch-regression"
	ControllerEpochBack = "controller-epoch-regression"
	EmptyISR            = "empty-isr"
	ReplicaDivergence   = "replica-divergence"
	// StaleIncarnationRead: a record of a deleted incarnation of the
	// re-created topic read by a client started after the topic was created
	// again (or found by the final read).
	StaleIncarnationRead = "stale-incarnation-read"
)

// AllAnomalies lists every anomaly the checker can report, in report order.
var AllAnomalies = []string{
	LostWrite, InconsistentOffsets, Duplicate, NonmonotonicSend, NonmonotonicPoll, PollSkip,
	AbortedRead, UnseenAfterHealing, DirtyRead, FinalReadMissing, LeaderEpochBack,
	ControllerEpochBack, EmptyISR, ReplicaDivergence, StaleIncarnationRead,
}

// Anomaly is one finding, with enough of the history to find it again.
type Anomaly struct {
	Name      string `json:"name"`
	Topic     string `json:"topic,omitempty"` // empty: the main topic
	Partition int32  `json:"p"`
	Offset    int64  `json:"o"`
	Value     string `json:"v,omitempty"`
	Proc      string `json:"proc,omitempty"`
	Detail    string `json:"detail"`
}

func (a Anomaly) String() string {
	topic := ""
	if a.Topic != "" {
		topic = a.Topic + " "
	}
	return fmt.Sprintf("%s %sp%d o%d %s %s: %s", a.Name, topic, a.Partition, a.Offset, a.Proc, a.Value, a.Detail)
}

// Result is what Check found.
type Result struct {
	Anomalies []Anomaly
	// ByName counts anomalies per name.
	ByName map[string]int
	// Sends counts sends per outcome; Reads counts consumer records seen
	// and Final the records of the final read.
	Sends       map[Outcome]int
	Reads       int
	Final       int
	SendsByProc map[string]map[Outcome]int
	// Unavailable is the longest stretch between the workload's start, its
	// successful acks=all writes and its end; UnavailableFrom is when
	// (microseconds since the run started) it began.
	Unavailable     time.Duration
	UnavailableFrom int64
	// Txn summarises the transactional workload's events, if any (then
	// Unavailable is the longest stretch without a committed transaction).
	Txn TxnStats
	// Compact summarises the compacted topic's events, if any.
	Compact CompactStats
	// Share summarises the share group workload's events, if any.
	Share ShareStats
}

// Valid reports whether no anomaly was found.
func (r Result) Valid() bool { return len(r.Anomalies) == 0 }

// Has reports whether an anomaly of this name was found.
func (r Result) Has(name string) bool { return r.ByName[name] > 0 }

// maxPerName bounds how many anomalies of one name a result keeps in full
// (the count stays exact).
const maxPerName = 50

type checker struct {
	res Result
}

func (c *checker) flag(a Anomaly) {
	c.res.ByName[a.Name]++
	if c.res.ByName[a.Name] <= maxPerName {
		c.res.Anomalies = append(c.res.Anomalies, a)
	}
}

type pv struct {
	p int32
	v string
}

type po struct {
	p int32
	o int64
}

// countSend adds a send to the totals.
func (c *checker) countSend(e Event) {
	c.res.Sends[e.Outcome]++
	if c.res.SendsByProc[e.Proc] == nil {
		c.res.SendsByProc[e.Proc] = map[Outcome]int{}
	}
	c.res.SendsByProc[e.Proc][e.Outcome]++
}

// ofRecreatedTopic reports whether e is a send, read, assignment or final
// read of the re-created topic, which check_recreate.go checks instead of
// the rules below (they assume records live for the whole run).
func ofRecreatedTopic(e Event) bool {
	switch e.Kind {
	case KindSend, KindRead, KindAssign, KindFinal, KindFinalDone:
		return e.Topic != ""
	}
	return false
}

// Check analyses a history. Events must be in recording order (the order
// a Recorder keeps them in).
func Check(history []Event) Result {
	c := &checker{res: Result{
		ByName:      map[string]int{},
		Sends:       map[Outcome]int{},
		SendsByProc: map[string]map[Outcome]int{},
	}}
	var events, recreated, compacted, shared []Event
	for _, e := range history {
		if ofShareTopic(e) {
			shared = append(shared, e)
		} else if ofCompactedTopic(e) {
			compacted = append(compacted, e)
		} else if ofRecreatedTopic(e) {
			recreated = append(recreated, e)
		} else {
			events = append(events, e)
		}
	}
	c.checkRecreated(recreated)
	compactOKs := c.checkCompacted(compacted)
	c.checkShare(shared)

	final := map[po]string{}                 // the final read
	finalValues := map[pv][]int64{}          // value -> offsets in the final read
	finalDone := map[int32]bool{}            // partitions whose final read completed
	seen := map[pv]bool{}                    // values any consumer read
	readOffsets := map[pv]map[int64]bool{}   // value -> offsets where consumers or the final read saw it
	offsetValues := map[po]map[string]bool{} // offset -> values acks, reads and the final read put there
	var sends []Event
	partitions := map[int32]bool{}

	observe := func(p int32, o int64, v string) {
		k := po{p, o}
		if offsetValues[k] == nil {
			offsetValues[k] = map[string]bool{}
		}
		offsetValues[k][v] = true
	}
	readAt := func(p int32, o int64, v string) {
		k := pv{p, v}
		if readOffsets[k] == nil {
			readOffsets[k] = map[int64]bool{}
		}
		readOffsets[k][o] = true
		observe(p, o, v)
	}

	for _, e := range events {
		switch e.Kind {
		case KindSend:
			sends = append(sends, e)
			partitions[e.Partition] = true
			c.countSend(e)
			if e.Outcome == OK {
				observe(e.Partition, e.Offset, e.Value)
			}
		case KindRead:
			c.res.Reads++
			seen[pv{e.Partition, e.Value}] = true
			readAt(e.Partition, e.Offset, e.Value)
		case KindFinal:
			c.res.Final++
			final[po{e.Partition, e.Offset}] = e.Value
			finalValues[pv{e.Partition, e.Value}] = append(finalValues[pv{e.Partition, e.Value}], e.Offset)
			readAt(e.Partition, e.Offset, e.Value)
		case KindFinalDone:
			finalDone[e.Partition] = true
			partitions[e.Partition] = true
		}
	}
	workStart, workEnd := workloadSpan(events)

	// Acknowledged and failed sends against the final read and the reads.
	for _, s := range sends {
		k := pv{s.Partition, s.Value}
		switch s.Outcome {
		case OK:
			if finalDone[s.Partition] && len(finalValues[k]) == 0 {
				c.flag(Anomaly{Name: LostWrite, Partition: s.Partition, Offset: s.Offset, Value: s.Value, Proc: s.Proc,
					Detail: fmt.Sprintf("acknowledged at offset %d (t=%s), absent from the final read (offset %d holds %q)", s.Offset, us(s.Time), s.Offset, final[po{s.Partition, s.Offset}])})
			}
			if finalDone[s.Partition] && !seen[k] {
				c.flag(Anomaly{Name: UnseenAfterHealing, Partition: s.Partition, Offset: s.Offset, Value: s.Value, Proc: s.Proc,
					Detail: "acknowledged, never polled by any consumer"})
			}
		case Fail:
			if offs := readOffsets[k]; len(offs) > 0 {
				c.flag(Anomaly{Name: AbortedRead, Partition: s.Partition, Offset: minKey(offs), Value: s.Value, Proc: s.Proc,
					Detail: fmt.Sprintf("send failed definitely (%s) but was read at offsets %v", s.Err, sortedKeys(offs))})
			}
		}
	}
	for p := range partitions {
		if !finalDone[p] {
			c.flag(Anomaly{Name: FinalReadMissing, Partition: p, Offset: -1, Detail: "no complete final read of this partition"})
		}
	}

	// One offset, one value; one value, one offset.
	for _, k := range sortedPO(offsetValues) {
		if vs := offsetValues[k]; len(vs) > 1 {
			c.flag(Anomaly{Name: InconsistentOffsets, Partition: k.p, Offset: k.o,
				Detail: fmt.Sprintf("values %q observed at this offset", sortedKeys(vs))})
		}
	}
	for _, k := range sortedPV(readOffsets) {
		if offs := readOffsets[k]; len(offs) > 1 {
			c.flag(Anomaly{Name: Duplicate, Partition: k.p, Offset: minKey(offs), Value: k.v,
				Detail: fmt.Sprintf("value read at offsets %v", sortedKeys(offs))})
		}
	}
	// Reads the final read does not confirm.
	for _, e := range events {
		if e.Kind != KindRead || !finalDone[e.Partition] {
			continue
		}
		if _, ok := final[po{e.Partition, e.Offset}]; !ok && len(finalValues[pv{e.Partition, e.Value}]) == 0 {
			c.flag(Anomaly{Name: DirtyRead, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
				Detail: fmt.Sprintf("read in poll %d at t=%s; neither the offset nor the value is in the final read", e.Poll, us(e.Time))})
		}
	}

	c.checkSendOrder(sends)
	c.checkPolls(events, final)
	c.checkEpochs(events)
	for _, e := range events {
		if e.Kind == KindReplica && e.Outcome != OK {
			c.flag(Anomaly{Name: ReplicaDivergence, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Proc: e.Proc, Detail: e.Detail})
		}
	}
	c.availability(sends, workStart, workEnd)
	if len(sends) == 0 && len(compactOKs) > 0 {
		// A run of the compacted workload alone (--compact).
		c.res.Unavailable, c.res.UnavailableFrom = 0, 0
		c.availabilityOf(compactOKs, workStart, workEnd)
	}
	c.checkTxn(events)
	return c.res
}

// checkSendOrder: a producer's acknowledged sends to one partition land in
// the order it sent them.
func (c *checker) checkSendOrder(sends []Event) {
	type key struct {
		proc string
		p    int32
	}
	byKey := map[key][]Event{}
	for _, s := range sends {
		if s.Outcome == OK {
			k := key{s.Proc, s.Partition}
			byKey[k] = append(byKey[k], s)
		}
	}
	keys := make([]key, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].proc != keys[j].proc {
			return keys[i].proc < keys[j].proc
		}
		return keys[i].p < keys[j].p
	})
	for _, k := range keys {
		ss := byKey[k]
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].Seq < ss[j].Seq })
		for i := 1; i < len(ss); i++ {
			if ss[i].Offset <= ss[i-1].Offset {
				c.flag(Anomaly{Name: NonmonotonicSend, Partition: k.p, Offset: ss[i].Offset, Value: ss[i].Value, Proc: k.proc,
					Detail: fmt.Sprintf("send #%d acknowledged at offset %d, after send #%d (%q) at offset %d", ss[i].Seq, ss[i].Offset, ss[i-1].Seq, ss[i-1].Value, ss[i-1].Offset)})
			}
		}
	}
}

// checkPolls: within one assignment, each consumer's offsets on a
// partition strictly increase and never jump over a record the final read
// holds.
func (c *checker) checkPolls(events []Event, final map[po]string) {
	type key struct {
		proc string
		p    int32
	}
	last := map[key]int64{}
	finalOffsets := map[int32][]int64{}
	for k := range final {
		finalOffsets[k.p] = append(finalOffsets[k.p], k.o)
	}
	for _, offs := range finalOffsets {
		slices.Sort(offs)
	}
	for _, e := range events {
		switch e.Kind {
		case KindAssign:
			for _, p := range e.Partitions {
				delete(last, key{e.Proc, p})
			}
		case KindRead:
			k := key{e.Proc, e.Partition}
			prev, ok := last[k]
			last[k] = e.Offset
			if !ok {
				continue
			}
			if e.Offset <= prev {
				c.flag(Anomaly{Name: NonmonotonicPoll, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
					Detail: fmt.Sprintf("poll %d read offset %d after offset %d (t=%s)", e.Poll, e.Offset, prev, us(e.Time))})
				continue
			}
			offs := finalOffsets[e.Partition]
			i, _ := slices.BinarySearch(offs, prev+1)
			if i < len(offs) && offs[i] < e.Offset {
				c.flag(Anomaly{Name: PollSkip, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
					Detail: fmt.Sprintf("poll %d jumped from offset %d to %d over offset %d (%q) (t=%s)", e.Poll, prev, e.Offset, offs[i], final[po{e.Partition, offs[i]}], us(e.Time))})
			}
		}
	}
}

// checkEpochs: leader epochs per partition and the controller epoch never
// go backwards; a partition's ISR is never empty.
func (c *checker) checkEpochs(events []Event) {
	leaderEpoch := map[int32]int32{}
	controllerEpoch := int32(-1)
	for _, e := range events {
		if e.Kind != KindEpoch {
			continue
		}
		if e.Partition < 0 {
			if e.ControllerEpoch < controllerEpoch {
				c.flag(Anomaly{Name: ControllerEpochBack, Partition: -1, Offset: -1,
					Detail: fmt.Sprintf("controller epoch %d observed after %d (t=%s)", e.ControllerEpoch, controllerEpoch, us(e.Time))})
			}
			controllerEpoch = max(controllerEpoch, e.ControllerEpoch)
			continue
		}
		if prev, ok := leaderEpoch[e.Partition]; ok && e.LeaderEpoch < prev {
			c.flag(Anomaly{Name: LeaderEpochBack, Partition: e.Partition, Offset: -1,
				Detail: fmt.Sprintf("leader epoch %d (leader %d) observed after %d (t=%s)", e.LeaderEpoch, e.Leader, prev, us(e.Time))})
		}
		leaderEpoch[e.Partition] = max(leaderEpoch[e.Partition], e.LeaderEpoch)
		if len(e.ISR) == 0 {
			c.flag(Anomaly{Name: EmptyISR, Partition: e.Partition, Offset: -1,
				Detail: fmt.Sprintf("empty ISR at leader epoch %d (t=%s)", e.LeaderEpoch, us(e.Time))})
		}
	}
}

// availability finds the longest stretch of the workload without a
// successful write.
func (c *checker) availability(sends []Event, start, end int64) {
	var oks []int64
	for _, s := range sends {
		if s.Outcome == OK {
			oks = append(oks, s.Time)
		}
	}
	c.availabilityOf(oks, start, end)
}

// workloadSpan is when the workload started and ended (-1: not recorded).
func workloadSpan(events []Event) (start, end int64) {
	start, end = -1, -1
	for _, e := range events {
		if e.Kind != KindPhase {
			continue
		}
		switch e.Detail {
		case "workload-start":
			start = e.Time
		case "workload-end":
			end = e.Time
		}
	}
	return start, end
}

func us(t int64) string {
	return (time.Duration(t) * time.Microsecond).Round(time.Millisecond).String()
}

func minKey(m map[int64]bool) int64 {
	return sortedKeys(m)[0]
}

func sortedKeys[K int64 | string](m map[K]bool) []K { return slices.Sorted(maps.Keys(m)) }

// sortedPO and sortedPV give map keys by partition, then offset or value.
func sortedPO[V any](m map[po]V) []po {
	return slices.SortedFunc(maps.Keys(m), func(a, b po) int { return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.o, b.o)) })
}

func sortedPV[V any](m map[pv]V) []pv {
	return slices.SortedFunc(maps.Keys(m), func(a, b pv) int { return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.v, b.v)) })
}
