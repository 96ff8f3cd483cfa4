package server

// WriteShareGroupState v0-v1 (KIP-932, inter-broker): a partition leader
// stores a share partition's state with the group's coordinator, which
// answers once it is durable in __consumer_offsets (acks=all). kbroker
// writes the whole state each time (start offset and every in-flight run),
// where Kafka's share coordinator merges deltas; the state epoch is the
// writing leader's epoch, and an older one is refused (FENCED_STATE_EPOCH)
// so a deposed leader cannot overwrite its successor.
//
// Authorization (KafkaApis.handleWriteShareGroupStateRequest):
// ClusterAction on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
//
// This file also holds the leader's side: shareStateStore, which reads and
// writes through the coordinator (locally when this broker is the group's
// coordinator, else over these requests to it).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/coordinator"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/internal/share"
)

func init() {
	registerAPI(kmsg.WriteShareGroupState.Int16(), 0, 1, handleWriteShareGroupState)
}

func handleWriteShareGroupState(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.WriteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	allowed := b.authorizeCluster(rc, acl.OpClusterAction)
	for _, rt := range req.Topics {
		ot := kmsg.NewWriteShareGroupStateResponseTopic()
		ot.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			op := kmsg.NewWriteShareGroupStateResponseTopicPartition()
			op.Partition = rp.Partition
			if !allowed {
				op.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				ot.Partitions = append(ot.Partitions, op)
				continue
			}
			st := coordinator.ShareState{StateEpoch: rp.StateEpoch, StartOffset: rp.StartOffset}
			for _, sb := range rp.StateBatches {
				st.Batches = append(st.Batches, coordinator.ShareStateBatch{First: sb.FirstOffset, Last: sb.LastOffset, DeliveryState: sb.DeliveryState, DeliveryCount: sb.DeliveryCount})
			}
			op.ErrorCode = b.groups.WriteShareState(ctx, req.GroupID, rt.TopicID, rp.Partition, st, rp.LeaderEpoch)
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}

// storedShareState is a share partition's durable state as loaded.
type storedShareState struct {
	found      bool
	stateEpoch int32
	start      int64
	batches    []share.StateBatch
}

// shareStateStore keeps share partitions' durable state. leaderEpoch is
// the calling partition leader's epoch: once a leader read or wrote the
// state, the coordinator refuses older ones (kerr.FencedLeaderEpoch).
type shareStateStore interface {
	// Load returns the stored state of k (found false: none).
	Load(ctx context.Context, k share.Key, leaderEpoch int32) (storedShareState, error)
	// Save replaces k's stored state once it is durable; stateEpoch is the
	// state's epoch, raised by each leader's first write.
	Save(ctx context.Context, k share.Key, leaderEpoch, stateEpoch int32, start int64, batches []share.StateBatch) error
}

// coordinatorShareStore reads and writes share state through the group's
// coordinator.
type coordinatorShareStore struct {
	b     *Broker
	peers *peerConns
}

func newShareStateStore(b *Broker) shareStateStore {
	return &coordinatorShareStore{b: b, peers: newPeerConns(b, "kbroker-share-state")}
}

// errShareCoordinator is a retriable failure to reach the group's
// coordinator; the client's request is answered with it and retried.
var errShareCoordinator = fmt.Errorf("%w: share state coordinator unavailable", kerr.CoordinatorNotAvailable)

// coordinatorOf returns the broker leading group's __consumer_offsets
// partition.
func (s *coordinatorShareStore) coordinatorOf(group string) (int32, error) {
	if err := s.b.ensureOffsetsTopic(); err != nil {
		return -1, err
	}
	md := s.b.controller.Metadata()
	t := md.Topics[offsetsTopic]
	p := s.b.groups.PartitionFor(group)
	if t == nil || int(p) >= len(t.Partitions) || t.Partitions[p].Leader < 0 {
		return -1, errShareCoordinator
	}
	return t.Partitions[p].Leader, nil
}

// retry runs try until it answers something other than a retriable
// coordinator error, for at most 10 s (the coordinator may be moving).
func (s *coordinatorShareStore) retry(ctx context.Context, try func(ctx context.Context) (int16, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		code, err := try(ctx)
		if err == nil {
			switch code {
			case 0:
				return nil
			case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code:
				err = fmt.Errorf("%w: %v", errShareCoordinator, kerr.ErrorForCode(code))
			default:
				return kerr.ErrorForCode(code)
			}
		}
		select {
		case <-ctx.Done():
			return errors.Join(errShareCoordinator, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

func (s *coordinatorShareStore) Load(ctx context.Context, k share.Key, leaderEpoch int32) (storedShareState, error) {
	var st coordinator.ShareState
	var found bool
	err := s.retry(ctx, func(ctx context.Context) (int16, error) {
		coord, err := s.coordinatorOf(k.Group)
		if err != nil {
			return 0, err
		}
		if coord == s.b.self.ID {
			var code int16
			st, found, code = s.b.groups.ReadShareState(ctx, k.Group, k.TopicID, k.Partition, leaderEpoch)
			return code, nil
		}
		req := kmsg.NewPtrReadShareGroupStateRequest()
		req.Version = 0 // peer requests carry their version
		req.GroupID = k.Group
		rt := kmsg.NewReadShareGroupStateRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch = k.Partition, leaderEpoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := s.peers.request(ctx, coord, req, true)
		if err != nil {
			return 0, err
		}
		resp := kresp.(*kmsg.ReadShareGroupStateResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, fmt.Errorf("%w: malformed ReadShareGroupState answer", kerr.UnknownServerError)
		}
		rp2 := resp.Topics[0].Partitions[0]
		if rp2.ErrorCode != 0 {
			return rp2.ErrorCode, nil
		}
		found = rp2.StartOffset >= 0
		st = coordinator.ShareState{StateEpoch: rp2.StateEpoch, StartOffset: rp2.StartOffset}
		for _, sb := range rp2.StateBatches {
			st.Batches = append(st.Batches, coordinator.ShareStateBatch{First: sb.FirstOffset, Last: sb.LastOffset, DeliveryState: sb.DeliveryState, DeliveryCount: sb.DeliveryCount})
		}
		return 0, nil
	})
	if err != nil {
		return storedShareState{}, err
	}
	out := storedShareState{found: found, stateEpoch: st.StateEpoch, start: st.StartOffset}
	if !found {
		out.stateEpoch = 0
	}
	for _, sb := range st.Batches {
		out.batches = append(out.batches, share.StateBatch{First: sb.First, Last: sb.Last, State: share.RecordState(sb.DeliveryState), Deliveries: sb.DeliveryCount})
	}
	return out, nil
}

func (s *coordinatorShareStore) Save(ctx context.Context, k share.Key, leaderEpoch, stateEpoch int32, start int64, batches []share.StateBatch) error {
	st := coordinator.ShareState{StateEpoch: stateEpoch, StartOffset: start}
	for _, sb := range batches {
		st.Batches = append(st.Batches, coordinator.ShareStateBatch{First: sb.First, Last: sb.Last, DeliveryState: int8(sb.State), DeliveryCount: sb.Deliveries})
	}
	return s.retry(ctx, func(ctx context.Context) (int16, error) {
		coord, err := s.coordinatorOf(k.Group)
		if err != nil {
			return 0, err
		}
		if coord == s.b.self.ID {
			return s.b.groups.WriteShareState(ctx, k.Group, k.TopicID, k.Partition, st, leaderEpoch), nil
		}
		req := kmsg.NewPtrWriteShareGroupStateRequest()
		req.Version = 1 // peer requests carry their version
		req.GroupID = k.Group
		rt := kmsg.NewWriteShareGroupStateRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
		rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = k.Partition, stateEpoch, leaderEpoch, start
		for _, sb := range st.Batches {
			ob := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
			ob.FirstOffset, ob.LastOffset, ob.DeliveryState, ob.DeliveryCount = sb.First, sb.Last, sb.DeliveryState, sb.DeliveryCount
			rp.StateBatches = append(rp.StateBatches, ob)
		}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		// Not retried on a fresh connection by peers: the retry loop
		// here repeats the whole write, which is idempotent (a replace).
		kresp, err := s.peers.request(ctx, coord, req, true)
		if err != nil {
			return 0, err
		}
		resp := kresp.(*kmsg.WriteShareGroupStateResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, fmt.Errorf("%w: malformed WriteShareGroupState answer", kerr.UnknownServerError)
		}
		return resp.Topics[0].Partitions[0].ErrorCode, nil
	})
}
