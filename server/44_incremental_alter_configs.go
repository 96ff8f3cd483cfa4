package server

import (
	"context"

	"github.com/kbroker/kbroker/protocol"
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
//
// Version notes:
// * v1: flexible versions

func init() {
	registerAPI(kmsg.IncrementalAlterConfigs.Int16(), 0, 1, handleIncrementalAlterConfigs)
}

func handleIncrementalAlterConfigs(_ context.Context, b *Broker, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)

	seen := make(map[configResourceKey]int, len(req.Resources))
	for _, rr := range req.Resources {
		seen[configResourceKey{rr.ResourceType, rr.ResourceName}]++
	}
	for _, rr := range req.Resources {
		var err error
		if seen[configResourceKey{rr.ResourceType, rr.ResourceName}] > 1 {
			err = errDuplicateResource
		} else {
			err = b.alterConfigResource(rr.ResourceType, rr.ResourceName, len(rr.Configs), incrementalConfigs(rr.Configs), req.ValidateOnly)
		}
		st := kmsg.NewIncrementalAlterConfigsResponseResource()
		st.ResourceType = rr.ResourceType
		st.ResourceName = rr.ResourceName
		if err != nil {
			st.ErrorCode = protocol.ErrorCode(err)
			msg := err.Error()
			st.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, st)
	}
	return resp, nil
}
