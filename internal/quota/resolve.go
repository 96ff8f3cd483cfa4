package quota

// Default is the name of a default entity (Kafka's ConfigEntityName.Default)
// in the lookups of Resolve.
const Default = "<default>"

// Entity is what a rate is kept for (Kafka's quota metric tags): the user
// and client id, "" where the applying quota does not depend on it. Two
// connections whose requests resolve to the same Entity share one rate:
// all clients of a user under a user quota, all users of a client id under
// a client id quota, each user or client id on its own under a default.
type Entity struct {
	User     string
	ClientID string
}

// Lookup returns the bound one configured entity sets, if it sets one:
// user and clientID as stored (Default for a default, "" when not part of
// the entity: a user quota is Lookup(u, "")).
type Lookup func(user, clientID string) (bound float64, ok bool)

// Resolve finds the quota that applies to a request of user (the
// principal's name, ANONYMOUS when unauthenticated) with clientID, as
// Kafka's DefaultQuotaCallback: the most specific configured entity in
// this order,
//
//	/config/users/<user>/clients/<client-id>
//	/config/users/<user>/clients/<default>
//	/config/users/<user>
//	/config/users/<default>/clients/<client-id>
//	/config/users/<default>/clients/<default>
//	/config/users/<default>
//	/config/clients/<client-id>
//	/config/clients/<default>
//
// It returns the Entity the rate is kept for (quotaMetricTags) and the
// bound (quotaLimit of those tags); ok is false when no quota applies
// (Kafka's unlimited static default), and nothing needs recording.
func Resolve(user, clientID string, lookup Lookup) (e Entity, bound float64, ok bool) {
	has := func(u, c string) bool {
		_, found := lookup(u, c)
		return found
	}
	// An empty name is never a configured entity (AlterClientQuotas
	// refuses it); in a lookup it would mean "not part of the entity".
	u, c := user != "", clientID != ""
	switch {
	case u && c && has(user, clientID),
		u && has(user, Default):
		e = Entity{user, clientID}
	case u && has(user, ""):
		e = Entity{user, ""}
	case c && has(Default, clientID),
		has(Default, Default):
		e = Entity{user, clientID}
	case has(Default, ""):
		e = Entity{user, ""}
	default:
		e = Entity{"", clientID}
	}
	bound, ok = limit(e, lookup)
	return e, bound, ok
}

// limit is DefaultQuotaCallback.quotaLimit: the bound for a rate's tags.
// The tags alone choose where to look, as in Kafka: a user with an empty
// client id under a user + <default> client quota is looked up as a user.
func limit(e Entity, lookup Lookup) (float64, bool) {
	first := func(candidates ...Entity) (float64, bool) {
		for _, c := range candidates {
			if b, ok := lookup(c.User, c.ClientID); ok {
				return b, true
			}
		}
		return 0, false
	}
	switch {
	case e.User != "" && e.ClientID != "":
		return first(e, Entity{e.User, Default}, Entity{Default, e.ClientID}, Entity{Default, Default})
	case e.User != "":
		return first(e, Entity{Default, ""})
	case e.ClientID != "":
		return first(e, Entity{"", Default})
	}
	return 0, false
}
