package server

// ShareFetch v0-v2 (KIP-932; v1 adds MaxRecords, BatchSize and the acquire
// mode of KIP-1206, v2 KIP-1222's renew acknowledgements):
// a share group member fetches from the partitions this broker leads.
// Records are acquired for the member (locked for
// group.share.record.lock.duration.ms) in the group's share partition
// (share/), so another member is not given them until they are released,
// rejected, time out or are accepted; acknowledgements may ride on the
// request. Share sessions follow Kafka's ShareSessionCache epoch rules
// (0 opens, -1 closes, otherwise the session's next epoch).
//
// Authorization (KafkaApis.handleShareFetchRequest): Read on the group,
// else GROUP_AUTHORIZATION_FAILED for the whole request; Read on each
// topic, else that topic's partitions answer TOPIC_AUTHORIZATION_FAILED.
//
// A share partition's start offset is share.auto.offset.reset's choice
// (the group config: latest, Kafka's default, is the high watermark when
// the group first fetches the partition; earliest the log start) unless
// its durable state says otherwise (85_write_share_group_state.go); the
// state is reloaded whenever this broker becomes the partition's leader
// anew.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/internal/share"
	"github.com/kbroker/kbroker/protocol"
	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/replica"
	"github.com/kbroker/kbroker/segment"
)

func init() {
	registerAPI(kmsg.ShareFetch.Int16(), 0, 2, handleShareFetch)
}

// defaultShareMaxRecords is what a fetch without MaxRecords acquires at
// most (Kafka's share.max.fetch.records default).
const defaultShareMaxRecords = 500

// lazyShares is the broker's share leader, made on first use.
type lazyShares struct {
	once sync.Once
	sl   atomic.Pointer[shareLeader] // nil until first used
}

// shareConnClosed ends the share sessions opened on a connection that has
// closed and releases the records their members hold, as Kafka's
// ShareSessionCache does when a connection drops: a consumer that dies
// (its socket closes) gives its records back at once rather than when
// their locks expire.
func (b *Broker) shareConnClosed(conn uint64) {
	sl := b.shares.sl.Load()
	if sl == nil {
		return
	}
	for _, s := range sl.mgr.CloseConn(conn) {
		sl.releaseMember(s.Group, s.Member, s.Parts())
	}
}

// shareLeader is this broker's share state as a partition leader.
type shareLeader struct {
	b     *Broker
	mgr   *share.Manager
	store shareStateStore
}

func (b *Broker) shareLeader() *shareLeader {
	b.shares.once.Do(func() {
		b.shares.sl.Store(&shareLeader{b: b, mgr: share.NewManager(2000), store: newShareStateStore(b)})
	})
	return b.shares.sl.Load()
}

// shareConfig is the share partitions' settings from the broker config.
func (b *Broker) shareConfig() share.Config {
	return share.Config{
		LockDuration:  b.cfg.GroupShareRecordLockDuration,
		DeliveryLimit: int16(b.cfg.GroupShareDeliveryCountLimit),
		MaxInFlight:   int64(b.cfg.GroupSharePartitionMaxLocks),
	}
}

// shareConfigOf is the share partitions' settings of a group: the broker
// config's, with the group's overrides.
func (b *Broker) shareConfigOf(settings shareGroupSettings) share.Config {
	cfg := b.shareConfig()
	cfg.LockDuration = settings.lockDuration
	cfg.ReadCommitted = settings.readCommitted
	cfg.DeliveryLimit = settings.deliveryLimit
	cfg.MaxInFlight = settings.maxLocks
	return cfg
}

// shareTarget is one session partition of a fetch.
type shareTarget struct {
	tp    share.TP
	topic string
	part  *replica.Partition
	ps    *share.PartitionState
	err   error
	// strict: ShareAcquireMode 1 (record limit, KIP-1206): never more
	// than MaxRecords, batches split.
	strict bool
}

// sharePartition returns the share partition of group on part, loaded for
// part's current leader epoch (from the durable state, else started by
// share.auto.offset.reset). With verify (a share session opening) a loaded
// state is checked against the stored one's epoch first and reloaded if an
// operator changed it (Alter/DeleteShareGroupOffsets). Call without locks.
func (sl *shareLeader) sharePartition(ctx context.Context, group string, tp share.TP, part *replica.Partition, verify bool) (*share.PartitionState, error) {
	ps := sl.mgr.Partition(share.Key{Group: group, TopicID: tp.TopicID, Partition: tp.Partition})
	st := part.State()
	if !st.IsLeader {
		return nil, kerr.NotLeaderForPartition
	}
	ps.Lock()
	defer ps.Unlock()
	var stored *storedShareState
	if p, epoch := ps.PartitionLocked(); p != nil && epoch == st.LeaderEpoch {
		if !verify {
			return ps, nil
		}
		s, err := sl.store.Load(ctx, ps.Key, st.LeaderEpoch)
		if err != nil {
			return nil, fmt.Errorf("load share state of %s %x-%d: %w", group, tp.TopicID, tp.Partition, deposed(err))
		}
		if s.found && s.stateEpoch == ps.StateEpochLocked() {
			// A session opening picks up the group's config changes
			// (Kafka reads them with every request; a share fetch
			// here does not ask the coordinator each time). Should
			// the coordinator not answer, the loaded partition keeps
			// the configs it has rather than fail the session.
			settings, err := sl.b.shareGroupSettings(ctx, group)
			if err != nil {
				sl.b.logger.Info("share session opened with the group configs of the last load: reading them failed", "group", group, "err", err)
				return ps, nil
			}
			p.SetConfig(sl.b.shareConfigOf(settings))
			return ps, nil
		}
		stored = &s
	}
	// The group's configs as of this load (share.auto.offset.reset,
	// share.record.lock.duration.ms, share.isolation.level); a later
	// change applies from the next share session or load.
	settings, err := sl.b.shareGroupSettings(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("read configs of group %s: %w", group, err)
	}
	cfg := sl.b.shareConfigOf(settings)
	if stored == nil {
		s, err := sl.store.Load(ctx, ps.Key, st.LeaderEpoch)
		if err != nil {
			return nil, fmt.Errorf("load share state of %s %x-%d: %w", group, tp.TopicID, tp.Partition, deposed(err))
		}
		stored = &s
	}
	start, batches := stored.start, stored.batches
	if !stored.found {
		// share.auto.offset.reset: latest (Kafka's default) is the high
		// watermark, earliest the log start, by_duration the first
		// record no older than its duration (else the high watermark,
		// as KIP-1106 resets past every record's timestamp to latest).
		start = st.HighWatermark
		switch {
		case settings.earliest:
			start = st.LogStartOffset
		case settings.byDuration:
			since := time.Now().Add(-settings.resetBack).UnixMilli()
			off, _, found, err := sl.b.offsetForTimestamp(part, since, st.HighWatermark)
			if err != nil {
				return nil, fmt.Errorf("share.auto.offset.reset by_duration of %s %x-%d: %w", group, tp.TopicID, tp.Partition, err)
			}
			if found {
				start = off
			}
		}
	}
	p := share.Restore(cfg, start, batches)
	if st.LogStartOffset > p.StartOffset() {
		p.MoveStart(st.LogStartOffset) // records gone from the log are not delivered
	}
	// Stored at once under a new state epoch: a new partition's start is
	// fixed (a failover does not skip what arrives meanwhile), and the
	// previous leader's later writes are fenced.
	stateEpoch := stored.stateEpoch + 1
	start, batches = p.Snapshot()
	if err := sl.store.Save(ctx, ps.Key, st.LeaderEpoch, stateEpoch, start, batches); err != nil {
		return nil, fmt.Errorf("store share state of %s %x-%d: %w", group, tp.TopicID, tp.Partition, deposed(err))
	}
	ps.SetLocked(p, st.LeaderEpoch, stateEpoch)
	return ps, nil
}

// deposed answers a share state coordinator's FENCED_LEADER_EPOCH as
// NOT_LEADER_OR_FOLLOWER: a newer leader of the partition has read its
// state, so this broker no longer leads it whatever its metadata says, and
// the client learns the leader from the metadata and the hint.
func deposed(err error) error {
	if errors.Is(err, kerr.FencedLeaderEpoch) {
		return fmt.Errorf("%w: a newer leader holds the share state (%w)", kerr.NotLeaderForPartition, err)
	}
	return err
}

// acknowledge applies one partition's acknowledgement batches for member
// and stores the result before it is published; nothing changes unless
// every batch is valid and the store took it. It returns Kafka's error
// code (0: done).
func (sl *shareLeader) acknowledge(ctx context.Context, ps *share.PartitionState, member string, batches []ackBatch, maxType share.AckType, now time.Time) int16 {
	ps.Lock()
	defer ps.Unlock()
	p, leaderEpoch := ps.PartitionLocked()
	if p == nil {
		return kerr.InvalidRecordState.Code
	}
	p.ExpireLocks(now)
	next := p.Clone()
	for _, ab := range batches {
		for _, t := range ab.types {
			if t > maxType {
				return kerr.InvalidRequest.Code
			}
		}
		if err := next.Acknowledge(member, ab.first, ab.last, ab.types, now); err != nil {
			if errors.Is(err, share.ErrInvalidRequest) {
				return kerr.InvalidRequest.Code
			}
			return kerr.InvalidRecordState.Code
		}
	}
	before, _ := p.Snapshot()
	start, states := next.Snapshot()
	if !renewOnly(batches) || start != before {
		if err := sl.store.Save(ctx, ps.Key, leaderEpoch, ps.StateEpochLocked(), start, states); err != nil {
			sl.b.logger.Warn("failed to store share acknowledgements", "group", ps.Key.Group, "partition", ps.Key.Partition, "err", err)
			if errors.Is(err, kerr.FencedStateEpoch) || errors.Is(err, kerr.FencedLeaderEpoch) {
				// A newer leader or an operator wrote the state: what is
				// here is stale, and is loaded again on next use.
				ps.SetLocked(nil, -1, 0)
			}
			return protocol.ErrorCode(deposed(err))
		}
	}
	p.Replace(next)
	ps.NotifyLocked()
	return 0
}

func renewOnly(batches []ackBatch) bool {
	for _, b := range batches {
		for _, t := range b.types {
			if t != share.AckRenew {
				return false
			}
		}
	}
	return true
}

// releaseMember releases member's acquired records on the partitions of a
// closed or replaced share session.
func (sl *shareLeader) releaseMember(group, member string, tps []share.TP) {
	for _, tp := range tps {
		ps := sl.mgr.Partition(share.Key{Group: group, TopicID: tp.TopicID, Partition: tp.Partition})
		ps.Lock()
		if p, _ := ps.PartitionLocked(); p != nil && p.ReleaseMember(member) {
			ps.NotifyLocked()
		}
		ps.Unlock()
	}
}

// ackBatch is one acknowledgement batch of a request.
type ackBatch struct {
	first, last int64
	types       []share.AckType
}

func toAckBatches[T any](in []T, get func(T) (int64, int64, []int8)) []ackBatch {
	out := make([]ackBatch, 0, len(in))
	for _, b := range in {
		first, last, types := get(b)
		ab := ackBatch{first: first, last: last}
		for _, t := range types {
			ab.types = append(ab.types, share.AckType(t))
		}
		out = append(out, ab)
	}
	return out
}

// shareRequestError maps a session error to Kafka's code.
func shareSessionCode(err error) int16 {
	switch {
	case errors.Is(err, share.ErrSessionNotFound):
		return kerr.ShareSessionNotFound.Code
	case errors.Is(err, share.ErrInvalidSessionEpoch):
		return kerr.InvalidShareSessionEpoch.Code
	case errors.Is(err, share.ErrSessionLimit):
		return kerr.ShareSessionLimitReached.Code
	}
	return kerr.UnknownServerError.Code
}

func handleShareFetch(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	resp.AcquisitionLockTimeoutMillis = int32(b.cfg.GroupShareRecordLockDuration.Milliseconds())
	group, member := derefString(req.GroupID), derefString(req.MemberID)
	if !b.authorize(rc, acl.OpRead, acl.ResourceGroup, group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if group == "" || member == "" || len(member) > 36 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	renew := req.Version >= 2 && req.IsRenewAck
	if renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	maxType := share.AckReject
	if renew {
		maxType = share.AckRenew
	}
	sl := b.shareLeader()
	md := b.controller.Metadata()

	// Response entries, one per partition, in the order they are first named.
	index := map[share.TP]*kmsg.ShareFetchResponseTopicPartition{}
	var order []share.TP
	entry := func(tp share.TP) *kmsg.ShareFetchResponseTopicPartition {
		if e := index[tp]; e != nil {
			return e
		}
		e := new(kmsg.ShareFetchResponseTopicPartition)
		e.Default()
		e.Partition = tp.Partition
		e.CurrentLeader.LeaderID, e.CurrentLeader.LeaderEpoch = -1, -1
		index[tp] = e
		order = append(order, tp)
		return e
	}

	var add, forget []share.TP
	acks := map[share.TP][]ackBatch{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			tp := share.TP{TopicID: rt.TopicID, Partition: rp.Partition}
			add = append(add, tp)
			if len(rp.AcknowledgementBatches) > 0 {
				acks[tp] = append(acks[tp], toAckBatches(rp.AcknowledgementBatches, func(ab kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
					return ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes
				})...)
			}
		}
	}
	for _, ft := range req.ForgottenTopicsData {
		for _, p := range ft.Partitions {
			forget = append(forget, share.TP{TopicID: ft.TopicID, Partition: p})
		}
	}
	if req.ShareSessionEpoch == -1 {
		add = nil // a closing request only acknowledges
	}
	session, replaced, err := sl.mgr.OpenSession(share.SessionRequest{Group: group, Member: member, Epoch: req.ShareSessionEpoch, Add: add, Forget: forget, Conn: rc.conn})
	if err != nil {
		resp.ErrorCode = shareSessionCode(err)
		return resp, nil
	}
	if len(replaced) > 0 {
		sl.releaseMember(group, member, replaced)
	}

	readable := b.checksFor(rc, acl.OpRead, acl.ResourceTopic)
	resolve := func(tp share.TP) (string, *replica.Partition, error) {
		t, ok := md.TopicByID(tp.TopicID)
		if !ok {
			return "", nil, kerr.UnknownTopicID
		}
		if !readable.allowed(t.Name) {
			return t.Name, nil, kerr.TopicAuthorizationFailed
		}
		part, err := b.localPartitionOf(t.Name, tp.TopicID, tp.Partition)
		return t.Name, part, err
	}
	leaderHint := func(e *kmsg.ShareFetchResponseTopicPartition, topic string, p int32) {
		if t, ok := md.Topics[topic]; ok && int(p) < len(t.Partitions) {
			e.CurrentLeader.LeaderID = t.Partitions[p].Leader
			e.CurrentLeader.LeaderEpoch = t.Partitions[p].LeaderEpoch
		}
	}

	// Piggybacked acknowledgements first (Kafka applies them before the
	// fetch, so released records may be fetched again at once).
	now := time.Now()
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			tp := share.TP{TopicID: rt.TopicID, Partition: rp.Partition}
			batches, ok := acks[tp]
			if !ok {
				continue
			}
			delete(acks, tp)
			e := entry(tp)
			topic, part, err := resolve(tp)
			if err == nil {
				var ps *share.PartitionState
				if ps, err = sl.sharePartition(ctx, group, tp, part, false); err == nil {
					e.AcknowledgeErrorCode = sl.acknowledge(ctx, ps, member, batches, maxType, now)
					continue
				}
			}
			e.AcknowledgeErrorCode = protocol.ErrorCode(err)
			if errors.Is(err, kerr.NotLeaderForPartition) {
				leaderHint(e, topic, tp.Partition)
			}
		}
	}
	if req.ShareSessionEpoch == -1 {
		sl.releaseMember(group, member, session.Parts())
		return shareFetchResponse(resp, index, order), nil
	}
	if renew {
		return shareFetchResponse(resp, index, order), nil
	}

	// Fetch: every session partition.
	var targets []*shareTarget
	for _, tp := range session.Parts() {
		t := &shareTarget{tp: tp, strict: req.ShareAcquireMode == 1}
		t.topic, t.part, t.err = resolve(tp)
		if t.err == nil {
			t.ps, t.err = sl.sharePartition(ctx, group, tp, t.part, req.ShareSessionEpoch == 0)
		}
		if t.err == nil {
			t.ps.Lock()
			if p, _ := t.ps.PartitionLocked(); p != nil {
				resp.AcquisitionLockTimeoutMillis = int32(p.Config().LockDuration.Milliseconds())
			}
			t.ps.Unlock()
		}
		if t.err != nil {
			e := entry(tp)
			e.ErrorCode = protocol.ErrorCode(t.err)
			if errors.Is(t.err, kerr.NotLeaderForPartition) {
				leaderHint(e, t.topic, tp.Partition)
			}
			continue
		}
		targets = append(targets, t)
	}
	if req.ShareSessionEpoch == 0 {
		for _, t := range targets {
			entry(t.tp) // a full request's answer names every partition
		}
	}
	// Rotate the start by the session epoch so one busy partition does
	// not starve the others of MaxRecords.
	if n := len(targets); n > 1 {
		k := int(session.Epoch) % n
		targets = append(targets[k:], targets[:k]...)
	}
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = defaultShareMaxRecords
	}
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = int(b.cfg.SocketRequestMaxBytes)
	}
	deadline := now.Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	for {
		waitOn := make([]<-chan struct{}, 0, 2*len(targets))
		for _, t := range targets {
			waitOn = append(waitOn, t.part.Changed(), t.ps.Changed())
		}
		acquired, nextExpiry := sl.acquire(targets, member, maxRecords, maxBytes, time.Now(), entry)
		if acquired > 0 || len(targets) == 0 || !time.Now().Before(deadline) {
			break
		}
		wake := deadline
		if !nextExpiry.IsZero() && nextExpiry.Before(wake) {
			wake = nextExpiry
		}
		waitAny(ctx, waitOn, wake)
		if ctx.Err() != nil {
			break
		}
	}
	return shareFetchResponse(resp, index, order), nil
}

// acquire acquires records for member from targets in order, up to
// maxRecords and about maxBytes, filling their response entries. It
// returns the records acquired and the earliest lock expiry among the
// targets (a wait should end then: records may come free).
func (sl *shareLeader) acquire(targets []*shareTarget, member string, maxRecords, maxBytes int, now time.Time, entry func(share.TP) *kmsg.ShareFetchResponseTopicPartition) (int, time.Time) {
	total, bytes := 0, 0
	var nextExpiry time.Time
	for _, t := range targets {
		if total >= maxRecords || bytes >= maxBytes {
			break
		}
		n, size, err := sl.acquireOne(t, member, maxRecords-total, maxBytes-bytes, now, entry)
		if err != nil {
			e := entry(t.tp)
			e.ErrorCode = protocol.ErrorCode(err)
			continue
		}
		total += n
		bytes += size
		t.ps.Lock()
		if p, _ := t.ps.PartitionLocked(); p != nil {
			if e := p.NextLockExpiry(); !e.IsZero() && (nextExpiry.IsZero() || e.Before(nextExpiry)) {
				nextExpiry = e
			}
		}
		t.ps.Unlock()
	}
	return total, nextExpiry
}

func (sl *shareLeader) acquireOne(t *shareTarget, member string, maxRecords, maxBytes int, now time.Time, entry func(share.TP) *kmsg.ShareFetchResponseTopicPartition) (int, int, error) {
	t.ps.Lock()
	defer t.ps.Unlock()
	p, epoch := t.ps.PartitionLocked()
	st := t.part.State()
	if p == nil || !st.IsLeader || epoch != st.LeaderEpoch {
		return 0, 0, kerr.NotLeaderForPartition
	}
	if p.ExpireLocks(now) {
		t.ps.NotifyLocked()
	}
	if st.LogStartOffset > p.StartOffset() {
		p.MoveStart(st.LogStartOffset)
	}
	// read_committed (share.isolation.level) acquires up to the last
	// stable offset, as Kafka's share fetch reads with its isolation.
	readCommitted := p.Config().ReadCommitted
	bound := st.HighWatermark
	if readCommitted {
		bound = st.LastStableOffset
	}
	from := p.FirstDeliverable()
	if from >= bound {
		return 0, 0, nil
	}
	res, err := t.part.Read(from, maxBytes, true, -1, readCommitted)
	if err != nil {
		return 0, 0, err
	}
	aborted := segment.NewAbortedRanges(res.AbortedTxns)
	raw, err := res.Records.AppendTo(nil)
	res.Records.Close()
	if err != nil {
		return 0, 0, fmt.Errorf("%w: read %s-%d: %v", kerr.KafkaStorageError, t.topic, t.tp.Partition, err)
	}
	parts, headers, err := recordbatch.Split(raw)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %s-%d at %d: %v", kerr.CorruptMessage, t.topic, t.tp.Partition, from, err)
	}
	batches := shareBatches(from, headers, aborted)
	lead := len(batches) - len(headers) // a stale range before the first batch
	ranges := p.Acquire(member, maxRecords, t.strict, batches, now)
	if len(ranges) == 0 {
		if p.FirstDeliverable() > from {
			// Only archived (markers, aborted or removed records):
			// a waiting fetch reads on at once instead of after its
			// MaxWait.
			t.ps.NotifyLocked()
		}
		return 0, 0, nil
	}
	// Send the batches holding acquired offsets.
	var out []byte
	n := 0
	for i, h := range headers {
		for _, r := range ranges {
			if !batches[lead+i].Skip && h.BaseOffset <= r.Last && h.LastOffset() >= r.First {
				out = append(out, parts[i]...)
				break
			}
		}
	}
	e := entry(t.tp)
	e.Records = out
	for _, r := range ranges {
		ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
		ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = r.First, r.Last, r.Deliveries
		e.AcquiredRecords = append(e.AcquiredRecords, ar)
		n += int(r.Last - r.First + 1)
	}
	return n, len(out), nil
}

// shareBatches is what a share fetch read from offset from gives Acquire:
// each batch's offsets, with Skip (archived, never delivered) for control
// batches and, under read_committed, for aborted transactions' batches
// (Kafka's filterAbortedTransactionalAcquiredRecords). When the first
// batch starts past from, the log no longer has [from, its base):
// compaction removed those records, so a Skip range covers them and ones
// still in flight there are archived rather than left Available forever
// (Kafka's maybeArchiveStaleBatches).
func shareBatches(from int64, headers []recordbatch.Header, aborted segment.AbortedRanges) []share.Batch {
	out := make([]share.Batch, 0, len(headers)+1)
	if len(headers) > 0 && headers[0].BaseOffset > from {
		out = append(out, share.Batch{First: from, Last: headers[0].BaseOffset - 1, Skip: true})
	}
	for _, h := range headers {
		out = append(out, share.Batch{First: h.BaseOffset, Last: h.LastOffset(), Skip: h.IsControl() || aborted.Aborted(h)})
	}
	return out
}

// shareFetchResponse assembles the entries by topic, in order.
func shareFetchResponse(resp *kmsg.ShareFetchResponse, index map[share.TP]*kmsg.ShareFetchResponseTopicPartition, order []share.TP) *kmsg.ShareFetchResponse {
	byTopic := map[[16]byte]int{}
	for _, tp := range order {
		i, ok := byTopic[tp.TopicID]
		if !ok {
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = tp.TopicID
			resp.Topics = append(resp.Topics, rt)
			i = len(resp.Topics) - 1
			byTopic[tp.TopicID] = i
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, *index[tp])
	}
	return resp
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
