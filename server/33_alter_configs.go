package server

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs: v0-2
//
// Behaviour:
// * TOPIC: the request's entries replace all of the topic's overrides
//   (entries with a null value are dropped); every value is validated
//   first (INVALID_CONFIG with the reason), and nothing changes when any
//   is invalid. Unknown topic: UNKNOWN_TOPIC_OR_PARTITION.
// * BROKER ("" or this broker's id): kbroker has no dynamic broker
//   configs, so a non-empty change is INVALID_REQUEST, as Kafka answers a
//   config it cannot change dynamically.
// * A resource named twice, or a config named twice in one resource:
//   INVALID_REQUEST.
// * ValidateOnly checks everything and changes nothing.
// * Authorization: AlterConfigs on the topic (topic resources) or on the
//   cluster (broker resources), else TOPIC_AUTHORIZATION_FAILED or
//   CLUSTER_AUTHORIZATION_FAILED for that resource alone, after the
//   duplicate-resource check and before anything else (existence).
// * Changes go through the controller, which applies them to the topic's
//   partitions (retention, segment size, min.insync.replicas, ...).
//
// Version notes:
// * v1: ThrottleMillis
// * v2: flexible versions

func init() { registerAPI(kmsg.AlterConfigs.Int16(), 0, 2, handleAlterConfigs) }

func handleAlterConfigs(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)

	changes := make([]configResourceChange, len(req.Resources))
	for i, rr := range req.Resources {
		changes[i] = configResourceChange{rr.ResourceType, rr.ResourceName, len(rr.Configs), replaceConfigs(rr.Configs)}
	}
	refused := func(rtype kmsg.ConfigResourceType, name string) error {
		return b.configsRefusal(rc, acl.OpAlterConfigs, rtype, name)
	}
	for i, err := range b.alterConfigResources(changes, req.ValidateOnly, refused) {
		st := kmsg.NewAlterConfigsResponseResource()
		st.ResourceType = req.Resources[i].ResourceType
		st.ResourceName = req.Resources[i].ResourceName
		st.ErrorCode, st.ErrorMessage = errorCodeAndMessage(err)
		resp.Resources = append(resp.Resources, st)
	}
	return resp, nil
}
