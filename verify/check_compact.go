package verify

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// The compacted topic's anomalies (compact.go).
const (
	// LostLatestValue: after cleaning, the final read's last record of a
	// key is older than the key's latest acknowledged write (or the key
	// is gone although no write after that one could have deleted it).
	LostLatestValue = "lost-latest-value"
	// ResurrectedKey: a key whose latest acknowledged write is a
	// tombstone has an older value as its last record in the final read:
	// the tombstone went and an earlier value stayed.
	ResurrectedKey = "resurrected-key"
	// ReorderedKey: a read (consumer or final) finds a key's
	// acknowledged write after a later write of the same key.
	ReorderedKey = "reordered-key"
	// TombstoneRetained: the final read, taken once the producers had
	// stopped, fence records kept the cleaner busy and delete.retention.ms
	// had long passed (Settle), still holds a tombstone.
	TombstoneRetained = "tombstone-retained"
	// PhantomRecord: a record read whose id no producer sent, or whose
	// key or value kind (tombstone or not) is not the one sent.
	PhantomRecord = "phantom-record"
)

// CompactAnomalies lists the anomalies only the compacted topic's checker
// reports; it also reports aborted-read, inconsistent-offsets, duplicate,
// nonmonotonic-poll and final-read-incomplete.
var CompactAnomalies = []string{LostLatestValue, ResurrectedKey, ReorderedKey, TombstoneRetained, PhantomRecord}

// CompactStats summarises the compacted topic's events.
type CompactStats struct {
	Sends      int // records the producers sent (fences included)
	Tombstones int // of which tombstones
	Keys       int // keys written
	Final      int // records in the final read
	FinalTombs int // of which tombstones
	LiveKeys   int // keys whose last record in the final read is a value
	Reads      int // records the reader read
}

// ofCompactedTopic reports whether e is a send, read, assignment or final
// read of the compacted topic.
func ofCompactedTopic(e Event) bool {
	switch e.Kind {
	case KindSend, KindRead, KindAssign, KindFinal, KindFinalDone:
		return e.Topic == CompactTopicName
	}
	return false
}

// checkCompacted checks the compacted topic's events (in recording order).
// Each key is written by one producer, so its writes are ordered by their
// Seq. Offsets are never rewritten by cleaning, so every record a read
// returns must sit at the offset its acknowledgement gave, each record id
// at one offset only, and a consumer's offsets strictly increase within an
// assignment (holes allowed). The final read (after Settle) must hold, for
// every key, a last record at least as late as the key's latest
// acknowledged write (resurrected-key / lost-latest-value otherwise) and no
// tombstone at all. A read must never find an acknowledged write after a
// later write of the same key. It returns the times of the producers'
// acknowledged writes (fences left out), for the availability figure.
func (c *checker) checkCompacted(events []Event) (oks []int64) {
	if len(events) == 0 {
		return nil
	}
	sends := map[string]Event{}           // id -> send
	byKey := map[string][]Event{}         // key -> its sends, by Seq
	partitions := map[int32]bool{}        // written
	offsetIDs := map[po]map[string]bool{} // offset -> ids acks and reads put there
	idOffsets := map[string]map[int64]bool{}
	st := &c.res.Compact
	observe := func(p int32, o int64, id string) {
		k := po{p, o}
		if offsetIDs[k] == nil {
			offsetIDs[k] = map[string]bool{}
		}
		offsetIDs[k][id] = true
	}
	for _, e := range events {
		if e.Kind != KindSend {
			continue
		}
		c.countSend(e)
		sends[e.Value] = e
		byKey[e.Key] = append(byKey[e.Key], e)
		partitions[e.Partition] = true
		st.Sends++
		if e.Tombstone {
			st.Tombstones++
		}
		if e.Outcome == OK {
			observe(e.Partition, e.Offset, e.Value)
			if e.Proc != fenceProc {
				oks = append(oks, e.Time)
			}
		}
	}
	st.Keys = len(byKey)
	for _, ss := range byKey {
		slices.SortFunc(ss, func(a, b Event) int { return cmp.Compare(a.Seq, b.Seq) })
	}

	type procPart struct {
		proc string
		p    int32
	}
	type procKey struct {
		proc, key string
	}
	lastOffset := map[procPart]int64{} // within the current assignment
	latestSeen := map[procKey]Event{}  // the highest-Seq send of each key read so far in the assignment
	finalLast := map[string]Event{}    // key -> its last record in the final read
	finalDone := map[int32]bool{}
	var finalTombs []Event
	for _, e := range events {
		switch e.Kind {
		case KindAssign:
			for _, p := range e.Partitions {
				delete(lastOffset, procPart{e.Proc, p})
			}
			for k := range latestSeen {
				if k.proc == e.Proc {
					delete(latestSeen, k)
				}
			}
			continue
		case KindFinalDone:
			finalDone[e.Partition] = true
			partitions[e.Partition] = true
			continue
		case KindRead:
			c.res.Reads++
			st.Reads++
		case KindFinal:
			c.res.Final++
			st.Final++
			finalLast[e.Key] = e
			if e.Tombstone {
				st.FinalTombs++
				finalTombs = append(finalTombs, e)
			}
		default:
			continue
		}
		// A record read, by a consumer or the final read.
		observe(e.Partition, e.Offset, e.Value)
		if idOffsets[e.Value] == nil {
			idOffsets[e.Value] = map[int64]bool{}
		}
		idOffsets[e.Value][e.Offset] = true
		pp := procPart{e.Proc, e.Partition}
		if prev, ok := lastOffset[pp]; ok && e.Offset <= prev {
			c.flag(Anomaly{Name: NonmonotonicPoll, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
				Detail: fmt.Sprintf("read offset %d after offset %d (t=%s)", e.Offset, prev, us(e.Time))})
		}
		lastOffset[pp] = e.Offset
		s, ok := sends[e.Value]
		switch {
		case !ok:
			c.flag(Anomaly{Name: PhantomRecord, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
				Detail: fmt.Sprintf("key %q tombstone=%v read at t=%s: no producer sent this id", e.Key, e.Tombstone, us(e.Time))})
			continue
		case s.Key != e.Key || s.Tombstone != e.Tombstone || s.Partition != e.Partition:
			c.flag(Anomaly{Name: PhantomRecord, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
				Detail: fmt.Sprintf("read as key %q tombstone=%v in partition %d, sent as key %q tombstone=%v to partition %d", e.Key, e.Tombstone, e.Partition, s.Key, s.Tombstone, s.Partition)})
			continue
		case s.Outcome == Fail:
			c.flag(Anomaly{Name: AbortedRead, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
				Detail: fmt.Sprintf("send failed definitely (%s) but was read at t=%s", s.Err, us(e.Time))})
		case s.Outcome == OK && s.Offset != e.Offset:
			c.flag(Anomaly{Name: InconsistentOffsets, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
				Detail: fmt.Sprintf("acknowledged at offset %d, read at offset %d (t=%s): cleaning must not move records", s.Offset, e.Offset, us(e.Time))})
		}
		pk := procKey{e.Proc, e.Key}
		if later, ok := latestSeen[pk]; ok && later.Seq > s.Seq && s.Outcome == OK {
			c.flag(Anomaly{Name: ReorderedKey, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
				Detail: fmt.Sprintf("key %s: write #%d (acknowledged at offset %d) read at offset %d after write #%d (%s); the producer sent #%d after #%d was acknowledged", e.Key, s.Seq, s.Offset, e.Offset, later.Seq, later.Value, later.Seq, s.Seq)})
		}
		if cur, ok := latestSeen[pk]; !ok || s.Seq > cur.Seq {
			latestSeen[pk] = s
		}
	}

	// One offset, one record; one record, one offset.
	for _, k := range sortedPO(offsetIDs) {
		if ids := offsetIDs[k]; len(ids) > 1 {
			c.flag(Anomaly{Name: InconsistentOffsets, Topic: CompactTopicName, Partition: k.p, Offset: k.o,
				Detail: fmt.Sprintf("records %q observed at this offset (acknowledgements and reads)", sortedKeys(ids))})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(idOffsets)) {
		if offs := idOffsets[id]; len(offs) > 1 {
			c.flag(Anomaly{Name: Duplicate, Topic: CompactTopicName, Partition: sends[id].Partition, Offset: minKey(offs), Value: id,
				Detail: fmt.Sprintf("record read at offsets %v", sortedKeys(offs))})
		}
	}
	for _, p := range slices.Sorted(maps.Keys(partitions)) {
		if !finalDone[p] {
			c.flag(Anomaly{Name: FinalReadMissing, Topic: CompactTopicName, Partition: p, Offset: -1, Detail: "no complete final read of this partition"})
		}
	}
	for _, e := range finalTombs {
		if finalDone[e.Partition] {
			c.flag(Anomaly{Name: TombstoneRetained, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
				Detail: fmt.Sprintf("tombstone of key %s still in the final read, taken after the producers stopped and fences kept the cleaner busy past delete.retention.ms", e.Key)})
		}
	}

	for _, e := range finalLast {
		if !e.Tombstone {
			st.LiveKeys++
		}
	}

	// Every key's last record in the final read against its writes.
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		ss := byKey[key]
		if !finalDone[ss[0].Partition] {
			continue
		}
		var latest *Event // the latest acknowledged write
		for i := range ss {
			if ss[i].Outcome == OK {
				latest = &ss[i]
			}
		}
		if latest == nil {
			continue // nothing acknowledged: any state will do
		}
		last, present := finalLast[key]
		if !present {
			if latest.Tombstone {
				continue
			}
			// Gone although the latest acknowledged write is a value:
			// fine only if a later tombstone may have been written.
			if slices.ContainsFunc(ss, func(s Event) bool { return s.Seq > latest.Seq && s.Tombstone && s.Outcome != Fail }) {
				continue
			}
			c.flag(Anomaly{Name: LostLatestValue, Topic: CompactTopicName, Partition: latest.Partition, Offset: latest.Offset, Value: latest.Value, Proc: latest.Proc,
				Detail: fmt.Sprintf("key %s: write #%d acknowledged at offset %d (t=%s), the final read has no record of the key and no later write deleted it", key, latest.Seq, latest.Offset, us(latest.Time))})
			continue
		}
		s, ok := sends[last.Value]
		if !ok || s.Seq >= latest.Seq {
			continue // a phantom was flagged above; a later write is fine
		}
		name := LostLatestValue
		if latest.Tombstone && !last.Tombstone {
			name = ResurrectedKey
		}
		c.flag(Anomaly{Name: name, Topic: CompactTopicName, Partition: latest.Partition, Offset: latest.Offset, Value: latest.Value, Proc: latest.Proc,
			Detail: fmt.Sprintf("key %s: write #%d (tombstone=%v) acknowledged at offset %d (t=%s), but the final read's last record of the key is the earlier write #%d (tombstone=%v) at offset %d",
				key, latest.Seq, latest.Tombstone, latest.Offset, us(latest.Time), s.Seq, last.Tombstone, last.Offset)})
	}
	return oks
}
