package zk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	gozk "github.com/go-zookeeper/zk"
)

// Dynamic broker configs, as Kafka's ZooKeeper mode keeps them
// (AdminZkClient.changeBrokerConfig, DynamicConfigManager):
//
//	/config/brokers/<id>        one broker's dynamic configs
//	/config/brokers/<default>   the cluster-wide dynamic defaults
//
// each {"version":1,"config":{"follower.replication.throttled.rate":"1048576",...}}
// (kept, with an empty config, when every key is removed, as Kafka does),
// each change followed by a /config/changes notification naming
// brokers/<id> or brokers/<default>.

// Paths and entity type of dynamic broker configs.
const (
	BrokerConfigsPath = ConfigPath + "/brokers"
	// BrokerEntityType is the entity type in change notifications
	// (Kafka's ConfigType.Broker).
	BrokerEntityType = "brokers"
)

// BrokerConfigPath is /config/brokers/<entity>: a broker id or
// DefaultEntity.
func BrokerConfigPath(entity string) string { return BrokerConfigsPath + "/" + entity }

// ValidBrokerEntity checks a broker config entity: DefaultEntity or a
// broker id (a non-negative integer in canonical form).
func ValidBrokerEntity(entity string) error {
	if entity == DefaultEntity {
		return nil
	}
	id, err := strconv.ParseInt(entity, 10, 32)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != entity {
		return fmt.Errorf("broker config entity %q is neither a broker id nor %s", entity, DefaultEntity)
	}
	return nil
}

// ParseBrokerEntityPath reads the broker a change notification names
// (brokers/<id> or brokers/<default>); ok is false for other entity types.
func ParseBrokerEntityPath(entityPath string) (entity string, ok bool, err error) {
	rest, found := strings.CutPrefix(entityPath, BrokerEntityType+"/")
	if !found {
		return "", false, nil
	}
	if err := ValidBrokerEntity(rest); err != nil {
		return "", false, fmt.Errorf("entity path %q: %w", entityPath, err)
	}
	return rest, true, nil
}

// BrokerConfigEntities lists the entities with a znode under
// /config/brokers, sorted; znodes that name neither a broker id nor the
// default are left out with a warning.
func (s *Store) BrokerConfigEntities(ctx context.Context) ([]string, error) {
	znodes, err := s.children(ctx, BrokerConfigsPath)
	if errors.Is(err, ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(znodes))
	for _, z := range znodes {
		if err := ValidBrokerEntity(z); err != nil {
			s.logger.Warn("ignoring a broker config znode", "path", s.abs(BrokerConfigPath(z)), "err", err)
			continue
		}
		out = append(out, z)
	}
	slices.Sort(out)
	return out, nil
}

// BrokerConfig reads a broker entity's dynamic configs and its znode
// version, the condition of the next SetBrokerConfig; a missing znode is
// an empty config at version -1.
func (s *Store) BrokerConfig(ctx context.Context, entity string) (map[string]string, int32, error) {
	path := BrokerConfigPath(entity)
	data, stat, err := s.get(ctx, path)
	if errors.Is(err, ErrNoNode) {
		return map[string]string{}, -1, nil
	}
	if err != nil {
		return nil, 0, err
	}
	cfg, err := decodeEntityConfig(path, data)
	if err != nil {
		return nil, 0, s.malformedAt(err)
	}
	return cfg, stat.Version, nil
}

// SetBrokerConfig replaces a broker entity's dynamic configs, if its znode
// is still at version (-1: it must not exist), and creates the change
// notification for it, in one transaction fenced on the controller epoch.
// A znode changed meanwhile is ErrVersionConflict.
func (s *Store) SetBrokerConfig(ctx context.Context, epochZkVersion int32, entity string, configs map[string]string, version int32) error {
	if err := ValidBrokerEntity(entity); err != nil {
		return err
	}
	path := BrokerConfigPath(entity)
	var ops []any
	if version < 0 {
		if _, _, err := s.get(ctx, BrokerConfigsPath); errors.Is(err, ErrNoNode) {
			ops = append(ops, s.createOp(BrokerConfigsPath, nil, 0))
		} else if err != nil {
			return fmt.Errorf("set config of broker %s: %w", entity, err)
		}
		ops = append(ops, s.createOp(path, EncodeUserConfig(configs), 0))
	} else {
		ops = append(ops, s.setOp(path, EncodeUserConfig(configs), version))
	}
	ops = append(ops, s.createOp(ConfigChangePath(ConfigChangeSequencePrefix), EncodeConfigChangeNotification(BrokerEntityType+"/"+entity), gozk.FlagSequence))
	_, err := s.fencedMulti(ctx, epochZkVersion, ops...)
	var me *MultiError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &me) && me.Index < len(ops)-1 &&
		(errors.Is(me.Err, gozk.ErrNodeExists) || errors.Is(me.Err, gozk.ErrBadVersion) || errors.Is(me.Err, gozk.ErrNoNode)):
		return fmt.Errorf("set config of broker %s at version %d: %w", entity, version, ErrVersionConflict)
	default:
		return fmt.Errorf("set config of broker %s: %w", entity, err)
	}
}
