package coordinator

import (
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/recordbatch"
)

func protoMember(seq uint64, names ...string) *member {
	m := &member{seq: seq}
	for _, n := range names {
		m.protocols = append(m.protocols, kmsg.JoinGroupRequestProtocol{Name: n})
	}
	return m
}

func TestSelectProtocol(t *testing.T) {
	for _, tc := range []struct {
		name string
		ms   []*member
		want string
	}{
		{"single", []*member{protoMember(1, "range", "rr")}, "range"},
		{"only common", []*member{protoMember(1, "a", "b"), protoMember(2, "b")}, "b"},
		{"vote", []*member{protoMember(1, "a", "b"), protoMember(2, "b", "a"), protoMember(3, "b", "a")}, "b"},
		{"tie goes to first member's preference", []*member{protoMember(1, "a", "b"), protoMember(2, "b", "a")}, "a"},
		{"none", []*member{protoMember(1, "a"), protoMember(2, "b")}, ""},
	} {
		if got := selectProtocol(tc.ms); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestValidateCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   commitCheck
		want int16
	}{
		{"simple to empty", commitCheck{state: stateEmpty, reqGen: -1}, 0},
		{"simple to stable", commitCheck{state: stateStable, generation: 3, reqGen: -1}, errUnknownMemberID},
		{"dead", commitCheck{state: stateDead, reqGen: -1}, errCoordinatorNotAvailable},
		{"member ok", commitCheck{state: stateStable, generation: 3, isMember: true, reqGen: 3, reqMember: "m"}, 0},
		{"member preparing ok", commitCheck{state: statePreparingRebalance, generation: 3, isMember: true, reqGen: 3, reqMember: "m"}, 0},
		{"member completing", commitCheck{state: stateCompletingRebalance, generation: 3, isMember: true, reqGen: 3, reqMember: "m"}, errRebalanceInProgress},
		{"wrong generation", commitCheck{state: stateStable, generation: 3, isMember: true, reqGen: 2, reqMember: "m"}, errIllegalGeneration},
		{"unknown member", commitCheck{state: stateStable, generation: 3, reqGen: 3, reqMember: "x"}, errUnknownMemberID},
		{"generation without member on empty", commitCheck{state: stateEmpty, generation: 3, reqGen: 3}, errUnknownMemberID},
		{"simple with a member id to empty (3.9)", commitCheck{state: stateEmpty, reqGen: -1, reqMember: "x"}, 0},
		{"txn simple to stable", commitCheck{state: stateStable, generation: 3, reqGen: -1, transactional: true}, 0},
		{"txn simple to completing", commitCheck{state: stateCompletingRebalance, generation: 3, reqGen: -1, transactional: true}, 0},
		{"txn member completing", commitCheck{state: stateCompletingRebalance, generation: 3, isMember: true, reqGen: 3, reqMember: "m", transactional: true}, 0},
		{"txn wrong generation", commitCheck{state: stateStable, generation: 3, isMember: true, reqGen: 2, reqMember: "m", transactional: true}, errIllegalGeneration},
		{"txn unknown member", commitCheck{state: stateStable, generation: 3, reqGen: 3, reqMember: "x", transactional: true}, errUnknownMemberID},
		{"txn fenced", commitCheck{state: stateStable, generation: 3, fenced: true, reqGen: 3, reqMember: "m", reqStatic: true, transactional: true}, errFencedInstanceID},
		{"txn dead", commitCheck{state: stateDead, reqGen: -1, transactional: true}, errCoordinatorNotAvailable},
		{"fenced", commitCheck{state: stateStable, generation: 3, isMember: true, fenced: true, reqGen: 3, reqMember: "m", reqStatic: true}, errFencedInstanceID},
	} {
		if got := validateCommit(tc.in); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestExpiredOffsets(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	ret := time.Hour
	old := now.Add(-2 * time.Hour)
	recent := now.Add(-time.Minute)
	offsets := map[topicPartition]offsetEntry{
		{"a", 0}: {commitTime: old},
		{"b", 0}: {commitTime: recent},
		{"c", 0}: {commitTime: recent, expireTime: now.Add(-time.Second)},
	}
	for _, tc := range []struct {
		name string
		in   expiryInput
		want []topicPartition
	}{
		{"simple group by commit time", expiryInput{state: stateEmpty, offsets: offsets},
			[]topicPartition{{"a", 0}, {"c", 0}}},
		{"empty group emptied long ago", expiryInput{state: stateEmpty, protocolType: "consumer", stateTime: old, offsets: offsets},
			[]topicPartition{{"a", 0}, {"b", 0}, {"c", 0}}},
		{"empty group emptied recently", expiryInput{state: stateEmpty, protocolType: "consumer", stateTime: recent, offsets: offsets},
			[]topicPartition{{"c", 0}}},
		{"stable consumer: unsubscribed only", expiryInput{state: stateStable, protocolType: "consumer", subsKnown: true,
			subscribed: map[string]struct{}{"a": {}}, offsets: offsets}, []topicPartition{{"c", 0}}},
		{"stable non-consumer: nothing", expiryInput{state: stateStable, protocolType: "connect", offsets: offsets}, nil},
		{"rebalancing consumer: nothing", expiryInput{state: statePreparingRebalance, protocolType: "consumer", subsKnown: true, offsets: offsets}, nil},
	} {
		if got := expiredOffsets(tc.in, now, ret); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := expiredOffsets(expiryInput{offsets: offsets}, now, 0); got != nil {
		t.Errorf("retention 0 expired %v", got)
	}
}

func TestValidSessionTimeout(t *testing.T) {
	for _, tc := range []struct {
		ms   int32
		want bool
	}{{5999, false}, {6000, true}, {1800000, true}, {1800001, false}} {
		if got := validSessionTimeout(tc.ms, 6*time.Second, 30*time.Minute); got != tc.want {
			t.Errorf("%d: %v", tc.ms, got)
		}
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	gv := kmsg.NewGroupMetadataValue()
	gv.ProtocolType = "consumer"
	gv.Generation = 4
	gv.Protocol = kmsg.StringPtr("range")
	gv.Leader = kmsg.StringPtr("m1")
	gv.Members = []kmsg.GroupMetadataValueMember{{MemberID: "m1", ClientID: "c", ClientHost: "/h", SessionTimeoutMillis: 1, RebalanceTimeoutMillis: 2, Subscription: []byte{1}, Assignment: []byte{2}}}
	in := []record{
		offsetRecord("g", topicPartition{"t", 3}, offsetEntry{offset: 9, leaderEpoch: 2, metadata: "m", commitTime: now}),
		offsetTombstone("g", topicPartition{"t", 4}),
		groupRecord("g", &gv),
		groupTombstone("h"),
	}
	batch := buildBatch(in, now.UnixMilli())
	h, err := recordbatch.Validate(batch)
	if err != nil {
		t.Fatal(err)
	}
	if h.RecordCount != 4 || h.LastOffsetDelta != 3 || h.ProducerID != -1 || h.Attributes != 0 || h.BaseOffset != 0 {
		t.Fatalf("header: %+v", h)
	}
	out, err := decodeBatch(batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 4 {
		t.Fatalf("%d records", len(out))
	}
	p0, ok, err := parseRecord(out[0])
	if err != nil || !ok || !p0.isOffset || p0.group != "g" || p0.tp != (topicPartition{"t", 3}) ||
		p0.offset.Offset != 9 || p0.offset.LeaderEpoch != 2 || p0.offset.Metadata != "m" || p0.offset.CommitTimestamp != now.UnixMilli() || p0.offset.Version != 3 {
		t.Fatalf("offset record: %+v %v %v", p0, ok, err)
	}
	if p1, ok, _ := parseRecord(out[1]); !ok || !p1.isOffset || p1.offset != nil {
		t.Fatalf("offset tombstone: %+v", p1)
	}
	p2, ok, _ := parseRecord(out[2])
	if !ok || p2.isOffset || p2.groupMeta == nil || p2.groupMeta.Generation != 4 || p2.groupMeta.Version != 3 ||
		len(p2.groupMeta.Members) != 1 || p2.groupMeta.Members[0].ClientHost != "/h" {
		t.Fatalf("group record: %+v", p2.groupMeta)
	}
	if p3, ok, _ := parseRecord(out[3]); !ok || p3.isOffset || p3.group != "h" || p3.groupMeta != nil {
		t.Fatalf("group tombstone: %+v", p3)
	}
	// Key versions on the wire are Kafka's: offsets 1, groups 2.
	if out[0].key[1] != 1 || out[2].key[1] != 2 {
		t.Fatalf("key versions %d %d", out[0].key[1], out[2].key[1])
	}
}
