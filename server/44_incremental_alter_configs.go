package server

import (
	"context"
	"errors"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// IncrementalAlterConfigs: v0-1
//
// Behaviour:
// * TOPIC: SET (0) sets an override, DELETE (1) removes it (back to the
//   broker default), APPEND (2) / SUBTRACT (3) add or remove values of a
//   LIST config (cleanup.policy), starting from the override or else the
//   default. APPEND/SUBTRACT on a non-list config is INVALID_REQUEST, as
//   Kafka's ZooKeeper-mode broker answers. The resulting overrides are
//   validated together (INVALID_CONFIG with the reason) and applied all or
//   nothing. Unknown topic: UNKNOWN_TOPIC_OR_PARTITION.
// * BROKER ("" or this broker's id): no dynamic broker configs; a
//   non-empty change is INVALID_REQUEST.
// * A resource named twice, or a config named twice in one resource:
//   INVALID_REQUEST.
// * ValidateOnly checks everything and changes nothing.
// * Authorization: AlterConfigs on the topic (topic resources) or on the
//   cluster (broker resources), else TOPIC_AUTHORIZATION_FAILED or
//   CLUSTER_AUTHORIZATION_FAILED for that resource alone, after the
//   duplicate-resource check and before anything else (existence).
//
// Version notes:
// * v1: flexible versions

func init() {
	registerAPI(kmsg.IncrementalAlterConfigs.Int16(), 0, 1, handleIncrementalAlterConfigs)
}

func handleIncrementalAlterConfigs(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)

	changes := make([]configResourceChange, len(req.Resources))
	for i, rr := range req.Resources {
		changes[i] = configResourceChange{rr.ResourceType, rr.ResourceName, len(rr.Configs), incrementalConfigs(rr.Configs)}
	}
	refused := func(rtype kmsg.ConfigResourceType, name string) error {
		return b.configsRefusal(rc, acl.OpAlterConfigs, rtype, name)
	}
	for i, err := range b.alterConfigResources(changes, req.ValidateOnly, refused) {
		if rr := req.Resources[i]; rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig && !errors.Is(err, errDuplicateResource) && refused(rr.ResourceType, rr.ResourceName) == nil {
			err = b.alterGroupConfigs(ctx, rr, req.ValidateOnly) // share_group_configs.go
		}
		st := kmsg.NewIncrementalAlterConfigsResponseResource()
		st.ResourceType = req.Resources[i].ResourceType
		st.ResourceName = req.Resources[i].ResourceName
		st.ErrorCode, st.ErrorMessage = errorCodeAndMessage(err)
		resp.Resources = append(resp.Resources, st)
	}
	return resp, nil
}
