package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/kbroker/kbroker/controller/zk"
)

// The embedded node keeps client quota entities in its state file's view
// (Metadata.UserConfigs, ClientConfigs, UserClientConfigs), as it keeps
// user configs: the controller is the only writer, so a version only tells
// an existing entity (0) from an absent one (-1).

// Clients lists the client ids with a config, sorted.
func (s *localStore) Clients(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.state.Metadata.ClientConfigs)), nil
}

// UserClients lists the client ids with a config of user, sorted.
func (s *localStore) UserClients(_ context.Context, user string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.state.Metadata.UserClientConfigs[user])), nil
}

// EntityConfig returns an entity's config: version 0 when it exists, -1
// when not.
func (s *localStore) EntityConfig(_ context.Context, e zk.Entity) (map[string]string, int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	configs, ok := s.state.Metadata.entityConfig(e)
	if !ok {
		return map[string]string{}, -1, nil
	}
	return maps.Clone(configs), 0, nil
}

// SetEntityConfig replaces an entity's config, conditional on it existing
// (version >= 0) or not (-1) as EntityConfig said. An empty config
// removes the entity: the file keeps no empty entries.
func (s *localStore) SetEntityConfig(_ context.Context, epochZkVersion int32, e zk.Entity, configs map[string]string, version int32) error {
	if e.User == "" && e.Client == "" {
		return fmt.Errorf("set entity config: no user and no client id")
	}
	return s.update(epochZkVersion, func(st *localState) error {
		if _, exists := st.Metadata.entityConfig(e); exists != (version >= 0) {
			return fmt.Errorf("set config of %s at version %d: %w", e, version, zk.ErrVersionConflict)
		}
		st.Metadata.setEntityConfig(e, configs)
		return nil
	})
}
