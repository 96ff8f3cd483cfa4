package server

// LeaveGroup v0-v5 (batched members from v3).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.LeaveGroup.Int16(), 0, 5, handleLeaveGroup) }

func handleLeaveGroup(ctx context.Context, b *Broker, _ *requestContext, req kmsg.Request) (kmsg.Response, error) {
	return b.groups.LeaveGroup(ctx, req.(*kmsg.LeaveGroupRequest)), nil
}
