package zk

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"math"

	gozk "github.com/go-zookeeper/zk"
)

// ClusterID returns the cluster id, creating /cluster/id with proposed (a
// fresh random id when empty) if it is absent (KafkaZkClient.createOrGetClusterId).
func (s *Store) ClusterID(ctx context.Context, proposed string) (string, error) {
	if proposed == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		proposed = base64.RawURLEncoding.EncodeToString(b[:])
	}
	if err := s.createParents(ctx, s.abs(ClusterIDPath)); err != nil {
		return "", fmt.Errorf("create %s: %w", s.abs(ClusterPath), err)
	}
	err := s.retry(ctx, func() error {
		_, err := s.conn.Create(s.abs(ClusterIDPath), EncodeClusterID(proposed), 0, acl)
		return err
	})
	if err == nil {
		s.logger.Info("created cluster id", "cluster_id", proposed)
		return proposed, nil
	}
	if !errors.Is(err, gozk.ErrNodeExists) {
		return "", fmt.Errorf("create %s: %w", s.abs(ClusterIDPath), err)
	}
	data, _, err := s.get(ctx, ClusterIDPath)
	if err != nil {
		return "", err
	}
	id, err := DecodeClusterID(data)
	return id, s.malformedAt(err)
}

// AllocateProducerIDBlock reserves the next block of ProducerIDBlockSize
// producer ids for brokerID with a conditional update of
// /latest_producer_id_block, retrying on version conflicts, as Kafka's
// ZkProducerIdManager.getNewProducerIdBlock: concurrent allocators (on any
// brokers) never get overlapping blocks.
func (s *Store) AllocateProducerIDBlock(ctx context.Context, brokerID int32) (ProducerIDBlock, error) {
	for {
		data, stat, err := s.get(ctx, ProducerIDBlockPath)
		exists := err == nil
		if err != nil && !errors.Is(err, ErrNoNode) {
			return ProducerIDBlock{}, fmt.Errorf("allocate producer id block: %w", err)
		}
		next := ProducerIDBlock{Broker: brokerID, First: 0, Last: ProducerIDBlockSize - 1}
		if exists && len(data) > 0 {
			cur, err := DecodeProducerIDBlock(data)
			if err != nil {
				return ProducerIDBlock{}, s.malformedAt(err)
			}
			if cur.Last > math.MaxInt64-ProducerIDBlockSize {
				return ProducerIDBlock{}, fmt.Errorf("allocate producer id block: all producer ids are exhausted (last block ends at %d)", cur.Last)
			}
			next.First = cur.Last + 1
			next.Last = cur.Last + ProducerIDBlockSize
		}
		encoded := EncodeProducerIDBlock(next)
		if exists {
			err = s.retry(ctx, func() error {
				_, err := s.conn.Set(s.abs(ProducerIDBlockPath), encoded, stat.Version)
				return err
			})
		} else {
			err = s.retry(ctx, func() error {
				_, err := s.conn.Create(s.abs(ProducerIDBlockPath), encoded, 0, acl)
				return err
			})
		}
		switch {
		case err == nil:
			s.logger.Debug("allocated producer id block", "broker", brokerID, "first", next.First, "last", next.Last)
			return next, nil
		case errors.Is(err, gozk.ErrBadVersion), errors.Is(err, gozk.ErrNodeExists), errors.Is(err, gozk.ErrNoNode):
			// Another allocator won this round (or, after a lost
			// connection, our own first attempt did): read again.
			continue
		default:
			return ProducerIDBlock{}, fmt.Errorf("allocate producer id block: %w", err)
		}
	}
}
