package server

// JoinGroup v0-v9: the group coordinator's delayed join; blocks until the rebalance's join phase completes. Static members (group.instance.id, v5+) rejoin without a rebalance (KIP-345).
//
// Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED with
// JoinGroupRequest.getErrorResponse's fields (generation -1, no member id,
// protocol "" before v7 and null from v7).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/coordinator"
	"github.com/kbroker/kbroker/internal/acl"
)

func init() { registerAPI(kmsg.JoinGroup.Int16(), 0, 9, handleJoinGroup) }

func handleJoinGroup(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.JoinGroupRequest)
	if !b.authorize(rc, acl.OpRead, acl.ResourceGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		resp.Generation = -1
		resp.Protocol = kmsg.StringPtr("")
		if req.Version >= 7 {
			resp.Protocol = nil
		}
		return resp, nil
	}
	return b.groups.JoinGroup(coordinator.WithClientInfo(ctx, coordinator.ClientInfo{ClientID: rc.clientID}), req), nil
}
