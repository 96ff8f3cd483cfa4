package server

// DescribeGroups v0-v5. v6 (GROUP_ID_NOT_FOUND for unknown groups) is not served.
//
// Authorization: Describe on each group, else that group alone is answered
// GROUP_AUTHORIZATION_FAILED with no state, protocol or members. With
// IncludeAuthorizedOperations (v3+) a group answered without error carries
// the principal's operations on it.

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.DescribeGroups.Int16(), 0, 5, handleDescribeGroups) }

func handleDescribeGroups(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	describable := b.checksFor(rc, acl.OpDescribe, acl.ResourceGroup)
	allowed, denied := splitByName(req.Groups, func(g string) string { return g }, describable.allowed)
	var resp *kmsg.DescribeGroupsResponse
	if len(denied) == 0 {
		resp = b.groups.DescribeGroups(ctx, req)
	} else {
		sub := *req
		sub.Groups = allowed
		described := b.groups.DescribeGroups(ctx, &sub).Groups
		resp = req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, id := range req.Groups {
			if !describable.allowed(id) || len(described) == 0 {
				dg := kmsg.NewDescribeGroupsResponseGroup()
				dg.Group, dg.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
				if describable.allowed(id) {
					dg.ErrorCode = kerr.UnknownServerError.Code // the coordinator answered fewer groups than asked
				}
				resp.Groups = append(resp.Groups, dg)
				continue
			}
			resp.Groups = append(resp.Groups, described[0])
			described = described[1:]
		}
	}
	if req.Version >= 3 && req.IncludeAuthorizedOperations {
		for i := range resp.Groups {
			if g := &resp.Groups[i]; g.ErrorCode == 0 {
				g.AuthorizedOperations = b.authorizedOperations(rc, acl.ResourceGroup, g.Group)
			}
		}
	}
	return resp, nil
}
