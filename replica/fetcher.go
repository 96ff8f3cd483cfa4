package replica

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaderConn is a connection to a leader broker (kafkaconn.Conn). The byte
// fields of a response (fetched records) may be valid only until the next
// Request: the fetcher is done with each response before sending another.
type LeaderConn interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	Close()
}

// Dialer makes a connection to broker id at addr.
type Dialer func(brokerID int32, addr string) LeaderConn

// Follower fetch settings, as Kafka's replica.fetch.* defaults.
const (
	defaultReplicaFetchWait   = 500 * time.Millisecond
	replicaFetchMaxBytes      = 10 << 20
	replicaFetchPartitionMax  = 1 << 20
	replicaFetchRequestBudget = 10 * time.Second
)

// fetcherManager runs one fetcher per leader broker, as Kafka's
// ReplicaFetcherManager (with num.replica.fetchers=1).
type fetcherManager struct {
	m *Manager

	// mu guards fetchers and assigned.
	mu       sync.Mutex
	fetchers map[int32]*fetcher
	assigned map[TopicPartition]int32 // partition -> leader id

	// throttle is the follower-side replication throttle (throttle.go).
	throttle atomic.Pointer[throttleRef]
}

func newFetcherManager(m *Manager) *fetcherManager {
	return &fetcherManager{m: m, fetchers: map[int32]*fetcher{}, assigned: map[TopicPartition]int32{}}
}

// add makes p fetch from leaderID (moving it from another fetcher if
// needed); it truncates first.
func (fm *fetcherManager) add(p *Partition, leaderID int32, addr string) {
	if fm.m.cfg.Dial == nil {
		return
	}
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if old, ok := fm.assigned[p.tp]; ok {
		if f := fm.fetchers[old]; f != nil {
			f.removePartition(p.tp)
		}
	}
	f := fm.fetchers[leaderID]
	var moved []*fetchPart
	if f != nil && f.addr != addr {
		// The leader moved to another address: its other partitions
		// move to the new fetcher too (and re-check divergence).
		moved = f.snapshot()
		f.stop()
		delete(fm.fetchers, leaderID)
		f = nil
	}
	if f == nil {
		f = newFetcher(fm.m, leaderID, addr)
		fm.fetchers[leaderID] = f
	}
	for _, fp := range moved {
		if fp.p.tp != p.tp {
			f.addPartition(fp.p)
		}
	}
	fm.assigned[p.tp] = leaderID
	f.addPartition(p)
}

// remove stops fetching tp.
func (fm *fetcherManager) remove(tp TopicPartition) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if id, ok := fm.assigned[tp]; ok {
		if f := fm.fetchers[id]; f != nil {
			f.removePartition(tp)
		}
		delete(fm.assigned, tp)
	}
}

// closeAll stops every fetcher and waits for them.
func (fm *fetcherManager) closeAll() {
	fm.mu.Lock()
	fs := fm.fetchers
	fm.fetchers = map[int32]*fetcher{}
	fm.assigned = map[TopicPartition]int32{}
	fm.mu.Unlock()
	for _, f := range fs {
		f.stop()
	}
}

// fetchPart is one partition a fetcher copies.
type fetchPart struct {
	p        *Partition
	truncate bool // find the divergence point before fetching
}

// fetcher copies partitions from one leader with Fetch requests carrying
// this broker's replica id.
type fetcher struct {
	m        *Manager
	leaderID int32
	addr     string
	conn     LeaderConn
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}
	wake     chan struct{}

	// mu guards parts, added and inFlight.
	mu    sync.Mutex
	parts map[TopicPartition]*fetchPart
	// added counts partitions added; a fetch built before the latest
	// addition is cut short.
	added uint64
	// inFlight cancels the fetch being sent, so that a partition added
	// meanwhile does not wait out the leader's long poll
	// (replica.fetch.wait.max.ms): a new topic's first acks=all writes
	// would.
	inFlight context.CancelFunc
}

func newFetcher(m *Manager, leaderID int32, addr string) *fetcher {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fetcher{m: m, leaderID: leaderID, addr: addr, conn: m.cfg.Dial(leaderID, addr), ctx: ctx, cancel: cancel,
		done: make(chan struct{}), wake: make(chan struct{}, 1), parts: map[TopicPartition]*fetchPart{}}
	go f.run()
	return f
}

func (f *fetcher) addPartition(p *Partition) {
	f.mu.Lock()
	f.parts[p.tp] = &fetchPart{p: p, truncate: true}
	f.added++
	if f.inFlight != nil {
		f.inFlight()
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fetcher) removePartition(tp TopicPartition) {
	f.mu.Lock()
	delete(f.parts, tp)
	f.mu.Unlock()
}

func (f *fetcher) stop() {
	f.cancel()
	<-f.done
	f.conn.Close()
}

func (f *fetcher) snapshot() []*fetchPart {
	parts, _ := f.snapshotAdded()
	return parts
}

// snapshotAdded is snapshot with the count of additions it includes.
func (f *fetcher) snapshotAdded() ([]*fetchPart, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*fetchPart, 0, len(f.parts))
	for _, fp := range f.parts {
		out = append(out, fp)
	}
	return out, f.added
}

func (f *fetcher) run() {
	defer close(f.done)
	var backoff retryBackoff
	for {
		parts, added := f.snapshotAdded()
		if len(parts) == 0 {
			select {
			case <-f.ctx.Done():
				return
			case <-f.wake:
				continue
			}
		}
		err := f.truncate(parts)
		if err == nil {
			err = f.fetchOnce(parts, added)
		}
		if f.ctx.Err() != nil {
			return
		}
		if err == nil {
			backoff.reset()
			continue
		}
		if !errors.Is(err, errNothingToFetch) {
			f.m.logger.Debug("follower fetch failed", "leader", f.leaderID, "err", err)
		}
		// A new view (f.wake) is a reason to try again at once.
		select {
		case <-f.ctx.Done():
			return
		case <-f.wake:
		case <-time.After(backoff.next()):
		}
	}
}

// truncate finds, for partitions that just started following, where their
// log diverges from the leader's (OffsetForLeaderEpoch) and cuts there.
func (f *fetcher) truncate(parts []*fetchPart) error {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = 4 // flexible: the topic id travels in a tag
	req.ReplicaID = f.m.cfg.BrokerID
	type pending struct {
		fp         *fetchPart
		leader     leaderRef
		localEpoch int32
	}
	byTopic := map[string]int{}
	var waiting []pending
	for _, fp := range parts {
		if !fp.truncate {
			continue
		}
		_, _, leader, last, ok := fp.p.followerFetchPosition()
		if !ok {
			continue
		}
		if last < 0 {
			fp.truncate = false // empty log: nothing to cut
			continue
		}
		i, ok := byTopic[fp.p.tp.Topic]
		if !ok {
			t := kmsg.NewOffsetForLeaderEpochRequestTopic()
			t.Topic = fp.p.tp.Topic
			if fp.p.topicID != ([16]byte{}) {
				t.UnknownTags.Set(protocol.TagTopicID, fp.p.topicID[:])
			}
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[fp.p.tp.Topic] = i
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = fp.p.tp.Partition, leader.epoch, last
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		waiting = append(waiting, pending{fp, leader, last})
	}
	if len(waiting) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(f.ctx, replicaFetchRequestBudget)
	defer cancel()
	resp, err := f.conn.Request(ctx, req)
	if err != nil {
		return err
	}
	results := map[TopicPartition]kmsg.OffsetForLeaderEpochResponseTopicPartition{}
	for _, t := range resp.(*kmsg.OffsetForLeaderEpochResponse).Topics {
		for _, p := range t.Partitions {
			results[TopicPartition{t.Topic, p.Partition}] = p
		}
	}
	for _, w := range waiting {
		r, ok := results[w.fp.p.tp]
		if !ok {
			continue
		}
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			// Not (yet) the leader there: retry later.
			continue
		}
		done, err := w.fp.p.truncateToLeader(w.leader, w.localEpoch, r.LeaderEpoch, r.EndOffset)
		if err != nil {
			return err
		}
		w.fp.truncate = !done
	}
	return nil
}

// fetchOnce sends one Fetch for every partition ready to fetch.
func (f *fetcher) fetchOnce(parts []*fetchPart, added uint64) error {
	req := kmsg.NewPtrFetchRequest()
	// v13+ names topics by id: a leader still holding another incarnation
	// of the topic (deleted, its name reused) answers
	// INCONSISTENT_TOPIC_ID or UNKNOWN_TOPIC_ID instead of its records.
	req.Version = 13
	req.ReplicaID = f.m.cfg.BrokerID
	wait := f.m.cfg.ReplicaFetchWait
	if wait <= 0 {
		wait = defaultReplicaFetchWait
	}
	req.MaxWaitMillis = int32(wait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = replicaFetchMaxBytes
	req.SessionID, req.SessionEpoch = 0, -1
	// Durable acknowledgements: a fetch tells the leader this replica's
	// log end, which the leader counts toward the high watermark, so what
	// the log holds beyond its durable end is fdatasynced first (what the
	// last fetch appended, or a log recovered after a crash).
	var toSync []*Partition
	for _, fp := range parts {
		if !fp.truncate && fp.p.followerSyncNeeded() {
			toSync = append(toSync, fp.p)
		}
	}
	if len(toSync) > 0 {
		syncCtx, cancelSync := context.WithTimeout(f.ctx, durableSyncTimeout)
		err := syncFollowers(syncCtx, toSync)
		cancelSync()
		if err != nil {
			return err
		}
	}
	byTopic := map[[16]byte]int{}
	ready := map[fetchKey]*fetchPart{}
	sentTo := map[fetchKey]leaderRef{}
	throttle := f.m.fetchers.followerThrottle()
	pendingTruncation := false
	for _, fp := range parts {
		if fp.truncate {
			pendingTruncation = true
			continue
		}
		if throttle != nil && throttle.Hold(fp.p.tp) {
			continue // throttled and over the rate: not in this fetch
		}
		offset, logStart, leader, last, ok := fp.p.followerFetchPosition()
		if !ok {
			continue
		}
		if fp.p.topicID == ([16]byte{}) {
			continue // no view has named its topic id yet
		}
		i, seen := byTopic[fp.p.topicID]
		if !seen {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = fp.p.tp.Topic, fp.p.topicID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[fp.p.topicID] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.LogStartOffset = fp.p.tp.Partition, offset, logStart
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = leader.epoch, last
		rp.PartitionMaxBytes = replicaFetchPartitionMax
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		key := fetchKey{fp.p.topicID, fp.p.tp.Partition}
		ready[key] = fp
		sentTo[key] = leader
	}
	if len(ready) == 0 {
		return errNothingToFetch
	}
	if pendingTruncation {
		// A partition still waits for its divergence check (its leader
		// had not taken the view that makes it leader yet): do not park
		// this fetch for the whole long poll, or the partition would
		// wait that long to start copying, and its acks=all writes
		// with it.
		req.MaxWaitMillis = min(req.MaxWaitMillis, int32(truncationRetryWait/time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(f.ctx, wait+replicaFetchRequestBudget)
	defer cancel()
	f.mu.Lock()
	if f.added != added {
		f.mu.Unlock()
		return nil // a partition came in since the snapshot: start over
	}
	f.inFlight = cancel
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight = nil
		f.mu.Unlock()
	}()
	resp, err := f.conn.Request(ctx, req)
	if err != nil {
		return err
	}
	fr := resp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		return err
	}
	var firstErr error
	failed, answered := 0, 0
	for _, t := range fr.Topics {
		for _, rp := range t.Partitions {
			key := fetchKey{t.TopicID, rp.Partition}
			fp := ready[key]
			if fp == nil {
				continue
			}
			answered++
			if rp.ErrorCode != 0 {
				failed++
			}
			leader := sentTo[key]
			switch err := kerr.ErrorForCode(rp.ErrorCode); {
			case err == nil:
			case errors.Is(err, kerr.OffsetOutOfRange):
				// Below the leader's log start (retention, DeleteRecords):
				// start over from there. Otherwise we have more than the
				// leader: find the divergence again.
				offset, _, _, _, ok := fp.p.followerFetchPosition()
				switch {
				case ok && rp.LogStartOffset > offset:
					if err := fp.p.restartAt(leader, rp.LogStartOffset); err != nil && firstErr == nil {
						firstErr = err
					}
				case ok && rp.HighWatermark >= 0 && offset > rp.HighWatermark:
					// Beyond the leader's committed end (Kafka's
					// handleOutOfRange): cut back to it, then fetch.
					if err := fp.p.truncateAbove(leader, rp.HighWatermark); err != nil && firstErr == nil {
						firstErr = err
					}
				default:
					fp.truncate = true
				}
				continue
			default:
				// NOT_LEADER, FENCED or UNKNOWN leader epoch: the
				// controller's next view moves us; keep trying.
				continue
			}
			if throttle != nil {
				throttle.Record(fp.p.tp, len(rp.RecordBatches))
			}
			if _, err := fp.p.appendAsFollower(leader, rp.RecordBatches, rp.HighWatermark, rp.LogStartOffset); err != nil && firstErr == nil {
				firstErr = err
				fp.truncate = true
			}
		}
	}
	if firstErr == nil && answered > 0 && failed == answered {
		// Every partition errored (views still disagree on who leads):
		// back off instead of spinning.
		return errAllPartitionsFailed
	}
	return firstErr
}

// fetchKey names a partition in a follower fetch: by topic id, so an
// answer about another incarnation of the topic never lands in this one.
type fetchKey struct {
	topicID   [16]byte
	partition int32
}

// truncationRetryWait bounds the long poll of a fetch sent while another
// partition of the fetcher still waits for its divergence check.
const truncationRetryWait = 50 * time.Millisecond

// errNothingToFetch makes the fetcher back off while every partition
// still waits for its divergence check (the leader not answering for it
// yet).
var errNothingToFetch = errors.New("no partition ready to fetch")

// errAllPartitionsFailed makes the fetcher back off when a whole response
// was errors.
var errAllPartitionsFailed = errors.New("every partition in the fetch response had an error")
