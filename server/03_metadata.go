package server

import (
	"context"
	"slices"
	"sort"

	"github.com/kbroker/kbroker/controller"
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
	if allTopics {
		names := make([]string, 0, len(md.Topics))
		for name := range md.Topics {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			resp.Topics = append(resp.Topics, metadataTopic(b, rc, md.Topics[name], req.Version))
		}
	} else {
		for _, rt := range req.Topics {
			var t *controller.Topic
			switch {
			case rt.Topic != nil:
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
			}
			if t == nil && rt.Topic != nil && autoCreate {
				var err error
				t, err = b.autoCreateTopic(*rt.Topic)
				if err != nil {
					mt := kmsg.NewMetadataResponseTopic()
					mt.Topic = rt.Topic
					mt.ErrorCode = protocol.ErrorCode(err)
					resp.Topics = append(resp.Topics, mt)
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
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			resp.Topics = append(resp.Topics, metadataTopic(b, rc, t, req.Version))
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
			if _, live := md.Broker(r); !live {
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
