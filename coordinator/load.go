package coordinator

// Loading a __consumer_offsets partition (GroupMetadataManager.doLoadGroupsAndOffsets)
// and the periodic offset expiry (GroupMetadataManager.cleanupGroupMetadata).

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// loadedGroup accumulates one group's records during a replay: later
// records win, tombstones delete.
type loadedGroup struct {
	meta    *kmsg.GroupMetadataValue // nil: none, or deleted
	metaRaw []byte                   // meta as stored (its value bytes)
	offsets map[topicPartition]offsetEntry
}

// loadStats describes a replay, for the snapshot trigger.
type loadStats struct {
	replayed int64 // bytes of the batches replayed
	live     int64 // estimated bytes of the records a snapshot would write
}

// load replays partition p and rebuilds its groups. Groups whose metadata
// has members come back Stable with their assignments; their sessions
// restart (onLoadedLocked). Groups with only offsets come back Empty.
func (c *Coordinator) load(ctx context.Context, partition int32) (map[string]*group, loadStats, error) {
	var stats loadStats
	loaded := map[string]*loadedGroup{}
	get := func(id string) *loadedGroup {
		lg := loaded[id]
		if lg == nil {
			lg = &loadedGroup{offsets: map[topicPartition]offsetEntry{}}
			loaded[id] = lg
		}
		return lg
	}
	err := c.log.ReadAll(ctx, partition, func(batch []byte) error {
		stats.replayed += int64(len(batch))
		records, err := decodeBatch(batch)
		if err != nil {
			return err
		}
		for _, r := range records {
			p, ok, err := parseRecord(r)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			lg := get(p.group)
			switch {
			case p.isOffset && p.offset == nil:
				delete(lg.offsets, p.tp)
			case p.isOffset:
				o := offsetEntry{
					offset:      p.offset.Offset,
					leaderEpoch: -1,
					metadata:    p.offset.Metadata,
					commitTime:  time.UnixMilli(p.offset.CommitTimestamp),
				}
				if p.offset.Version >= 3 {
					o.leaderEpoch = p.offset.LeaderEpoch
				}
				if p.offset.Version == 1 && p.offset.ExpireTimestamp > 0 {
					o.expireTime = time.UnixMilli(p.offset.ExpireTimestamp)
				}
				lg.offsets[p.tp] = o
			default:
				lg.meta = p.groupMeta
				lg.metaRaw = nil
				if p.groupMeta != nil {
					lg.metaRaw = bytes.Clone(r.value) // the batch buffer may be reused
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, stats, fmt.Errorf("replay: %w", err)
	}
	now := c.now()
	groups := make(map[string]*group, len(loaded))
	for id, lg := range loaded {
		if lg.meta == nil && len(lg.offsets) == 0 {
			continue
		}
		groups[id] = restoreGroup(c, id, partition, lg, now)
		stats.live += int64(len(lg.metaRaw)) + int64(len(lg.offsets))*int64(len(id)+64)
	}
	return groups, stats, nil
}

// restoreGroup builds a group from its replayed records (GroupMetadata.loadGroup).
func restoreGroup(c *Coordinator, id string, partition int32, lg *loadedGroup, now time.Time) *group {
	g := newGroup(c, id, partition, now)
	g.offsets = lg.offsets
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
}

// expiryLoop runs the offset expiry every interval until Close.
func (c *Coordinator) expiryLoop(interval time.Duration) {
	defer c.bg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.bgCtx.Done():
			return
		case <-t.C:
			c.expireOffsets(c.bgCtx, c.now())
		}
	}
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
	expired := expiredOffsets(expiryInput{
		state:        g.state,
		protocolType: g.protocolType,
		stateTime:    g.stateTime,
		subscribed:   g.subscribed,
		subsKnown:    g.subsKnown,
		offsets:      g.offsets,
	}, now, c.cfg.OffsetsRetention)
	die := g.state == stateEmpty && len(g.offsets) == len(expired) && len(g.pending) == 0
	if len(expired) == 0 && !die {
		g.mu.Unlock()
		return
	}
	records := make([]record, 0, len(expired)+1)
	for _, tp := range expired {
		records = append(records, offsetTombstone(g.id, tp))
	}
	if die {
		records = append(records, groupTombstone(g.id))
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
