package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/kafkaconn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// forwardTimeout bounds creating a topic through another broker, including
// waiting for its view to arrive here.
const forwardTimeout = 10 * time.Second

// createTopicAnywhere creates a topic for the broker's own needs (auto
// creation, __consumer_offsets): through the local controller, or, in a
// cluster where another broker is the controller, by sending it
// CreateTopics, as Kafka brokers forward auto-creation. It returns once
// this broker's view has the topic; an existing topic is no error.
func (b *Broker) createTopicAnywhere(req controller.CreateTopicRequest) (*controller.Topic, error) {
	t, err := b.controller.CreateTopic(req, false)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		if t := b.controller.Metadata().Topics[req.Name]; t != nil {
			return t, nil
		}
	}
	if !errors.Is(err, kerr.NotController) {
		return t, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	conn, ctrl, err := b.controllerConn()
	if err != nil {
		return nil, fmt.Errorf("%w: creating topic %q: %v", kerr.LeaderNotAvailable, req.Name, err)
	}
	creq := kmsg.NewPtrCreateTopicsRequest()
	creq.Version = 7
	creq.TimeoutMillis = int32(forwardTimeout / time.Millisecond)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = req.Name, req.NumPartitions, req.ReplicationFactor
	for k, v := range req.Configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, &v
		rt.Configs = append(rt.Configs, c)
	}
	creq.Topics = append(creq.Topics, rt)
	resp, err := conn.Request(ctx, creq)
	if err != nil {
		return nil, fmt.Errorf("%w: forwarding the creation of %q to controller %d: %v", kerr.LeaderNotAvailable, req.Name, ctrl.ID, err)
	}
	for _, st := range resp.(*kmsg.CreateTopicsResponse).Topics {
		if err := kerr.ErrorForCode(st.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return nil, fmt.Errorf("creating %q through controller %d: %w", req.Name, ctrl.ID, err)
		}
	}
	for {
		next := b.nextView()
		if t := b.controller.Metadata().Topics[req.Name]; t != nil {
			return t, nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: topic %q created but not yet known here", kerr.LeaderNotAvailable, req.Name)
		}
	}
}

// controllerConn returns the broker's connection to the current
// controller, shared by ISR changes, forwarded topic creation and
// controlled shutdown (requests on it are serialised).
func (b *Broker) controllerConn() (*kafkaconn.Conn, controller.BrokerInfo, error) {
	md := b.controller.Metadata()
	ctrl, ok := md.Broker(md.ControllerID)
	if !ok {
		return nil, ctrl, fmt.Errorf("%w: no controller known", kerr.NotController)
	}
	addr := net.JoinHostPort(ctrl.Host, strconv.Itoa(int(ctrl.Port)))
	b.ctrlConnMu.Lock()
	defer b.ctrlConnMu.Unlock()
	if b.ctrlConn == nil || b.ctrlConn.Addr() != addr {
		if b.ctrlConn != nil {
			b.ctrlConn.Close()
		}
		b.ctrlConn = kafkaconn.New(addr, "kbroker-"+strconv.Itoa(int(b.self.ID))).WithSecurity(b.peerSecurity)
	}
	return b.ctrlConn, ctrl, nil
}

// forwardToController sends req (an admin change this broker is not the
// controller for) to the controller over the controller connection. what
// names the change in errors, which are NOT_CONTROLLER: the client
// retries.
func (b *Broker) forwardToController(ctx context.Context, what string, req kmsg.Request) (kmsg.Response, int32, error) {
	conn, ctrl, err := b.controllerConn()
	if err != nil {
		return nil, -1, fmt.Errorf("%w: %s: %v", kerr.NotController, what, err)
	}
	if ctrl.ID == b.self.ID {
		// This broker's view still names itself, but it no longer is the
		// controller: sending the request to itself would only wait on
		// its own controller connection.
		return nil, ctrl.ID, fmt.Errorf("%w: broker %d is no longer the controller and does not know its successor yet", kerr.NotController, b.self.ID)
	}
	resp, err := conn.Request(ctx, req)
	if err != nil {
		return nil, ctrl.ID, fmt.Errorf("%w: forwarding to controller %d: %v", kerr.NotController, ctrl.ID, err)
	}
	return resp, ctrl.ID, nil
}

// awaitView waits until shows holds for this broker's view, or ctx ends:
// then it logs that what was done through controller ctrl is not in the
// view yet and returns (the change is made; the view follows).
func (b *Broker) awaitView(ctx context.Context, ctrl int32, what string, shows func(*controller.Metadata) bool) {
	for {
		next := b.nextView()
		if shows(b.controller.Metadata()) {
			return
		}
		select {
		case <-next:
		case <-ctx.Done():
			b.logger.Warn(what+" through the controller but not yet in this broker's view; answering anyway", "controller", ctrl)
			return
		}
	}
}
