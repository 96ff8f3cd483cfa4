package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster: v0-1
//
// Behaviour:
// * The live brokers, the controller id and the cluster id, from the
//   controller's current metadata.
// * ClusterAuthorizedOperations: kbroker has no authorizer, so every
//   operation on the CLUSTER resource is allowed when asked for, and
//   -2147483648 (not requested) otherwise, as Kafka.
//
// Version notes:
// * v1: EndpointType: 1 (brokers) is served; 2 (controllers) is
//   UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker answers.

func init() { registerAPI(kmsg.DescribeCluster.Int16(), 0, 1, handleDescribeCluster) }

// clusterAuthorizedOperations is the bit set of the operations Kafka
// allows on the CLUSTER resource (AclEntry.supportedOperations): CREATE,
// ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS and
// IDEMPOTENT_WRITE, each as 1<<operation.
const clusterAuthorizedOperations int32 = 1<<kmsg.ACLOperationCreate |
	1<<kmsg.ACLOperationAlter |
	1<<kmsg.ACLOperationDescribe |
	1<<kmsg.ACLOperationClusterAction |
	1<<kmsg.ACLOperationDescribeConfigs |
	1<<kmsg.ACLOperationAlterConfigs |
	1<<kmsg.ACLOperationIdempotentWrite

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
	resp.ClusterAuthorizedOperations = -2147483648
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterAuthorizedOperations
	}
	return resp, nil
}
