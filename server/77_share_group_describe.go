package server

// ShareGroupDescribe v0-v1 (KIP-932): share groups; classic, consumer and
// unknown groups answer GROUP_ID_NOT_FOUND, as Kafka.
//
// Authorization (KafkaApis.handleShareGroupDescribeRequest): Describe on
// each group, else that group alone is answered GROUP_AUTHORIZATION_FAILED.
// IncludeAuthorizedOperations adds the principal's operations on the group.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/internal/acl"
)

func init() {
	registerAPI(kmsg.ShareGroupDescribe.Int16(), 0, 1, handleShareGroupDescribe)
}

func handleShareGroupDescribe(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareGroupDescribeRequest)
	describable := b.checksFor(rc, acl.OpDescribe, acl.ResourceGroup)
	allowed, _ := splitByName(req.GroupIDs, func(g string) string { return g }, describable.allowed)
	sub := *req
	sub.GroupIDs = allowed
	described := b.groups.ShareGroupDescribe(ctx, &sub).Groups
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, id := range req.GroupIDs {
		if !describable.allowed(id) || len(described) == 0 {
			dg := kmsg.NewShareGroupDescribeResponseGroup()
			dg.GroupID, dg.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			if describable.allowed(id) {
				dg.ErrorCode = kerr.UnknownServerError.Code
			}
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		dg := described[0]
		described = described[1:]
		if req.IncludeAuthorizedOperations && dg.ErrorCode == 0 {
			dg.AuthorizedOperations = b.authorizedOperations(rc, acl.ResourceGroup, dg.GroupID)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil
}
