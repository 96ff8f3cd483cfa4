package server

// SyncGroup v0-v5: blocks until the leader's assignment is stored in __consumer_offsets.
//
// Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED with an
// empty assignment.

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.SyncGroup.Int16(), 0, 5, handleSyncGroup) }

func handleSyncGroup(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SyncGroupRequest)
	if !b.authorize(rc, acl.OpRead, acl.ResourceGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		resp.MemberAssignment = []byte{}
		return resp, nil
	}
	return b.groups.SyncGroup(ctx, req), nil
}
