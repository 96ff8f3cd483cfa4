package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Dynamic broker configs (Kafka's DynamicBrokerConfig, ZooKeeper mode):
// each broker's own and the cluster-wide defaults, kept in
// /config/brokers/<id> and /config/brokers/<default> (zk/brokerconfigs.go),
// written by the controller and carried in every view, so every broker
// applies the same values: its own entity over the default over its
// server.properties.

// DefaultBrokerEntity names the cluster-wide dynamic defaults.
const DefaultBrokerEntity = zk.DefaultEntity

// DynamicBrokerConfig is the value of key for broker id in the view: its
// own dynamic config, else the cluster-wide dynamic default; ok is false
// when neither sets it.
func (m *Metadata) DynamicBrokerConfig(id int32, key string) (value string, ok bool) {
	if v, ok := m.BrokerConfigs[fmt.Sprint(id)][key]; ok {
		return v, true
	}
	v, ok := m.BrokerConfigs[DefaultBrokerEntity][key]
	return v, ok
}

// readBrokerConfigs reads the dynamic configs of the broker entities named
// (nil: every one the store has) over known (as last seen). A damaged
// znode keeps the entity's known configs and is named in the log, so it
// cannot fail a takeover.
func (a *active) readBrokerConfigs(ctx context.Context, known map[string]map[string]string, entities []string) (map[string]map[string]string, error) {
	out := cloneUserConfigs(known)
	if entities == nil {
		var err error
		if entities, err = a.c.store.BrokerConfigEntities(ctx); err != nil {
			return nil, err
		}
		out = nil
	}
	for _, e := range entities {
		configs, version, err := a.c.store.BrokerConfig(ctx, e)
		switch {
		case errors.Is(err, zk.ErrMalformed):
			a.c.logger.Error("malformed broker config znode; keeping its configs as last known until it is fixed", "entity", e, "err", err)
			configs, version = known[e], 0
		case err != nil:
			return nil, err
		}
		if out == nil {
			out = map[string]map[string]string{}
		}
		if version < 0 {
			delete(out, e)
			continue
		}
		out[e] = maps.Clone(configs)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// UpdateBrokerConfigs changes the dynamic configs of a broker entity (a
// broker id, or DefaultBrokerEntity) to what change makes of the stored
// ones; only the controller can. validateOnly computes and checks the
// change without writing it.
func (c *Cluster) UpdateBrokerConfigs(entity string, change func(current map[string]string) (map[string]string, error), validateOnly bool) error {
	return c.withActive(func(a *active) error { return a.updateBrokerConfigs(entity, change, validateOnly) })
}

func (a *active) updateBrokerConfigs(entity string, change func(map[string]string) (map[string]string, error), validateOnly bool) error {
	if err := zk.ValidBrokerEntity(entity); err != nil {
		return fmt.Errorf("%w: %v", kerr.InvalidRequest, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	// Read fresh, so that what another tool wrote is kept, and write
	// conditionally on the version read.
	for attempt := 0; attempt < 3; attempt++ {
		current, version, err := a.c.store.BrokerConfig(ctx, entity)
		if errors.Is(err, zk.ErrMalformed) {
			return fmt.Errorf("%w: the stored dynamic configs of broker %s are damaged (see the controller's log); fix or delete the znode first", kerr.UnknownServerError, entity)
		}
		if err != nil {
			return fmt.Errorf("%w: reading the dynamic configs of broker %s: %v", kerr.UnknownServerError, entity, err)
		}
		next, err := change(maps.Clone(current))
		if err != nil || validateOnly {
			return err
		}
		if maps.Equal(next, current) && (version >= 0 || len(next) == 0) {
			return nil // nothing changes (and no empty znode is made)
		}
		err = a.c.store.SetBrokerConfig(ctx, a.epochZkVersion, entity, next, version)
		if errors.Is(err, zk.ErrVersionConflict) {
			continue
		}
		if err != nil {
			return a.storeErr(err)
		}
		md := a.md.clone()
		if md.BrokerConfigs == nil {
			md.BrokerConfigs = map[string]map[string]string{}
		}
		md.BrokerConfigs[entity] = maps.Clone(next)
		a.publishLocked(md)
		// Keys only: a dynamic config may one day hold a secret.
		a.c.logger.Info("dynamic broker configs changed", "broker", entity, "keys", slices.Sorted(maps.Keys(next)))
		return nil
	}
	return fmt.Errorf("%w: the dynamic configs of broker %s kept changing under the alteration; try again", kerr.UnknownServerError, entity)
}
