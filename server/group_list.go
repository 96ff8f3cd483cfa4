package server

// ListGroups v0-v5 (states filter v4, types filter v5: all groups are classic).
//
// Authorization: Describe on the cluster lists every group; otherwise only
// the groups the principal may Describe are listed, the others left out
// (never refused).

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.ListGroups.Int16(), 0, 5, handleListGroups) }

func handleListGroups(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	resp := b.groups.ListGroups(ctx, kreq.(*kmsg.ListGroupsRequest))
	if !b.authorizeCluster(rc, acl.OpDescribe) {
		describable := b.checksFor(rc, acl.OpDescribe, acl.ResourceGroup)
		resp.Groups, _ = splitByName(resp.Groups, func(g kmsg.ListGroupsResponseGroup) string { return g.Group }, describable.allowed)
	}
	return resp, nil
}
