package coordinator

// Group configs (KIP-848 / KIP-932 dynamic group configs: the GROUP config
// resource of DescribeConfigs / IncrementalAlterConfigs). Kafka keeps them
// in its KRaft metadata; kbroker keeps them with the group in its
// __consumer_offsets partition, so the group's coordinator answers for
// them and they fail over with it. Names and values are validated by the
// server; the coordinator stores what it is given.
//
// Record (kbroker's own key version, skipped by Kafka's readers):
//
//	key:   int16 version 0x4b43 ("KC"), string group
//	value: int16 version 0, int32 n, n x (string name, string value)
//
// A nil value (tombstone) removes every config of the group.

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
)

const groupConfigKeyVersion int16 = 0x4b43

func groupConfigRecordKey(group string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(groupConfigKeyVersion))
	b = binary.BigEndian.AppendUint16(b, uint16(len(group)))
	return append(b, group...)
}

func groupConfigRecordValue(configs map[string]string) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(configs)))
	names := make([]string, 0, len(configs))
	for n := range configs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b = binary.BigEndian.AppendUint16(b, uint16(len(n)))
		b = append(b, n...)
		v := configs[n]
		b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
		b = append(b, v...)
	}
	return b
}

func decodeGroupConfigKey(key []byte) (string, error) {
	if len(key) < 4 || len(key) != 4+int(binary.BigEndian.Uint16(key[2:])) {
		return "", fmt.Errorf("group config key of %d bytes", len(key))
	}
	return string(key[4:]), nil
}

func decodeGroupConfigValue(v []byte) (map[string]string, error) {
	if len(v) < 6 {
		return nil, fmt.Errorf("group config value of %d bytes", len(v))
	}
	n := int(binary.BigEndian.Uint32(v[2:]))
	rest := v[6:]
	str := func() (string, error) {
		if len(rest) < 2 || len(rest) < 2+int(binary.BigEndian.Uint16(rest)) {
			return "", fmt.Errorf("short group config value")
		}
		l := int(binary.BigEndian.Uint16(rest))
		s := string(rest[2 : 2+l])
		rest = rest[2+l:]
		return s, nil
	}
	out := make(map[string]string, n)
	for i := 0; i < n; i++ {
		name, err := str()
		if err != nil {
			return nil, err
		}
		val, err := str()
		if err != nil {
			return nil, err
		}
		out[name] = val
	}
	return out, nil
}

// GroupConfigs returns group's dynamic configs (nil: none). code is
// NOT_COORDINATOR and the like when this broker does not own the group.
func (c *Coordinator) GroupConfigs(group string) (map[string]string, int16) {
	g, code := c.lookup(group, false)
	if code != 0 || g == nil {
		return nil, code
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if code := g.statusLocked(); code != 0 {
		return nil, code
	}
	out := make(map[string]string, len(g.configs))
	for k, v := range g.configs {
		out[k] = v
	}
	return out, 0
}

// ConfigChange is one incremental change: Value nil deletes Name.
type ConfigChange struct {
	Name  string
	Value *string
}

// AlterGroupConfigs applies changes to group's configs and returns once
// they are durable (0) or Kafka's error code. The group is created (empty)
// if it does not exist, as Kafka allows configs for a group before it has
// members.
func (c *Coordinator) AlterGroupConfigs(ctx context.Context, group string, changes []ConfigChange) int16 {
	g, code := c.lookup(group, true)
	if code != 0 {
		return code
	}
	if err := g.acquireWrite(ctx); err != nil {
		return errCoordinatorNotAvailable
	}
	defer g.releaseWrite()
	g.mu.Lock()
	if code := g.statusLocked(); code != 0 {
		g.mu.Unlock()
		return code
	}
	next := make(map[string]string, len(g.configs)+len(changes))
	for k, v := range g.configs {
		next[k] = v
	}
	g.mu.Unlock()
	for _, ch := range changes {
		if ch.Value == nil {
			delete(next, ch.Name)
		} else {
			next[ch.Name] = *ch.Value
		}
	}
	rec := record{key: groupConfigRecordKey(group)}
	if len(next) > 0 {
		rec.value = groupConfigRecordValue(next)
	}
	code = 0
	c.writeGroup(ctx, g, c.now(), []record{rec}, func(err error) {
		if err != nil {
			code = appendErrorCode(err, false)
			c.logger.Warn("failed to store group configs", "group", group, "err", err, "code", code)
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		g.configs = next
	})
	return code
}

// groupConfigRecordsLocked restore g's configs (snapshots).
func (g *group) groupConfigRecordsLocked() []record {
	if len(g.configs) == 0 {
		return nil
	}
	return []record{{key: groupConfigRecordKey(g.id), value: groupConfigRecordValue(g.configs)}}
}

// groupConfigTombstonesLocked delete g's configs (group deletion).
func (g *group) groupConfigTombstonesLocked() []record {
	if len(g.configs) == 0 {
		return nil
	}
	return []record{{key: groupConfigRecordKey(g.id)}}
}
