package server

// JoinGroup v0-v9: the group coordinator's delayed join; blocks until the rebalance's join phase completes. Static members (group.instance.id, v5+) rejoin without a rebalance (KIP-345).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kbroker/kbroker/coordinator"
)

func init() { registerAPI(kmsg.JoinGroup.Int16(), 0, 9, handleJoinGroup) }

func handleJoinGroup(ctx context.Context, b *Broker, rc *requestContext, req kmsg.Request) (kmsg.Response, error) {
	return b.groups.JoinGroup(coordinator.WithClientInfo(ctx, coordinator.ClientInfo{ClientID: rc.clientID}), req.(*kmsg.JoinGroupRequest)), nil
}
