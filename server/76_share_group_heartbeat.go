package server

// ShareGroupHeartbeat v0-v1 (KIP-932): share group membership on the group
// coordinator (coordinator/share_group.go). v0 was Kafka 4.0's early
// access version (same fields); it is served too, as kfake does, since
// the project advertises every API from version 0.
//
// Authorization (KafkaApis.handleShareGroupHeartbeat): Read on the group,
// else GROUP_AUTHORIZATION_FAILED; then Describe on every subscribed topic
// name, else TOPIC_AUTHORIZATION_FAILED (the heartbeat is refused).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/coordinator"
	"github.com/kbroker/kbroker/internal/acl"
)

func init() {
	registerAPI(kmsg.ShareGroupHeartbeat.Int16(), 0, 1, handleShareGroupHeartbeat)
}

func handleShareGroupHeartbeat(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareGroupHeartbeatRequest)
	refuse := func(code int16) (kmsg.Response, error) {
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	if !b.authorize(rc, acl.OpRead, acl.ResourceGroup, req.GroupID) {
		return refuse(kerr.GroupAuthorizationFailed.Code)
	}
	if len(req.SubscribedTopicNames) > 0 && b.authorizer() != nil {
		describable := b.checksFor(rc, acl.OpDescribe, acl.ResourceTopic)
		for _, t := range req.SubscribedTopicNames {
			if !describable.allowed(t) {
				return refuse(kerr.TopicAuthorizationFailed.Code)
			}
		}
	}
	ci := coordinator.ClientInfo{ClientID: rc.clientID, ClientHost: "/" + rc.clientIP()}
	return b.groups.ShareGroupHeartbeat(coordinator.WithClientInfo(ctx, ci), req), nil
}
