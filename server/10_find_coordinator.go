package server

import (
	"context"
	"fmt"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-6
//
// Behaviour:
// * Group keys: the coordinator is the leader of the group's
//   __consumer_offsets partition (Kafka's hash of the group id); the topic
//   is created on first use with offsets.topic.num.partitions partitions.
// * Transaction keys: INVALID_REQUEST with a message (no transactions yet).
//
// Version notes:
// * v1: key type, error message
// * v3: flexible
// * v4: several keys per request (KIP-699)
// * v5: TRANSACTION_ABORTABLE may be returned (not here)
// * v6: share group keys (KIP-932): INVALID_REQUEST, share groups are not
//   implemented

func init() { registerAPI(kmsg.FindCoordinator.Int16(), 0, 6, handleFindCoordinator) }

func handleFindCoordinator(_ context.Context, b *Broker, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		node, err := b.findCoordinator(req.CoordinatorType, key)
		if err != nil {
			c.ErrorCode = protocol.ErrorCode(err)
			msg := err.Error()
			c.ErrorMessage = &msg
			c.NodeID, c.Port = -1, -1
		} else {
			c.NodeID, c.Host, c.Port = node.ID, node.Host, node.Port
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 && len(resp.Coordinators) == 1 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
		resp.Coordinators = nil
	}
	return resp, nil
}

func (b *Broker) findCoordinator(keyType int8, key string) (controller.BrokerInfo, error) {
	if keyType == 2 {
		return controller.BrokerInfo{}, fmt.Errorf("%w: kbroker does not support share groups", kerr.InvalidRequest)
	}
	if keyType != 0 {
		// INVALID_REQUEST rather than a retriable code, so a transactional
		// client fails at once with this message instead of retrying forever.
		return controller.BrokerInfo{}, fmt.Errorf("%w: kbroker does not support transactions yet", kerr.InvalidRequest)
	}
	if err := b.ensureOffsetsTopic(); err != nil {
		return controller.BrokerInfo{}, err
	}
	md := b.controller.Metadata()
	t := md.Topics[offsetsTopic]
	p := b.groups.PartitionFor(key)
	if t == nil || int(p) >= len(t.Partitions) {
		return controller.BrokerInfo{}, kerr.CoordinatorNotAvailable
	}
	node, ok := md.Broker(t.Partitions[p].Leader)
	if !ok {
		return controller.BrokerInfo{}, kerr.CoordinatorNotAvailable
	}
	return node, nil
}

// ensureOffsetsTopic creates __consumer_offsets on first use, as Kafka does.
func (b *Broker) ensureOffsetsTopic() error {
	md := b.controller.Metadata()
	if _, ok := md.Topics[offsetsTopic]; ok {
		return nil
	}
	rf := b.cfg.OffsetsTopicReplicationFactor
	if int(rf) > len(md.Brokers) {
		rf = int16(len(md.Brokers))
	}
	_, err := b.createTopicAnywhere(controller.CreateTopicRequest{
		Name:              offsetsTopic,
		NumPartitions:     b.cfg.OffsetsTopicNumPartitions,
		ReplicationFactor: rf,
		Configs:           map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600"},
	})
	if err != nil {
		return fmt.Errorf("%w: creating %s: %v", kerr.CoordinatorNotAvailable, offsetsTopic, err)
	}
	return nil
}
