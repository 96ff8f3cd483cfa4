package verify

// The share group workload (KIP-932).
//
// One idempotent franz-go producer (acks=all) writes unique values
// ("s-<seq>") round robin to the partitions of ShareTopicName (RF 3). The
// share group ShareWorkload.Group is first given share.auto.offset.reset
// earliest (so it reads every partition from its first offset, whatever
// was written before a member joined: nothing is deleted from this topic)
// and a short share.record.lock.duration.ms; then shareMembers franz-go
// share consumers read it, accepting every record they get. Each member
// polls, records every delivery (member, partition, offset, value,
// delivery count), accepts them all and flushes the acknowledgements
// before it polls again; ShareAckCallback tells which partitions' acks the
// broker took, and each record's acceptance is recorded as ok, fail or
// info (unknown: the flush timed out, or a partition's acks had mixed
// answers). A member whose flush times out is closed and replaced by a
// new one (a new member id).
//
// The consumers run with MaxConcurrentFetches(0) (franz-go's strict pull
// mode: one fetch at a time, only while a poll runs), so every record a
// poll returns was acquired by a fetch that began after the member's
// previous non-empty poll began. That time is each delivery's Floor: a
// delivery whose Floor is later than a successful acceptance of the same
// record is a redelivery after the acknowledgement
// (share-redelivered-after-ack, check_share.go).
//
// After healing and once the producer stopped, Drain waits until every
// acknowledged write was delivered and accepted (an acceptance whose
// outcome is unknown counts: it may have taken effect) or shareDrainBound
// passes, then records each partition's high watermark.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareTopicName is the share group's topic (RF 3).
const ShareTopicName = "kverify-share"

// shareMembers is how many share consumers read the topic at a time.
const shareMembers = 3

// ShareLockDuration is the group's share.record.lock.duration.ms: records
// a member got and did not acknowledge (it was replaced, or its broker
// died) come back this soon.
const ShareLockDuration = 5 * time.Second

// shareDrainBound bounds the drain after healing.
const shareDrainBound = 45 * time.Second

// shareFlushTimeout bounds a member's flush of its acknowledgements.
const shareFlushTimeout = 10 * time.Second

// ShareWorkload drives the share group's topic.
type ShareWorkload struct {
	Rec        *Recorder
	Seeds      []string
	Topic      string
	Partitions int32
	Group      string
	// Interval paces the producer as the plain workload's.
	Interval time.Duration
	Logf     func(string, ...any)
	Security *Security

	// mu guards the drain's view: values acknowledged as written,
	// delivered (with where and how often), acknowledged by a member
	// whatever the answer (ackSent), and accepted (acknowledgement
	// answered ok, or with an open outcome: such a record may never come
	// back).
	mu        sync.Mutex
	written   map[string]bool
	delivered map[string]shareDelivery
	ackSent   map[string]bool
	accepted  map[string]bool
}

// shareDelivery is where a value was delivered from and its highest
// delivery count.
type shareDelivery struct {
	partition  int32
	offset     int64
	deliveries int32
}

// shareDeliveryLimit is Kafka's default group.share.delivery.count.limit:
// a record delivered this often is archived, not made available again.
const shareDeliveryLimit = 5

func (w *ShareWorkload) logf(format string, args ...any) {
	if w.Logf != nil {
		w.Logf(format, args...)
	}
}

func (w *ShareWorkload) note(m *map[string]bool, v string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if *m == nil {
		*m = map[string]bool{}
	}
	(*m)[v] = true
}

// noteDelivery records a delivery of v.
func (w *ShareWorkload) noteDelivery(v string, d shareDelivery) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.delivered == nil {
		w.delivered = map[string]shareDelivery{}
	}
	if prev, ok := w.delivered[v]; ok {
		d.deliveries = max(d.deliveries, prev.deliveries)
	}
	w.delivered[v] = d
}

// startOffsets returns the group's share-partition start offsets of the
// topic (DescribeShareGroupOffsets): every record below one was
// acknowledged or archived.
func (w *ShareWorkload) startOffsets(ctx context.Context, cl *kgo.Client) (map[int32]int64, error) {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = w.Group
	t := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	t.Topic = w.Topic
	for p := range w.Partitions {
		t.Partitions = append(t.Partitions, p)
	}
	g.Topics = append(g.Topics, t)
	req.Groups = append(req.Groups, g)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, rg := range resp.Groups {
		if err := kerr.ErrorForCode(rg.ErrorCode); err != nil {
			return nil, err
		}
		for _, rt := range rg.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err == nil && rp.StartOffset >= 0 {
					out[rp.Partition] = rp.StartOffset
				}
			}
		}
	}
	return out, nil
}

// SetUp gives the group its configs before any member joins:
// share.auto.offset.reset=earliest and the lock duration.
func (w *ShareWorkload) SetUp(ctx context.Context) error {
	cl, err := kgo.NewClient(w.Security.Admin(kgo.SeedBrokers(w.Seeds...))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return waitFor(ctx, 30*time.Second, func() error {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
		res.ResourceName = w.Group
		for k, v := range map[string]string{
			"share.auto.offset.reset":       "earliest",
			"share.record.lock.duration.ms": strconv.FormatInt(ShareLockDuration.Milliseconds(), 10),
		} {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = k, kmsg.StringPtr(v)
			res.Configs = append(res.Configs, c)
		}
		req.Resources = append(req.Resources, res)
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := req.RequestWith(rctx, cl)
		if err != nil {
			return fmt.Errorf("configs of share group %s: %w", w.Group, err)
		}
		for _, r := range resp.Resources {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return fmt.Errorf("configs of share group %s: %w", w.Group, err)
			}
		}
		return nil
	})
}

// RunProducer writes until ctx ends, then lets outstanding sends resolve.
func (w *ShareWorkload) RunProducer(ctx context.Context) {
	const name = "sprod"
	cl, err := w.Security.AcksAllProducer(w.Seeds, w.Topic, w.Rec, name)
	if err != nil {
		w.logf("%s: %v", name, err)
		return
	}
	defer cl.Close()
	producePaced(ctx, cl, w.Interval, func(seq int64) (*kgo.Record, Event) {
		e := Event{Kind: KindSend, Topic: w.Topic, Proc: name, Seq: seq, Partition: int32(seq % int64(w.Partitions)), Value: fmt.Sprintf("s-%d", seq)}
		return &kgo.Record{Partition: e.Partition, Value: []byte(e.Value)}, e
	}, func(e Event) {
		if e.Outcome == OK {
			w.note(&w.written, e.Value)
		}
		w.Rec.Add(e)
	})
}

// RunConsumers runs shareMembers members until ctx ends.
func (w *ShareWorkload) RunConsumers(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range shareMembers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for gen := 1; ctx.Err() == nil; gen++ {
				w.member(ctx, fmt.Sprintf("share%d.%d", i, gen))
				sleepCtx(ctx, 200*time.Millisecond)
			}
		}()
	}
	wg.Wait()
}

// ackWindow collects the ack callbacks of one member between its accept
// of a poll's records and the end of the flush.
type ackWindow struct {
	mu      sync.Mutex
	open    bool
	results map[int32][]error // partition -> answers
}

func (a *ackWindow) callback(_ *kgo.Client, rs kgo.ShareAckResults) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.open {
		return
	}
	for _, r := range rs {
		a.results[r.Partition] = append(a.results[r.Partition], r.Err)
	}
}

func (a *ackWindow) begin() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.open, a.results = true, map[int32][]error{}
}

func (a *ackWindow) end() map[int32][]error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.open = false
	return a.results
}

// shareAckOutcome classifies one partition's acknowledgements of a poll:
// ok if every answer for the partition was a success, fail if every one
// was an error by which the broker refused them before changing anything
// (definiteShareAckError), info otherwise: the flush did not finish, no
// answer came, the answers were mixed, or an error leaves the outcome
// open (a lost connection, a timeout, a state write that reached the log
// but too few replicas: the acceptance may yet take effect).
func shareAckOutcome(flushErr error, answers []error) (Outcome, string) {
	if flushErr != nil {
		return Info, "flush: " + flushErr.Error()
	}
	if len(answers) == 0 {
		return Info, "no answer for the partition"
	}
	failed, definite := 0, 0
	var last error
	for _, err := range answers {
		if err != nil {
			failed++
			last = err
			if definiteShareAckError(err) {
				definite++
			}
		}
	}
	switch {
	case failed == 0:
		return OK, ""
	case definite == len(answers):
		return Fail, last.Error()
	}
	return Info, fmt.Sprintf("%d of %d answers failed: %v", failed, len(answers), last)
}

// definiteShareAckError reports whether err is a broker's refusal of
// acknowledgements that changed nothing (Kafka answers these before it
// touches the share-partition state).
func definiteShareAckError(err error) bool {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return false
	}
	switch ke.Code {
	case kerr.InvalidRecordState.Code, kerr.NotLeaderForPartition.Code, kerr.UnknownTopicOrPartition.Code,
		kerr.UnknownTopicID.Code, kerr.InvalidRequest.Code, kerr.ShareSessionNotFound.Code,
		kerr.InvalidShareSessionEpoch.Code, kerr.FencedStateEpoch.Code, kerr.GroupAuthorizationFailed.Code,
		kerr.TopicAuthorizationFailed.Code:
		return true
	}
	return false
}

// member is one share consumer until ctx ends or its flush times out.
func (w *ShareWorkload) member(ctx context.Context, name string) {
	win := &ackWindow{}
	cl, err := kgo.NewClient(w.Security.Client(
		kgo.SeedBrokers(w.Seeds...),
		kgo.ShareGroup(w.Group),
		kgo.ConsumeTopics(w.Topic),
		kgo.ShareMaxRecords(50),
		kgo.MaxConcurrentFetches(0),
		kgo.ShareAckCallback(win.callback),
		kgo.MetadataMinAge(250*time.Millisecond),
	)...)
	if err != nil {
		w.logf("%s: %v", name, err)
		sleepCtx(ctx, time.Second)
		return
	}
	defer func() {
		// Closing leaves the group (records still held are released).
		done := make(chan struct{})
		go func() { cl.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			w.logf("%s: close did not finish within 15s", name)
		}
	}()
	floor := w.Rec.Since(time.Now())
	for ctx.Err() == nil {
		pollStart := w.Rec.Since(time.Now())
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		if len(recs) == 0 {
			continue
		}
		for _, r := range recs {
			w.Rec.Add(Event{Kind: KindShareDeliver, Topic: w.Topic, Proc: name, Partition: r.Partition, Offset: r.Offset,
				Value: string(r.Value), Deliveries: r.DeliveryCount(), Floor: floor})
			w.noteDelivery(string(r.Value), shareDelivery{r.Partition, r.Offset, r.DeliveryCount()})
		}
		// The next poll's records come from fetches begun during this
		// poll or later (one fetch at a time, only while polling).
		floor = pollStart
		win.begin()
		cl.MarkAcks(kgo.AckAccept)
		fctx, cancel := context.WithTimeout(context.Background(), shareFlushTimeout)
		flushErr := cl.FlushAcks(fctx)
		cancel()
		answers := win.end()
		for _, r := range recs {
			out, detail := shareAckOutcome(flushErr, answers[r.Partition])
			w.Rec.Add(Event{Kind: KindShareAck, Topic: w.Topic, Proc: name, Partition: r.Partition, Offset: r.Offset,
				Value: string(r.Value), Deliveries: r.DeliveryCount(), Outcome: out, Err: detail})
			w.note(&w.ackSent, string(r.Value))
			if out != Fail {
				w.note(&w.accepted, string(r.Value))
			}
		}
		if flushErr != nil {
			// Answers of this member may still come: a new member
			// starts clean.
			w.logf("%s: acknowledgements not flushed within %v (%v): a new member takes over", name, shareFlushTimeout, flushErr)
			return
		}
	}
}

// shareDrain is where an acknowledged write stands for the drain.
type shareDrain int

const (
	shareUndelivered  shareDrain = iota // not delivered to the group yet
	shareUnaccepted                     // delivered, its acceptance refused, still in flight
	shareAccepted                       // an acceptance answered ok or with an open outcome
	shareAcceptedLate                   // refused, yet below the start offset: see below
)

// shareDrainState places write v. A record whose acceptance was answered
// with an error, never delivered again, yet below its share-partition
// start offset (spso) with fewer deliveries than the limit was accepted
// after all: by an attempt whose answer was lost, then retried by
// franz-go and refused (INVALID_RECORD_STATE, SHARE_SESSION_NOT_FOUND)
// because it had taken effect. A record no member acknowledged at all
// stays unaccepted: a start offset past it would be a record the group
// skipped.
func shareDrainState(v string, delivered map[string]shareDelivery, accepted, ackSent map[string]bool, spso map[int32]int64) shareDrain {
	d, ok := delivered[v]
	switch {
	case !ok:
		return shareUndelivered
	case accepted[v]:
		return shareAccepted
	case ackSent[v] && d.deliveries < shareDeliveryLimit && spso[d.partition] > d.offset:
		return shareAcceptedLate
	}
	return shareUnaccepted
}

// Drain waits, once the producer stopped, until every acknowledged write
// was delivered and accepted, or shareDrainBound passes; then it records
// each partition's high watermark (KindShareDrainDone). The consumers
// must run meanwhile.
func (w *ShareWorkload) Drain(ctx context.Context) error {
	var ends map[int32]int64
	if err := waitFor(ctx, 30*time.Second, func() error {
		var err error
		ends, err = EndOffsets(ctx, w.Seeds, w.Topic, w.Security.Admin()...)
		if err == nil && int32(len(ends)) != w.Partitions {
			err = fmt.Errorf("end offsets of %d partitions", len(ends))
		}
		return err
	}); err != nil {
		return fmt.Errorf("list end offsets of %s: %w", w.Topic, err)
	}
	admin, err := kgo.NewClient(w.Security.Admin(kgo.SeedBrokers(w.Seeds...))...)
	if err != nil {
		return err
	}
	defer admin.Close()
	began := time.Now()
	acceptedLate := map[string]bool{}
	pending := func(spso map[int32]int64) (undelivered, unaccepted int) {
		w.mu.Lock()
		defer w.mu.Unlock()
		clear(acceptedLate)
		for v := range w.written {
			switch shareDrainState(v, w.delivered, w.accepted, w.ackSent, spso) {
			case shareUndelivered:
				undelivered++
			case shareUnaccepted:
				unaccepted++
			case shareAcceptedLate:
				acceptedLate[v] = true
			}
		}
		return undelivered, unaccepted
	}
	err = waitFor(ctx, shareDrainBound, func() error {
		spso, err := w.startOffsets(ctx, admin)
		if err != nil {
			return fmt.Errorf("share-partition start offsets of %s: %w", w.Group, err)
		}
		if u, a := pending(spso); u+a > 0 {
			return fmt.Errorf("%d acknowledged writes not yet delivered, %d delivered but not yet accepted", u, a)
		}
		return nil
	})
	if n := len(acceptedLate); n > 0 {
		w.logf("share group: %d records whose acceptance was answered with an error lie below their share-partition start offset: accepted by an attempt whose answer was lost", n)
		w.Rec.Add(Event{Kind: KindPhase, Detail: fmt.Sprintf("share group: %d records accepted by an acknowledgement whose answer was lost (below the share-partition start offset, fewer than %d deliveries)", n, shareDeliveryLimit)})
	}
	detail := fmt.Sprintf("every acknowledged write delivered and accepted %v after the drain began", time.Since(began).Round(time.Millisecond))
	if err != nil {
		detail = fmt.Sprintf("drain bound %v passed: %v", shareDrainBound, err)
	}
	for p := range w.Partitions {
		w.Rec.Add(Event{Kind: KindShareDrainDone, Topic: w.Topic, Proc: "drain", Partition: p, Offset: ends[p], Detail: detail})
	}
	w.logf("share group: %s", detail)
	if err != nil {
		return errors.New("share group drain: " + detail)
	}
	return nil
}
