package server

// OffsetFetch v0-v9 (batched groups from v8; require_stable treated as false). v10 (topic ids) is not served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.OffsetFetch.Int16(), 0, 9, handleOffsetFetch) }

func handleOffsetFetch(ctx context.Context, b *Broker, _ *requestContext, req kmsg.Request) (kmsg.Response, error) {
	return b.groups.OffsetFetch(ctx, req.(*kmsg.OffsetFetchRequest)), nil
}
