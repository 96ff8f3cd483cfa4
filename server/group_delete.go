package server

// DeleteGroups v0-v2: Empty groups only; tombstones are written first.
//
// Authorization: Delete on each group, else that group is answered
// GROUP_AUTHORIZATION_FAILED and left as it is.

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.DeleteGroups.Int16(), 0, 2, handleDeleteGroups) }

func handleDeleteGroups(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	deletable := b.checksFor(rc, acl.OpDelete, acl.ResourceGroup)
	allowed, denied := splitByName(req.Groups, func(g string) string { return g }, deletable.allowed)
	if len(denied) == 0 {
		return b.groups.DeleteGroups(ctx, req), nil
	}
	var deleted []kmsg.DeleteGroupsResponseGroup
	if len(allowed) > 0 {
		sub := *req
		sub.Groups = allowed
		deleted = b.groups.DeleteGroups(ctx, &sub).Groups
	}
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		if !deletable.allowed(id) || len(deleted) == 0 {
			code := kerr.GroupAuthorizationFailed.Code
			if deletable.allowed(id) {
				code = kerr.UnknownServerError.Code // the coordinator answered fewer groups than asked
			}
			resp.Groups = append(resp.Groups, kmsg.DeleteGroupsResponseGroup{Group: id, ErrorCode: code})
			continue
		}
		resp.Groups = append(resp.Groups, deleted[0])
		deleted = deleted[1:]
	}
	return resp, nil
}
