package integration

// KIP-932 share groups with franz-go's share consumer (kgo.ShareGroup) and
// raw ShareFetch / ShareAcknowledge requests, issue 17:
//
//   - TestShareGroupDistinctRecords: three share consumers on one
//     partition; every record is delivered and accepted once, no record
//     goes to two consumers, and all three get records.
//   - TestShareGroupLockTimeout: a member acquires records and vanishes
//     (no acknowledgement, no session close, its connection still open: a
//     hung process, a network partition); a franz-go consumer gets them
//     only once group.share.record.lock.duration.ms has passed, with
//     delivery count 2.
//   - TestShareGroupConnectionCloseReleases: a member whose connection
//     closes (what kill -9 leaves) gives its records back at once.
//   - TestShareGroupDeliveryLimit: records released and rejected up to
//     group.share.delivery.count.limit are archived, never delivered again.
//   - TestShareGroupBadInput: acknowledgements of records not acquired (or
//     acquired by another member), bad session epochs, stale member epochs
//     and unknown members: Kafka's errors, state unchanged.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/kafkahash"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareRaw is a raw share group member on one partition's leader.
type shareRaw struct {
	t       *testing.T
	cl      *kgo.Client
	leader  int32
	group   string
	member  string
	topicID [16]byte
	epoch   int32
	// maxRecords is each fetch's MaxRecords (0: 500).
	maxRecords int32
}

func newShareRaw(t *testing.T, cl *kgo.Client, group, member, topic string) *shareRaw {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t, 10*time.Second), cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) == 0 {
		t.Fatalf("metadata of %s: %v %+v", topic, err, resp)
	}
	return &shareRaw{t: t, cl: cl, leader: resp.Topics[0].Partitions[0].Leader, group: group, member: member, topicID: resp.Topics[0].TopicID}
}

// fetch sends a ShareFetch for partition 0 at the member's epoch with acks
// (first, last, type) triples and returns the response's partition entry
// (zero if none) and top-level error.
func (s *shareRaw) fetch(maxWait time.Duration, acks ...int64) (kmsg.ShareFetchResponseTopicPartition, int16) {
	s.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 2
	req.GroupID, req.MemberID = kmsg.StringPtr(s.group), kmsg.StringPtr(s.member)
	req.ShareSessionEpoch = s.epoch
	req.MaxWaitMillis, req.MaxBytes, req.MaxRecords = int32(maxWait.Milliseconds()), 1<<20, 500
	if s.maxRecords > 0 {
		req.MaxRecords = s.maxRecords
	}
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = s.topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	for i := 0; i+2 < len(acks); i += 3 {
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{
			FirstOffset: acks[i], LastOffset: acks[i+1], AcknowledgeTypes: []int8{int8(acks[i+2])},
		})
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(s.t, maxWait+10*time.Second), s.cl.Broker(int(s.leader)))
	if err != nil {
		s.t.Fatalf("ShareFetch: %v", err)
	}
	if resp.ErrorCode == 0 {
		s.epoch++
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			return p, resp.ErrorCode
		}
	}
	return kmsg.ShareFetchResponseTopicPartition{}, resp.ErrorCode
}

// ack sends a ShareAcknowledge at epoch with one batch of one type and
// returns (top-level error, partition error).
func (s *shareRaw) ack(epoch int32, first, last int64, typ int8) (int16, int16) {
	s.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version = 2
	req.GroupID, req.MemberID = kmsg.StringPtr(s.group), kmsg.StringPtr(s.member)
	req.ShareSessionEpoch = epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = s.topicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	rp.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{typ}}}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(s.t, 10*time.Second), s.cl.Broker(int(s.leader)))
	if err != nil {
		s.t.Fatalf("ShareAcknowledge: %v", err)
	}
	if resp.ErrorCode == 0 && epoch > 0 {
		s.epoch++
	}
	if resp.ErrorCode != 0 || len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0 {
		return resp.ErrorCode, 0
	}
	return resp.ErrorCode, resp.Topics[0].Partitions[0].ErrorCode
}

func acquiredOffsets(p kmsg.ShareFetchResponseTopicPartition) (offs []int64, deliveries map[int64]int16) {
	deliveries = map[int64]int16{}
	for _, r := range p.AcquiredRecords {
		for o := r.FirstOffset; o <= r.LastOffset; o++ {
			offs = append(offs, o)
			deliveries[o] = r.DeliveryCount
		}
	}
	return offs, deliveries
}

func produceShare(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	for i := from; i < from+n; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("v%d", i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// initShareGroup makes the group's share partition start at the current
// end (share.auto.offset.reset=latest) before the test produces: a raw
// member opens and closes a session.
func initShareGroup(t *testing.T, cl *kgo.Client, group, topic string) {
	t.Helper()
	s := newShareRaw(t, cl, group, "init", topic)
	if _, code := s.fetch(0); code != 0 {
		t.Fatalf("initial share fetch: %v", kerr.ErrorForCode(code))
	}
	s.epoch = -1
	if _, code := s.fetch(0); code != 0 {
		t.Fatalf("closing the initial share session: %v", kerr.ErrorForCode(code))
	}
}

// startShareGroup starts a broker with overrides, creates topic (one
// partition) and starts group's share partition at its end; it returns
// the broker and an admin client.
func startShareGroup(t *testing.T, topic, group string, overrides ...string) (*Broker, *kgo.Client) {
	t.Helper()
	b := StartBroker(t, append([]string{"num.partitions=1"}, overrides...)...)
	admin := b.Client(t)
	createTopic(t, b.Admin(t), topic, 1, nil)
	initShareGroup(t, admin, group, topic)
	return b, admin
}

func TestShareGroupDistinctRecords(t *testing.T) {
	topic, group := "share-distinct", "sg-distinct"
	b, admin := startShareGroup(t, topic, group, "group.share.heartbeat.interval.ms=500")

	const total = 600
	var mu sync.Mutex
	got := map[int64][]int{} // offset -> consumers that got it
	perConsumer := make([]int, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	done := make(chan struct{})
	for i := 0; i < 3; i++ {
		cl := b.Client(t, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ShareMaxRecords(5), kgo.ShareMaxRecordsStrict())
		wg.Add(1)
		go func(i int, cl *kgo.Client) {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					got[r.Offset] = append(got[r.Offset], i)
					perConsumer[i]++
					mu.Unlock()
					time.Sleep(2 * time.Millisecond) // work: lets the others take their share
				})
				cl.MarkAcks(kgo.AckAccept)
			}
		}(i, cl)
	}
	produceShare(t, admin, topic, 0, total)
	checkFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) < total {
			return fmt.Errorf("%d of %d offsets delivered", len(got), total)
		}
		return nil
	})
	close(done)
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for off, who := range got {
		if len(who) != 1 {
			t.Errorf("offset %d delivered to consumers %v", off, who)
		}
		if off < 0 || off >= total {
			t.Errorf("offset %d was never produced", off)
		}
	}
	for i, n := range perConsumer {
		if n == 0 {
			t.Errorf("consumer %d got no records (%v)", i, perConsumer)
		}
	}
	t.Logf("%d records, each delivered once; per consumer %v", total, perConsumer)
}

func TestShareGroupLockTimeout(t *testing.T) {
	const lock = 3 * time.Second
	topic, group := "share-lock", "sg-lock"
	b, admin := startShareGroup(t, topic, group, "group.share.record.lock.duration.ms=3000")
	produceShare(t, admin, topic, 0, 20)

	// The vanishing member: acquires everything, then neither acknowledges
	// nor closes its session, and its connection stays open.
	gone := newShareRaw(t, admin, group, "gone", topic)
	p, code := gone.fetch(5 * time.Second)
	offs, _ := acquiredOffsets(p)
	if code != 0 || len(offs) != 20 {
		t.Fatalf("vanishing member acquired %d records (error %d)", len(offs), code)
	}
	acquiredAt := time.Now()

	cl := b.Client(t, kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	seen := map[int64]bool{}
	var firstAt time.Time
	ctx := testContext(t, 30*time.Second)
	for len(seen) < 20 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if firstAt.IsZero() {
				firstAt = time.Now()
			}
			seen[r.Offset] = true
		})
		cl.MarkAcks(kgo.AckAccept)
	}
	if len(seen) != 20 {
		t.Fatalf("redelivered %d of 20 records", len(seen))
	}
	if waited := firstAt.Sub(acquiredAt); waited < lock-100*time.Millisecond {
		t.Fatalf("records redelivered %v after acquisition, before the %v lock expired", waited, lock)
	} else {
		t.Logf("records held by the vanished member redelivered %v after acquisition (lock %v)", waited, lock)
	}
	// The vanished member's late acknowledgement is refused.
	if top, part := gone.ack(gone.epoch, 0, 19, 1); top != 0 || part != kerr.InvalidRecordState.Code {
		t.Fatalf("late ack of the vanished member: %d/%d, want INVALID_RECORD_STATE", top, part)
	}
}

// TestShareGroupConnectionCloseReleases: a member whose connection closes
// (its process died: the kernel closes the socket) gives its records back
// at once, as Kafka's share session cache does on a disconnect, rather
// than when their 60 s locks expire; a franz-go consumer gets all 20
// within the test's 20 s.
func TestShareGroupConnectionCloseReleases(t *testing.T) {
	topic, group := "share-conn-close", "sg-conn-close"
	b, admin := startShareGroup(t, topic, group, "group.share.record.lock.duration.ms=60000")
	produceShare(t, admin, topic, 0, 20)

	own := b.Client(t) // the dying member's own connections
	dying := newShareRaw(t, own, group, "dying", topic)
	p, code := dying.fetch(5 * time.Second)
	if offs, _ := acquiredOffsets(p); code != 0 || len(offs) != 20 {
		t.Fatalf("member acquired %d records (error %d)", len(offs), code)
	}
	own.Close()

	cl := b.Client(t, kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	if got := pollShareValues(testContext(t, 20*time.Second), t, cl, nil, 20); len(got) != 20 {
		t.Fatalf("%d of the closed member's 20 records delivered within 20 s (locks of 60 s)", len(got))
	}
}

// TestShareGroupDeliveryLimit: records released and rejected up to the
// delivery limit are archived, the limit being the broker's
// group.share.delivery.count.limit or the group's own
// share.delivery.count.limit (set after the partition was loaded: the
// member's new share session picks it up).
func TestShareGroupDeliveryLimit(t *testing.T) {
	t.Run("broker", func(t *testing.T) {
		topic, group := "share-limit", "sg-limit"
		_, admin := startShareGroup(t, topic, group, "group.share.delivery.count.limit=3")
		testShareDeliveryLimit(t, admin, topic, group)
	})
	t.Run("group", func(t *testing.T) {
		topic, group := "share-limit-group", "sg-limit-group"
		_, admin := startShareGroup(t, topic, group) // the broker's limit: 5
		for _, bad := range []string{"1", "11", "three"} {
			if code := alterGroupConfig(t, admin, group, "share.delivery.count.limit", bad); code != kerr.InvalidConfig.Code {
				t.Errorf("share.delivery.count.limit=%s: %v, want INVALID_CONFIG", bad, kerr.ErrorForCode(code))
			}
		}
		if code := alterGroupConfig(t, admin, group, "share.delivery.count.limit", "3"); code != 0 {
			t.Fatalf("share.delivery.count.limit=3: %v", kerr.ErrorForCode(code))
		}
		testShareDeliveryLimit(t, admin, topic, group)
	})
}

// testShareDeliveryLimit checks a delivery limit of 3 on group's share
// partition of topic, which starts at the end.
func testShareDeliveryLimit(t *testing.T, admin *kgo.Client, topic, group string) {
	produceShare(t, admin, topic, 0, 2) // offset 0: released until archived; offset 1: rejected

	m := newShareRaw(t, admin, group, "m", topic)
	p, _ := m.fetch(5 * time.Second)
	for round := int16(1); round <= 3; round++ {
		offs, deliveries := acquiredOffsets(p)
		want := []int64{0}
		if round == 1 {
			want = []int64{0, 1}
		}
		if fmt.Sprint(offs) != fmt.Sprint(want) || deliveries[0] != round {
			t.Fatalf("round %d acquired %v with deliveries %v, want %v at delivery %d", round, offs, deliveries, want, round)
		}
		acks := []int64{0, 0, 2} // release offset 0
		if round == 1 {
			acks = append(acks, 1, 1, 3) // reject offset 1
		}
		p, _ = m.fetch(500*time.Millisecond, acks...)
		if p.AcknowledgeErrorCode != 0 {
			t.Fatalf("round %d ack: %v", round, kerr.ErrorForCode(p.AcknowledgeErrorCode))
		}
	}
	// Both are archived: nothing more is delivered, to anyone, and a new
	// record is delivered at once.
	if offs, _ := acquiredOffsets(p); len(offs) != 0 {
		t.Fatalf("archived records delivered again: %v", offs)
	}
	other := newShareRaw(t, admin, group, "other", topic)
	if p, _ := other.fetch(500 * time.Millisecond); len(p.AcquiredRecords) != 0 {
		t.Fatalf("archived records delivered to another member: %+v", p.AcquiredRecords)
	}
	produceShare(t, admin, topic, 2, 1)
	p, _ = other.fetch(5 * time.Second)
	if offs, d := acquiredOffsets(p); fmt.Sprint(offs) != "[2]" || d[2] != 1 {
		t.Fatalf("after the archive, acquired %v (deliveries %v), want [2] once", offs, d)
	}
}

func TestShareGroupBadInput(t *testing.T) {
	topic, group := "share-bad", "sg-bad"
	_, admin := startShareGroup(t, topic, group)
	produceShare(t, admin, topic, 0, 4)

	a := newShareRaw(t, admin, group, "a", topic)
	p, _ := a.fetch(5 * time.Second)
	if offs, _ := acquiredOffsets(p); len(offs) != 4 {
		t.Fatalf("a acquired %v", offs)
	}
	bm := newShareRaw(t, admin, group, "b", topic)
	if p, code := bm.fetch(0); code != 0 || len(p.AcquiredRecords) != 0 { // opens b's session; nothing free
		t.Fatalf("b's first fetch: %d %+v", code, p.AcquiredRecords)
	}
	produceShare(t, admin, topic, 4, 1) // offset 4: not acquired yet
	if top, part := bm.ack(bm.epoch, 0, 1, 1); top != 0 || part != kerr.InvalidRecordState.Code {
		t.Fatalf("b acknowledging a's records: %d/%d, want INVALID_RECORD_STATE", top, part)
	}
	if top, part := a.ack(a.epoch, 4, 4, 1); top != 0 || part != kerr.InvalidRecordState.Code {
		t.Fatalf("acknowledging a record never acquired: %d/%d, want INVALID_RECORD_STATE", top, part)
	}
	if top, part := a.ack(a.epoch, 3, 7, 1); top != 0 || part != kerr.InvalidRecordState.Code {
		t.Fatalf("acknowledging past the end: %d/%d, want INVALID_RECORD_STATE", top, part)
	}
	// Session epochs.
	if top, _ := a.ack(0, 0, 0, 1); top != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("ShareAcknowledge at epoch 0: %d, want INVALID_SHARE_SESSION_EPOCH", top)
	}
	if top, _ := a.ack(a.epoch+5, 0, 0, 1); top != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("ShareAcknowledge at a wrong epoch: %d, want INVALID_SHARE_SESSION_EPOCH", top)
	}
	nobody := newShareRaw(t, admin, group, "nobody", topic)
	if top, _ := nobody.ack(3, 0, 0, 1); top != kerr.ShareSessionNotFound.Code {
		t.Fatalf("ShareAcknowledge without a session: %d, want SHARE_SESSION_NOT_FOUND", top)
	}
	nobody.epoch = 7
	if _, code := nobody.fetch(0); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("ShareFetch without a session: %d, want SHARE_SESSION_NOT_FOUND", code)
	}
	// State unchanged: a still holds 0-3 and can accept them; then offset 4
	// is what b gets.
	if top, part := a.ack(a.epoch, 0, 3, 1); top != 0 || part != 0 {
		t.Fatalf("a accepting its records after the refused acks: %d/%d", top, part)
	}
	p, _ = bm.fetch(5 * time.Second)
	if offs, d := acquiredOffsets(p); fmt.Sprint(offs) != "[4]" || d[4] != 1 {
		t.Fatalf("b acquired %v (deliveries %v), want [4] once", offs, d)
	}

	// Heartbeats: stale and future epochs, unknown members.
	hb := func(member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch = group, member, epoch
		req.SubscribedTopicNames = topics
		resp, err := req.RequestWith(testContext(t, 10*time.Second), admin)
		if err != nil {
			t.Fatalf("ShareGroupHeartbeat: %v", err)
		}
		return resp
	}
	j := hb("member-1", 0, topic)
	if j.ErrorCode != 0 || j.MemberEpoch < 1 || j.Assignment == nil || len(j.Assignment.TopicPartitions) != 1 {
		t.Fatalf("join: %+v", j)
	}
	// Another member joins: member-1 moves on to the new group epoch, so
	// its old epoch is stale.
	if r := hb("member-3", 0, topic); r.ErrorCode != 0 {
		t.Fatalf("member-3 join: %+v", r)
	}
	if r := hb("member-1", j.MemberEpoch); r.ErrorCode != 0 || r.MemberEpoch <= j.MemberEpoch {
		t.Fatalf("member-1 heartbeat after member-3 joined: %+v", r)
	} else {
		j = r
	}
	for _, tc := range []struct {
		member string
		epoch  int32
		want   int16
	}{
		{"member-1", j.MemberEpoch - 1, kerr.FencedMemberEpoch.Code},
		{"member-1", j.MemberEpoch + 1, kerr.FencedMemberEpoch.Code},
		{"member-2", 1, kerr.UnknownMemberID.Code},
		{"member-2", -1, kerr.UnknownMemberID.Code},
	} {
		if got := hb(tc.member, tc.epoch).ErrorCode; got != tc.want {
			t.Errorf("heartbeat %s epoch %d: %v, want %v", tc.member, tc.epoch, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
	if r := hb("member-1", j.MemberEpoch); r.ErrorCode != 0 || r.MemberEpoch != j.MemberEpoch {
		t.Fatalf("member-1 after the refused heartbeats: %+v", r)
	}
}

// alterGroupConfig sets one config of group (IncrementalAlterConfigs on
// the GROUP resource) and returns the resource's error code.
func alterGroupConfig(t *testing.T, cl *kgo.Client, group, name, value string) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = name, kmsg.StringPtr(value)
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(testContext(t, 10*time.Second), cl)
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs: %v", err)
	}
	return resp.Resources[0].ErrorCode
}

// TestShareGroupConfigs: the GROUP config resource. share.auto.offset.reset
// set to earliest before any member fetches makes a franz-go share
// consumer read the records produced before it joined; the value is
// described as a group config; unknown names and bad values answer
// INVALID_CONFIG and change nothing.
func TestShareGroupConfigs(t *testing.T) {
	b := StartBroker(t, "num.partitions=1")
	admin := b.Client(t)
	topic, group := "share-configs", "sg-configs"
	createTopic(t, b.Admin(t), topic, 1, nil)
	produceShare(t, admin, topic, 0, 50)

	alter := func(name, value string) int16 { return alterGroupConfig(t, admin, group, name, value) }
	describe := func() map[string]kmsg.DescribeConfigsResponseResourceConfig {
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(testContext(t, 10*time.Second), admin)
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("DescribeConfigs: %v %+v", err, resp)
		}
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range resp.Resources[0].Configs {
			out[c.Name] = c
		}
		return out
	}
	if d := describe()["share.auto.offset.reset"]; d.Value == nil || *d.Value != "latest" || d.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("default share.auto.offset.reset: %+v", d)
	}
	for _, tc := range []struct{ name, value string }{
		{"share.no.such.config", "1"},
		{"share.auto.offset.reset", "sometimes"},
		{"share.record.lock.duration.ms", "-5"},
	} {
		if code := alter(tc.name, tc.value); code != kerr.InvalidConfig.Code {
			t.Errorf("%s=%s: %v, want INVALID_CONFIG", tc.name, tc.value, kerr.ErrorForCode(code))
		}
	}
	if code := alter("share.auto.offset.reset", "earliest"); code != 0 {
		t.Fatalf("set earliest: %v", kerr.ErrorForCode(code))
	}
	if code := alter("share.record.lock.duration.ms", "15000"); code != 0 {
		t.Fatalf("set lock duration: %v", kerr.ErrorForCode(code))
	}
	d := describe()
	if v := d["share.auto.offset.reset"]; v.Value == nil || *v.Value != "earliest" || v.Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("share.auto.offset.reset after the change: %+v", v)
	}
	if v := d["share.record.lock.duration.ms"]; v.Value == nil || *v.Value != "15000" {
		t.Fatalf("share.record.lock.duration.ms after the change: %+v", v)
	}

	// The group's configs survive a restart (they are in __consumer_offsets).
	b.Restart()
	admin = b.Client(t)
	if v := describe()["share.auto.offset.reset"]; v.Value == nil || *v.Value != "earliest" {
		t.Fatalf("share.auto.offset.reset after a restart: %+v", v)
	}

	cl := b.Client(t, kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	if got := pollShareValues(testContext(t, 30*time.Second), t, cl, nil, 50); len(got) != 50 {
		t.Fatalf("earliest: %d of the 50 records produced before the group read", len(got))
	}
}

// TestShareGroupOffsetsAdmin: Describe/Alter/DeleteShareGroupOffsets on
// the group's coordinator; an altered start offset takes effect on the
// partition leader that already held the group's state (the next share
// session reloads it), and an altered group answers NON_EMPTY_GROUP while
// it has members.
func TestShareGroupOffsetsAdmin(t *testing.T) {
	topic, group := "share-admin", "sg-admin"
	_, admin := startShareGroup(t, topic, group)
	produceShare(t, admin, topic, 0, 20)

	m := newShareRaw(t, admin, group, "m", topic)
	if p, _ := m.fetch(5 * time.Second); len(p.AcquiredRecords) == 0 {
		t.Fatal("nothing acquired")
	}
	if top, part := m.ack(m.epoch, 0, 4, 1); top != 0 || part != 0 {
		t.Fatalf("accept 0-4: %d/%d", top, part)
	}
	m.epoch = -1
	if _, code := m.fetch(0); code != 0 {
		t.Fatalf("closing the session: %v", kerr.ErrorForCode(code))
	}
	describe := func() int64 {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID = group
		rg.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: topic, Partitions: []int32{0}}}
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(testContext(t, 10*time.Second), admin)
		if err != nil || resp.Groups[0].ErrorCode != 0 || resp.Groups[0].Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("DescribeShareGroupOffsets: %v %+v", err, resp)
		}
		return resp.Groups[0].Topics[0].Partitions[0].StartOffset
	}
	if got := describe(); got != 5 {
		t.Fatalf("start offset after accepting 0-4: %d, want 5", got)
	}
	alter := func(start int64) int16 {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = group
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = topic
		rt.Partitions = []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: start}}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testContext(t, 10*time.Second), admin)
		if err != nil {
			t.Fatalf("AlterShareGroupOffsets: %v", err)
		}
		return resp.ErrorCode
	}
	if code := alter(12); code != 0 {
		t.Fatalf("alter: %v", kerr.ErrorForCode(code))
	}
	if got := describe(); got != 12 {
		t.Fatalf("start offset after the alter: %d, want 12", got)
	}
	n := newShareRaw(t, admin, group, "n", topic)
	p, _ := n.fetch(5 * time.Second)
	if offs, _ := acquiredOffsets(p); len(offs) != 8 || offs[0] != 12 {
		t.Fatalf("after the alter a new session acquired %v, want 12-19", offs)
	}
	// A member makes the group non-empty: operators must wait.
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = group, "member", []string{topic}
	if r, err := hb.RequestWith(testContext(t, 10*time.Second), admin); err != nil || r.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v %+v", err, r)
	}
	if code := alter(0); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("alter of a group with a member: %v, want NON_EMPTY_GROUP", kerr.ErrorForCode(code))
	}
	if got := describe(); got != 12 {
		t.Fatalf("start offset after the refused alter: %d, want 12", got)
	}
	hb.MemberEpoch = -1
	if r, err := hb.RequestWith(testContext(t, 10*time.Second), admin); err != nil || r.ErrorCode != 0 {
		t.Fatalf("leave: %v %+v", err, r)
	}
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = group
	del.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: topic}}
	if resp, err := del.RequestWith(testContext(t, 10*time.Second), admin); err != nil || resp.ErrorCode != 0 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteShareGroupOffsets: %v %+v", err, resp)
	}
	if got := describe(); got != -1 {
		t.Fatalf("start offset after the delete: %d, want -1", got)
	}
}

// TestShareGroupOffsetsAdminFirstRequest: operators' first requests of a
// fresh broker, one group on each of the 50 __consumer_offsets partitions
// at once, before the topic exists. FindCoordinator names the broker only
// once its coordinator loaded the group's partition; before the fix the
// metadata already named it while loads were starting, some requests got
// NOT_COORDINATOR, and franz-go does not retry that for
// AlterShareGroupOffsets (franz-go's TestShareGroupOffsetsAdmin failed so,
// 1 run in 6).
func TestShareGroupOffsetsAdminFirstRequest(t *testing.T) {
	b := StartBroker(t, "num.partitions=1")
	const partitions = 50 // offsets.topic.num.partitions
	groups := make([]string, partitions)
	for i, found := 0, 0; found < partitions; i++ {
		g := fmt.Sprintf("sg-first-%d", i)
		if p := kafkahash.PartitionFor(g, partitions); groups[p] == "" {
			groups[p] = g
			found++
		}
	}
	topic := "share-admin-first"
	createTopic(t, b.Admin(t), topic, 1, nil)
	ctx := testContext(t, 30*time.Second)
	var wg sync.WaitGroup
	codes := make([]int16, partitions)
	errs := make([]error, partitions)
	for i, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := b.Client(t) // each its own client: nothing cached
			req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
			req.GroupID = g
			rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
			rt.Topic = topic
			rt.Partitions = []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 0}}
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				errs[i] = err
				return
			}
			codes[i] = resp.ErrorCode
		}()
	}
	wg.Wait()
	for i, g := range groups {
		if errs[i] != nil || codes[i] != 0 {
			t.Errorf("first AlterShareGroupOffsets of %s (__consumer_offsets-%d): %v %v", g, i, errs[i], kerr.ErrorForCode(codes[i]))
		}
	}
}
