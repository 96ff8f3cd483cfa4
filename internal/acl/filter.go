package acl

// Filters of DescribeAcls and DeleteAcls (Kafka's AclBindingFilter:
// ResourcePatternFilter + AccessControlEntryFilter).

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Filter selects bindings. Nil strings and the Any values match
// everything; PatternType Match selects the patterns that would apply to
// a resource of that name (the literal name, the literal "*", and the
// prefixes of the name); any other value selects exactly that value.
// Principal and host compare exactly: a filter for "User:alice" does not
// select "User:*" entries.
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// AnyFilter matches every binding (AclBindingFilter.ANY).
func AnyFilter() Filter {
	return Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
}

// ExactFilter matches b and nothing else (AclBinding.toFilter).
func ExactFilter(b Binding) Filter {
	name, principal, host := b.Name, b.Principal, b.Host
	return Filter{
		ResourceType: b.Type, ResourceName: &name, PatternType: b.Pattern,
		Principal: &principal, Host: &host, Operation: b.Operation, Permission: b.Permission,
	}
}

// Matches tells whether f selects b (AclBindingFilter.matches).
func (f Filter) Matches(b Binding) bool {
	return f.MatchesResource(b.Resource) && f.MatchesEntry(b.Entry)
}

// MatchesResource is ResourcePatternFilter.matches.
func (f Filter) MatchesResource(r Resource) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != r.Type {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != r.Pattern {
		return false
	}
	if f.ResourceName == nil {
		return true
	}
	name := *f.ResourceName
	if f.PatternType == PatternAny || f.PatternType == r.Pattern {
		return name == r.Name
	}
	// PatternMatch: the patterns that apply to a resource called name.
	switch r.Pattern {
	case PatternLiteral:
		return name == r.Name || r.Name == WildcardResource
	case PatternPrefixed:
		return strings.HasPrefix(name, r.Name)
	default:
		// Kafka throws here; no stored pattern has another type.
		return false
	}
}

// MatchesEntry is AccessControlEntryFilter.matches.
func (f Filter) MatchesEntry(e Entry) bool {
	return (f.Principal == nil || *f.Principal == e.Principal) &&
		(f.Host == nil || *f.Host == e.Host) &&
		(f.Operation == OpAny || f.Operation == e.Operation) &&
		(f.Permission == PermissionAny || f.Permission == e.Permission)
}

// Validate refuses a filter with an Unknown element, as DescribeAclsRequest
// and DeleteAclsRequest do when Kafka parses them ("Filters contain UNKNOWN
// elements"; Kafka then closes the connection, the server may answer
// INVALID_REQUEST instead). The error is an *InvalidRequestError.
func (f Filter) Validate() error {
	if f.ResourceType == ResourceUnknown || f.PatternType == PatternUnknown ||
		f.Operation == OpUnknown || f.Permission == PermissionUnknown {
		return &InvalidRequestError{Message: "Filters contain UNKNOWN elements"}
	}
	return nil
}

// ExactResources are the patterns f can select when its resource part
// names at most one name (ResourcePatternFilter.matchesAtMostOne; a Any
// pattern type gives the literal and the prefixed pattern of that name),
// else nil. Kafka's deleteAcls visits these besides the cached ones, so a
// delete reaches ACLs this broker has not loaded yet.
func (f Filter) ExactResources() []Resource {
	if f.ResourceType == ResourceAny || f.ResourceType == ResourceUnknown || f.ResourceName == nil {
		return nil
	}
	switch f.PatternType {
	case PatternLiteral, PatternPrefixed:
		return []Resource{{f.ResourceType, *f.ResourceName, f.PatternType}}
	case PatternAny:
		return []Resource{
			{f.ResourceType, *f.ResourceName, PatternLiteral},
			{f.ResourceType, *f.ResourceName, PatternPrefixed},
		}
	default:
		return nil
	}
}

// Matching returns the bindings f selects, in their order.
func Matching(bindings []Binding, f Filter) []Binding {
	var out []Binding
	for _, b := range bindings {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// DeleteMatches decides a DeleteAcls request: deleted[i] are the bindings
// filters[i] deletes, and kept are the bindings no filter selects. A
// binding selected by several filters is reported once, under the first
// of them, as AclAuthorizer.deleteAcls does.
func DeleteMatches(bindings []Binding, filters []Filter) (deleted [][]Binding, kept []Binding) {
	deleted = make([][]Binding, len(filters))
next:
	for _, b := range bindings {
		for i, f := range filters {
			if f.Matches(b) {
				deleted[i] = append(deleted[i], b)
				continue next
			}
		}
		kept = append(kept, b)
	}
	return deleted, kept
}
