package server

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strconv"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeClientQuotas: v0-1
//
// Behaviour:
// * Answered from this broker's cluster view (the controller publishes
//   every user, client id and user + client id quota), so any broker
//   answers, within about a second of a change anywhere.
// * Filter components as Kafka (ZkAdminManager.describeClientQuotas, the
//   same rules as KRaft's ClientQuotasImage): match type 0 (exact) names an
//   entity, 1 (default) the default entity of the type, 2 (any) any entity
//   of the type, the default included. An entity matches when each
//   component matches; with strict it must have no other entity type, and
//   without, entities with more types match too. An entity is listed only
//   with quota keys (a user with SCRAM credentials only is not).
// * Whole-request errors, Kafka's: an empty entity type or one named twice
//   INVALID_REQUEST; a type other than user, client-id, ip
//   UNSUPPORTED_VERSION; ip with user or client-id INVALID_REQUEST; an
//   exact match without a name, a default or any with one, or an unknown
//   match type INVALID_REQUEST (KRaft's checks: ZooKeeper-mode Kafka fails
//   those with UNKNOWN_SERVER_ERROR). kbroker keeps no IP quotas: an ip
//   filter finds nothing.
// * A stored value that does not read as a number fails the request with
//   UNKNOWN_SERVER_ERROR, as Kafka's IllegalStateException does.
// * Values are doubles; a default entity's name is null.
// * Authorization: DescribeConfigs (or AlterConfigs) on the cluster, else
//   CLUSTER_AUTHORIZATION_FAILED and no entries.
//
// Version notes:
// * v1: flexible

func init() {
	registerAPI(kmsg.DescribeClientQuotas.Int16(), 0, 1, handleDescribeClientQuotas)
}

func handleDescribeClientQuotas(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !b.authorizeCluster(rc, acl.OpDescribeConfigs) {
		resp.ErrorCode, resp.ErrorMessage = errorCodeAndMessage(errClusterRefused)
		return resp, nil
	}
	entries, err := describeClientQuotas(b.controller.Metadata(), req.Components, req.Strict)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCodeAndMessage(err)
		return resp, nil
	}
	resp.Entries = entries
	return resp, nil
}

// quotaFilter is one validated component: the entity type's name to
// match, nil for the default, and any for match type 2.
type quotaFilter struct {
	name *string
	any  bool
}

// matches reports whether an entity's name for the filter's type (nil:
// the entity has no such part; a pointer to DefaultQuotaEntity: its
// default) satisfies the filter.
func (f quotaFilter) matches(name *string) bool {
	switch {
	case name == nil:
		return false
	case f.any:
		return true
	case f.name == nil:
		return *name == controller.DefaultQuotaEntity
	default:
		// An exact "<default>" names a user or client id spelled so,
		// which kbroker never stores (Kafka's %3Cdefault%3E), not the
		// default entity.
		return *f.name != controller.DefaultQuotaEntity && *name == *f.name
	}
}

// parseQuotaFilters validates a request's components (see the header)
// into filters by entity type.
func parseQuotaFilters(comps []kmsg.DescribeClientQuotasRequestComponent) (map[string]quotaFilter, error) {
	filters := map[string]quotaFilter{}
	for _, c := range comps {
		switch c.MatchType {
		case 0:
			if c.Match == nil {
				return nil, kafkaErr(kerr.InvalidRequest, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
			}
		case 1, 2:
			if c.Match != nil {
				kind := map[kmsg.QuotasMatchType]string{1: "MATCH_TYPE_DEFAULT", 2: "MATCH_TYPE_SPECIFIED"}[c.MatchType]
				return nil, kafkaErr(kerr.InvalidRequest, "Request specified %s, but also specified a match string.", kind)
			}
		default:
			return nil, kafkaErr(kerr.InvalidRequest, "Unexpected match type: %d", c.MatchType)
		}
	}
	for _, c := range comps {
		short := map[string]string{controller.QuotaEntityUser: "user", controller.QuotaEntityClientID: "client", controller.QuotaEntityIP: "ip"}[c.EntityType]
		switch {
		case c.EntityType == "":
			return nil, kafkaErr(kerr.InvalidRequest, "Unexpected empty filter component entity type")
		case short == "":
			return nil, kafkaErr(kerr.UnsupportedVersion, "Custom entity type '%s' not supported", c.EntityType)
		}
		if _, dup := filters[c.EntityType]; dup {
			return nil, kafkaErr(kerr.InvalidRequest, "Duplicate %s filter component entity type", short)
		}
		filters[c.EntityType] = quotaFilter{name: c.Match, any: c.MatchType == 2}
	}
	_, ip := filters[controller.QuotaEntityIP]
	if ip && len(filters) > 1 {
		return nil, kafkaErr(kerr.InvalidRequest, "Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component.")
	}
	return filters, nil
}

// describeClientQuotas lists the quota entities of md that match the
// filter, sorted by user then client id (defaults first), each with its
// quota keys sorted.
func describeClientQuotas(md *controller.Metadata, comps []kmsg.DescribeClientQuotasRequestComponent, strict bool) ([]kmsg.DescribeClientQuotasResponseEntry, error) {
	filters, err := parseQuotaFilters(comps)
	if err != nil {
		return nil, err
	}
	if _, ip := filters[controller.QuotaEntityIP]; ip {
		return []kmsg.DescribeClientQuotasResponseEntry{}, nil // no IP quotas
	}
	var entities []controller.QuotaEntity
	for u := range md.UserConfigs {
		entities = append(entities, controller.QuotaEntity{User: u})
	}
	for c := range md.ClientConfigs {
		entities = append(entities, controller.QuotaEntity{Client: c})
	}
	for u, clients := range md.UserClientConfigs {
		for c := range clients {
			entities = append(entities, controller.QuotaEntity{User: u, Client: c})
		}
	}
	slices.SortFunc(entities, func(x, y controller.QuotaEntity) int {
		return cmp.Or(cmp.Compare(x.User, y.User), cmp.Compare(x.Client, y.Client))
	})
	out := []kmsg.DescribeClientQuotasResponseEntry{}
	for _, e := range entities {
		if !quotaEntityMatches(e, filters, strict) {
			continue
		}
		configs := md.EntityConfig(e)
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, k := range slices.Sorted(maps.Keys(configs)) {
			if !controller.IsQuotaKey(k) {
				continue
			}
			v, err := strconv.ParseFloat(configs[k], 64)
			if err != nil {
				return nil, kafkaErr(kerr.UnknownServerError, "Unexpected client quota configuration value: %s -> %s", k, configs[k])
			}
			val := kmsg.NewDescribeClientQuotasResponseEntryValue()
			val.Key, val.Value = k, v
			entry.Values = append(entry.Values, val)
		}
		if len(entry.Values) == 0 {
			continue
		}
		entry.Entity = quotaEntityParts(e)
		out = append(out, entry)
	}
	return out, nil
}

// quotaEntityMatches is Kafka's match of one entity against the filters.
func quotaEntityMatches(e controller.QuotaEntity, filters map[string]quotaFilter, strict bool) bool {
	part := func(name string) *string {
		if name == "" {
			return nil
		}
		return &name
	}
	for typ, name := range map[string]*string{controller.QuotaEntityUser: part(e.User), controller.QuotaEntityClientID: part(e.Client)} {
		f, filtered := filters[typ]
		switch {
		case filtered && !f.matches(name):
			return false
		case !filtered && strict && name != nil:
			return false
		}
	}
	return true
}

// quotaEntityParts is an entity as the response names it: user first, a
// default's name null.
func quotaEntityParts(e controller.QuotaEntity) []kmsg.DescribeClientQuotasResponseEntryEntity {
	var out []kmsg.DescribeClientQuotasResponseEntryEntity
	add := func(typ, name string) {
		if name == "" {
			return
		}
		p := kmsg.NewDescribeClientQuotasResponseEntryEntity()
		p.Type = typ
		if name != controller.DefaultQuotaEntity {
			p.Name = &name
		}
		out = append(out, p)
	}
	add(controller.QuotaEntityUser, e.User)
	add(controller.QuotaEntityClientID, e.Client)
	return out
}
