package coordinator

// Loading a __consumer_offsets partition (GroupMetadataManager.doLoadGroupsAndOffsets)
// and the periodic offset expiry (GroupMetadataManager.cleanupGroupMetadata).

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/internal/tick"
	"github.com/kbroker/kbroker/recordbatch"
)

// loadedGroup accumulates one group's records during a replay: later
// records win, tombstones delete.
type loadedGroup struct {
	meta    *kmsg.GroupMetadataValue // nil: none, or deleted
	metaRaw []byte                   // meta as stored (its value bytes)
	offsets map[topicPartition]offsetEntry
	// pending: the transactions still open at the end of the replay, by
	// producer id.
	pending map[int64]*openTxn
	// cg: the consumer (KIP-848) group records, nil if none were seen.
	cg *loadedCG
	// shareStates: share partition states (share_state.go).
	shareStates map[shareStateKey]ShareState
	// shareLeaderEpochs: the newest leader epoch that read each share
	// partition's state (share_state.go).
	shareLeaderEpochs map[shareStateKey]int32
	// configs: the group's dynamic configs (share_group_config.go).
	configs map[string]string
}

// loadStats describes a replay, for the snapshot trigger.
type loadStats struct {
	replayed int64 // bytes of the batches replayed
	live     int64 // estimated bytes of the records a snapshot would write
}

// replay rebuilds a partition's state from its batches, in log order
// (GroupMetadataManager.doLoadGroupsAndOffsets).
//
// Transactional batches are held per producer id and per group until that
// producer's control batch: a commit marker applies them (each only if its
// batch is newer than the offset it would replace, as CompleteTxn), an
// abort marker drops them; those still open at the end stay pending. A
// plain offset record replaces the current one only if it is newer by
// append offset too: for records of ordinary writes that always holds (the
// log only grows), but a snapshot's rewrite carries its original append
// offset and must not undo a transaction committed after the snapshot
// copied the state and before its records were appended.
type replay struct {
	groups  map[string]*loadedGroup
	pending map[int64]map[string]*openTxn // producer id -> group -> open transaction
	stats   loadStats
}

func newReplay() *replay {
	return &replay{
		groups:  map[string]*loadedGroup{},
		pending: map[int64]map[string]*openTxn{},
	}
}

func (r *replay) group(id string) *loadedGroup {
	lg := r.groups[id]
	if lg == nil {
		lg = &loadedGroup{offsets: map[topicPartition]offsetEntry{}}
		r.groups[id] = lg
	}
	return lg
}

// apply replays one batch.
func (r *replay) apply(batch []byte) error {
	r.stats.replayed += int64(len(batch))
	h, err := recordbatch.Validate(batch)
	if err != nil {
		return err
	}
	batch = batch[:h.Size()]
	if h.IsControl() {
		typ, err := controlType(batch)
		if err != nil {
			return err
		}
		switch typ {
		case kmsg.ControlRecordKeyTypeCommit:
			for id, txn := range r.pending[h.ProducerID] {
				applyTxnCommit(r.group(id).offsets, txn.offsets)
			}
			delete(r.pending, h.ProducerID)
		case kmsg.ControlRecordKeyTypeAbort:
			delete(r.pending, h.ProducerID)
		}
		return nil
	}
	records, err := decodeRecords(batch)
	if err != nil {
		return err
	}
	for _, rec := range records {
		p, ok, err := parseRecord(rec)
		if err != nil {
			return err
		}
		if !ok {
			if v := keyVersion(rec.key); v == groupConfigKeyVersion {
				group, err := decodeGroupConfigKey(rec.key)
				if err != nil {
					return err
				}
				lg := r.group(group)
				lg.configs = nil
				if rec.value != nil {
					if lg.configs, err = decodeGroupConfigValue(rec.value); err != nil {
						return err
					}
				}
			} else if v == shareStateKeyVersion {
				group, _, err := decodeShareStateKey(rec.key)
				if err != nil {
					return err
				}
				lg := r.group(group)
				states := map[string]map[shareStateKey]ShareState{group: lg.shareStates}
				if err := applyShareStateRecord(states, rec.key, rec.value); err != nil {
					return err
				}
				lg.shareStates = states[group]
			} else if v == shareLeaderEpochKeyVersion {
				group, k, err := decodeShareStateKey(rec.key)
				if err != nil {
					return err
				}
				lg := r.group(group)
				if lg.shareLeaderEpochs, err = applyShareLeaderEpochRecord(lg.shareLeaderEpochs, k, rec.value); err != nil {
					return err
				}
			} else if isConsumerGroupKeyVersion(v) {
				k, err := decodeCGKey(rec.key)
				if err != nil {
					return err
				}
				lg := r.group(k.group)
				if lg.cg == nil {
					lg.cg = newLoadedCG()
				}
				if err := lg.cg.apply(k, rec.value); err != nil {
					return err
				}
			}
			continue
		}
		if !p.isOffset {
			// Group metadata applies at once, even in a transactional
			// batch (Kafka holds back only offsets).
			lg := r.group(p.group)
			lg.meta = p.groupMeta
			lg.metaRaw = nil
			if p.groupMeta != nil {
				lg.metaRaw = bytes.Clone(rec.value) // the batch buffer may be reused
			}
			continue
		}
		var o offsetEntry
		if p.offset != nil {
			o = loadedOffset(p.offset, h.BaseOffset)
			if rec.hasOrigin {
				o.appendOffset = rec.origin
			}
		}
		if h.IsTransactional() {
			byGroup := r.pending[h.ProducerID]
			if byGroup == nil {
				byGroup = map[string]*openTxn{}
				r.pending[h.ProducerID] = byGroup
			}
			txn := byGroup[p.group]
			if txn == nil {
				txn = &openTxn{first: h.BaseOffset, offsets: map[topicPartition]offsetEntry{}}
				byGroup[p.group] = txn
			}
			if p.offset == nil {
				delete(txn.offsets, p.tp)
			} else {
				txn.offsets[p.tp] = o
			}
			continue
		}
		lg := r.group(p.group)
		if p.offset == nil {
			delete(lg.offsets, p.tp)
		} else if cur, ok := lg.offsets[p.tp]; !ok || cur.appendOffset < o.appendOffset {
			lg.offsets[p.tp] = o
		}
	}
	return nil
}

// loadedOffset is the entry of a stored offset value, from the batch at base.
func loadedOffset(v *kmsg.OffsetCommitValue, base int64) offsetEntry {
	o := offsetEntry{
		offset:       v.Offset,
		leaderEpoch:  -1,
		metadata:     v.Metadata,
		commitTime:   time.UnixMilli(v.CommitTimestamp),
		appendOffset: base,
	}
	if v.Version >= 3 {
		o.leaderEpoch = v.LeaderEpoch
	}
	if v.Version == 1 && v.ExpireTimestamp > 0 {
		o.expireTime = time.UnixMilli(v.ExpireTimestamp)
	}
	return o
}

// finish hands the transactions still open to their groups.
func (r *replay) finish() {
	for pid, byGroup := range r.pending {
		for id, txn := range byGroup {
			if len(txn.offsets) == 0 {
				continue
			}
			lg := r.group(id)
			if lg.pending == nil {
				lg.pending = map[int64]*openTxn{}
			}
			lg.pending[pid] = txn
		}
	}
}

// load replays partition p and rebuilds its groups. Groups whose metadata
// has members come back Stable with their assignments; their sessions
// restart (onLoadedLocked). Groups with only offsets (committed or pending)
// come back Empty. txnGroups indexes the groups with pending offsets by
// producer id.
func (c *Coordinator) load(ctx context.Context, partition int32) (groups map[string]*group, txnGroups map[int64]map[string]struct{}, stats loadStats, err error) {
	r := newReplay()
	if err := c.log.ReadAll(ctx, partition, r.apply); err != nil {
		return nil, nil, r.stats, fmt.Errorf("replay: %w", err)
	}
	r.finish()
	stats = r.stats
	now := c.now()
	groups = make(map[string]*group, len(r.groups))
	txnGroups = map[int64]map[string]struct{}{}
	for id, lg := range r.groups {
		var cg *cgState
		if lg.cg != nil {
			cg = lg.cg.state()
		}
		if lg.meta == nil && len(lg.offsets) == 0 && len(lg.pending) == 0 && cg == nil && len(lg.shareStates) == 0 && len(lg.configs) == 0 {
			continue
		}
		src := lg
		if cg != nil {
			// A consumer group replaces a classic one only through the
			// classic group's tombstone, so both are never live; should a
			// log hold both, the consumer group wins.
			src = &loadedGroup{offsets: lg.offsets, pending: lg.pending}
			stats.live += int64(len(cg.members)+1) * 256
		}
		g := restoreGroup(c, id, partition, src, now)
		g.cg = cg
		g.shareStates = lg.shareStates
		g.shareLeaderEpochs = lg.shareLeaderEpochs
		g.configs = lg.configs
		groups[id] = g
		stats.live += int64(len(lg.metaRaw)) + int64(len(lg.offsets))*int64(len(id)+64)
		for pid := range lg.pending {
			indexTxnGroup(txnGroups, pid, id)
		}
	}
	return groups, txnGroups, stats, nil
}

// restoreGroup builds a group from its replayed records (GroupMetadata.loadGroup).
func restoreGroup(c *Coordinator, id string, partition int32, lg *loadedGroup, now time.Time) *group {
	g := newGroup(c, id, partition, now)
	g.offsets = lg.offsets
	if lg.pending != nil {
		g.pendingTxn = lg.pending
	}
	v := lg.meta
	if v == nil {
		return g
	}
	g.storedMeta = lg.metaRaw
	g.generation = v.Generation
	g.syncStoreGen = v.Generation
	g.protocolType = v.ProtocolType
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	if v.CurrentStateTimestamp > 0 {
		g.stateTime = time.UnixMilli(v.CurrentStateTimestamp)
	}
	for _, vm := range v.Members {
		m := &member{
			id:               vm.MemberID,
			instanceID:       vm.InstanceID,
			clientID:         vm.ClientID,
			clientHost:       vm.ClientHost,
			sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
			protocolType:     v.ProtocolType,
			protocols:        []kmsg.JoinGroupRequestProtocol{{Name: g.protocol, Metadata: vm.Subscription}},
			assignment:       vm.Assignment,
		}
		if v.Version == 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		g.addMemberLocked(m)
	}
	g.protocolType = v.ProtocolType
	if len(g.members) > 0 {
		if v.Leader != nil {
			if _, ok := g.members[*v.Leader]; ok {
				g.leader = *v.Leader
			}
		}
		g.state = stateStable
		g.subscribed, g.subsKnown = subscribedTopics(g.protocolType, g.protocol, g.members)
	} else {
		g.protocol = ""
	}
	return g
}

// onLoadedLocked starts the sessions of restored members: they must
// heartbeat (or rejoin) within their session timeout.
func (g *group) onLoadedLocked(now time.Time) {
	for _, m := range g.members {
		g.scheduleHeartbeatLocked(m, now)
	}
	g.onLoadedCGLocked()
}

// expiryLoop runs the offset expiry every interval until Close.
func (c *Coordinator) expiryLoop(interval time.Duration) {
	defer c.bg.Done()
	tick.Every(c.bgCtx, interval, func(time.Time) { c.expireOffsets(c.bgCtx, c.now()) })
}

// expireOffsets removes the offsets that expired at now (see
// expiredOffsets) from every loaded group, and removes Empty groups left
// without offsets, writing tombstones first.
func (c *Coordinator) expireOffsets(ctx context.Context, now time.Time) {
	groups, _ := c.allGroups()
	for _, g := range groups {
		if ctx.Err() != nil {
			return
		}
		g.expire(ctx, now)
	}
}

func (g *group) expire(ctx context.Context, now time.Time) {
	c := g.c
	if err := g.acquireWrite(ctx); err != nil {
		return
	}
	defer g.releaseWrite()
	g.mu.Lock()
	if g.unloadCode != 0 || g.state == stateDead {
		g.mu.Unlock()
		return
	}
	in := expiryInput{
		state:        g.state,
		protocolType: g.protocolType,
		stateTime:    g.stateTime,
		subscribed:   g.subscribed,
		subsKnown:    g.subsKnown,
		offsets:      g.offsets,
	}
	if g.cg != nil {
		in.consumerGroup = true
		in.subscribed = groupSubscribedTopics(g.cg.members, resolveRegexes(g.cg.members, c.topicImage()))
	}
	expired := expiredOffsets(in, now, c.cfg.OffsetsRetention)
	// A group with offsets of an open transaction stays (Kafka's
	// GroupMetadata.hasOffsets counts them).
	die := g.state == stateEmpty && len(g.offsets) == len(expired) && len(g.pending) == 0 && len(g.pendingTxn) == 0 &&
		(g.cg == nil || len(g.cg.members) == 0) && g.sg == nil && len(g.shareStates) == 0 && len(g.configs) == 0
	if len(expired) == 0 && !die {
		g.mu.Unlock()
		return
	}
	records := make([]record, 0, len(expired)+1)
	for _, tp := range expired {
		records = append(records, offsetTombstone(g.id, tp))
	}
	if die {
		if g.cg != nil {
			records = append(records, cgDeleteGroupRecords(g.id, g.cg)...)
		} else {
			records = append(records, groupTombstone(g.id))
		}
		g.state = stateDead // as in deleteGroup: nothing may change meanwhile
	}
	g.mu.Unlock()

	c.writeGroup(ctx, g, now, records, func(err error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if err != nil {
			if die {
				g.state = stateEmpty
			}
			c.logger.Warn("failed to expire offsets", "group", g.id, "err", err)
			return
		}
		for _, tp := range expired {
			delete(g.offsets, tp)
		}
		c.logger.Info("expired offsets", "group", g.id, "offsets", len(expired), "group_removed", die)
		if die {
			g.killLocked()
		}
	})
}
