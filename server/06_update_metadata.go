package server

import (
	"context"
	"fmt"
	"slices"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// UpdateMetadata: v0-8 (inter-broker)
//
// Behaviour:
// * The controller sends every broker the whole cluster view (brokers,
//   topics, partition leaders, leader epochs, ISRs, topic configs) with
//   this request; the broker takes its partition roles from it.
// * A view from an older controller epoch gets STALE_CONTROLLER_EPOCH, so a
//   deposed controller changes nothing.
// * A view names the deleted topics some replica has not confirmed; the
//   broker deletes every replica of them it keeps, and answers
//   KAFKA_STORAGE_ERROR while one remains (the deletion stays pending).
// * Versions before 6 cannot carry topic configs: INVALID_REQUEST. A broker
//   in embedded mode has no controller to hear from: INVALID_REQUEST.
// * Authorization: ClusterAction on the cluster (the controller), else
//   CLUSTER_AUTHORIZATION_FAILED and the view is not looked at.

func init() { registerAPI(kmsg.UpdateMetadata.Int16(), 0, 8, handleUpdateMetadata) }

func handleUpdateMetadata(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.UpdateMetadataRequest)
	resp := req.ResponseKind().(*kmsg.UpdateMetadataResponse)
	if !b.authorizeCluster(rc, acl.OpClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	md, err := controller.DecodeUpdateMetadata(req)
	if err != nil {
		b.logger.Warn("refusing a malformed UpdateMetadata", "controller", req.ControllerID, "err", err)
		resp.ErrorCode = protocol.ErrorCode(fmt.Errorf("%w: %v", kerr.InvalidRequest, err))
		return resp, nil
	}
	if err := b.controller.ApplyUpdate(req.ControllerEpoch, md); err != nil {
		resp.ErrorCode = protocol.ErrorCode(err)
		return resp, nil
	}
	if b.holdsDeleted(md.DeletedTopicIDs) {
		// A deletion failed (or this view repeats one already applied):
		// apply the current view again, which retries it. While a
		// replica of a deleted topic remains there is no
		// acknowledgement: the controller keeps the deletion pending
		// and sends the view again.
		b.applyMetadata(b.controller.Metadata())
		if b.holdsDeleted(md.DeletedTopicIDs) {
			resp.ErrorCode = kerr.KafkaStorageError.Code
		}
	}
	return resp, nil
}

// holdsDeleted reports whether this broker keeps a replica (open or on
// disk) of any of the deleted topics ids.
func (b *Broker) holdsDeleted(ids [][16]byte) bool {
	if len(ids) == 0 {
		return false
	}
	for _, r := range b.replicas.Replicas() {
		if slices.Contains(ids, r.TopicID) {
			return true
		}
	}
	return false
}
