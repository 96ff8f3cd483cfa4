package server

// ConsumerGroupDescribe v0-v1 (KIP-848): groups of the "consumer" protocol;
// classic and unknown groups answer GROUP_ID_NOT_FOUND, as Kafka.
//
// Authorization (KafkaApis.handleConsumerGroupDescribe): Describe on each
// group, else that group alone is answered GROUP_AUTHORIZATION_FAILED.
// IncludeAuthorizedOperations adds the principal's operations on the group.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/internal/acl"
)

func init() {
	registerAPI(kmsg.ConsumerGroupDescribe.Int16(), 0, 1, handleConsumerGroupDescribe)
}

func handleConsumerGroupDescribe(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	describable := b.checksFor(rc, acl.OpDescribe, acl.ResourceGroup)
	allowed, _ := splitByName(req.Groups, func(g string) string { return g }, describable.allowed)
	sub := *req
	sub.Groups = allowed
	described := b.groups.ConsumerGroupDescribe(ctx, &sub).Groups
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		if !describable.allowed(id) || len(described) == 0 {
			dg := kmsg.NewConsumerGroupDescribeResponseGroup()
			dg.Group, dg.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			if describable.allowed(id) {
				dg.ErrorCode = kerr.UnknownServerError.Code // the coordinator answered fewer groups than asked
			}
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		dg := described[0]
		described = described[1:]
		if req.IncludeAuthorizedOperations && dg.ErrorCode == 0 {
			dg.AuthorizedOperations = b.authorizedOperations(rc, acl.ResourceGroup, dg.Group)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil
}
