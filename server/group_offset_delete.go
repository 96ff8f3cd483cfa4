package server

// OffsetDelete v0.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.OffsetDelete.Int16(), 0, 0, handleOffsetDelete) }

func handleOffsetDelete(ctx context.Context, b *Broker, _ *requestContext, req kmsg.Request) (kmsg.Response, error) {
	return b.groups.OffsetDelete(ctx, req.(*kmsg.OffsetDeleteRequest)), nil
}
