package server

// OffsetCommit v0-v9: durable (acks=all to __consumer_offsets) before acknowledged. v10 (topic ids) is not served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.OffsetCommit.Int16(), 0, 9, handleOffsetCommit) }

func handleOffsetCommit(ctx context.Context, b *Broker, _ *requestContext, req kmsg.Request) (kmsg.Response, error) {
	return b.groups.OffsetCommit(ctx, req.(*kmsg.OffsetCommitRequest)), nil
}
