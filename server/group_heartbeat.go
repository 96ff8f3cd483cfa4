package server

// Heartbeat v0-v4.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.Heartbeat.Int16(), 0, 4, handleHeartbeat) }

func handleHeartbeat(ctx context.Context, b *Broker, _ *requestContext, req kmsg.Request) (kmsg.Response, error) {
	return b.groups.Heartbeat(ctx, req.(*kmsg.HeartbeatRequest)), nil
}
