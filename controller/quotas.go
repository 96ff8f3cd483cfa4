package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Client quotas live where Kafka's ZooKeeper mode keeps them (zk/quotas.go:
// /config/users/<u>, /config/clients/<c>, /config/users/<u>/clients/<c>,
// <default> for the defaults) and reach every broker in the view (user
// ones in UserConfigs, next to SCRAM credentials; ClientConfigs;
// UserClientConfigs). AlterClientQuotas changes them here, validated as
// Kafka's ClientQuotaControlManager (the newer and stricter of Kafka's two
// validations: ZooKeeper mode's ZkAdminManager accepted zero and negative
// rates, which no quota can mean); kafka-configs.sh --zookeeper writes
// reach the view through the change notifications (users.go).

// QuotaEntity names a client quota entity: a user, a client id or both,
// DefaultQuotaEntity naming a default.
type QuotaEntity = zk.Entity

// DefaultQuotaEntity is the name of a default entity, as Kafka's znodes
// and kbroker's views spell it (on the wire a default is a null name).
const DefaultQuotaEntity = zk.DefaultEntity

// Quota config keys (Kafka's QuotaConfigs.userAndClientQuotaConfigs).
const (
	ProducerByteRate       = "producer_byte_rate"
	ConsumerByteRate       = "consumer_byte_rate"
	RequestPercentage      = "request_percentage"
	ControllerMutationRate = "controller_mutation_rate"
)

// quotaKeyIsLong tells, for each quota key, whether Kafka defines it as a
// LONG (stored as an integer) rather than a DOUBLE.
var quotaKeyIsLong = map[string]bool{
	ProducerByteRate:       true,
	ConsumerByteRate:       true,
	RequestPercentage:      false,
	ControllerMutationRate: false,
}

// IsQuotaKey reports whether key is a user or client id quota
// (QuotaConfigs.isClientOrUserQuotaConfig); a user's other keys are SCRAM
// credentials.
func IsQuotaKey(key string) bool {
	_, ok := quotaKeyIsLong[key]
	return ok
}

// Entity types of the quota APIs (ClientQuotaEntity).
const (
	QuotaEntityUser     = "user"
	QuotaEntityClientID = "client-id"
	QuotaEntityIP       = "ip"
)

// QuotaEntityPart is one (type, name) pair of an entity as the wire
// carries it; a nil name is the default entity of that type.
type QuotaEntityPart struct {
	Type string
	Name *string
}

// QuotaOp sets a quota key to Value, or removes it.
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// QuotaAlteration is one entry of an AlterClientQuotas request.
type QuotaAlteration struct {
	Entity []QuotaEntityPart
	Ops    []QuotaOp
}

func invalidQuotaRequest(format string, args ...any) error {
	return &kafkaError{kerr.InvalidRequest, fmt.Sprintf(format, args...)}
}

// ParseQuotaEntity validates an entity as ClientQuotaControlManager
// (validateEntity, configKeysForEntityType) and returns it. IP entities
// (connection_creation_rate) are refused: kbroker keeps no IP quotas. A
// user or client id literally named "<default>" is refused too: kbroker's
// views could not tell it from the default entity (Kafka's ZooKeeper mode
// tells them apart by the sanitized znode name).
func ParseQuotaEntity(parts []QuotaEntityPart) (QuotaEntity, error) {
	var e QuotaEntity
	if len(parts) == 0 {
		return e, invalidQuotaRequest("Invalid empty client quota entity")
	}
	seen := map[string]bool{}
	ip := false
	for _, p := range parts {
		if seen[p.Type] {
			return QuotaEntity{}, invalidQuotaRequest("Invalid client quota entity, duplicate entity entry %s", p.Type)
		}
		seen[p.Type] = true
		name := DefaultQuotaEntity
		if p.Name != nil {
			name = *p.Name
		}
		switch {
		case p.Type != QuotaEntityUser && p.Type != QuotaEntityClientID && p.Type != QuotaEntityIP:
			return QuotaEntity{}, invalidQuotaRequest("Unhandled client quota entity type: %s", p.Type)
		case p.Name != nil && *p.Name == "":
			// ZkAdminManager.parseAndSanitizeQuotaEntity
			return QuotaEntity{}, invalidQuotaRequest("Empty %s not supported", p.Type)
		case p.Name != nil && *p.Name == DefaultQuotaEntity:
			return QuotaEntity{}, invalidQuotaRequest("kbroker cannot keep quotas of a %s named %s: it would be the default %s (send a null name for the default)", p.Type, DefaultQuotaEntity, p.Type)
		case p.Type == QuotaEntityUser:
			e.User = name
		case p.Type == QuotaEntityClientID:
			e.Client = name
		default:
			ip = true
		}
	}
	if ip {
		if e.User != "" || e.Client != "" {
			return QuotaEntity{}, invalidQuotaRequest("Invalid quota entity combination, IP entity should not be combined with User or ClientId")
		}
		return QuotaEntity{}, invalidQuotaRequest("kbroker does not support IP quotas (connection_creation_rate)")
	}
	return e, nil
}

// checkQuotaOps validates an entity's operations as
// ClientQuotaControlManager (alterClientQuotas, validateQuotaKeyValue):
// a key at most once, known keys only, set values finite and above 0,
// byte rates integral and within a LONG. Removals are not checked further
// (removing an unknown or absent key changes nothing).
func checkQuotaOps(e QuotaEntity, ops []QuotaOp) error {
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Key] {
			return invalidQuotaRequest("Duplicate quota key %s not updating quota for this entity %s", op.Key, e)
		}
		seen[op.Key] = true
		if op.Remove {
			continue
		}
		isLong, ok := quotaKeyIsLong[op.Key]
		switch {
		case !ok:
			return invalidQuotaRequest("Invalid configuration key %s", op.Key)
		case math.IsNaN(op.Value) || math.IsInf(op.Value, 0):
			return invalidQuotaRequest("Quota %s must be a finite number", op.Key)
		case op.Value <= 0:
			return invalidQuotaRequest("Quota %s must be greater than 0", op.Key)
		case isLong && op.Value >= math.MaxInt64:
			return invalidQuotaRequest("Proposed value for %s is too large for a LONG.", op.Key)
		case isLong && math.Abs(math.Mod(op.Value, 1)) > 1e-6:
			return invalidQuotaRequest("%s cannot be a fractional value.", op.Key)
		}
	}
	return nil
}

// checkQuotaAlterations validates a request: each entry's entity and
// operations, and that no entity appears twice (every appearance of a
// repeated entity fails, so none of them is half applied). It returns
// each entry's entity and error.
func checkQuotaAlterations(alts []QuotaAlteration) ([]QuotaEntity, []error) {
	entities := make([]QuotaEntity, len(alts))
	errs := make([]error, len(alts))
	count := map[QuotaEntity]int{}
	for i, alt := range alts {
		entities[i], errs[i] = ParseQuotaEntity(alt.Entity)
		if errs[i] == nil {
			count[entities[i]]++
			errs[i] = checkQuotaOps(entities[i], alt.Ops)
		}
	}
	for i := range alts {
		if errs[i] == nil && count[entities[i]] > 1 {
			errs[i] = invalidQuotaRequest("Ignoring duplicate entity %s", entities[i])
		}
	}
	return entities, errs
}

// applyQuotaOps returns current with ops applied (current is not
// modified): removals delete, settings store the value as Kafka's
// ZkAdminManager writes it (a LONG as an integer, a DOUBLE as Java's
// Double.toString). Keys that are not quotas (SCRAM credentials) stay.
func applyQuotaOps(current map[string]string, ops []QuotaOp) map[string]string {
	out := maps.Clone(current)
	if out == nil {
		out = map[string]string{}
	}
	for _, op := range ops {
		switch {
		case op.Remove:
			delete(out, op.Key)
		case quotaKeyIsLong[op.Key]:
			out[op.Key] = strconv.FormatInt(int64(op.Value+1e-6), 10)
		default:
			out[op.Key] = javaDouble(op.Value)
		}
	}
	return out
}

// javaDouble formats v as Java's Double.toString (which Kafka's
// ZkAdminManager uses for DOUBLE quotas): the shortest digits that read
// back as v, plain with at least one decimal between 10^-3 and 10^7
// ("50.0", "0.5"), computerized scientific notation outside ("1.0E7",
// "1.0E-4").
func javaDouble(v float64) string {
	if v == 0 {
		return "0.0"
	}
	if a := math.Abs(v); a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	mant, exp, _ := strings.Cut(strconv.FormatFloat(v, 'e', -1, 64), "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	n, _ := strconv.Atoi(exp) // strconv's own "+07" / "-04"
	return mant + "E" + strconv.Itoa(n)
}

// AlterClientQuotas applies a request's quota alterations
// (AlterClientQuotas), validated as Kafka does; only the controller can.
// Each entry's entity is written on its own (its znode, keeping keys that
// are not quotas, and a change notification); the new view is published
// before it returns. validateOnly checks without writing. It returns one
// error per entry, in order; the error is only NOT_CONTROLLER.
func (c *Cluster) AlterClientQuotas(alts []QuotaAlteration, validateOnly bool) ([]error, error) {
	var res []error
	err := c.withActive(func(a *active) error {
		res = a.alterClientQuotas(alts, validateOnly)
		return nil
	})
	return res, err
}

func (a *active) alterClientQuotas(alts []QuotaAlteration, validateOnly bool) []error {
	entities, errs := checkQuotaAlterations(alts)
	if validateOnly {
		return errs
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	next := a.md.clone()
	changed := false
	for i, alt := range alts {
		if errs[i] != nil {
			continue
		}
		configs, wrote, err := a.writeQuotaLocked(ctx, entities[i], alt.Ops)
		if err != nil {
			errs[i] = err
			continue
		}
		if wrote {
			next.setEntityConfig(entities[i], configs)
			changed = true
			a.c.logger.Info("altered client quotas", "entity", entities[i].String(), "quotas", quotaValues(configs))
		}
	}
	if changed {
		a.publishLocked(next)
	}
	return errs
}

// quotaValues are the quota keys of configs with their values, for the
// log (a user's other keys are credentials).
func quotaValues(configs map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range configs {
		if IsQuotaKey(k) {
			out[k] = v
		}
	}
	return out
}

// writeQuotaLocked applies an entity's operations to its stored config,
// read fresh so that what other tools wrote (SCRAM credentials, other
// quotas) is kept, and writes it conditionally on the version read, trying
// again a few times if another writer came in between. A change that
// changes nothing writes nothing (wrote false).
func (a *active) writeQuotaLocked(ctx context.Context, e QuotaEntity, ops []QuotaOp) (configs map[string]string, wrote bool, err error) {
	for attempt := 0; attempt < 3; attempt++ {
		current, version, err := a.c.store.EntityConfig(ctx, e)
		if errors.Is(err, zk.ErrMalformed) {
			return nil, false, fmt.Errorf("%w: the stored config of %s is damaged (see the controller's log); fix or delete it first", kerr.UnknownServerError, e)
		}
		if err != nil {
			return nil, false, fmt.Errorf("%w: reading the config of %s: %v", kerr.UnknownServerError, e, err)
		}
		configs := applyQuotaOps(current, ops)
		if maps.Equal(configs, current) {
			return current, false, nil
		}
		err = a.c.store.SetEntityConfig(ctx, a.epochZkVersion, e, configs, version)
		if errors.Is(err, zk.ErrVersionConflict) {
			continue
		}
		if err != nil {
			if err = a.storeErr(err); !errors.Is(err, kerr.NotController) {
				err = fmt.Errorf("%w: writing the config of %s: %v", kerr.UnknownServerError, e, err)
			}
			return nil, false, err
		}
		return configs, true, nil
	}
	return nil, false, fmt.Errorf("%w: the config of %s kept changing under the alteration; try again", kerr.UnknownServerError, e)
}

// EntityConfig is the stored config of a quota entity in the view (nil
// when it has none); a user's holds its SCRAM credentials too. Not to be
// modified.
func (m *Metadata) EntityConfig(e QuotaEntity) map[string]string {
	c, _ := m.entityConfig(e)
	return c
}

func (m *Metadata) entityConfig(e zk.Entity) (map[string]string, bool) {
	var c map[string]string
	var ok bool
	switch {
	case e.User != "" && e.Client != "":
		c, ok = m.UserClientConfigs[e.User][e.Client]
	case e.User != "":
		c, ok = m.UserConfigs[e.User]
	default:
		c, ok = m.ClientConfigs[e.Client]
	}
	return c, ok
}

// setEntityConfig sets an entity's config in m, a snapshot being built:
// an empty config removes the entity, and maps left empty become nil.
func (m *Metadata) setEntityConfig(e zk.Entity, configs map[string]string) {
	set := func(in map[string]map[string]string, name string) map[string]map[string]string {
		if len(configs) == 0 {
			delete(in, name)
			if len(in) == 0 {
				return nil
			}
			return in
		}
		if in == nil {
			in = map[string]map[string]string{}
		}
		in[name] = maps.Clone(configs)
		return in
	}
	switch {
	case e.User != "" && e.Client != "":
		clients := set(m.UserClientConfigs[e.User], e.Client)
		if clients == nil {
			delete(m.UserClientConfigs, e.User)
			if len(m.UserClientConfigs) == 0 {
				m.UserClientConfigs = nil
			}
			return
		}
		if m.UserClientConfigs == nil {
			m.UserClientConfigs = map[string]map[string]map[string]string{}
		}
		m.UserClientConfigs[e.User] = clients
	case e.User != "":
		m.UserConfigs = set(m.UserConfigs, e.User)
	default:
		m.ClientConfigs = set(m.ClientConfigs, e.Client)
	}
}

// cloneUserClientConfigs deep-copies user + client id configs (nil stays
// nil).
func cloneUserClientConfigs(in map[string]map[string]map[string]string) map[string]map[string]map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]map[string]map[string]string, len(in))
	for user, clients := range in {
		out[user] = cloneUserConfigs(clients)
	}
	return out
}

// quotaConfigsTag is the UpdateMetadata tag carrying ClientConfigs and
// UserClientConfigs.
type quotaConfigsTag struct {
	Clients     map[string]map[string]string            `json:"clients,omitempty"`
	UserClients map[string]map[string]map[string]string `json:"user_clients,omitempty"`
}

// readQuotaEntities reads the configs of client id and user + client id
// entities (nil: every one the store has) into md, a snapshot being
// built, over known (the configs as last seen). A damaged znode must not
// fail a takeover, so its entity keeps its known config and the znode is
// named in the log.
func (a *active) readQuotaEntities(ctx context.Context, md, known *Metadata, entities []zk.Entity) error {
	store := a.c.store
	if entities == nil {
		md.ClientConfigs, md.UserClientConfigs = nil, nil
		clients, err := store.Clients(ctx)
		if err != nil {
			return err
		}
		for _, c := range clients {
			entities = append(entities, zk.Entity{Client: c})
		}
		users, err := store.Users(ctx)
		if err != nil {
			return err
		}
		for _, u := range users {
			clients, err := store.UserClients(ctx, u)
			if err != nil {
				return err
			}
			for _, c := range clients {
				entities = append(entities, zk.Entity{User: u, Client: c})
			}
		}
	}
	for _, e := range entities {
		configs, _, err := store.EntityConfig(ctx, e)
		if errors.Is(err, zk.ErrMalformed) {
			a.c.logger.Error("malformed quota config znode; keeping the entity's quotas as last known until it is fixed", "entity", e.String(), "err", err)
			configs = known.EntityConfig(e)
		} else if err != nil {
			return err
		}
		md.setEntityConfig(e, configs)
	}
	return nil
}

// equalQuotaConfigs compares the client id and user + client id configs
// of two views (nil equals empty).
func equalQuotaConfigs(x, y *Metadata) bool {
	return equalUserConfigs(x.ClientConfigs, y.ClientConfigs) &&
		maps.EqualFunc(x.UserClientConfigs, y.UserClientConfigs, equalUserConfigs)
}

// changedQuotaEntities lists, sorted, the client id and user + client id
// entities whose config differs between two views: names only, for the
// log.
func changedQuotaEntities(before, after *Metadata) []string {
	var out []string
	for _, c := range changedUsers(before.ClientConfigs, after.ClientConfigs) {
		out = append(out, zk.Entity{Client: c}.String())
	}
	users := map[string]bool{}
	for u := range before.UserClientConfigs {
		users[u] = true
	}
	for u := range after.UserClientConfigs {
		users[u] = true
	}
	for u := range users {
		for _, c := range changedUsers(before.UserClientConfigs[u], after.UserClientConfigs[u]) {
			out = append(out, zk.Entity{User: u, Client: c}.String())
		}
	}
	slices.Sort(out)
	return out
}
