package acl

import (
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func str(s string) *string { return &s }

func patternFilter(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType) Filter {
	return Filter{ResourceType: rt, ResourceName: name, PatternType: pt, Operation: OpAny, Permission: PermissionAny}
}

// TestFilterMatchesResource is Kafka's ResourcePatternFilterTest.
func TestFilterMatchesResource(t *testing.T) {
	for _, tc := range []struct {
		name   string
		filter Filter
		r      Resource
		want   bool
	}{
		{"shouldNotMatchIfDifferentResourceType", patternFilter(ResourceTopic, str("Name"), PatternLiteral), group("Name"), false},
		{"shouldNotMatchIfDifferentName", patternFilter(ResourceTopic, str("Different"), PatternPrefixed), topicPfx("Name"), false},
		{"shouldNotMatchIfDifferentNameCase", patternFilter(ResourceTopic, str("NAME"), PatternLiteral), topic("Name"), false},
		{"shouldNotMatchIfDifferentPatternType", patternFilter(ResourceTopic, str("Name"), PatternLiteral), topicPfx("Name"), false},
		{"shouldMatchWhereResourceTypeIsAny", patternFilter(ResourceAny, str("Name"), PatternPrefixed), topicPfx("Name"), true},
		{"shouldMatchWhereResourceNameIsAny", patternFilter(ResourceTopic, nil, PatternPrefixed), topicPfx("Name"), true},
		{"shouldMatchWherePatternTypeIsAny", patternFilter(ResourceTopic, nil, PatternAny), topicPfx("Name"), true},
		{"shouldMatchWherePatternTypeIsMatch", patternFilter(ResourceTopic, nil, PatternMatch), topicPfx("Name"), true},
		{"shouldMatchLiteralIfExactMatch", patternFilter(ResourceTopic, str("Name"), PatternLiteral), topic("Name"), true},
		{"shouldMatchLiteralIfNameMatchesAndFilterIsOnPatternTypeAny", patternFilter(ResourceTopic, str("Name"), PatternAny), topic("Name"), true},
		{"shouldMatchLiteralIfNameMatchesAndFilterIsOnPatternTypeMatch", patternFilter(ResourceTopic, str("Name"), PatternMatch), topic("Name"), true},
		{"shouldNotMatchLiteralIfNamePrefixed", patternFilter(ResourceTopic, str("Name-something"), PatternMatch), topic("Name"), false},
		{"shouldMatchLiteralWildcardIfExactMatch", patternFilter(ResourceTopic, str("*"), PatternLiteral), topic("*"), true},
		{"shouldNotMatchLiteralWildcardAgainstOtherName", patternFilter(ResourceTopic, str("Name"), PatternLiteral), topic("*"), false},
		{"shouldNotMatchLiteralWildcardTheWayAround", patternFilter(ResourceTopic, str("*"), PatternLiteral), topic("Name"), false},
		{"shouldNotMatchLiteralWildcardIfFilterHasPatternTypeOfAny", patternFilter(ResourceTopic, str("Name"), PatternAny), topic("*"), false},
		{"shouldMatchLiteralWildcardIfFilterHasPatternTypeOfMatch", patternFilter(ResourceTopic, str("Name"), PatternMatch), topic("*"), true},
		{"shouldMatchPrefixedIfExactMatch", patternFilter(ResourceTopic, str("Name"), PatternPrefixed), topicPfx("Name"), true},
		{"shouldNotMatchIfBothPrefixedAndFilterIsPrefixOfResource", patternFilter(ResourceTopic, str("Name"), PatternPrefixed), topicPfx("Name-something"), false},
		{"shouldNotMatchIfBothPrefixedAndResourceIsPrefixOfFilter", patternFilter(ResourceTopic, str("Name-something"), PatternPrefixed), topicPfx("Name"), false},
		{"shouldNotMatchPrefixedIfNamePrefixedAnyFilterTypeIsAny", patternFilter(ResourceTopic, str("Name-something"), PatternAny), topicPfx("Name"), false},
		{"shouldMatchPrefixedIfNamePrefixedAnyFilterTypeIsMatch", patternFilter(ResourceTopic, str("Name-something"), PatternMatch), topicPfx("Name"), true},
		// Beyond Kafka's test.
		{"match: a prefix longer than the name", patternFilter(ResourceTopic, str("Na"), PatternMatch), topicPfx("Name"), false},
		{"match: a prefixed \"*\" is a prefix, not a wildcard", patternFilter(ResourceTopic, str("Name"), PatternMatch), topicPfx("*"), false},
		{"match: other type", patternFilter(ResourceGroup, str("Name"), PatternMatch), topic("*"), false},
		{"match: any type", patternFilter(ResourceAny, str("Name"), PatternMatch), group("*"), true},
		{"unknown pattern never matches", patternFilter(ResourceTopic, str("Name"), PatternMatch), Resource{ResourceTopic, "Name", PatternUnknown}, false},
	} {
		if got := tc.filter.MatchesResource(tc.r); got != tc.want {
			t.Errorf("%s: MatchesResource(%v) = %v, want %v", tc.name, tc.r, got, tc.want)
		}
	}
}

// TestFilterMatches is Kafka's AclBindingTest.testMatching.
func TestFilterMatches(t *testing.T) {
	acl1 := Binding{topic("mytopic"), Entry{"User:ANONYMOUS", "", OpAll, PermissionAllow}}
	acl2 := Binding{topic("mytopic"), Entry{"User:*", "", OpRead, PermissionAllow}}
	acl3 := Binding{topic("mytopic2"), Entry{"User:ANONYMOUS", "127.0.0.1", OpRead, PermissionDeny}}
	unknownACL := Binding{topic("mytopic2"), Entry{"User:ANONYMOUS", "127.0.0.1", OpUnknown, PermissionDeny}}

	anyAnonymous := AnyFilter()
	anyAnonymous.Principal = str("User:ANONYMOUS")
	anyDeny := AnyFilter()
	anyDeny.Permission = PermissionDeny
	anyMytopic := patternFilter(ResourceTopic, str("mytopic"), PatternLiteral)

	for _, tc := range []struct {
		name   string
		filter Filter
		b      Binding
		want   bool
	}{
		{"ANY acl1", AnyFilter(), acl1, true},
		{"ANY acl2", AnyFilter(), acl2, true},
		{"ANY acl3", AnyFilter(), acl3, true},
		{"anonymous acl1", anyAnonymous, acl1, true},
		{"anonymous acl2 (User:* is not User:ANONYMOUS)", anyAnonymous, acl2, false},
		{"anonymous acl3", anyAnonymous, acl3, true},
		{"deny acl1", anyDeny, acl1, false},
		{"deny acl2", anyDeny, acl2, false},
		{"deny acl3", anyDeny, acl3, true},
		{"mytopic acl1", anyMytopic, acl1, true},
		{"mytopic acl2", anyMytopic, acl2, true},
		{"mytopic acl3", anyMytopic, acl3, false},
		{"anonymous unknown", anyAnonymous, unknownACL, true},
		{"deny unknown", anyDeny, unknownACL, true},
		{"mytopic unknown", anyMytopic, unknownACL, false},
		{"exact acl1", ExactFilter(acl1), acl1, true},
		{"exact acl1 vs acl2", ExactFilter(acl1), acl2, false},
		{"host filter", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Host: str("127.0.0.1"), Operation: OpAny, Permission: PermissionAny}, acl3, true},
		{"host filter, other host", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Host: str("127.0.0.2"), Operation: OpAny, Permission: PermissionAny}, acl3, false},
		{"operation filter is exact (All is not Read)", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpRead, Permission: PermissionAny}, acl1, false},
	} {
		if got := tc.filter.Matches(tc.b); got != tc.want {
			t.Errorf("%s: Matches = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestFilterValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Filter)
		err    bool
	}{
		{"any", func(*Filter) {}, false},
		{"match", func(f *Filter) { f.PatternType = PatternMatch }, false},
		{"exact", func(f *Filter) { *f = ExactFilter(allow(topic("t"), alice, anyIP, OpRead)) }, false},
		{"unknown resource type", func(f *Filter) { f.ResourceType = ResourceUnknown }, true},
		{"unknown pattern type", func(f *Filter) { f.PatternType = PatternUnknown }, true},
		{"unknown operation", func(f *Filter) { f.Operation = OpUnknown }, true},
		{"unknown permission", func(f *Filter) { f.Permission = PermissionUnknown }, true},
	} {
		f := AnyFilter()
		tc.mutate(&f)
		err := f.Validate()
		if (err != nil) != tc.err {
			t.Errorf("%s: Validate() = %v, want error %v", tc.name, err, tc.err)
		}
		var ire *InvalidRequestError
		if err != nil && (!errors.As(err, &ire) || ire.Message != "Filters contain UNKNOWN elements") {
			t.Errorf("%s: Validate() = %#v, want an InvalidRequestError with Kafka's message", tc.name, err)
		}
	}
}

func TestExactResources(t *testing.T) {
	for _, tc := range []struct {
		filter Filter
		want   []Resource
	}{
		{patternFilter(ResourceTopic, str("t"), PatternLiteral), []Resource{topic("t")}},
		{patternFilter(ResourceTopic, str("t"), PatternPrefixed), []Resource{topicPfx("t")}},
		{patternFilter(ResourceTopic, str("t"), PatternAny), []Resource{topic("t"), topicPfx("t")}},
		{patternFilter(ResourceTopic, str("t"), PatternMatch), nil},
		{patternFilter(ResourceTopic, nil, PatternLiteral), nil},
		{patternFilter(ResourceAny, str("t"), PatternLiteral), nil},
	} {
		if got := tc.filter.ExactResources(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ExactResources(%+v) = %v, want %v", tc.filter, got, tc.want)
		}
	}
}

// TestDescribeAndDelete is AclAuthorizerTest.testAclsFilter: describe by
// filters, then one DeleteAcls request whose filters overlap.
func TestDescribeAndDelete(t *testing.T) {
	principal := "User:alice"
	resource1, resource2, prefixed := topic("foo-1"), topic("bar-2"), topicPfx("bar-")
	acl1 := allow(resource1, principal, anyIP, OpRead)
	acl2 := allow(resource1, principal, "192.168.0.1", OpWrite)
	acl3 := allow(resource2, principal, anyIP, OpDescribe)
	acl4 := allow(prefixed, anyone, anyIP, OpRead)
	a := New([]Binding{acl1, acl2, acl3, acl4}, Config{})

	resourceFilter := func(r Resource) Filter { return patternFilter(r.Type, str(r.Name), r.Pattern) }
	asSet := func(bs []Binding) map[Binding]bool {
		m := map[Binding]bool{}
		for _, b := range bs {
			m[b] = true
		}
		return m
	}
	set := func(bs ...Binding) map[Binding]bool { return asSet(bs) }

	if got := asSet(a.Describe(AnyFilter())); !reflect.DeepEqual(got, set(acl1, acl2, acl3, acl4)) {
		t.Errorf("Describe(ANY) = %v", got)
	}
	if got := asSet(a.Describe(resourceFilter(resource1))); !reflect.DeepEqual(got, set(acl1, acl2)) {
		t.Errorf("Describe(resource1) = %v", got)
	}
	if got := asSet(a.Describe(resourceFilter(prefixed))); !reflect.DeepEqual(got, set(acl4)) {
		t.Errorf("Describe(prefixed) = %v", got)
	}
	matching := patternFilter(ResourceAny, str(resource2.Name), PatternMatch)
	if got := asSet(a.Describe(matching)); !reflect.DeepEqual(got, set(acl3, acl4)) {
		t.Errorf("Describe(MATCH bar-2) = %v", got)
	}

	filters := []Filter{
		matching,
		ExactFilter(acl1),
		resourceFilter(resource2),
		patternFilter(ResourceTopic, str("baz"), PatternAny),
	}
	deleted, kept := DeleteMatches(a.Bindings(), filters)
	want := []map[Binding]bool{set(acl3, acl4), set(acl1), set(), set()}
	for i := range filters {
		if got := asSet(deleted[i]); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("DeleteMatches: filter %d deleted %v, want %v", i, got, want[i])
		}
	}
	if !reflect.DeepEqual(kept, []Binding{acl2}) {
		t.Errorf("DeleteMatches kept %v, want [acl2]", kept)
	}
}

func TestValidateBinding(t *testing.T) {
	ok := allow(topic("t"), alice, anyIP, OpRead)
	for _, tc := range []struct {
		name   string
		mutate func(*Binding)
		msg    string // "" = valid
	}{
		{"valid literal", func(*Binding) {}, ""},
		{"valid wildcard", func(b *Binding) { b.Name = "*" }, ""},
		{"valid prefixed", func(b *Binding) { b.Pattern = PatternPrefixed }, ""},
		{"prefixed * is a prefix", func(b *Binding) { b.Pattern, b.Name = PatternPrefixed, "*" }, ""},
		{"valid cluster", func(b *Binding) { b.Resource = clusterRes; b.Operation = OpIdempotentWrite }, ""},
		{"deny", func(b *Binding) { b.Permission = PermissionDeny }, ""},
		{"group id with a space and unicode", func(b *Binding) { b.Resource = group("my group é") }, ""},
		{"user principal wildcard", func(b *Binding) { b.Principal = "User:*" }, ""},
		{"any resource type", func(b *Binding) { b.Type = ResourceAny }, "resourceType must not be ANY"},
		{"match pattern", func(b *Binding) { b.Pattern = PatternMatch }, "patternType must not be MATCH"},
		{"any pattern", func(b *Binding) { b.Pattern = PatternAny }, "patternType must not be ANY"},
		{"any operation", func(b *Binding) { b.Operation = OpAny }, "operation must not be ANY"},
		{"any permission", func(b *Binding) { b.Permission = PermissionAny }, "permissionType must not be ANY"},
		{"unknown resource type", func(b *Binding) { b.Type = ResourceUnknown }, "ACL binding contains unknown elements"},
		{"future resource type", func(b *Binding) { b.Type = 9 }, "ACL binding contains unknown elements"},
		{"unknown pattern", func(b *Binding) { b.Pattern = PatternUnknown }, "ACL binding contains unknown elements"},
		{"unknown operation", func(b *Binding) { b.Operation = OpUnknown }, "ACL binding contains unknown elements"},
		{"unknown permission", func(b *Binding) { b.Permission = PermissionUnknown }, "ACL binding contains unknown elements"},
		{"cluster with another name", func(b *Binding) { b.Resource = Resource{ResourceCluster, "my-cluster", PatternLiteral} },
			"The only valid name for the CLUSTER resource is kafka-cluster"},
		{"cluster wildcard", func(b *Binding) { b.Resource = Resource{ResourceCluster, "*", PatternLiteral} },
			"The only valid name for the CLUSTER resource is kafka-cluster"},
		{"empty name", func(b *Binding) { b.Name = "" }, "Invalid empty resource name"},
		{"group id with a slash", func(b *Binding) { b.Resource = group("a/b") }, "ACL binding contains invalid resource name: a/b"},
		{"dot dot", func(b *Binding) { b.Name = ".." }, `invalid resource name "..": ZooKeeper refuses the path components "." and ".."`},
		{"control character", func(b *Binding) { b.Name = "a\nb" }, `invalid resource name "a\nb": ZooKeeper refuses the character U+000A in a path`},
		{"principal without type", func(b *Binding) { b.Principal = "alice" }, "expected a string in format principalType:principalName but got alice"},
		{"empty principal", func(b *Binding) { b.Principal = "" }, "expected a string in format principalType:principalName but got "},
	} {
		b := ok
		tc.mutate(&b)
		err := ValidateBinding(b)
		if tc.msg == "" {
			if err != nil {
				t.Errorf("%s: ValidateBinding(%v) = %v, want nil", tc.name, b, err)
			}
			continue
		}
		var ire *InvalidRequestError
		if !errors.As(err, &ire) || ire.Message != tc.msg {
			t.Errorf("%s: ValidateBinding(%v) = %v, want InvalidRequestError %q", tc.name, b, err, tc.msg)
		}
	}
}
