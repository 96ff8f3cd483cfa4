package server

import (
	"context"
	"errors"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/kbroker/kbroker/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartition: v0-1 (inter-broker)
//
// Behaviour:
// * A partition leader asks the controller to change the ISR. Only the
//   controller answers (others: NOT_CONTROLLER); the change must come from
//   the current leader at the current leader epoch and partition epoch
//   (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION otherwise), so a deposed
//   leader cannot shrink the ISR to itself.
//
// * v2+ names topics by id: a request for a topic id the controller does
//   not know (the leader of a deleted topic whose name was reused) gets
//   UNKNOWN_TOPIC_ID, so it never changes the new topic's ISR.
// * Authorization: ClusterAction on the cluster (brokers), else
//   CLUSTER_AUTHORIZATION_FAILED at the top level and nothing changes.
//
// Version notes:
// * v1: leader recovery state
// * v2: topic ids instead of names

func init() { registerAPI(kmsg.AlterPartition.Int16(), 0, 2, handleAlterPartition) }

func handleAlterPartition(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterPartitionRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	if !b.authorizeCluster(rc, acl.OpClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if !b.controller.IsController() {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	}
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionResponseTopic()
		st.Topic, st.TopidID = rt.Topic, rt.TopicID // kmsg spells it TopidID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionResponseTopicPartition()
			sp.Partition = rp.Partition
			ps, err := b.controller.AlterISR(req.BrokerID, rt.Topic, rt.TopicID, rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch, rp.NewISR)
			if err != nil {
				sp.ErrorCode = protocol.ErrorCode(err)
			}
			sp.LeaderID, sp.LeaderEpoch, sp.ISR, sp.PartitionEpoch = ps.Leader, ps.LeaderEpoch, ps.ISR, ps.PartitionEpoch
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// isrWriter sends a leader's ISR changes to the controller: directly when
// this broker is the controller, else with AlterPartition.
type isrWriter struct {
	b *Broker
}

func (w *isrWriter) AlterISR(ctx context.Context, tp replica.TopicPartition, topicID [16]byte, leaderEpoch, partitionEpoch int32, isr []int32) ([]int32, int32, error) {
	b := w.b
	if b.controller.IsController() {
		ps, err := b.controller.AlterISR(b.self.ID, tp.Topic, topicID, tp.Partition, leaderEpoch, partitionEpoch, isr)
		if err != nil {
			return nil, 0, err
		}
		return ps.ISR, ps.PartitionEpoch, nil
	}
	conn, _, err := b.controllerConn()
	if err != nil {
		return nil, 0, err
	}
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 2
	req.BrokerID, req.BrokerEpoch = b.self.ID, -1
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.Topic, rt.TopicID = tp.Topic, topicID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch, rp.NewISR = tp.Partition, leaderEpoch, partitionEpoch, isr
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := conn.Request(ctx, req)
	if err != nil {
		return nil, 0, err
	}
	ar := resp.(*kmsg.AlterPartitionResponse)
	if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
		return nil, 0, err
	}
	for _, t := range ar.Topics {
		for _, p := range t.Partitions {
			if t.TopidID == topicID && p.Partition == tp.Partition {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, 0, err
				}
				return p.ISR, p.PartitionEpoch, nil
			}
		}
	}
	return nil, 0, errors.New("AlterPartition response without the partition")
}
