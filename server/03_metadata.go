package server

import (
	"context"
	"slices"
	"sort"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata: v0-12
//
// Behaviour:
// * Brokers, controller id and cluster id come from the controller's
//   current snapshot; every live broker is listed.
// * Unknown topics are created when auto.create.topics.enable is on and the
//   request allows it (always before v4); invalid names get
//   INVALID_TOPIC_EXCEPTION.
// * Authorization (KafkaApis.handleTopicMetadataRequest): a topic needs
//   Describe. An all-topics request lists only those; a topic named and
//   not describable gets TOPIC_AUTHORIZATION_FAILED without its id or
//   partitions, whether or not it exists (one named by id, v12, keeps the
//   id: ids are not secret). Auto-creation needs Create on the cluster or
//   on the topic, else TOPIC_AUTHORIZATION_FAILED. Authorized operations
//   (v8+, when asked): the topic's for every describable topic, the
//   cluster's (v8-10) when Describe on the cluster is allowed, else 0.
//
// Version notes:
// * v1: null topics = all topics, controller id, rack, internal flag
// * v2: cluster id
// * v4: AllowAutoTopicCreation
// * v5: offline replicas
// * v7: leader epoch
// * v9: flexible
// * v10: topic ids
// * v12: topics may be named by id only

func init() { registerAPI(kmsg.Metadata.Int16(), 0, 12, handleMetadata) }

func handleMetadata(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	md := b.controller.Metadata()

	allTopics := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	autoCreate := b.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	describable := b.checksFor(rc, acl.OpDescribe, acl.ResourceTopic)
	// withOperations adds a describable topic's authorized operations
	// when asked for (v8+).
	withOperations := func(mt kmsg.MetadataResponseTopic) kmsg.MetadataResponseTopic {
		if req.Version >= 8 && req.IncludeTopicAuthorizedOperations && mt.Topic != nil {
			mt.AuthorizedOperations = b.authorizedOperations(rc, acl.ResourceTopic, *mt.Topic)
		}
		return mt
	}
	unauthorized := func(name *string, id [16]byte) {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = name, id
		mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		resp.Topics = append(resp.Topics, mt)
	}
	if allTopics {
		names := make([]string, 0, len(md.Topics))
		for name := range md.Topics {
			// Topics the principal may not describe are not there.
			if describable.allowed(name) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			resp.Topics = append(resp.Topics, withOperations(metadataTopic(b, rc, md.Topics[name], req.Version)))
		}
	} else {
		for _, rt := range req.Topics {
			var t *controller.Topic
			switch {
			case rt.Topic != nil:
				if !describable.allowed(*rt.Topic) {
					// Checked before existence: the answer says nothing of it.
					unauthorized(rt.Topic, [16]byte{})
					continue
				}
				t = md.Topics[*rt.Topic]
			case rt.TopicID != [16]byte{}:
				t, _ = md.TopicByID(rt.TopicID)
				if t == nil {
					mt := kmsg.NewMetadataResponseTopic()
					mt.TopicID = rt.TopicID
					mt.ErrorCode = kerr.UnknownTopicID.Code
					resp.Topics = append(resp.Topics, mt)
					continue
				}
				if !describable.allowed(t.Name) {
					unauthorized(nil, rt.TopicID)
					continue
				}
			}
			if t == nil && rt.Topic != nil && autoCreate {
				if !b.mayAutoCreate(rc, *rt.Topic) {
					mt := kmsg.NewMetadataResponseTopic()
					mt.Topic = rt.Topic
					mt.IsInternal = isInternalTopic(*rt.Topic)
					mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
					resp.Topics = append(resp.Topics, mt)
					continue
				}
				var err error
				t, err = b.autoCreateTopic(*rt.Topic)
				if err != nil {
					mt := kmsg.NewMetadataResponseTopic()
					mt.Topic = rt.Topic
					mt.ErrorCode = protocol.ErrorCode(err)
					resp.Topics = append(resp.Topics, withOperations(mt))
					continue
				}
				md = b.controller.Metadata()
			}
			if t == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = rt.Topic
				mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if rt.Topic != nil && protocol.ValidTopicName(*rt.Topic) != nil {
					mt.ErrorCode = kerr.InvalidTopicException.Code
				}
				resp.Topics = append(resp.Topics, withOperations(mt))
				continue
			}
			resp.Topics = append(resp.Topics, withOperations(metadataTopic(b, rc, t, req.Version)))
		}
	}
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if b.authorizeCluster(rc, acl.OpDescribe) {
			resp.AuthorizedOperations = b.authorizedOperations(rc, acl.ResourceCluster, acl.ClusterName)
		}
	}
	brokers := md.Brokers
	if _, known := md.Broker(b.self.ID); !known {
		// A broker that has not heard from the controller yet still
		// serves: name it, so clients keep a broker to talk to.
		brokers = append(slices.Clone(brokers), b.self)
	}
	for _, br := range brokers {
		ep, ok := b.endpointFor(rc, br)
		if !ok {
			continue // not reachable on this client's listener
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID = br.ID
		mb.Host = ep.Host
		mb.Port = ep.Port
		if br.Rack != "" {
			rack := br.Rack
			mb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, mb)
	}
	clusterID := md.ClusterID
	resp.ClusterID = &clusterID
	resp.ControllerID = md.ControllerID
	return resp, nil
}

func metadataTopic(b *Broker, rc *requestContext, t *controller.Topic, version int16) kmsg.MetadataResponseTopic {
	md := b.controller.Metadata()
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = t.Name == offsetsTopic
	for i, ps := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader = ps.Leader
		mp.LeaderEpoch = ps.LeaderEpoch
		mp.Replicas = ps.Replicas
		mp.ISR = ps.ISR
		for _, r := range ps.Replicas {
			// Offline: its broker is not live, or its log dir failed.
			if _, live := md.Broker(r); !live || slices.Contains(ps.OfflineReplicas, r) {
				mp.OfflineReplicas = append(mp.OfflineReplicas, r)
			}
		}
		if ps.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		} else if leader, live := md.Broker(ps.Leader); live {
			if _, ok := b.endpointFor(rc, leader); !ok {
				// Kafka's rule: the leader lacks this client's listener.
				mp.Leader = -1
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
				if version >= 6 {
					mp.ErrorCode = kerr.ListenerNotFound.Code
				}
			}
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// mayAutoCreate tells whether the request's principal may have topic
// created on first use: Create on the cluster or on the topic, as
// Kafka's Metadata asks.
func (b *Broker) mayAutoCreate(rc *requestContext, topic string) bool {
	return b.authorizeCluster(rc, acl.OpCreate) || b.authorize(rc, acl.OpCreate, acl.ResourceTopic, topic)
}

// autoCreateTopic creates a topic with the broker defaults, as Kafka does
// for Metadata and Produce when auto.create.topics.enable is on.
func (b *Broker) autoCreateTopic(name string) (*controller.Topic, error) {
	if err := protocol.ValidTopicName(name); err != nil {
		return nil, err
	}
	return b.createTopicAnywhere(controller.CreateTopicRequest{
		Name:              name,
		NumPartitions:     b.cfg.NumPartitions,
		ReplicationFactor: b.cfg.DefaultReplicationFactor,
	})
}
