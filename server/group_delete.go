package server

// DeleteGroups v0-v2: Empty groups only; tombstones are written first.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.DeleteGroups.Int16(), 0, 2, handleDeleteGroups) }

func handleDeleteGroups(ctx context.Context, b *Broker, _ *requestContext, req kmsg.Request) (kmsg.Response, error) {
	return b.groups.DeleteGroups(ctx, req.(*kmsg.DeleteGroupsRequest)), nil
}
