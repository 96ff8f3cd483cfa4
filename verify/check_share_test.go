package verify

import (
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Hand-made histories of the share group workload. Times are explicit
// (Event.Time), microseconds since the run started.

func ssend(t int64, seq int64, p int32, out Outcome, off int64) Event {
	return Event{Time: t, Kind: KindSend, Topic: ShareTopicName, Proc: "sprod", Seq: seq, Partition: p,
		Value: "s-" + strconv.FormatInt(seq, 10), Outcome: out, Offset: off}
}

// sdeliver: member m got value v from p/o at time t (delivery count dc),
// fetched no earlier than floor.
func sdeliver(t int64, m string, p int32, o int64, v string, dc int32, floor int64) Event {
	return Event{Time: t, Kind: KindShareDeliver, Topic: ShareTopicName, Proc: m, Partition: p, Offset: o, Value: v, Deliveries: dc, Floor: floor}
}

func sack(t int64, m string, p int32, o int64, v string, out Outcome) Event {
	return Event{Time: t, Kind: KindShareAck, Topic: ShareTopicName, Proc: m, Partition: p, Offset: o, Value: v, Outcome: out}
}

func sdrained(t int64, ends ...int64) []Event {
	var out []Event
	for p, end := range ends {
		out = append(out, Event{Time: t, Kind: KindShareDrainDone, Topic: ShareTopicName, Proc: "drain", Partition: int32(p), Offset: end})
	}
	return out
}

// shareBase: three writes to partition 0 (s-1 @0, s-2 @1, s-3 @2), one
// indefinite (s-4, written at 3), one definitely failed (s-5); member a
// gets 0-1 and accepts them, member b gets 2 and 3; b's acceptance of 3
// fails, the lock expires and a gets 3 again (delivery 2) and accepts it.
func shareBase() []Event {
	return []Event{
		ssend(10, 1, 0, OK, 0),
		ssend(11, 2, 0, OK, 1),
		ssend(12, 3, 0, OK, 2),
		ssend(13, 4, 0, Info, -1),
		ssend(14, 5, 0, Fail, -1),
		sdeliver(100, "a", 0, 0, "s-1", 1, 50),
		sdeliver(100, "a", 0, 1, "s-2", 1, 50),
		sack(110, "a", 0, 0, "s-1", OK),
		sack(110, "a", 0, 1, "s-2", OK),
		sdeliver(120, "b", 0, 2, "s-3", 1, 60),
		sdeliver(120, "b", 0, 3, "s-4", 1, 60),
		sack(130, "b", 0, 2, "s-3", OK),
		sack(130, "b", 0, 3, "s-4", Fail),
		sdeliver(200, "a", 0, 3, "s-4", 2, 105),
		sack(210, "a", 0, 3, "s-4", OK),
	}
}

func TestCheckShare(t *testing.T) {
	base := shareBase()
	with := func(extra ...Event) []Event { return append(slices.Clone(base), extra...) }
	tests := []struct {
		name    string
		history []Event
		want    map[string]int // anomalies by name (nil: none)
	}{
		{"clean", with(sdrained(300, 4)...), nil},
		{
			// a got s-1 before b's late poll: b's fetch may have
			// begun before a's acceptance was answered (floor 105 <
			// 110): at-least-once allows it.
			"late poll of an earlier delivery is not judged",
			with(append([]Event{sdeliver(250, "b", 0, 0, "s-1", 1, 105)}, sdrained(300, 4)...)...),
			nil,
		},
		{
			"redelivered after the acceptance was acknowledged",
			with(append([]Event{sdeliver(250, "b", 0, 0, "s-1", 2, 111)}, sdrained(300, 4)...)...),
			map[string]int{ShareRedeliveredAfterAck: 1},
		},
		{
			// The same member gets it again in a later poll.
			"redelivered to the accepting member",
			with(append([]Event{sdeliver(250, "a", 0, 0, "s-1", 1, 200)}, sdrained(300, 4)...)...),
			map[string]int{ShareRedeliveredAfterAck: 1},
		},
		{
			// b's acceptance of s-4 failed: a's redelivery is fine,
			// it is judged against a's own acceptance at 210 only.
			"redelivery after a refused acceptance",
			with(append([]Event{sdeliver(260, "c", 0, 3, "s-4", 3, 205)}, sdrained(300, 4)...)...),
			nil,
		},
		{
			"lost: an acknowledged write never delivered",
			append(append(slices.Clone(base), ssend(15, 6, 1, OK, 0)), sdrained(300, 4, 1)...),
			map[string]int{ShareLost: 1},
		},
		{
			"lost beyond the high watermark",
			append(append(slices.Clone(base), ssend(15, 6, 1, OK, 5)), sdrained(300, 4, 1)...),
			map[string]int{ShareLost: 1},
		},
		{
			"an indefinite write never delivered is not lost",
			append(append(slices.Clone(base), ssend(15, 6, 1, Info, -1)), sdrained(300, 4, 0)...),
			nil,
		},
		{
			"unknown: a value nobody sent",
			with(append([]Event{sdeliver(250, "b", 0, 4, "s-99", 1, 200)}, sdrained(300, 5)...)...),
			map[string]int{ShareUnknownRecord: 1},
		},
		{
			"unknown: a definitely failed send delivered",
			with(append([]Event{sdeliver(250, "b", 0, 4, "s-5", 1, 200)}, sdrained(300, 5)...)...),
			map[string]int{ShareUnknownRecord: 1},
		},
		{
			"unknown and duplicate: an acknowledged write delivered from another offset",
			with(append([]Event{sdeliver(250, "b", 0, 7, "s-2", 1, 200)}, sdrained(300, 8)...)...),
			map[string]int{ShareUnknownRecord: 1, Duplicate: 1},
		},
		{
			// The producer's acknowledgement is recorded after a
			// member got the record.
			"delivered before the send was recorded",
			append(append([]Event{sdeliver(5, "c", 1, 0, "s-6", 1, 1), sack(6, "c", 1, 0, "s-6", OK)}, shareBase()...),
				append([]Event{ssend(15, 6, 1, OK, 0)}, sdrained(300, 4, 1)...)...),
			nil,
		},
		{
			"no drain",
			slices.Clone(base),
			map[string]int{FinalReadMissing: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.history)
			got := map[string]int{}
			maps.Copy(got, res.ByName)
			if len(got) == 0 {
				got = nil
			}
			if !maps.Equal(got, tc.want) {
				t.Fatalf("anomalies %v, want %v:\n%v", got, tc.want, res.Anomalies)
			}
			for _, a := range res.Anomalies {
				if a.Topic != ShareTopicName {
					t.Errorf("anomaly of another topic: %v", a)
				}
			}
		})
	}
}

func TestCheckShareStats(t *testing.T) {
	res := Check(append(shareBase(), sdrained(300, 4)...))
	got := res.Share
	want := ShareStats{Sends: 5, Written: 3, Deliveries: 5, Delivered: 4, Redelivered: 1, MaxDeliveries: 2,
		Acks: 4, AcksFailed: 1, Unaccepted: 0, Members: 2}
	if got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
	if res.Sends[OK] != 3 || res.Reads != 0 || res.Final != 0 {
		t.Fatalf("share events counted as the plain workload's: %+v", res)
	}
}

func TestShareAckOutcome(t *testing.T) {
	errX := errTest("x")
	tests := []struct {
		name     string
		flushErr error
		answers  []error
		want     Outcome
	}{
		{"all answers ok", nil, []error{nil, nil}, OK},
		{"all answers refused", nil, []error{kerr.InvalidRecordState, kerr.NotLeaderForPartition}, Fail},
		{"a connection lost", nil, []error{errX}, Info},
		{"written to too few replicas", nil, []error{kerr.NotEnoughReplicasAfterAppend}, Info},
		{"refused and timed out", nil, []error{kerr.InvalidRecordState, kerr.RequestTimedOut}, Info},
		{"mixed answers", nil, []error{nil, errX}, Info},
		{"no answer", nil, nil, Info},
		{"flush timed out", errX, []error{nil}, Info},
	}
	for _, tc := range tests {
		if got, _ := shareAckOutcome(tc.flushErr, tc.answers); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

// Where the drain places a write: a refused acceptance counts as taken
// only when the broker's start offset passed the record, a member did
// acknowledge it, and it was delivered fewer times than the limit.
func TestShareDrainState(t *testing.T) {
	delivered := map[string]shareDelivery{
		"acked":     {partition: 0, offset: 5, deliveries: 1},
		"refused":   {partition: 1, offset: 7, deliveries: 1},
		"noack":     {partition: 1, offset: 8, deliveries: 1},
		"archived":  {partition: 1, offset: 9, deliveries: shareDeliveryLimit},
		"inflight":  {partition: 1, offset: 20, deliveries: 2},
		"otherpart": {partition: 2, offset: 7, deliveries: 1},
	}
	accepted := map[string]bool{"acked": true}
	ackSent := map[string]bool{"acked": true, "refused": true, "archived": true, "inflight": true, "otherpart": true}
	spso := map[int32]int64{0: 6, 1: 10}
	for v, want := range map[string]shareDrain{
		"never":     shareUndelivered,
		"acked":     shareAccepted,
		"refused":   shareAcceptedLate,
		"noack":     shareUnaccepted, // skipped by the group, not accepted
		"archived":  shareUnaccepted, // at the delivery limit: archived, not accepted
		"inflight":  shareUnaccepted, // above the start offset: may come back
		"otherpart": shareUnaccepted, // its partition's start offset is unknown
	} {
		if got := shareDrainState(v, delivered, accepted, ackSent, spso); got != want {
			t.Errorf("%s: %d, want %d", v, got, want)
		}
	}
}
