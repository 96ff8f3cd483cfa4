package controller

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/kbroker/kbroker/controller/zk"
)

// User configs (/config/users: SCRAM credentials, quotas) and client
// quotas (/config/clients, /config/users/<user>/clients: quotas.go) reach
// every broker in the cluster view. The controller loads them with the rest,
// changes them for AlterUserScramCredentials (scram.go), and follows Kafka's
// config change notifications (/config/changes) so that a change written by
// Kafka's own tools (kafka-configs.sh --zookeeper writes the user's znode
// and a notification) is in the next view.

// configChangeExpiry is how old a change notification must be before the
// controller deletes it: Kafka's brokers purge them after 15 minutes
// (ZkNodeChangeNotificationListener's changeExpirationMs), long enough
// for every reader to have seen them.
const configChangeExpiry = 15 * time.Minute

// readUserConfigs reads the configs of users (nil: every user) over known,
// the configs as last seen, and returns the result; known is not modified.
// Users without a config are left out. A damaged znode must not fail a
// takeover (every broker in turn would win, fail and resign), so its user
// keeps the known config, and the znode is named in the log (not its
// content, which holds credentials).
func (a *active) readUserConfigs(ctx context.Context, known map[string]map[string]string, users []string) (map[string]map[string]string, error) {
	out := cloneUserConfigs(known)
	if users == nil {
		var err error
		if users, err = a.c.store.Users(ctx); err != nil {
			return nil, err
		}
		out = map[string]map[string]string{}
	}
	if out == nil {
		out = map[string]map[string]string{}
	}
	for _, user := range users {
		configs, _, err := a.c.store.UserConfig(ctx, user)
		if errors.Is(err, zk.ErrMalformed) {
			a.c.logger.Error("malformed user config znode; keeping the user's config as last known until it is fixed", "user", user, "err", err)
			if k, ok := known[user]; ok {
				out[user] = maps.Clone(k)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(configs) == 0 {
			delete(out, user)
			continue
		}
		out[user] = configs
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// onConfigChanges handles the current list of change notifications: the
// users, client ids and user + client ids named by notifications newer
// than the last handled are read again and, if their configs changed,
// published in a new view. Notifications
// older than configChangeExpiry are deleted.
func (a *active) onConfigChanges(names []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	store := a.c.store
	seen := make(map[string]time.Time, len(names))
	newest := a.configChangeSeq
	var users []string
	var entities []zk.Entity // client id and user + client id entities
	var brokers []string     // broker config entities
	all := false
	for _, name := range names {
		seq, ok := zk.ConfigChangeSequence(name)
		if !ok {
			continue // not a notification: not ours to judge
		}
		created, known := a.configChanges[name]
		if known && seq <= a.configChangeSeq {
			seen[name] = created
			continue
		}
		change, err := store.ConfigChange(ctx, name)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue // purged meanwhile
		case errors.Is(err, zk.ErrMalformed):
			if seq > a.configChangeSeq {
				a.c.logger.Warn("malformed config change notification; reading every user config again", "notification", name, "err", err)
				all = true
			}
		case err != nil:
			if a.ctx.Err() == nil {
				a.c.logger.Error("reading a config change notification failed; the next change retries", "notification", name, "err", err)
			}
			return
		case seq > a.configChangeSeq:
			if b, ok, err := zk.ParseBrokerEntityPath(change.EntityPath); ok || err != nil {
				if err != nil {
					a.c.logger.Warn("config change notification names a bad broker; reading every config again", "notification", name, "err", err)
					all = true
				} else if !slices.Contains(brokers, b) {
					brokers = append(brokers, b)
				}
				break
			}
			e, ok, err := zk.ParseEntityPath(change.EntityPath)
			switch {
			case err != nil:
				a.c.logger.Warn("config change notification names a bad user or client id; reading every user and client config again", "notification", name, "err", err)
				all = true
			case !ok:
				// Topics, brokers, ips: not in the view from here.
			case e.Client == "" && !slices.Contains(users, e.User):
				users = append(users, e.User)
			case e.Client != "" && !slices.Contains(entities, e):
				entities = append(entities, e)
			}
		}
		seen[name] = change.Created
		newest = max(newest, seq)
	}
	a.configChanges = seen
	if all || len(users) > 0 || len(entities) > 0 || len(brokers) > 0 {
		if all {
			users, entities, brokers = nil, nil, nil
		}
		next := a.md.clone()
		var err error
		if all || len(users) > 0 {
			next.UserConfigs, err = a.readUserConfigs(ctx, a.md.UserConfigs, users)
		}
		if err == nil && (all || len(entities) > 0) {
			err = a.readQuotaEntities(ctx, next, a.md, entities)
		}
		if err == nil && (all || len(brokers) > 0) {
			next.BrokerConfigs, err = a.readBrokerConfigs(ctx, a.md.BrokerConfigs, brokers)
		}
		if err != nil {
			if a.ctx.Err() == nil {
				a.c.logger.Error("reading changed user and client configs failed; the next change retries", "err", err)
			}
			return // newest not recorded: the next list handles these again
		}
		if !equalUserConfigs(next.UserConfigs, a.md.UserConfigs) || !equalQuotaConfigs(next, a.md) || !equalUserConfigs(next.BrokerConfigs, a.md.BrokerConfigs) {
			a.c.logger.Info("user, client and broker configs changed in ZooKeeper; publishing them",
				"users", changedUsers(a.md.UserConfigs, next.UserConfigs), "quota_entities", changedQuotaEntities(a.md, next),
				"brokers", changedUsers(a.md.BrokerConfigs, next.BrokerConfigs))
			a.publishLocked(next)
		}
	}
	a.configChangeSeq = newest
	if expired := expiredConfigChanges(seen, time.Now()); len(expired) > 0 {
		if err := store.DeleteConfigChanges(ctx, a.epochZkVersion, expired); err != nil && a.ctx.Err() == nil {
			a.c.logger.Warn("purging old config change notifications failed", "err", err)
		}
	}
}

// newestConfigChange is the highest sequence number among notification
// names (-1 for none).
func newestConfigChange(names []string) int64 {
	newest := int64(-1)
	for _, n := range names {
		if seq, ok := zk.ConfigChangeSequence(n); ok {
			newest = max(newest, seq)
		}
	}
	return newest
}

// expiredConfigChanges lists, sorted, the notifications created more than
// configChangeExpiry before now.
func expiredConfigChanges(created map[string]time.Time, now time.Time) []string {
	var out []string
	for name, at := range created {
		if !at.IsZero() && now.Sub(at) > configChangeExpiry {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// equalUserConfigs compares two user config maps (nil equals empty).
func equalUserConfigs(x, y map[string]map[string]string) bool {
	return maps.EqualFunc(x, y, func(a, b map[string]string) bool { return maps.Equal(a, b) })
}

// changedUsers lists, sorted, the users whose config differs between
// before and after: names only, for the log.
func changedUsers(before, after map[string]map[string]string) []string {
	var out []string
	for u, c := range after {
		if !maps.Equal(c, before[u]) {
			out = append(out, u)
		}
	}
	for u := range before {
		if _, ok := after[u]; !ok {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out
}
