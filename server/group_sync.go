package server

// SyncGroup v0-v5: blocks until the leader's assignment is stored in __consumer_offsets.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.SyncGroup.Int16(), 0, 5, handleSyncGroup) }

func handleSyncGroup(ctx context.Context, b *Broker, _ *requestContext, req kmsg.Request) (kmsg.Response, error) {
	return b.groups.SyncGroup(ctx, req.(*kmsg.SyncGroupRequest)), nil
}
