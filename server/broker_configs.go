package server

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/controller"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Dynamic broker configs: AlterConfigs and IncrementalAlterConfigs on a
// BROKER resource ("" for the cluster-wide defaults, or this broker's id)
// change /config/brokers through the controller, as Kafka's ZooKeeper-mode
// brokers write /config/brokers/<id> (Kafka writes it from any broker;
// kbroker keeps every write with the controller, fenced on its epoch).
// Every broker applies them from the view it is sent (replication
// throttles: replication_throttle.go).

// brokerConfigEntity is the entity of a BROKER resource name.
func brokerConfigEntity(name string) string {
	if name == "" {
		return controller.DefaultBrokerEntity
	}
	return name
}

// changeBrokerConfigs applies change to the dynamic configs of the broker
// resource name, after checking the result as Kafka does (unsupported
// names and bad values: INVALID_REQUEST, nothing changed). On a broker
// that is not the controller it computes the whole new config from its
// view and sends it to the controller as an AlterConfigs.
func (b *Broker) changeBrokerConfigs(name string, change configChange, validateOnly bool) error {
	entity := brokerConfigEntity(name)
	checked := func(current map[string]string) (map[string]string, error) {
		if current == nil {
			current = map[string]string{}
		}
		next, err := change(current, nil)
		if err != nil {
			return nil, err
		}
		if err := config.CheckDynamicBrokerConfigs(next); err != nil {
			return nil, fmt.Errorf("%w: invalid config value for resource broker %q: %v", kerr.InvalidRequest, name, err)
		}
		return next, nil
	}
	err := b.controller.UpdateBrokerConfigs(entity, checked, validateOnly)
	if !errors.Is(err, kerr.NotController) {
		return err
	}
	next, err := checked(maps.Clone(b.controller.Metadata().BrokerConfigs[entity]))
	if err != nil || validateOnly {
		return err
	}
	return b.forwardConfigs(kmsg.ConfigResourceTypeBroker, name, next, func(md *controller.Metadata) bool {
		return maps.Equal(md.BrokerConfigs[entity], next)
	})
}

// forwardConfigs sends a resource's whole new config to the controller as
// an AlterConfigs (which replaces it), on a broker that is not the
// controller, and waits (bounded) until this broker's view shows it. The
// read of the current config (this broker's view) and the write are not
// one step: a change made elsewhere in between is overwritten, as with
// Kafka's ZooKeeper-mode brokers, which read and write the znode
// unconditionally.
func (b *Broker) forwardConfigs(rtype kmsg.ConfigResourceType, name string, next map[string]string, shows func(*controller.Metadata) bool) error {
	req := kmsg.NewPtrAlterConfigsRequest()
	req.Version = 1
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = rtype, name
	for k, v := range next {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	what := fmt.Sprintf("altering the configs of %v %q", rtype, name)
	kresp, ctrl, err := b.forwardToController(ctx, what, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.AlterConfigsResponse)
	if len(resp.Resources) != 1 {
		return fmt.Errorf("%w: controller %d answered %d resources for one", kerr.UnknownServerError, ctrl, len(resp.Resources))
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		msg := ""
		if resp.Resources[0].ErrorMessage != nil {
			msg = *resp.Resources[0].ErrorMessage
		}
		return fmt.Errorf("%w: through controller %d: %s", err, ctrl, msg)
	}
	b.awaitView(ctx, ctrl, what, shows)
	return nil
}
