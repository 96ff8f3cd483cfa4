package zk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	gozk "github.com/go-zookeeper/zk"
)

// Client quota entities, as Kafka's ZooKeeper mode keeps them
// (ZkData.scala ConfigEntityZNode, AdminZkClient.changeEntityConfig,
// ClientQuotaManager's precedence list):
//
//	/config/users/<user>                       user (users.go: SCRAM credentials share it)
//	/config/users/<default>                    default user
//	/config/users/<user>/clients/<client>      user + client id
//	/config/users/<user>/clients/<default>     user + default client id
//	/config/users/<default>/clients/<client>   default user + client id
//	/config/users/<default>/clients/<default>  default user + default client id
//	/config/clients/<client>                   client id
//	/config/clients/<default>                  default client id
//
// each {"version":1,"config":{"producer_byte_rate":"1048576",...}}, names
// sanitized as users are (Sanitize), and each change followed by a
// /config/changes notification naming the entity path: users/<u>,
// users/<u>/clients/<c> or clients/<c>. <default> is Kafka's
// ConfigEntityName.Default written as is; Sanitize never produces it ('<'
// is encoded), which is how Kafka tells the default user from a user named
// "<default>" (%3Cdefault%3E). kbroker's views key entities by their names,
// so they cannot: a znode whose name decodes to "<default>" is left out
// (with a warning), and the controller refuses to create one.

// DefaultEntity is the name of a default quota entity (Kafka's
// ConfigEntityName.Default), in znode names, entity paths and kbroker's
// views.
const DefaultEntity = "<default>"

// Paths and entity types of client quota configs.
const (
	ClientConfigsPath = ConfigPath + "/clients"
	// ClientEntityType is the entity type of client id configs (Kafka's
	// ConfigType.Client), in entity paths and below a user's znode.
	ClientEntityType = "clients"
)

// Entity is one config entity of /config/users or /config/clients: a user
// (Client ""), a client id (User ""), or both. Names are as clients see
// them (not sanitized); DefaultEntity names a default entity.
type Entity struct {
	User   string
	Client string
}

// String names the entity for logs and messages, as Kafka's
// KafkaQuotaEntity: "user alice client-id app", "default user".
func (e Entity) String() string {
	part := func(kind, name string) string {
		if name == DefaultEntity {
			return "default " + kind
		}
		return kind + " " + name
	}
	var parts []string
	if e.User != "" {
		parts = append(parts, part("user", e.User))
	}
	if e.Client != "" {
		parts = append(parts, part("client-id", e.Client))
	}
	return strings.Join(parts, " ")
}

// EntityPath is the entity path a change notification names for e:
// users/<u>, users/<u>/clients/<c> or clients/<c>, sanitized.
func (e Entity) EntityPath() string {
	switch {
	case e.User != "" && e.Client != "":
		return UserEntityType + "/" + entityZNodeName(e.User) + "/" + ClientEntityType + "/" + entityZNodeName(e.Client)
	case e.User != "":
		return UserEntityType + "/" + entityZNodeName(e.User)
	default:
		return ClientEntityType + "/" + entityZNodeName(e.Client)
	}
}

// ZNodePath is e's config znode: /config/<entity path>.
func (e Entity) ZNodePath() string { return ConfigPath + "/" + e.EntityPath() }

// entityZNodeName is a user's or client id's znode name: sanitized, but
// DefaultEntity as is.
func entityZNodeName(name string) string {
	if name == DefaultEntity {
		return name
	}
	return Sanitize(name)
}

// entityName decodes a znode name written by entityZNodeName (or Kafka).
// A name that decodes to "<default>" without being the default entity is
// an error: kbroker's views could not tell it from the default.
func entityName(znode string) (string, error) {
	if znode == DefaultEntity {
		return znode, nil
	}
	name, err := Desanitize(znode)
	if err != nil {
		return "", err
	}
	if name == DefaultEntity || name == "" {
		return "", fmt.Errorf("znode name %q decodes to %q, which kbroker cannot tell from the default entity or no entity", znode, name)
	}
	return name, nil
}

// ParseEntityPath reads the entity a change notification names: users/<u>,
// users/<u>/clients/<c> or clients/<c>. ok is false for entities other
// than users and client ids (topics, brokers, ips); a users or clients
// path of another shape, or a name that does not decode, is an error.
func ParseEntityPath(entityPath string) (e Entity, ok bool, err error) {
	parts := strings.Split(entityPath, "/")
	bad := func(why string) (Entity, bool, error) {
		return Entity{}, false, fmt.Errorf("entity path %q: %s", entityPath, why)
	}
	switch {
	case parts[0] == UserEntityType && len(parts) == 2:
		e.User, err = entityName(parts[1])
	case parts[0] == UserEntityType && len(parts) == 4 && parts[2] == ClientEntityType:
		if e.User, err = entityName(parts[1]); err == nil {
			e.Client, err = entityName(parts[3])
		}
	case parts[0] == ClientEntityType && len(parts) == 2:
		e.Client, err = entityName(parts[1])
	case parts[0] == UserEntityType || parts[0] == ClientEntityType:
		return bad("not users/<user>, users/<user>/clients/<client> or clients/<client>")
	default:
		return Entity{}, false, nil
	}
	if err != nil {
		return bad(err.Error())
	}
	return e, true, nil
}

// entityNames decodes the children of a users or clients directory,
// sorted, leaving out (with a warning) a name that does not decode.
func (s *Store) entityNames(ctx context.Context, dir string) ([]string, error) {
	znodes, err := s.children(ctx, dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(znodes))
	for _, z := range znodes {
		n, err := entityName(z)
		if err != nil {
			s.logger.Warn("ignoring a config entity znode", "path", s.abs(dir+"/"+z), "err", err)
			continue
		}
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// Clients lists the client ids with a znode under /config/clients,
// sorted; the default client id is DefaultEntity.
func (s *Store) Clients(ctx context.Context) ([]string, error) {
	return s.entityNames(ctx, ClientConfigsPath)
}

// UserClients lists the client ids with a znode under
// /config/users/<user>/clients, sorted.
func (s *Store) UserClients(ctx context.Context, user string) ([]string, error) {
	return s.entityNames(ctx, Entity{User: user}.ZNodePath()+"/"+ClientEntityType)
}

// EntityConfig reads an entity's config and its znode version, the
// condition of the next SetEntityConfig; a missing znode is an empty
// config at version -1, a znode without data (a parent Kafka made) an
// empty config at its version. Errors never quote the content (a user's
// holds SCRAM keys).
func (s *Store) EntityConfig(ctx context.Context, e Entity) (map[string]string, int32, error) {
	path := e.ZNodePath()
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

// SetEntityConfig replaces an entity's config, if its znode is still at
// version (-1: it must not exist), and creates the change notification
// for it, in one transaction fenced on the controller epoch, as Kafka
// 3.9's AdminZkClient.changeEntityConfig:
//   - a new user + client entity also creates the user's znode and its
//     clients directory where missing, without data (createRecursive);
//   - an empty config deletes the znode when it has no children
//     (tryCleanQuotaNodes), and for a user + client entity also the
//     clients directory it leaves empty and then the user's znode, if
//     that holds no config either; with children it is written as
//     {"version":1,"config":{}}. An empty config for an absent entity
//     writes nothing.
//
// A znode changed meanwhile (or a sibling appearing under a directory
// being removed) is ErrVersionConflict: read again and redo the change.
func (s *Store) SetEntityConfig(ctx context.Context, epochZkVersion int32, e Entity, configs map[string]string, version int32) error {
	if e.User == "" && e.Client == "" {
		return errors.New("set entity config: no user and no client id")
	}
	path := e.ZNodePath()
	var ops []any
	switch {
	case len(configs) == 0 && version < 0:
		return nil
	case len(configs) == 0:
		var err error
		if ops, err = s.cleanupOps(ctx, e, version); err != nil {
			return err
		}
	case version < 0:
		if e.User != "" && e.Client != "" {
			user := Entity{User: e.User}.ZNodePath()
			for _, dir := range []string{user, user + "/" + ClientEntityType} {
				if _, _, err := s.get(ctx, dir); errors.Is(err, ErrNoNode) {
					ops = append(ops, s.createOp(dir, nil, 0))
				} else if err != nil {
					return fmt.Errorf("set config of %s: %w", e, err)
				}
			}
		}
		ops = append(ops, s.createOp(path, EncodeUserConfig(configs), 0))
	default:
		ops = append(ops, s.setOp(path, EncodeUserConfig(configs), version))
	}
	ops = append(ops, s.createOp(ConfigChangePath(ConfigChangeSequencePrefix), EncodeConfigChangeNotification(e.EntityPath()), gozk.FlagSequence))
	_, err := s.fencedMulti(ctx, epochZkVersion, ops...)
	var me *MultiError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &me) && me.Index < len(ops)-1 &&
		(errors.Is(me.Err, gozk.ErrNodeExists) || errors.Is(me.Err, gozk.ErrBadVersion) || errors.Is(me.Err, gozk.ErrNoNode) || errors.Is(me.Err, gozk.ErrNotEmpty)):
		return fmt.Errorf("set config of %s at version %d: %w", e, version, ErrVersionConflict)
	default:
		return fmt.Errorf("set config of %s: %w", e, err)
	}
}

// cleanupOps are the operations that empty an entity's config at version:
// deletions as tryCleanQuotaNodes makes them, or an empty config when the
// znode has children. Deleting a directory fails (ErrNotEmpty) if a child
// appeared meanwhile, so none is lost to a race.
func (s *Store) cleanupOps(ctx context.Context, e Entity, version int32) ([]any, error) {
	path := e.ZNodePath()
	children, err := s.children(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("set config of %s: %w", e, err)
	}
	if len(children) > 0 {
		return []any{s.setOp(path, EncodeUserConfig(nil), version)}, nil
	}
	ops := []any{s.deleteOp(path, version)}
	if e.User == "" || e.Client == "" {
		return ops, nil
	}
	user := Entity{User: e.User}.ZNodePath()
	clients := user + "/" + ClientEntityType
	siblings, err := s.children(ctx, clients)
	if err != nil {
		return nil, fmt.Errorf("set config of %s: %w", e, err)
	}
	if !slices.Equal(siblings, []string{entityZNodeName(e.Client)}) {
		return ops, nil
	}
	ops = append(ops, s.deleteOp(clients, -1))
	data, stat, err := s.get(ctx, user)
	if err != nil {
		return nil, fmt.Errorf("set config of %s: %w", e, err)
	}
	userConfig, err := decodeEntityConfig(user, data)
	if err != nil {
		// A damaged user znode stays for someone to look at.
		return ops, nil
	}
	userChildren, err := s.children(ctx, user)
	if err != nil {
		return nil, fmt.Errorf("set config of %s: %w", e, err)
	}
	if len(userConfig) == 0 && slices.Equal(userChildren, []string{ClientEntityType}) {
		ops = append(ops, s.deleteOp(user, stat.Version))
	}
	return ops, nil
}
