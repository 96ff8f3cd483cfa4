package server

// ListGroups v0-v5 (states filter v4, types filter v5: all groups are classic).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.ListGroups.Int16(), 0, 5, handleListGroups) }

func handleListGroups(ctx context.Context, b *Broker, _ *requestContext, req kmsg.Request) (kmsg.Response, error) {
	return b.groups.ListGroups(ctx, req.(*kmsg.ListGroupsRequest)), nil
}
