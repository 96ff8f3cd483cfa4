package server

import (
	"context"
	"fmt"
	"strconv"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/kbroker/kbroker/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-6
//
// Behaviour:
// * Group keys: the coordinator is the leader of the group's
//   __consumer_offsets partition (Kafka's hash of the group id); the topic
//   is created on first use with offsets.topic.num.partitions partitions.
// * Transaction keys: the coordinator is the leader of the transactional
//   id's __transaction_state partition (the same hash); the topic is
//   created on first use with transaction.state.log.num.partitions
//   partitions, replication factor transaction.state.log.replication.factor
//   (capped by live brokers) and min.insync.replicas
//   transaction.state.log.min.isr (capped by the replication factor).
// * Authorization (KafkaApis.getCoordinator), per key, before anything is
//   looked up or created: Describe on the group (group keys), else
//   GROUP_AUTHORIZATION_FAILED; Describe on the transactional id
//   (transaction keys), else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
//
// Version notes:
// * v1: key type, error message
// * v3: flexible
// * v4: several keys per request (KIP-699)
// * v5: TRANSACTION_ABORTABLE may be returned (not here)
// * v6: share group keys (KIP-932): INVALID_REQUEST, share groups are not
//   implemented

func init() { registerAPI(kmsg.FindCoordinator.Int16(), 0, 6, handleFindCoordinator) }

func handleFindCoordinator(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		var node controller.BrokerInfo
		var err error
		switch {
		case req.CoordinatorType == 0 && !b.authorize(rc, acl.OpDescribe, acl.ResourceGroup, key):
			err = fmt.Errorf("%w: not authorized to describe group %s", kerr.GroupAuthorizationFailed, key)
		case req.CoordinatorType == 1 && !b.authorize(rc, acl.OpDescribe, acl.ResourceTransactionalID, key):
			err = fmt.Errorf("%w: not authorized to describe transactional id %s", kerr.TransactionalIDAuthorizationFailed, key)
		default:
			node, err = b.findCoordinator(req.CoordinatorType, key)
		}
		var ep controller.Endpoint
		if err == nil {
			var ok bool
			if ep, ok = b.endpointFor(rc, node); !ok {
				// As Kafka: the coordinator has no endpoint on this
				// client's listener.
				err = fmt.Errorf("%w: coordinator %d has no listener %s", kerr.CoordinatorNotAvailable, node.ID, rc.listener)
			}
		}
		if err != nil {
			c.ErrorCode = protocol.ErrorCode(err)
			msg := err.Error()
			c.ErrorMessage = &msg
			c.NodeID, c.Port = -1, -1
		} else {
			c.NodeID, c.Host, c.Port = node.ID, ep.Host, ep.Port
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
	var topic string
	var p int32
	switch keyType {
	case 0:
		if err := b.ensureOffsetsTopic(); err != nil {
			return controller.BrokerInfo{}, err
		}
		topic, p = offsetsTopic, b.groups.PartitionFor(key)
	case 1:
		if err := b.ensureTxnTopic(); err != nil {
			return controller.BrokerInfo{}, err
		}
		topic, p = txn.TopicName, b.txns.PartitionFor(key)
	case 2:
		return controller.BrokerInfo{}, fmt.Errorf("%w: kbroker does not support share groups", kerr.InvalidRequest)
	default:
		return controller.BrokerInfo{}, fmt.Errorf("%w: unknown coordinator key type %d", kerr.InvalidRequest, keyType)
	}
	md := b.controller.Metadata()
	t := md.Topics[topic]
	if t == nil || int(p) >= len(t.Partitions) {
		return controller.BrokerInfo{}, kerr.CoordinatorNotAvailable
	}
	node, ok := md.Broker(t.Partitions[p].Leader)
	if !ok {
		return controller.BrokerInfo{}, kerr.CoordinatorNotAvailable
	}
	// This broker is named only once its coordinator serves the partition:
	// the view can say it leads before the load began, and a request sent
	// then is answered NOT_COORDINATOR, which clients do not retry for
	// every request (franz-go's AlterShareGroupOffsets). Clients retry
	// COORDINATOR_NOT_AVAILABLE here.
	if node.ID == b.self.ID && !b.coordinatorServing(keyType, p) {
		return controller.BrokerInfo{}, fmt.Errorf("%w: %s-%d is still loading", kerr.CoordinatorNotAvailable, topic, p)
	}
	return node, nil
}

// coordinatorServing reports whether this broker's coordinator of keyType
// (0 groups, 1 transactions) has loaded partition p.
func (b *Broker) coordinatorServing(keyType int8, p int32) bool {
	if keyType == 1 {
		return b.txns.Serving(p)
	}
	return b.groups.Serving(p)
}

// ensureOffsetsTopic creates __consumer_offsets on first use, as Kafka does.
func (b *Broker) ensureOffsetsTopic() error {
	return b.ensureInternalTopic(offsetsTopic, b.cfg.OffsetsTopicNumPartitions, b.cfg.OffsetsTopicReplicationFactor, 0,
		map[string]string{"cleanup.policy": "compact",
			"segment.bytes": strconv.FormatInt(b.cfg.OffsetsTopicSegmentBytes, 10)})
}

// ensureTxnTopic creates __transaction_state on first use, as Kafka does.
func (b *Broker) ensureTxnTopic() error {
	return b.ensureInternalTopic(txn.TopicName, b.cfg.TransactionStateLogNumPartitions,
		b.cfg.TransactionStateLogReplicationFactor, b.cfg.TransactionStateLogMinISR,
		map[string]string{"cleanup.policy": "compact",
			"segment.bytes": strconv.FormatInt(b.cfg.TransactionStateLogSegmentBytes, 10)})
}

// ensureInternalTopic creates a coordinator's internal topic unless it
// exists: the replication factor is capped by the live brokers, and
// min.insync.replicas (when minISR > 0) by the replication factor, so a
// small cluster can still write it.
func (b *Broker) ensureInternalTopic(name string, partitions int32, rf int16, minISR int32, configs map[string]string) error {
	md := b.controller.Metadata()
	if _, ok := md.Topics[name]; ok {
		return nil
	}
	if int(rf) > len(md.Brokers) {
		rf = int16(len(md.Brokers))
	}
	if minISR > 0 {
		configs["min.insync.replicas"] = strconv.Itoa(int(min(minISR, int32(max(rf, 1)))))
	}
	_, err := b.createTopicAnywhere(controller.CreateTopicRequest{
		Name:              name,
		NumPartitions:     partitions,
		ReplicationFactor: rf,
		Configs:           configs,
	})
	if err != nil {
		return fmt.Errorf("%w: creating %s: %v", kerr.CoordinatorNotAvailable, name, err)
	}
	return nil
}
