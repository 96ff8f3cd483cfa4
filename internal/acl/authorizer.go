package acl

// The authorization decision of Kafka's ZK-mode AclAuthorizer (3.9,
// kafka.security.authorizer.AclAuthorizer.authorizeAction and
// authorizeByResourceType), over an immutable snapshot of the bindings.
//
// Kafka keeps a mutable TreeMap it swaps under a lock and scans prefixed
// entries by walking the map from the name down to its first character.
// Here the broker builds a new Authorizer whenever the ACL set changes, and
// every lookup is a map access: the literal name, the literal "*", and one
// per distinct prefix length of the type's prefixed patterns. Within a
// pattern the entries are folded into operation bit masks per principal
// and host, so a decision ORs a handful of masks instead of scanning
// entries.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config is the authorizer's configuration (AclAuthorizer.configure).
type Config struct {
	// SuperUsers are principals ("User:admin") allowed everything
	// whatever the ACLs say (super.users).
	SuperUsers []string
	// AllowEveryoneIfNoACLFound allows any operation on a resource no
	// ACL matches at all (allow.everyone.if.no.acl.found).
	AllowEveryoneIfNoACLFound bool
}

// ParseSuperUsers reads Kafka's super.users value: principals separated by
// semicolons, each trimmed ("User:admin; User:broker"). As Java's
// String.split, trailing empty elements are dropped; any other empty or
// malformed element is an error, as SecurityUtils.parseKafkaPrincipal.
// Unlike Kafka, which splits the raw value, the whole value is trimmed
// first, so a trailing blank after the last ';' is not an error.
func ParseSuperUsers(v string) ([]string, error) {
	v = javaTrim(v)
	if v == "" {
		return nil, nil
	}
	parts := strings.Split(v, ";")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	users := make([]string, 0, len(parts))
	for _, p := range parts {
		p = javaTrim(p)
		if err := ValidatePrincipal(p); err != nil {
			return nil, fmt.Errorf("acl: super.users: %w", err)
		}
		users = append(users, p)
	}
	return users, nil
}

// javaTrim is String.trim: it strips every character up to ' '.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// Authorizer answers authorization questions over one immutable set of
// bindings. It is safe for concurrent use; build a new one (New) when the
// set changes.
type Authorizer struct {
	superUsers    map[string]struct{}
	allowEveryone bool
	// types is indexed by resource type code; nil for types without
	// bindings and for Unknown/Any.
	types    [ResourceUser + 1]*typeIndex
	bindings []Binding // deduplicated, sorted (see CompareBindings)
}

// typeIndex holds the bindings of one resource type.
type typeIndex struct {
	literal  map[string]*patternNode // by exact name, "*" included
	wildcard *patternNode            // literal["*"], or nil
	prefixed map[string]*patternNode // by prefix
	// prefixLens are the distinct byte lengths of the prefixes in
	// prefixed, ascending: the names to look up for a resource name are
	// its prefixes of these lengths.
	prefixLens []int
	// byPrincipal lists every entry of the type by principal, for
	// AuthorizeByResourceType (Kafka's resourceCache).
	byPrincipal map[string][]typeEntry
}

// typeEntry is one binding of a type, as AuthorizeByResourceType needs it.
type typeEntry struct {
	host    string
	op      kmsg.ACLOperation
	perm    kmsg.ACLPermissionType
	pattern kmsg.ACLResourcePatternType
	name    string
}

// patternNode holds the entries of one resource pattern.
type patternNode struct {
	byPrincipal map[string]*grants // principal (never "User:*") -> grants
	anyone      *grants            // entries for "User:*", or nil
}

// grants folds the entries of one principal on one pattern into
// operation bit masks.
type grants struct {
	anyHost masks            // entries for host "*"
	byHost  map[string]masks // entries for one host; nil when none
}

// masks are sets of operations (bit = operation code) granted or denied.
// Entries with an Unknown operation or permission add nothing: they
// never match a request, though they still count as ACLs on the resource.
type masks struct{ allow, deny uint32 }

func (m masks) or(o masks) masks { return masks{m.allow | o.allow, m.deny | o.deny} }

func opBit(op kmsg.ACLOperation) uint32 { return 1 << uint(op) }

// concreteOp tells whether op is one a request can ask about.
func concreteOp(op kmsg.ACLOperation) bool { return op >= OpAll && op <= OpDescribeTokens }

// concreteType tells whether t is a resource type a request can name.
func concreteType(t kmsg.ACLResourceType) bool { return t >= ResourceTopic && t <= ResourceUser }

// grantingOps is the set of operations whose ALLOW grants op
// (AclAuthorizer.allowAclExists): op itself and All; Describe is also
// granted by Read, Write, Delete and Alter, DescribeConfigs by
// AlterConfigs (AclOperation's documented inheritance). DENY has no such
// implication: a DENY of Read does not deny Describe.
func grantingOps(op kmsg.ACLOperation) uint32 {
	m := opBit(op) | opBit(OpAll)
	switch op {
	case OpDescribe:
		m |= opBit(OpRead) | opBit(OpWrite) | opBit(OpDelete) | opBit(OpAlter)
	case OpDescribeConfigs:
		m |= opBit(OpAlterConfigs)
	}
	return m
}

// denyingOps is the set of operations whose DENY denies op: op and All.
func denyingOps(op kmsg.ACLOperation) uint32 { return opBit(op) | opBit(OpAll) }

// New builds an Authorizer over bindings (a set: repeats count once).
// Bindings whose resource type or pattern type can never match a request
// (Unknown, Any, Match) are kept for Bindings and Describe but not
// indexed.
func New(bindings []Binding, cfg Config) *Authorizer {
	a := &Authorizer{allowEveryone: cfg.AllowEveryoneIfNoACLFound}
	if len(cfg.SuperUsers) > 0 {
		a.superUsers = make(map[string]struct{}, len(cfg.SuperUsers))
		for _, u := range cfg.SuperUsers {
			a.superUsers[u] = struct{}{}
		}
	}
	a.bindings = slices.Clone(bindings)
	slices.SortFunc(a.bindings, CompareBindings)
	a.bindings = slices.Compact(a.bindings)
	for _, b := range a.bindings {
		if !concreteType(b.Type) || (b.Pattern != PatternLiteral && b.Pattern != PatternPrefixed) {
			continue
		}
		ti := a.types[b.Type]
		if ti == nil {
			ti = &typeIndex{
				literal:     map[string]*patternNode{},
				prefixed:    map[string]*patternNode{},
				byPrincipal: map[string][]typeEntry{},
			}
			a.types[b.Type] = ti
		}
		ti.add(b)
	}
	return a
}

func (ti *typeIndex) add(b Binding) {
	nodes := ti.literal
	if b.Pattern == PatternPrefixed {
		nodes = ti.prefixed
	}
	n := nodes[b.Name]
	if n == nil {
		n = &patternNode{byPrincipal: map[string]*grants{}}
		nodes[b.Name] = n
		switch {
		case b.Pattern == PatternLiteral && b.Name == WildcardResource:
			ti.wildcard = n
		case b.Pattern == PatternPrefixed:
			if i, found := slices.BinarySearch(ti.prefixLens, len(b.Name)); !found {
				ti.prefixLens = slices.Insert(ti.prefixLens, i, len(b.Name))
			}
		}
	}
	n.add(b.Entry)
	ti.byPrincipal[b.Principal] = append(ti.byPrincipal[b.Principal],
		typeEntry{host: b.Host, op: b.Operation, perm: b.Permission, pattern: b.Pattern, name: b.Name})
}

func (n *patternNode) add(e Entry) {
	var g *grants
	if e.Principal == WildcardPrincipal {
		if n.anyone == nil {
			n.anyone = &grants{}
		}
		g = n.anyone
	} else {
		g = n.byPrincipal[e.Principal]
		if g == nil {
			g = &grants{}
			n.byPrincipal[e.Principal] = g
		}
	}
	var m masks
	if concreteOp(e.Operation) {
		switch e.Permission {
		case PermissionAllow:
			m.allow = opBit(e.Operation)
		case PermissionDeny:
			m.deny = opBit(e.Operation)
		}
	}
	if e.Host == WildcardHost {
		g.anyHost = g.anyHost.or(m)
		return
	}
	if g.byHost == nil {
		g.byHost = map[string]masks{}
	}
	g.byHost[e.Host] = g.byHost[e.Host].or(m)
}

// masksFor is what the node's entries allow and deny principal at host:
// entries for the principal itself or "User:*", from host or "*"
// (AclAuthorizer.matchingAclExists).
func (n *patternNode) masksFor(principal, host string) masks {
	var m masks
	if g := n.byPrincipal[principal]; g != nil {
		m = m.or(g.masksFor(host))
	}
	if n.anyone != nil {
		m = m.or(n.anyone.masksFor(host))
	}
	return m
}

func (g *grants) masksFor(host string) masks {
	m := g.anyHost
	if g.byHost != nil {
		m = m.or(g.byHost[host])
	}
	return m
}

// IsSuperUser tells whether principal is one of the configured super users.
func (a *Authorizer) IsSuperUser(principal string) bool {
	_, ok := a.superUsers[principal]
	return ok
}

// Authorize tells whether principal ("User:alice"), connecting from host
// (the client's IP address as text), may perform op on the resource of
// type rt named name, as AclAuthorizer.authorizeAction:
//   - super users may do anything;
//   - the ACLs that apply are those on the literal name, on the literal
//     wildcard "*", and on every prefix of the name; when there are none,
//     the answer is AllowEveryoneIfNoACLFound;
//   - an entry applies to the principal when it names it exactly or is
//     "User:*", and to the host when it names it exactly or is "*";
//   - a DENY for op or for All wins over any ALLOW;
//   - otherwise an ALLOW for op, for All, or for an operation implying op
//     (Read/Write/Delete/Alter imply Describe, AlterConfigs implies
//     DescribeConfigs) allows it.
//
// Names are compared exactly (case-sensitive). A request for a filter-only
// or unknown operation or resource type is refused.
func (a *Authorizer) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if !concreteOp(op) || !concreteType(rt) {
		return false
	}
	if a.IsSuperUser(principal) {
		return true
	}
	ti := a.types[rt]
	if ti == nil {
		return a.allowEveryone
	}
	var m masks
	found := false
	if n := ti.literal[name]; n != nil {
		found = true
		m = m.or(n.masksFor(principal, host))
	}
	if n := ti.wildcard; n != nil && name != WildcardResource {
		found = true
		m = m.or(n.masksFor(principal, host))
	}
	for _, l := range ti.prefixLens {
		if l > len(name) {
			break
		}
		if n := ti.prefixed[name[:l]]; n != nil {
			found = true
			m = m.or(n.masksFor(principal, host))
		}
	}
	if !found {
		return a.allowEveryone
	}
	if m.deny&denyingOps(op) != 0 {
		return false
	}
	return m.allow&grantingOps(op) != 0
}

// AuthorizeByResourceType tells whether principal at host may perform op
// on at least one resource of type rt (AclAuthorizer.authorizeByResourceType,
// used where Kafka asks "could this client write to any topic", e.g.
// InitProducerId without a transactional id). Only entries for op itself
// or All count (no implied operations), for the principal or "User:*",
// from host or "*":
//   - super users are allowed;
//   - a DENY on the literal "*" denies;
//   - otherwise AllowEveryoneIfNoACLFound allows;
//   - an ALLOW on the literal "*" allows; an ALLOW on a literal name
//     allows unless that name is also DENYed literally or lies under a
//     DENYed prefix; an ALLOW on a prefix allows unless it lies under a
//     DENYed prefix (a DENY on a longer prefix or on one name does not
//     shadow it).
//
// A filter-only or unknown operation or resource type is refused (Kafka
// throws IllegalArgumentException).
func (a *Authorizer) AuthorizeByResourceType(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if !concreteOp(op) || !concreteType(rt) {
		return false
	}
	if a.IsSuperUser(principal) {
		return true
	}
	var denyLiteral, denyPrefix, allowLiteral, allowPrefix map[string]struct{}
	add := func(set *map[string]struct{}, name string) {
		if *set == nil {
			*set = map[string]struct{}{}
		}
		(*set)[name] = struct{}{}
	}
	if ti := a.types[rt]; ti != nil {
		scan := func(entries []typeEntry) {
			for _, e := range entries {
				if (e.host != host && e.host != WildcardHost) || (e.op != op && e.op != OpAll) {
					continue
				}
				switch {
				case e.perm == PermissionDeny && e.pattern == PatternLiteral:
					add(&denyLiteral, e.name)
				case e.perm == PermissionDeny && e.pattern == PatternPrefixed:
					add(&denyPrefix, e.name)
				case e.perm == PermissionAllow && e.pattern == PatternLiteral:
					add(&allowLiteral, e.name)
				case e.perm == PermissionAllow && e.pattern == PatternPrefixed:
					add(&allowPrefix, e.name)
				}
			}
		}
		if principal != WildcardPrincipal {
			scan(ti.byPrincipal[principal])
		}
		scan(ti.byPrincipal[WildcardPrincipal])
	}
	if _, ok := denyLiteral[WildcardResource]; ok {
		return false
	}
	if a.allowEveryone {
		return true
	}
	// underDeniedPrefix is AclAuthorizer.hasDominantPrefixedDeny.
	underDeniedPrefix := func(name string) bool {
		for p := range denyPrefix {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
	for p := range allowPrefix {
		if !underDeniedPrefix(p) {
			return true
		}
	}
	for l := range allowLiteral {
		if l == WildcardResource {
			return true
		}
		if _, denied := denyLiteral[l]; !denied && !underDeniedPrefix(l) {
			return true
		}
	}
	return false
}

// Bindings returns every binding of the snapshot, deduplicated and sorted
// by resource type, pattern type, name, then principal, host, operation,
// permission. The caller may modify the returned slice.
func (a *Authorizer) Bindings() []Binding { return slices.Clone(a.bindings) }

// Describe returns the bindings f matches, in Bindings' order: the answer
// to DescribeAcls (AclAuthorizer.acls).
func (a *Authorizer) Describe(f Filter) []Binding { return Matching(a.bindings, f) }

// CompareBindings is the order of bindings everywhere they are listed
// (Bindings, the controller's views): resource type, pattern type, name,
// then principal, host, operation, permission.
func CompareBindings(x, y Binding) int {
	return cmp.Or(
		cmp.Compare(x.Type, y.Type),
		cmp.Compare(x.Pattern, y.Pattern),
		strings.Compare(x.Name, y.Name),
		strings.Compare(x.Principal, y.Principal),
		strings.Compare(x.Host, y.Host),
		cmp.Compare(x.Operation, y.Operation),
		cmp.Compare(x.Permission, y.Permission),
	)
}
