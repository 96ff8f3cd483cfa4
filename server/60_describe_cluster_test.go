package server

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDescribeCluster(t *testing.T) {
	b := newAdminTestBroker(t)
	run := func(version int16, endpointType int8, authorized bool) *kmsg.DescribeClusterResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = version
		req.EndpointType = endpointType
		req.IncludeClusterAuthorizedOperations = authorized
		resp, err := handleDescribeCluster(context.Background(), b, &requestContext{version: version}, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.DescribeClusterResponse)
	}
	md := b.controller.Metadata()
	resp := run(1, 1, false)
	if resp.ErrorCode != 0 || resp.ClusterID != md.ClusterID || resp.ControllerID != b.self.ID || resp.EndpointType != 1 {
		t.Fatalf("%+v", resp)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != b.self.ID || resp.Brokers[0].Host != b.self.Host ||
		resp.Brokers[0].Port != b.self.Port || resp.Brokers[0].Rack != nil {
		t.Fatalf("brokers: %+v", resp.Brokers)
	}
	if resp.ClusterAuthorizedOperations != -2147483648 {
		t.Fatalf("authorized operations not requested: %d", resp.ClusterAuthorizedOperations)
	}
	if resp := run(0, 0, true); resp.ErrorCode != 0 || resp.ClusterAuthorizedOperations != 1<<5|1<<7|1<<8|1<<9|1<<10|1<<11|1<<12 {
		t.Fatalf("v0 with authorized operations: %+v", resp)
	}
	if resp := run(1, 2, false); resp.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Fatalf("controllers endpoint: %+v", resp)
	}
}
