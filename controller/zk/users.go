package zk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// User configs and config change notifications, as Kafka's ZooKeeper mode
// keeps them (ZkData.scala ConfigEntityZNode and
// ConfigEntityChangeNotificationSequenceZNode, AdminZkClient.changeEntityConfig):
//
//	/config/users/<sanitized user>            {"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=4096","producer_byte_rate":"1024"}}
//	/config/changes/config_change_<10 digits> {"version":2,"entity_path":"users/<sanitized user>"}
//
// A user's znode holds its SCRAM credentials (one key per mechanism) and
// its quotas side by side; whoever changes one part keeps the others.
// Every change writes a sequential notification, which is how Kafka's
// brokers (and kbroker's controller) learn of a change made by another
// tool, such as kafka-configs.sh --zookeeper.
//
// A user znode's content is key material (a stored and a server key let
// whoever holds them brute-force the password offline and impersonate the
// broker): errors about it never quote it.

// Paths of user configs and config change notifications.
const (
	UserConfigsPath            = ConfigPath + "/users"
	ConfigChangeSequencePrefix = "config_change_"
	// UserEntityType is the entity type of user configs, the first part
	// of a notification's entity path (Kafka's ConfigType.User).
	UserEntityType = "users"
)

// UserConfigPath is /config/users/<sanitized user>; the default user
// (DefaultEntity) is /config/users/<default>.
func UserConfigPath(user string) string { return Entity{User: user}.ZNodePath() }

// UserEntityPath is the entity path a change notification names for user:
// users/<sanitized user>.
func UserEntityPath(user string) string { return Entity{User: user}.EntityPath() }

// ConfigChangePath is /config/changes/<name>.
func ConfigChangePath(name string) string { return ConfigChangesPath + "/" + name }

// Sanitize encodes a user principal or client id for use as a znode name,
// as Kafka's Sanitizer.sanitize: Java's URLEncoder (UTF-8; letters, digits,
// '.', '-', '_' kept; every other byte as %XX in upper-case hex), with '*'
// also encoded and a space as %20 instead of '+'.
func Sanitize(name string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-', c == '_':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		}
	}
	return b.String()
}

// Desanitize decodes a znode name written by Sanitize (or by Kafka), as
// Kafka's Sanitizer.desanitize (Java's URLDecoder: '+' is a space).
func Desanitize(name string) (string, error) {
	s, err := url.QueryUnescape(name)
	if err != nil {
		return "", fmt.Errorf("desanitize znode name %q: %w", name, err)
	}
	return s, nil
}

// EncodeUserConfig encodes /config/users/<u> as ConfigEntityZNode.encode:
// {"version":1,"config":{...}}, keys sorted.
func EncodeUserConfig(configs map[string]string) []byte { return EncodeTopicConfig(configs) }

// DecodeUserConfig decodes /config/users/<u> as ConfigEntityZNode.decode:
// an empty znode (a parent Kafka created for /clients below it) or one
// without "config" is an empty config; every value must be a string.
// Errors never quote the content.
func DecodeUserConfig(user string, data []byte) (map[string]string, error) {
	return decodeEntityConfig(UserConfigPath(user), data)
}

// decodeEntityConfig decodes the config znode of a user or client entity
// at path as ConfigEntityZNode.decode, never quoting the content.
func decodeEntityConfig(path string, data []byte) (map[string]string, error) {
	configs := map[string]string{}
	if len(strings.TrimSpace(string(data))) == 0 {
		return configs, nil
	}
	var raw struct {
		Config map[string]json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		// json's messages may quote a character of the input, not more;
		// keep only the kind of error.
		return nil, hiddenMalformed(path, "invalid JSON")
	}
	for k, v := range raw.Config {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, hiddenMalformed(path, "config %q is not a string", k)
		}
		configs[k] = s
	}
	return configs, nil
}

// EncodeConfigChangeNotification encodes a change notification as
// ConfigEntityChangeNotificationSequenceZNode.encode:
// {"version":2,"entity_path":"users/alice"}.
func EncodeConfigChangeNotification(entityPath string) []byte {
	var o object
	o.add("version", 2).add("entity_path", entityPath)
	return o.bytes()
}

// DecodeConfigChangeNotification decodes the notification at path into
// the entity path it names: version 2's entity_path, or version 1's
// entity_type and entity_name (Kafka before 0.10.1) joined by '/'.
func DecodeConfigChangeNotification(path string, data []byte) (string, error) {
	var raw struct {
		Version    *int    `json:"version"`
		EntityPath *string `json:"entity_path"`
		EntityType *string `json:"entity_type"`
		EntityName *string `json:"entity_name"`
	}
	if err := unmarshal(path, data, &raw); err != nil {
		return "", err
	}
	switch {
	case raw.Version == nil:
		return "", malformed(path, data, `no "version"`)
	case *raw.Version == 2 && raw.EntityPath != nil && *raw.EntityPath != "":
		return *raw.EntityPath, nil
	case *raw.Version == 1 && raw.EntityType != nil && raw.EntityName != nil:
		return *raw.EntityType + "/" + *raw.EntityName, nil
	}
	return "", malformed(path, data, "version %d without its entity fields", *raw.Version)
}

// ConfigChangeSequence is the sequence number of a notification named
// config_change_<10 digits>; ok is false for any other name.
func ConfigChangeSequence(name string) (seq int64, ok bool) {
	digits, found := strings.CutPrefix(name, ConfigChangeSequencePrefix)
	if !found || digits == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// ConfigChange is one notification under /config/changes.
type ConfigChange struct {
	Name       string // config_change_<seq>
	EntityPath string // users/<sanitized user>, topics/<t>, ...
	Created    time.Time
}

// Users lists the users that have a znode under /config/users,
// desanitized and sorted. Kafka's default-quota entity appears as
// DefaultEntity. A name that does not desanitize, or decodes to
// "<default>" without being the default entity, is left out with a
// warning: it cannot be a user kbroker's views can name.
func (s *Store) Users(ctx context.Context) ([]string, error) {
	return s.entityNames(ctx, UserConfigsPath)
}

// UserConfig reads /config/users/<user> and its znode version, the
// condition of the next SetUserConfig; a missing znode is an empty config
// at version -1.
func (s *Store) UserConfig(ctx context.Context, user string) (map[string]string, int32, error) {
	return s.EntityConfig(ctx, Entity{User: user})
}

// SetUserConfig replaces /config/users/<user> with configs, if the znode
// is still at version (-1: it must not exist), and creates the change
// notification for it, in one transaction fenced on the controller epoch.
// A changed znode is ErrVersionConflict: read it again and redo the change,
// so that keys another tool wrote meanwhile (quotas) are kept. An empty
// configs leaves {"version":1,"config":{}}, as Kafka does.
func (s *Store) SetUserConfig(ctx context.Context, epochZkVersion int32, user string, configs map[string]string, version int32) error {
	if user == "" {
		return errors.New("set user config: empty user name")
	}
	path := UserConfigPath(user)
	var op any
	if version < 0 {
		op = s.createOp(path, EncodeUserConfig(configs), 0)
	} else {
		op = s.setOp(path, EncodeUserConfig(configs), version)
	}
	note := s.createOp(ConfigChangePath(ConfigChangeSequencePrefix), EncodeConfigChangeNotification(UserEntityPath(user)), gozk.FlagSequence)
	_, err := s.fencedMulti(ctx, epochZkVersion, op, note)
	var me *MultiError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &me) && me.Index == 0 && (errors.Is(me.Err, gozk.ErrNodeExists) || errors.Is(me.Err, gozk.ErrBadVersion) || errors.Is(me.Err, gozk.ErrNoNode)):
		return fmt.Errorf("set config of user %q at version %d: %w", user, version, ErrVersionConflict)
	default:
		return fmt.Errorf("set config of user %q: %w", user, err)
	}
}

// WatchConfigChanges delivers the names of the notifications under
// /config/changes, sorted (so in sequence order), now and after every
// change of its children, until ctx ends; then it closes the channel. Only
// the latest list is kept for a slow reader; notifications stay until
// purged, so none is missed.
func (s *Store) WatchConfigChanges(ctx context.Context) (<-chan []string, error) {
	return watchLoop(ctx, s, func() ([]string, <-chan gozk.Event, error) {
		names, _, ev, err := s.conn.ChildrenW(s.abs(ConfigChangesPath))
		if errors.Is(err, gozk.ErrNoNode) {
			// Deleted by hand: create it again, as Kafka's brokers do at
			// startup, rather than fail every controller takeover.
			if _, cerr := s.conn.Create(s.abs(ConfigChangesPath), nil, 0, acl); cerr != nil && !errors.Is(cerr, gozk.ErrNodeExists) {
				return nil, nil, cerr
			}
			names, _, ev, err = s.conn.ChildrenW(s.abs(ConfigChangesPath))
		}
		if err != nil {
			return nil, nil, err
		}
		slices.Sort(names)
		return names, ev, nil
	}, slices.Equal)
}

// ConfigChange reads one notification; ErrNoNode if it was purged.
func (s *Store) ConfigChange(ctx context.Context, name string) (ConfigChange, error) {
	path := ConfigChangePath(name)
	data, stat, err := s.get(ctx, path)
	if err != nil {
		return ConfigChange{}, err
	}
	c := ConfigChange{Name: name, Created: time.UnixMilli(stat.Ctime)}
	c.EntityPath, err = DecodeConfigChangeNotification(path, data)
	return c, s.malformedAt(err)
}

// DeleteConfigChanges removes notifications everyone has seen (Kafka's
// brokers purge those older than 15 minutes), fenced on the controller
// epoch; already deleted ones are fine.
func (s *Store) DeleteConfigChanges(ctx context.Context, epochZkVersion int32, names []string) error {
	for _, n := range names {
		_, err := s.fencedMulti(ctx, epochZkVersion, s.deleteOp(ConfigChangePath(n), -1))
		if err != nil && !errors.Is(err, gozk.ErrNoNode) {
			return fmt.Errorf("delete config change notification %s: %w", n, err)
		}
	}
	return nil
}
