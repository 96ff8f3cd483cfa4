package server

// DescribeGroups v0-v5. v6 (GROUP_ID_NOT_FOUND for unknown groups) is not served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerAPI(kmsg.DescribeGroups.Int16(), 0, 5, handleDescribeGroups) }

func handleDescribeGroups(ctx context.Context, b *Broker, _ *requestContext, req kmsg.Request) (kmsg.Response, error) {
	return b.groups.DescribeGroups(ctx, req.(*kmsg.DescribeGroupsRequest)), nil
}
