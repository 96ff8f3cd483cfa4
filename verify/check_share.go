package verify

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// The share group workload's anomalies (share.go).
const (
	// ShareLost: a record whose write was acknowledged (acks=all) was
	// never delivered to any member of the share group, although the
	// group reads the topic from its first offset (share.auto.offset.reset
	// is earliest before any member joins, and nothing is deleted from
	// the log) and the drain after healing ran until every acknowledged
	// write had been delivered and accepted, or its bound passed.
	ShareLost = "share-lost"
	// ShareRedeliveredAfterAck: a record delivered again although a
	// member's acceptance of it had been acknowledged by the broker
	// before the delivery's fetch can have begun (its Floor is later than
	// the acknowledgement's answer).
	ShareRedeliveredAfterAck = "share-redelivered-after-ack"
	// ShareUnknownRecord: a delivered record no producer wrote: a value
	// never sent, sent with a definite failure, or acknowledged at
	// another partition or offset than the one it was delivered from.
	ShareUnknownRecord = "share-unknown-record"
)

// ShareAnomalies lists the anomalies only the share group's checker
// reports; it also reports duplicate (one value delivered from two
// offsets) and final-read-incomplete (no drain of a partition).
var ShareAnomalies = []string{ShareLost, ShareRedeliveredAfterAck, ShareUnknownRecord}

// ShareStats summarises the share group workload's events.
type ShareStats struct {
	Sends      int // records the producer sent
	Written    int // of which acknowledged
	Deliveries int // records delivered to members, redeliveries included
	Delivered  int // distinct records delivered
	// Redelivered counts records delivered more than once (allowed: a
	// release, a lock timeout, a failed acknowledgement, a failover).
	Redelivered   int
	MaxDeliveries int32 // the highest delivery count a member saw
	Acks          int   // acceptances the broker acknowledged
	AcksFailed    int   // acceptances the broker refused
	AcksUnknown   int   // acceptances whose outcome is unknown
	// Unaccepted counts records delivered whose acceptance was never
	// acknowledged (allowed: the broker archives a record after
	// group.share.delivery.count.limit deliveries).
	Unaccepted int
	Members    int // member incarnations that got records
}

// ofShareTopic reports whether e belongs to the share group workload.
func ofShareTopic(e Event) bool {
	switch e.Kind {
	case KindShareDeliver, KindShareAck, KindShareDrainDone:
		return true
	case KindSend:
		return e.Topic == ShareTopicName
	}
	return false
}

// checkShare checks the share group workload's events (in recording
// order): every acknowledged write delivered (share-lost), no delivery
// whose fetch began after an acceptance of the same record was
// acknowledged (share-redelivered-after-ack), every delivery a record
// written where it was delivered from (share-unknown-record), each value
// at one offset (duplicate).
func (c *checker) checkShare(events []Event) {
	if len(events) == 0 {
		return
	}
	st := &c.res.Share
	sends := map[string]Event{} // value -> send
	var written []Event         // acknowledged sends, in order
	partitions := map[int32]bool{}
	drained := map[int32]int64{} // partition -> high watermark at the drain
	deliveries := map[po][]Event{}
	acked := map[po][]Event{} // successful acceptances
	valueOffsets := map[string]map[po]bool{}
	members := map[string]bool{}
	// Sends first: a record may be delivered before its producer
	// recorded the acknowledgement.
	for _, e := range events {
		if e.Kind != KindSend {
			continue
		}
		c.countSend(e)
		st.Sends++
		sends[e.Value] = e
		partitions[e.Partition] = true
		if e.Outcome == OK {
			st.Written++
			written = append(written, e)
		}
	}
	for _, e := range events {
		switch e.Kind {
		case KindShareDrainDone:
			drained[e.Partition] = e.Offset
			partitions[e.Partition] = true
		case KindShareDeliver:
			st.Deliveries++
			st.MaxDeliveries = max(st.MaxDeliveries, e.Deliveries)
			members[e.Proc] = true
			k := po{e.Partition, e.Offset}
			deliveries[k] = append(deliveries[k], e)
			if valueOffsets[e.Value] == nil {
				valueOffsets[e.Value] = map[po]bool{}
			}
			valueOffsets[e.Value][k] = true
			s, ok := sends[e.Value]
			switch {
			case !ok:
				c.flag(Anomaly{Name: ShareUnknownRecord, Topic: ShareTopicName, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
					Detail: fmt.Sprintf("delivered at t=%s (delivery %d); no producer sent this value", us(e.Time), e.Deliveries)})
			case s.Outcome == Fail:
				c.flag(Anomaly{Name: ShareUnknownRecord, Topic: ShareTopicName, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
					Detail: fmt.Sprintf("delivered at t=%s; its send failed definitely (%s)", us(e.Time), s.Err)})
			case s.Partition != e.Partition || (s.Outcome == OK && s.Offset != e.Offset):
				c.flag(Anomaly{Name: ShareUnknownRecord, Topic: ShareTopicName, Partition: e.Partition, Offset: e.Offset, Value: e.Value, Proc: e.Proc,
					Detail: fmt.Sprintf("delivered from partition %d offset %d at t=%s; written to partition %d (acknowledged at offset %d)", e.Partition, e.Offset, us(e.Time), s.Partition, s.Offset)})
			}
		case KindShareAck:
			switch e.Outcome {
			case OK:
				st.Acks++
				k := po{e.Partition, e.Offset}
				acked[k] = append(acked[k], e)
			case Fail:
				st.AcksFailed++
			default:
				st.AcksUnknown++
			}
		}
	}
	st.Delivered = len(deliveries)
	st.Members = len(members)
	for k, ds := range deliveries {
		if len(ds) > 1 {
			st.Redelivered++
		}
		if len(acked[k]) == 0 {
			st.Unaccepted++
		}
	}

	// A delivery whose fetch began after an acceptance of the record was
	// acknowledged: the broker handed out a record it had been told was
	// done. (Deliveries whose fetch may have begun before the answer are
	// not judged: the acknowledged delivery itself, and earlier ones a
	// member polled late.)
	for _, k := range slices.SortedFunc(maps.Keys(acked), func(a, b po) int { return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.o, b.o)) }) {
		first := acked[k][0] // the earliest acknowledged acceptance
		for _, a := range acked[k] {
			if a.Time < first.Time {
				first = a
			}
		}
		for _, d := range deliveries[k] {
			if d.Floor > first.Time {
				c.flag(Anomaly{Name: ShareRedeliveredAfterAck, Topic: ShareTopicName, Partition: k.p, Offset: k.o, Value: d.Value, Proc: d.Proc,
					Detail: fmt.Sprintf("delivered to %s (delivery %d, fetched after t=%s) after %s's acceptance was acknowledged at t=%s", d.Proc, d.Deliveries, us(d.Floor), first.Proc, us(first.Time))})
				break
			}
		}
	}

	for _, v := range slices.Sorted(maps.Keys(valueOffsets)) {
		if offs := valueOffsets[v]; len(offs) > 1 {
			ks := slices.SortedFunc(maps.Keys(offs), func(a, b po) int { return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.o, b.o)) })
			c.flag(Anomaly{Name: Duplicate, Topic: ShareTopicName, Partition: ks[0].p, Offset: ks[0].o, Value: v,
				Detail: fmt.Sprintf("value delivered from %d offsets: %v", len(ks), ks)})
		}
	}

	for _, p := range slices.Sorted(maps.Keys(partitions)) {
		if _, ok := drained[p]; !ok {
			c.flag(Anomaly{Name: FinalReadMissing, Topic: ShareTopicName, Partition: p, Offset: -1, Detail: "the share group's drain of this partition did not end"})
		}
	}
	for _, s := range written {
		end, ok := drained[s.Partition]
		if !ok || len(deliveries[po{s.Partition, s.Offset}]) > 0 {
			continue
		}
		where := fmt.Sprintf("below the partition's high watermark %d", end)
		if s.Offset >= end {
			where = fmt.Sprintf("at or beyond the partition's high watermark %d", end)
		}
		c.flag(Anomaly{Name: ShareLost, Topic: ShareTopicName, Partition: s.Partition, Offset: s.Offset, Value: s.Value, Proc: s.Proc,
			Detail: fmt.Sprintf("acknowledged at offset %d (t=%s), %s, never delivered to the share group", s.Offset, us(s.Time), where)})
	}
}
