package server

// ConsumerGroupHeartbeat v0-v1 (KIP-848, the "consumer" group protocol):
// the coordinator's consumer groups (coordinator/consumer_*.go). v1 adds
// SubscribedTopicRegex and requires client-generated member ids.
//
// Authorization (Kafka 3.9's KafkaApis.handleConsumerGroupHeartbeat): Read
// on the group, else GROUP_AUTHORIZATION_FAILED; then Describe on every
// subscribed topic name, else TOPIC_AUTHORIZATION_FAILED (the heartbeat is
// refused: clients may not learn of topics they cannot describe).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/coordinator"
	"github.com/kbroker/kbroker/internal/acl"
)

func init() {
	registerAPI(kmsg.ConsumerGroupHeartbeat.Int16(), 0, 1, handleConsumerGroupHeartbeat)
}

func handleConsumerGroupHeartbeat(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	refuse := func(code int16) (kmsg.Response, error) {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	if !b.authorize(rc, acl.OpRead, acl.ResourceGroup, req.Group) {
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
	return b.groups.ConsumerGroupHeartbeat(coordinator.WithClientInfo(ctx, ci), req), nil
}
