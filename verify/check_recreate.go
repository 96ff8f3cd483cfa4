package verify

import (
	"fmt"
	"maps"
	"slices"
)

// checkRecreated checks the sends, reads and final reads of topics the
// RecreateTopic fault deletes and creates again (see recreate.go), one
// topic at a time. A deleted incarnation's records are legitimately gone,
// so the main topic's rules do not apply; these do:
//
//   - stale-incarnation-read: a client started after incarnation k was
//     created (its assign event says k; the final read is such a client)
//     reads a record written to an incarnation before k. A record whose
//     send was indefinite is exempt: a request lost in a buffer might in
//     principle be applied after the re-creation.
//   - lost-write and inconsistent-offsets within the last incarnation:
//     each acknowledged write to it is in the final read, at the offset
//     its acknowledgement gave.
//   - aborted-read: a definitely failed send is read.
//   - final-read-incomplete: a partition written to has no complete final
//     read.
//
// Replica divergence is checked by Check for every topic.
func (c *checker) checkRecreated(events []Event) {
	byTopic := map[string][]Event{}
	for _, e := range events {
		byTopic[e.Topic] = append(byTopic[e.Topic], e)
		if e.Kind == KindSend {
			c.countSend(e)
		}
	}
	for _, topic := range slices.Sorted(maps.Keys(byTopic)) {
		c.checkIncarnations(topic, byTopic[topic])
	}
}

func (c *checker) checkIncarnations(topic string, events []Event) {
	outcome := map[pv]Outcome{} // a value's send outcome
	var acked []Event
	partitions := map[int32]bool{}
	for _, e := range events {
		if e.Kind == KindSend {
			outcome[pv{e.Partition, e.Value}] = e.Outcome
			partitions[e.Partition] = true
			if e.Outcome == OK {
				acked = append(acked, e)
			}
		}
	}

	clientInc := map[string]int32{} // consumer -> incarnation its current client started in
	finalAt := map[po]string{}
	finalOffsets := map[pv][]int64{}
	finalDone := map[int32]bool{}
	var last int32 // the incarnation the final read read
	for _, e := range events {
		switch e.Kind {
		case KindAssign:
			clientInc[e.Proc] = e.Incarnation
			if e.Proc == "final" {
				last = e.Incarnation
			}
		case KindRead, KindFinal:
			if e.Kind == KindRead {
				c.res.Reads++
			} else {
				c.res.Final++
				finalAt[po{e.Partition, e.Offset}] = e.Value
				finalOffsets[pv{e.Partition, e.Value}] = append(finalOffsets[pv{e.Partition, e.Value}], e.Offset)
			}
			k, ok := incarnationOf(e.Value)
			sent := outcome[pv{e.Partition, e.Value}]
			switch {
			case sent == Fail:
				c.flag(Anomaly{Name: AbortedRead, Topic: topic, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
					Detail: fmt.Sprintf("send failed definitely but was read (t=%s)", us(e.Time))})
			case ok && k < clientInc[e.Proc] && sent != Info:
				c.flag(Anomaly{Name: StaleIncarnationRead, Topic: topic, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
					Detail: fmt.Sprintf("record of incarnation %d read at t=%s by a client started in incarnation %d", k, us(e.Time), clientInc[e.Proc])})
			}
		case KindFinalDone:
			finalDone[e.Partition] = true
			partitions[e.Partition] = true
		}
	}

	for _, s := range acked {
		if k, ok := incarnationOf(s.Value); !ok || k != last || !finalDone[s.Partition] {
			continue
		}
		offs := finalOffsets[pv{s.Partition, s.Value}]
		switch {
		case len(offs) == 0:
			c.flag(Anomaly{Name: LostWrite, Topic: topic, Partition: s.Partition, Offset: s.Offset, Value: s.Value, Proc: s.Proc,
				Detail: fmt.Sprintf("acknowledged at offset %d (t=%s) in incarnation %d, absent from the final read (offset %d holds %q)", s.Offset, us(s.Time), last, s.Offset, finalAt[po{s.Partition, s.Offset}])})
		case finalAt[po{s.Partition, s.Offset}] != s.Value:
			c.flag(Anomaly{Name: InconsistentOffsets, Topic: topic, Partition: s.Partition, Offset: s.Offset, Value: s.Value, Proc: s.Proc,
				Detail: fmt.Sprintf("acknowledged at offset %d in incarnation %d, the final read has it at %v and %q there", s.Offset, last, offs, finalAt[po{s.Partition, s.Offset}])})
		}
	}
	for _, p := range slices.Sorted(maps.Keys(partitions)) {
		if !finalDone[p] {
			c.flag(Anomaly{Name: FinalReadMissing, Topic: topic, Partition: p, Offset: -1, Detail: "no complete final read of this partition"})
		}
	}
}
