package zk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// RegisterBroker creates the broker's ephemeral /brokers/ids/<id> and
// returns its broker epoch (the znode's creation zxid), as
// KafkaZkClient.registerBroker with its CheckedEphemeral rules:
//   - the znode exists and this session owns it: already registered, fine;
//   - it is left over from this Store's previous, expired session (the
//     server has not deleted it yet, ZOOKEEPER-2985): delete, re-create;
//   - another session owns it: ErrBrokerRegistered.
//
// A zero info.Timestamp is set to now.
func (s *Store) RegisterBroker(ctx context.Context, info BrokerInfo) (int64, error) {
	if info.Timestamp == 0 {
		info.Timestamp = time.Now().UnixMilli()
	}
	data, err := EncodeBrokerInfo(info)
	if err != nil {
		return 0, fmt.Errorf("register broker: %w", err)
	}
	path := BrokerIDPath(info.ID)
	stat, err := s.createCheckedEphemeral(ctx, path, data, func(owner int64) error {
		return fmt.Errorf("register broker: broker.id %d is %w (%s is owned by ZooKeeper session 0x%x, this broker's session is 0x%x)",
			info.ID, ErrBrokerRegistered, s.abs(path), owner, s.SessionID())
	})
	if err != nil {
		return 0, err
	}
	s.logger.Info("registered broker", "broker", info.ID, "path", s.abs(path), "broker_epoch", stat.Czxid)
	return stat.Czxid, nil
}

// createCheckedEphemeral is Kafka's CheckedEphemeral.create.
func (s *Store) createCheckedEphemeral(ctx context.Context, path string, data []byte, ownedByOther func(owner int64) error) (*gozk.Stat, error) {
	for attempt := 0; ; attempt++ {
		if attempt == 10 {
			return nil, fmt.Errorf("create ephemeral %s: it keeps appearing and vanishing", s.abs(path))
		}
		// Create empty, then set the data: the set returns the stat
		// (czxid) in the same transaction.
		res, err := s.multi(ctx, s.createOp(path, nil, gozk.FlagEphemeral), s.setOp(path, data, 0))
		if err == nil {
			s.mu.Lock()
			s.ephemeral = s.SessionID()
			s.mu.Unlock()
			return res[1].Stat, nil
		}
		if !errors.Is(err, gozk.ErrNodeExists) {
			return nil, fmt.Errorf("create ephemeral %s: %w", s.abs(path), err)
		}
		_, stat, err := s.get(ctx, path)
		if errors.Is(err, ErrNoNode) {
			continue // went away meanwhile: create again
		}
		if err != nil {
			return nil, err
		}
		current := s.SessionID()
		s.mu.Lock()
		previous := s.ephemeral
		s.mu.Unlock()
		switch {
		case stat.EphemeralOwner == current:
			return stat, nil
		case stat.EphemeralOwner == previous && previous != current && previous != 0:
			s.logger.Info("ephemeral znode left over from our expired session; re-creating it",
				"path", s.abs(path), "owner", fmt.Sprintf("0x%x", previous), "session", fmt.Sprintf("0x%x", current))
			err := s.retry(ctx, func() error { return s.conn.Delete(s.abs(path), -1) })
			if err != nil && !errors.Is(err, gozk.ErrNoNode) {
				return nil, fmt.Errorf("delete stale ephemeral %s: %w", s.abs(path), err)
			}
		default:
			return nil, ownedByOther(stat.EphemeralOwner)
		}
	}
}

// Broker reads one broker's registration; ErrNoNode if it is not live.
func (s *Store) Broker(ctx context.Context, id int32) (BrokerInfo, error) {
	data, stat, err := s.get(ctx, BrokerIDPath(id))
	if err != nil {
		return BrokerInfo{}, err
	}
	b, err := DecodeBrokerInfo(id, data)
	if err != nil {
		return BrokerInfo{}, s.malformedAt(err)
	}
	b.Epoch = stat.Czxid
	return b, nil
}

// BrokerIDs lists the live brokers' ids, sorted.
func (s *Store) BrokerIDs(ctx context.Context) ([]int32, error) {
	names, err := s.children(ctx, BrokerIDsPath)
	if err != nil {
		return nil, err
	}
	return s.parseBrokerIDs(names)
}

func (s *Store) parseBrokerIDs(names []string) ([]int32, error) {
	ids := make([]int32, 0, len(names))
	for _, n := range names {
		id, err := strconv.ParseInt(n, 10, 32)
		if err != nil {
			return nil, s.malformedAt(malformed(BrokerIDsPath+"/"+n, nil, "child of %s is not a broker id", BrokerIDsPath))
		}
		ids = append(ids, int32(id))
	}
	slices.Sort(ids)
	return ids, nil
}

// Brokers reads every live broker's registration, sorted by id (Kafka's
// getAllBrokerAndEpochsInCluster). A broker that vanishes while being read
// is left out.
func (s *Store) Brokers(ctx context.Context) ([]BrokerInfo, error) {
	ids, err := s.BrokerIDs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]BrokerInfo, 0, len(ids))
	for _, id := range ids {
		b, err := s.Broker(ctx, id)
		if errors.Is(err, ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// WatchBrokers delivers the sorted ids of the live brokers now and after
// every change of /brokers/ids's children (a child watch, as Kafka's
// BrokerChangeHandler), until ctx ends; then it closes the channel. Only
// the latest set is kept for a slow reader. Every change is delivered,
// even when the set of ids looks the same: a broker that re-registered
// quickly is a new incarnation (compare broker epochs).
func (s *Store) WatchBrokers(ctx context.Context) (<-chan []int32, error) {
	return watchLoop(ctx, s, func() ([]int32, <-chan gozk.Event, error) {
		names, _, ev, err := s.conn.ChildrenW(s.abs(BrokerIDsPath))
		if err != nil {
			return nil, nil, err
		}
		ids, err := s.parseBrokerIDs(names)
		return ids, ev, err
	}, func(a, b []int32) bool { return false })
}
