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
