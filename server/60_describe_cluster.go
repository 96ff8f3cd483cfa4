package server

import (
	"context"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster: v0-1
//
// Behaviour:
// * The live brokers, the controller id and the cluster id, from the
//   controller's current metadata.
// * ClusterAuthorizedOperations, when asked for: 0 without Describe on the
//   cluster, else the principal's operations on it (every one Kafka
//   defines without an authorizer); -2147483648 when not asked, as Kafka's
//   AuthHelper.computeDescribeClusterResponse.
//
// Version notes:
// * v1: EndpointType: 1 (brokers) is served; 2 (controllers) is
//   UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker answers.

func init() { registerAPI(kmsg.DescribeCluster.Int16(), 0, 1, handleDescribeCluster) }

func handleDescribeCluster(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)

	if req.Version >= 1 {
		resp.EndpointType = req.EndpointType
		if req.EndpointType != 1 {
			resp.ErrorCode = kerr.UnsupportedEndpointType.Code
			msg := "kbroker brokers only describe brokers (endpoint type 1)"
			resp.ErrorMessage = &msg
			return resp, nil
		}
	}
	md := b.controller.Metadata()
	resp.ClusterID = md.ClusterID
	resp.ControllerID = md.ControllerID
	for _, bi := range md.Brokers {
		ep, ok := b.endpointFor(rc, bi)
		if !ok {
			continue // not reachable on this client's listener
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID = bi.ID
		rb.Host = ep.Host
		rb.Port = ep.Port
		if bi.Rack != "" {
			rack := bi.Rack
			rb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	resp.ClusterAuthorizedOperations = unrequestedOperations
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = 0
		if b.authorizeCluster(rc, acl.OpDescribe) {
			resp.ClusterAuthorizedOperations = b.authorizedOperations(rc, acl.ResourceCluster, acl.ClusterName)
		}
	}
	return resp, nil
}
