package server

import (
	"context"
	"fmt"
	"sort"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics: v0-7
//
// Behaviour:
// * Names, partition counts, replication factors, explicit assignments and
//   configs are all checked before anything is created; ValidateOnly
//   checks and creates nothing.
// * -1 partitions or replication factor take the broker defaults (v4+).
// * Authorization (KafkaApis.handleCreateTopicsRequest): Create on the
//   cluster, or else on each topic, is needed; a topic without it gets
//   TOPIC_AUTHORIZATION_FAILED "Authorization failed." (after the
//   duplicate check). A topic created without DescribeConfigs on it is
//   answered without its id, partitions, replication factor or configs,
//   and TopicConfigErrorCode TOPIC_AUTHORIZATION_FAILED (v5+), as Kafka.
//
// Version notes:
// * v1: ValidateOnly, error messages
// * v4: default partitions / replication factor
// * v5: flexible; the created topic's partitions, replication factor and
//   configs in the response
// * v7: topic id in the response

func init() { registerAPI(kmsg.CreateTopics.Int16(), 0, 7, handleCreateTopics) }

func handleCreateTopics(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	clusterCreate := b.authorizeCluster(rc, acl.OpCreate)
	creatable := b.checksFor(rc, acl.OpCreate, acl.ResourceTopic)
	configsVisible := b.checksFor(rc, acl.OpDescribeConfigs, acl.ResourceTopic)
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		fail := func(err error) {
			st.ErrorCode = protocol.ErrorCode(err)
			if req.Version >= 1 {
				msg := err.Error()
				st.ErrorMessage = &msg
			}
		}
		if seen[rt.Topic] > 1 {
			fail(fmt.Errorf("%w: topic %q appears more than once in the request", kerr.InvalidRequest, rt.Topic))
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !clusterCreate && !creatable.allowed(rt.Topic) {
			fail(&refusal{kerr.TopicAuthorizationFailed, "Authorization failed."})
			if !configsVisible.allowed(rt.Topic) {
				st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			}
			resp.Topics = append(resp.Topics, st)
			continue
		}
		t, err := b.createTopic(rt, req.ValidateOnly)
		if err != nil {
			fail(err)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !configsVisible.allowed(rt.Topic) {
			// Created, but what it was created with is not this
			// principal's to see.
			st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st.TopicID = t.ID
		st.NumPartitions = int32(len(t.Partitions))
		st.ReplicationFactor = int16(len(t.Partitions[0].Replicas))
		eff := b.cfg.EffectiveTopicConfig(t.Configs)
		names := make([]string, 0, len(eff))
		for name := range eff {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name = name
			v := eff[name]
			c.Value = &v
			c.Source = 5 // DEFAULT_CONFIG
			if _, set := t.Configs[name]; set {
				c.Source = 1 // DYNAMIC_TOPIC_CONFIG
			}
			st.Configs = append(st.Configs, c)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func (b *Broker) createTopic(rt kmsg.CreateTopicsRequestTopic, validateOnly bool) (*controller.Topic, error) {
	if err := protocol.ValidTopicName(rt.Topic); err != nil {
		return nil, err
	}
	configs := map[string]string{}
	for _, c := range rt.Configs {
		if c.Value == nil {
			continue
		}
		configs[c.Name] = *c.Value
	}
	configs, err := b.normalizeTopicOverrides(configs)
	if err != nil {
		return nil, err
	}
	req := controller.CreateTopicRequest{
		Name:              rt.Topic,
		NumPartitions:     rt.NumPartitions,
		ReplicationFactor: rt.ReplicationFactor,
		Configs:           configs,
	}
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return nil, fmt.Errorf("%w: both an assignment and a partition count or replication factor were given", kerr.InvalidRequest)
		}
		assignment := make([][]int32, len(rt.ReplicaAssignment))
		for _, a := range rt.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(assignment) || assignment[a.Partition] != nil {
				return nil, fmt.Errorf("%w: partitions of the assignment must be 0..%d, each once", kerr.InvalidReplicaAssignment, len(assignment)-1)
			}
			assignment[a.Partition] = a.Replicas
		}
		req.Assignment = assignment
	}
	if req.NumPartitions == -1 {
		req.NumPartitions = b.cfg.NumPartitions
	}
	if req.ReplicationFactor == -1 {
		req.ReplicationFactor = b.cfg.DefaultReplicationFactor
	}
	return b.controller.CreateTopic(req, validateOnly)
}
