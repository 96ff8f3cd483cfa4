package server

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/internal/quota"
	"github.com/kbroker/kbroker/internal/sendfile"
	"github.com/kbroker/kbroker/protocol"
	"github.com/kbroker/kbroker/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch: v0-16
//
// Behaviour:
// * Consumers read below the high watermark (read_uncommitted) or the last
//   stable offset (read_committed, with the aborted transactions in the
//   range so the consumer can drop their records).
// * Long poll: the request waits until MinBytes are available or MaxWait
//   passes, waking as soon as any requested partition's log or high
//   watermark moves (no polling).
// * Byte limits: MaxBytes for the response and MaxBytes per partition, but
//   the first batch of the first partition with data is returned whole even
//   if larger (KIP-74), so a consumer can always progress.
// * Incremental fetch sessions (KIP-227) from v7.
// * Batches are served as stored (v2). Kafka down-converts for Fetch v0-3;
//   kbroker does not, which the clients that still send v0-3 (sarama,
//   librdkafka, kafka-python) read anyway as they detect the magic byte.
// * Authorization (KafkaApis.handleFetchRequest), on every fetch of a
//   session too: a follower (replica id >= 0) needs ClusterAction on the
//   cluster, else every partition gets TOPIC_AUTHORIZATION_FAILED; a
//   consumer needs Read on each topic, else its partitions get
//   TOPIC_AUTHORIZATION_FAILED whether or not the topic exists. Unknown
//   topic ids are answered UNKNOWN_TOPIC_ID first, as Kafka.
// * Client quotas (client_quotas.go), consumers only: MaxBytes capped to
//   what consumer_byte_rate allows in one window; a fetch over its
//   consumer or request quota is answered empty with throttle_time_ms.
//
// Version notes:
// * v4: isolation level, last stable offset, aborted transactions
// * v5: log start offset
// * v7: fetch sessions
// * v9: current leader epoch (KIP-320 fencing)
// * v11: rack id, preferred read replica
// * v12: flexible, diverging epoch
// * v13: topic ids
// * v15: replica state replaces replica id
// * v16: node endpoints

func init() { registerAPI(kmsg.Fetch.Int16(), 0, 16, handleFetch) }

// fetchTarget is one partition to read in this fetch.
type fetchTarget struct {
	sp   *sessionPartition
	part *replica.Partition
	err  error
	out  kmsg.FetchResponseTopicPartition
	// records are out's record batches, sent in place of RecordBatches
	// (file ranges go out with sendfile).
	records sendfile.Chunks
	// include says the partition goes in the response (always for full
	// fetches; for incremental ones only when something changed).
	include bool
}

// fetchResponse is a Fetch response whose partitions' records are chunks:
// records[t][p] belongs to Topics[t].Partitions[p]. Whoever writes it
// closes the chunks (Close).
type fetchResponse struct {
	*kmsg.FetchResponse
	records [][]sendfile.Chunks
}

// Close releases the segment file descriptors of the records.
func (r *fetchResponse) Close() {
	for _, t := range r.records {
		for _, cs := range t {
			cs.Close()
		}
	}
}

func handleFetch(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FetchRequest)
	resp := &fetchResponse{FetchResponse: req.ResponseKind().(*kmsg.FetchResponse)}
	now := time.Now()
	md := b.controller.Metadata()

	// Resolve topic ids (v13+) to names.
	nameOf := func(topic string, id [16]byte) (string, bool) {
		if req.Version < 13 {
			return topic, true
		}
		t, ok := md.TopicByID(id)
		if !ok {
			return "", false
		}
		return t.Name, true
	}

	var session *fetchSession
	incremental := false
	unknownIDs := map[[16]byte][]int32{}
	nParts := 0
	for _, rt := range req.Topics {
		nParts += len(rt.Partitions)
	}
	requested := make([]sessionPartition, 0, nParts)
	for _, rt := range req.Topics {
		name, ok := nameOf(rt.Topic, rt.TopicID)
		for _, rp := range rt.Partitions {
			if !ok {
				unknownIDs[rt.TopicID] = append(unknownIDs[rt.TopicID], rp.Partition)
				continue
			}
			requested = append(requested, sessionPartition{
				topic: name, topicID: rt.TopicID, partition: rp.Partition,
				fetchOffset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, currentLeaderEpoch: rp.CurrentLeaderEpoch,
			})
		}
	}

	switch {
	case req.Version < 7 || (req.SessionID == 0 && req.SessionEpoch == -1):
		// No session.
	case req.SessionEpoch == 0:
		// Epoch 0 opens a new session; with an id it also closes that
		// session (franz-go resets this way).
		if req.SessionID != 0 {
			b.fetches.remove(req.SessionID)
		}
		session = b.fetches.create(now)
		if session != nil {
			for _, sp := range requested {
				session.upsert(sp)
			}
			resp.SessionID = session.id
		}
	case req.SessionEpoch == -1:
		b.fetches.remove(req.SessionID)
	default:
		s, err := b.fetches.get(req.SessionID, req.SessionEpoch, now)
		if err != nil {
			resp.ErrorCode = protocol.ErrorCode(err)
			return resp, nil
		}
		session, incremental = s, true
		for _, sp := range requested {
			session.upsert(sp)
		}
		for _, ft := range req.ForgottenTopics {
			name, ok := nameOf(ft.Topic, ft.TopicID)
			if !ok {
				continue
			}
			for _, p := range ft.Partitions {
				session.forget(sessionKey{name, p})
			}
		}
		resp.SessionID = session.id
	}

	// The targets in one allocation, not one each.
	var targets []*fetchTarget
	if session != nil {
		all := make([]fetchTarget, len(session.order))
		targets = make([]*fetchTarget, len(session.order))
		for i, k := range session.order {
			all[i].sp = session.parts[k]
			targets[i] = &all[i]
		}
	} else {
		all := make([]fetchTarget, len(requested))
		targets = make([]*fetchTarget, len(requested))
		for i := range requested {
			all[i].sp = &requested[i]
			targets[i] = &all[i]
		}
	}
	replicaID := req.ReplicaID
	if req.Version >= 15 {
		replicaID = req.ReplicaState.ID
	}
	readable := b.checksFor(rc, acl.OpRead, acl.ResourceTopic)
	follower := replicaID >= 0
	followerAllowed := follower && b.authorizeCluster(rc, acl.OpClusterAction)
	for _, t := range targets {
		if (follower && !followerAllowed) || (!follower && !readable.allowed(t.sp.topic)) {
			t.err = fmt.Errorf("%w: not authorized to fetch from %s", kerr.TopicAuthorizationFailed, t.sp.topic)
			continue
		}
		t.part, t.err = b.localPartitionOf(t.sp.topic, t.sp.topicID, t.sp.partition)
		if t.err == nil && t.sp.topicID == [16]byte{} {
			t.sp.topicID = t.part.TopicID()
		}
	}

	maxBytes := int(req.MaxBytes)
	if req.Version < 3 || maxBytes <= 0 {
		maxBytes = int(b.cfg.SocketRequestMaxBytes)
	}
	if !follower {
		maxBytes = b.fetchQuotaMaxBytes(ctx, maxBytes)
	}
	minBytes := min(int(req.MinBytes), maxBytes)
	deadline := now.Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	for {
		// Take the wake-up channels before reading, so an append between
		// the read and the wait is not missed.
		waitOn := make([]<-chan struct{}, 0, len(targets))
		for _, t := range targets {
			if t.part != nil {
				waitOn = append(waitOn, t.part.Changed())
			}
		}
		total, news := b.readFetchTargets(targets, maxBytes, incremental, replicaID, req.IsolationLevel == 1)
		if total >= minBytes || news || !time.Now().Before(deadline) || len(waitOn) == 0 {
			break
		}
		waitStart := time.Now()
		woke := waitAny(ctx, waitOn, deadline)
		addRemoteTime(ctx, time.Since(waitStart)) // Kafka's DelayedFetch: remote time
		if !woke {
			b.readFetchTargets(targets, maxBytes, incremental, replicaID, req.IsolationLevel == 1)
			break
		}
	}
	if follower && b.replThrottle.leaderThrottlesAny() {
		// What throttled partitions send counts towards the leader's
		// replication rate (Kafka's sizeOfThrottledPartitions).
		throttled := 0
		for _, t := range targets {
			if t.part != nil && t.records != nil && b.replThrottle.leaderThrottled(replica.TopicPartition{Topic: t.sp.topic, Partition: t.sp.partition}) {
				throttled += t.records.Size()
			}
		}
		b.replThrottle.leader.Record(throttled, time.Now())
	}

	if !follower {
		if throttle := b.throttleFetch(ctx, fetchResponseBytes(targets), time.Now()); throttle > 0 {
			// Over a quota: answered empty (Kafka's getThrottledResponse),
			// so the session keeps what it had and nothing read counts.
			for _, t := range targets {
				t.records.Close()
			}
			return resp, nil
		}
	}

	// Assemble the response in request (or session) order: first count
	// each topic's partitions, so that every slice is made once, at its
	// size.
	byTopic := map[string]int{}
	var counts []int
	for _, t := range targets {
		if !t.include {
			continue
		}
		i, ok := byTopic[t.sp.topic]
		if !ok {
			i = len(counts)
			byTopic[t.sp.topic] = i
			counts = append(counts, 0)
		}
		counts[i]++
	}
	resp.Topics = make([]kmsg.FetchResponseTopic, len(counts), len(counts)+len(unknownIDs))
	resp.records = make([][]sendfile.Chunks, len(counts))
	included := 0
	for _, n := range counts {
		included += n
	}
	partsAll := make([]kmsg.FetchResponseTopicPartition, 0, included)
	recordsAll := make([]sendfile.Chunks, 0, included)
	for i, n := range counts {
		// Each topic's slices are windows of the shared ones, capped so
		// that appending to one cannot run into the next.
		resp.Topics[i].Partitions = partsAll[len(partsAll) : len(partsAll) : len(partsAll)+n]
		resp.records[i] = recordsAll[len(recordsAll) : len(recordsAll) : len(recordsAll)+n]
		partsAll, recordsAll = partsAll[:len(partsAll)+n], recordsAll[:len(recordsAll)+n]
	}
	named := make([]bool, len(counts))
	for _, t := range targets {
		if !t.include {
			t.records.Close()
			continue
		}
		if t.sp != nil && session != nil && t.err == nil {
			t.sp.sentHighWatermark = t.out.HighWatermark
			t.sp.sentLogStartOffset = t.out.LogStartOffset
		}
		i := byTopic[t.sp.topic]
		if !named[i] {
			named[i] = true
			parts := resp.Topics[i].Partitions
			resp.Topics[i] = kmsg.NewFetchResponseTopic()
			resp.Topics[i].Topic = t.sp.topic
			resp.Topics[i].TopicID = t.sp.topicID
			resp.Topics[i].Partitions = parts
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, t.out)
		resp.records[i] = append(resp.records[i], t.records)
		b.ops.fetched(t.sp.topic, t.records.Size(), follower)
	}
	for id, parts := range unknownIDs {
		rt := kmsg.NewFetchResponseTopic()
		rt.TopicID = id
		for _, p := range parts {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p
			rp.ErrorCode = kerr.UnknownTopicID.Code
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rp.RecordBatches = []byte{}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// readFetchTargets reads every target once, filling out. It returns the
// bytes read and whether an incremental response has something to say
// other than records (an error or changed offsets).
func (b *Broker) readFetchTargets(targets []*fetchTarget, maxBytes int, incremental bool, replicaID int32, readCommitted bool) (int, bool) {
	now := time.Now()
	total := 0
	news := false
	for _, t := range targets {
		// A read again (after a long-poll wait) replaces the last one.
		t.records.Close()
		t.records = nil
		out := kmsg.NewFetchResponseTopicPartition()
		out.Partition = t.sp.partition
		out.HighWatermark, out.LastStableOffset, out.LogStartOffset = -1, -1, -1
		// An empty record set, never null: librdkafka rejects a null
		// MessageSet ("invalid MessageSetSize -1").
		out.RecordBatches = []byte{}
		t.include = !incremental
		if t.err != nil {
			out.ErrorCode = protocol.ErrorCode(t.err)
			t.out, t.include = out, true
			news = true
			continue
		}
		remaining := maxBytes - total
		limit := int(t.sp.maxBytes)
		if limit > remaining {
			limit = remaining
		}
		minOne := total == 0
		var res replica.ReadResult
		var err error
		// A follower's fetch always records its position, even past the
		// byte budget, or its caught-up time would go stale.
		if limit > 0 || minOne || replicaID >= 0 {
			if replicaID >= 0 {
				// A follower: reads up to the log end, and its position
				// moves the high watermark and its ISR membership. A
				// throttled replica out of sync gets nothing while the
				// leader's replication rate is over its bound; its
				// position is still recorded.
				res, err = t.part.ReadForFollower(replicaID, t.sp.fetchOffset, max(limit, 0), t.sp.currentLeaderEpoch, now)
				tp := replica.TopicPartition{Topic: t.sp.topic, Partition: t.sp.partition}
				if err == nil && b.replThrottle.leaderThrottled(tp) && b.replThrottle.leaderHolds(tp, t.part.InSync(replicaID), now) {
					res.Records.Close()
					res.Records = nil
				}
			} else {
				res, err = t.part.Read(t.sp.fetchOffset, limit, minOne, t.sp.currentLeaderEpoch, readCommitted)
			}
		} else {
			st := t.part.State()
			res = replica.ReadResult{State: st}
		}
		if err != nil {
			out.ErrorCode = protocol.ErrorCode(err)
			if errors.Is(err, kerr.OffsetOutOfRange) || errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, kerr.UnknownLeaderEpoch) {
				out.HighWatermark = res.HighWatermark
				out.LastStableOffset = res.LastStableOffset
				out.LogStartOffset = res.LogStartOffset
			}
			t.out, t.include = out, true
			news = true
			continue
		}
		out.HighWatermark = res.HighWatermark
		out.LastStableOffset = res.LastStableOffset
		out.LogStartOffset = res.LogStartOffset
		if readCommitted {
			out.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 0, len(res.AbortedTxns))
			for _, a := range res.AbortedTxns {
				out.AbortedTransactions = append(out.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
			}
		}
		t.records = res.Records
		size := res.Records.Size()
		total += size
		if size > 0 {
			t.include = true
		}
		if incremental && (res.HighWatermark != t.sp.sentHighWatermark || res.LogStartOffset != t.sp.sentLogStartOffset) {
			t.include = true
			news = true
		}
		t.out = out
	}
	return total, news
}

// waitAny blocks until one of chans is closed (true), or the deadline passes
// or ctx ends (false).
func waitAny(ctx context.Context, chans []<-chan struct{}, deadline time.Time) bool {
	defer quota.Parked(ctx, time.Now()) // a long poll is not busy time
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	if len(chans) == 1 {
		select {
		case <-chans[0]:
			return true
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	for _, c := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen >= 2
}
