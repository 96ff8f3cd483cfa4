package server

import (
	"context"
	"time"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ControlledShutdown: v0-3 (inter-broker)
//
// Behaviour:
// * A broker stopping on SIGTERM asks the controller to move leadership of
//   its partitions to other ISR members first; the answer says how many it
//   still leads (partitions with no other ISR member stay). Non-controllers
//   answer NOT_CONTROLLER.
// * Authorization: ClusterAction on the cluster (brokers), else
//   CLUSTER_AUTHORIZATION_FAILED and nothing moves.

func init() { registerAPI(kmsg.ControlledShutdown.Int16(), 0, 3, handleControlledShutdown) }

func handleControlledShutdown(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ControlledShutdownRequest)
	resp := req.ResponseKind().(*kmsg.ControlledShutdownResponse)
	if !b.authorizeCluster(rc, acl.OpClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	remaining, err := b.controller.ControlledShutdown(req.BrokerID)
	if err != nil {
		resp.ErrorCode = protocol.ErrorCode(err)
		return resp, nil
	}
	for range remaining {
		resp.PartitionsRemaining = append(resp.PartitionsRemaining, kmsg.NewControlledShutdownResponsePartitionsRemaining())
	}
	return resp, nil
}

// controlledShutdownTimeout bounds moving leadership away before stopping.
const controlledShutdownTimeout = 15 * time.Second

// controlledShutdown asks the controller (perhaps this broker) to move
// leadership elsewhere, then waits until this broker's view shows it, so
// clients are sent away with NOT_LEADER_OR_FOLLOWER rather than time out.
// Failures are logged: the broker stops anyway.
func (b *Broker) controlledShutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), controlledShutdownTimeout)
	defer cancel()
	for attempt := 0; ctx.Err() == nil; attempt++ {
		remaining, err := b.requestControlledShutdown(ctx)
		if err == nil {
			b.logger.Info("controlled shutdown: leadership moved", "still_leading", remaining)
			break
		}
		b.logger.Warn("controlled shutdown request failed; retrying", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
	// Wait for the view that moves the partitions (the controller sends
	// it before answering, but another broker's view travels separately).
	for ctx.Err() == nil {
		next := b.nextView()
		if !b.leadsAnyMovable() {
			return
		}
		select {
		case <-next:
		case <-ctx.Done():
		}
	}
	b.logger.Warn("controlled shutdown: still leading partitions at the deadline")
}

func (b *Broker) requestControlledShutdown(ctx context.Context) (int, error) {
	if b.controller.IsController() {
		return b.controller.ControlledShutdown(b.self.ID)
	}
	conn, _, err := b.controllerConn()
	if err != nil {
		return -1, err
	}
	req := kmsg.NewPtrControlledShutdownRequest()
	req.Version = 3
	req.BrokerID, req.BrokerEpoch = b.self.ID, -1
	resp, err := conn.Request(ctx, req)
	if err != nil {
		return -1, err
	}
	cr := resp.(*kmsg.ControlledShutdownResponse)
	if err := kerr.ErrorForCode(cr.ErrorCode); err != nil {
		return -1, err
	}
	return len(cr.PartitionsRemaining), nil
}

// leadsAnyMovable reports whether this broker still leads a partition that
// has another ISR member to take over.
func (b *Broker) leadsAnyMovable() bool {
	for _, t := range b.controller.Metadata().Topics {
		for _, ps := range t.Partitions {
			if ps.Leader == b.self.ID && len(ps.ISR) > 1 {
				return true
			}
		}
	}
	return false
}
