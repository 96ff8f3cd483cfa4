package acl

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cases ported from Kafka's AclAuthorizerTest / AuthorizerTest and
// BaseAuthorizerTest (3.9); the Kafka test each comes from is named.

const (
	alice  = "User:alice"
	bob    = "User:bob"
	host1  = "192.168.1.1"
	host2  = "192.168.1.2"
	anyone = WildcardPrincipal
	anyIP  = WildcardHost
)

func allow(r Resource, principal, host string, op kmsg.ACLOperation) Binding {
	return Binding{r, Entry{principal, host, op, PermissionAllow}}
}

func deny(r Resource, principal, host string, op kmsg.ACLOperation) Binding {
	return Binding{r, Entry{principal, host, op, PermissionDeny}}
}

func topic(name string) Resource    { return Resource{ResourceTopic, name, PatternLiteral} }
func topicPfx(name string) Resource { return Resource{ResourceTopic, name, PatternPrefixed} }
func group(name string) Resource    { return Resource{ResourceGroup, name, PatternLiteral} }
func groupPfx(name string) Resource { return Resource{ResourceGroup, name, PatternPrefixed} }

var clusterRes = Resource{ResourceCluster, ClusterName, PatternLiteral}

type check struct {
	principal, host string
	op              kmsg.ACLOperation
	rt              kmsg.ACLResourceType
	name            string
	want            bool
}

func TestAuthorize(t *testing.T) {
	const res = "foo-1234" // Kafka's "foo-" + UUID
	superUsers, err := ParseSuperUsers("User:superuser1; User:superuser2")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		bindings []Binding
		cfg      Config
		checks   []check
	}{
		{"testTopicAcl", []Binding{
			allow(topic(res), alice, host1, OpRead),
			allow(topic(res), alice, host2, OpRead),
			deny(topic(res), alice, host1, OpRead),
			allow(topic(res), alice, host1, OpWrite),
			allow(topic(res), alice, anyIP, OpDescribe),
			allow(topic(res), "User:rob", anyIP, OpRead),
			allow(topic(res), "User:batman", anyIP, OpWrite),
		}, Config{}, []check{
			{alice, host2, OpRead, ResourceTopic, res, true},
			{alice, host1, OpRead, ResourceTopic, res, false}, // deny from host1
			{alice, host1, OpWrite, ResourceTopic, res, true},
			{alice, host2, OpWrite, ResourceTopic, res, false}, // no allow from host2
			{alice, host1, OpDescribe, ResourceTopic, res, true},
			{alice, host2, OpDescribe, ResourceTopic, res, true},
			{alice, host1, OpAlter, ResourceTopic, res, false},
			{alice, host2, OpAlter, ResourceTopic, res, false},
			{"User:rob", host1, OpDescribe, ResourceTopic, res, true},    // implied by Read
			{"User:batman", host1, OpDescribe, ResourceTopic, res, true}, // implied by Write
			{"User:rob", host1, OpRead, ResourceTopic, res, true},
			{"User:batman", host1, OpWrite, ResourceTopic, res, true},
		}},
		{"testAllowAccessWithCustomPrincipal", []Binding{
			deny(topic(res), alice, host1, OpRead),
			allow(topic(res), alice, host2, OpRead),
		}, Config{}, []check{
			{alice, host2, OpRead, ResourceTopic, res, true},
			{alice, host1, OpRead, ResourceTopic, res, false},
		}},
		{"testDenyTakesPrecedence", []Binding{
			allow(topic(res), anyone, anyIP, OpAll),
			deny(topic(res), alice, "192.168.2.1", OpAll),
		}, Config{}, []check{
			{alice, "192.168.2.1", OpRead, ResourceTopic, res, false},
			{alice, "192.168.2.2", OpRead, ResourceTopic, res, true},
			{bob, "192.168.2.1", OpRead, ResourceTopic, res, true},
		}},
		{"testAllowAllAccess", []Binding{allow(topic(res), anyone, anyIP, OpAll)}, Config{}, []check{
			{"User:random", "192.0.4.4", OpRead, ResourceTopic, res, true},
			{"User:random", "192.0.4.4", OpAlterConfigs, ResourceTopic, res, true},
			{"User:random", "192.0.4.4", OpRead, ResourceTopic, "other", false},
			{"User:random", "192.0.4.4", OpRead, ResourceGroup, res, false},
		}},
		{"testSuperUserHasAccess", []Binding{deny(topic(res), anyone, anyIP, OpAll)}, Config{SuperUsers: superUsers}, []check{
			{"User:superuser1", "192.0.4.4", OpRead, ResourceTopic, res, true},
			{"User:superuser2", "192.0.4.4", OpRead, ResourceTopic, res, true},
			{"User:superuser3", "192.0.4.4", OpRead, ResourceTopic, res, false},
			// Super users need no ACL at all either.
			{"User:superuser1", "192.0.4.4", OpClusterAction, ResourceCluster, ClusterName, true},
		}},
		{"testWildCardAcls: read on *", []Binding{
			allow(topic("*"), alice, "192.168.3.1", OpRead),
		}, Config{}, []check{
			{alice, "192.168.3.1", OpRead, ResourceTopic, res, true},
			{alice, "192.168.3.2", OpRead, ResourceTopic, res, false},
			{alice, "192.168.3.1", OpRead, ResourceTopic, "*", true},
		}},
		{"testWildCardAcls: deny write on * beats allow on the topic", []Binding{
			allow(topic("*"), alice, "192.168.3.1", OpRead),
			allow(topic(res), alice, "192.168.3.1", OpWrite),
			deny(topic("*"), alice, "192.168.3.1", OpWrite),
		}, Config{}, []check{
			{alice, "192.168.3.1", OpWrite, ResourceTopic, res, false},
			{alice, "192.168.3.1", OpRead, ResourceTopic, res, true},
		}},
		{"testNoAclFound", nil, Config{}, []check{
			{alice, host1, OpRead, ResourceTopic, res, false},
		}},
		{"testNoAclFoundOverride", nil, Config{AllowEveryoneIfNoACLFound: true}, []check{
			{alice, host1, OpRead, ResourceTopic, res, true},
			{alice, host1, OpIdempotentWrite, ResourceCluster, ClusterName, true},
		}},
		{"allow everyone applies per resource", []Binding{
			allow(topic("owned"), bob, anyIP, OpRead),
			allow(topicPfx("fo"), bob, anyIP, OpRead),
			allow(group("*"), bob, anyIP, OpRead),
		}, Config{AllowEveryoneIfNoACLFound: true}, []check{
			{alice, host1, OpRead, ResourceTopic, "unowned", true},
			{alice, host1, OpRead, ResourceTopic, "owned", false},
			{alice, host1, OpRead, ResourceTopic, "foo", false}, // the prefix is an ACL on it
			{alice, host1, OpRead, ResourceGroup, "g", false},   // so is the wildcard
			{alice, host1, OpRead, ResourceTransactionalID, "g", true},
		}},
		{"an entry with an unknown operation is still an ACL", []Binding{
			{topic("t"), Entry{bob, anyIP, OpUnknown, PermissionAllow}},
			{topic("u"), Entry{bob, anyIP, OpRead, PermissionUnknown}},
		}, Config{AllowEveryoneIfNoACLFound: true}, []check{
			{bob, host1, OpRead, ResourceTopic, "t", false},
			{bob, host1, OpRead, ResourceTopic, "u", false},
			{bob, host1, OpRead, ResourceTopic, "v", true},
		}},
		{"testAccessAllowedIfAllowAclExistsOnWildcardResource", []Binding{
			allow(topic("*"), anyone, anyIP, OpRead),
		}, Config{}, []check{
			{alice, "192.168.0.1", OpRead, ResourceTopic, res, true},
		}},
		{"testAccessAllowedIfAllowAclExistsOnPrefixedResource", []Binding{
			allow(topicPfx("foo"), anyone, anyIP, OpRead),
		}, Config{}, []check{
			{alice, "192.168.0.1", OpRead, ResourceTopic, res, true},
			{alice, "192.168.0.1", OpRead, ResourceTopic, "foo", true},
			{alice, "192.168.0.1", OpRead, ResourceTopic, "fo", false},
			{alice, "192.168.0.1", OpRead, ResourceTopic, "Foo-1", false},
		}},
		{"testAuthorizeWithPrefixedResource", []Binding{
			deny(topic("a_other"), anyone, anyIP, OpRead),
			deny(topicPfx("a_other"), anyone, anyIP, OpRead),
			deny(topicPfx("foo-5678"), anyone, anyIP, OpRead),
			deny(topicPfx("foo-9999"), anyone, anyIP, OpRead),
			deny(topicPfx("foo-1234-zzz"), anyone, anyIP, OpRead),
			deny(topicPfx("fooo-1234"), anyone, anyIP, OpRead),
			deny(topicPfx("fo-1234"), anyone, anyIP, OpRead),
			deny(topicPfx("fop-1234"), anyone, anyIP, OpRead),
			deny(topicPfx("fon-1234"), anyone, anyIP, OpRead),
			deny(topicPfx("fon-"), anyone, anyIP, OpRead),
			deny(topicPfx("z_other"), anyone, anyIP, OpRead),
			deny(topic("z_other"), anyone, anyIP, OpRead),
			allow(topicPfx("foo"), anyone, anyIP, OpRead),
		}, Config{}, []check{
			{alice, "192.168.0.1", OpRead, ResourceTopic, res, true},
			{alice, "192.168.0.1", OpRead, ResourceTopic, "foo-1234-zzz-1", false},
			{alice, "192.168.0.1", OpRead, ResourceTopic, "fon-x", false},
		}},
		{"testSingleCharacterResourceAcls", []Binding{
			allow(topic("f"), anyone, anyIP, OpRead),
			allow(topicPfx("_"), anyone, anyIP, OpRead),
		}, Config{}, []check{
			{alice, "192.168.0.1", OpRead, ResourceTopic, "f", true},
			{alice, "192.168.0.1", OpRead, ResourceTopic, "foo", false},
			{alice, "192.168.0.1", OpRead, ResourceTopic, "_foo", true},
			{alice, "192.168.0.1", OpRead, ResourceTopic, "_", true},
			{alice, "192.168.0.1", OpRead, ResourceTopic, "foo_", false},
		}},
		{"testAuthorizeWithEmptyResourceName", []Binding{
			allow(group("*"), anyone, anyIP, OpRead),
		}, Config{}, []check{
			{alice, "192.168.0.1", OpRead, ResourceGroup, "", true},
			{alice, "192.168.0.1", OpRead, ResourceTopic, "", false},
		}},
		{"deny on a prefix beats allow on the literal name", []Binding{
			allow(topic("payments.eu"), alice, anyIP, OpWrite),
			deny(topicPfx("payments."), alice, anyIP, OpWrite),
		}, Config{}, []check{
			{alice, host1, OpWrite, ResourceTopic, "payments.eu", false},
			{alice, host1, OpDescribe, ResourceTopic, "payments.eu", true}, // Describe not denied
		}},
		{"deny for everyone beats allow for one user", []Binding{
			allow(topic("t"), alice, host1, OpRead),
			deny(topic("t"), anyone, anyIP, OpRead),
		}, Config{}, []check{
			{alice, host1, OpRead, ResourceTopic, "t", false},
		}},
		{"case sensitivity", []Binding{
			allow(topic("Orders"), alice, anyIP, OpRead),
			allow(topicPfx("Pay"), alice, anyIP, OpRead),
			allow(group("G"), alice, "fe80::1", OpRead),
		}, Config{}, []check{
			{alice, host1, OpRead, ResourceTopic, "Orders", true},
			{alice, host1, OpRead, ResourceTopic, "orders", false},
			{alice, host1, OpRead, ResourceTopic, "Payments", true},
			{alice, host1, OpRead, ResourceTopic, "payments", false},
			{"User:Alice", host1, OpRead, ResourceTopic, "Orders", false},
			{"user:alice", host1, OpRead, ResourceTopic, "Orders", false},
			{alice, "fe80::1", OpRead, ResourceGroup, "G", true},
			{alice, "FE80::1", OpRead, ResourceGroup, "G", false},
			{alice, "fe80::2", OpRead, ResourceGroup, "G", false},
		}},
		{"wildcard principal is only User:*", []Binding{
			allow(topic("t"), "Group:*", anyIP, OpRead),
			allow(topic("u"), anyone, anyIP, OpRead),
		}, Config{}, []check{
			{alice, host1, OpRead, ResourceTopic, "t", false},
			{"Group:*", host1, OpRead, ResourceTopic, "t", true},
			{"ServiceAccount:x", host1, OpRead, ResourceTopic, "u", true},
		}},
		{"a host entry of * from a host * client", []Binding{
			allow(topic("t"), alice, host1, OpRead),
		}, Config{}, []check{
			{alice, "*", OpRead, ResourceTopic, "t", false},
		}},
		{"requests for filter-only values are refused", []Binding{
			allow(topic("t"), anyone, anyIP, OpAll),
		}, Config{AllowEveryoneIfNoACLFound: true, SuperUsers: []string{alice}}, []check{
			{alice, host1, OpAny, ResourceTopic, "t", false},
			{alice, host1, OpUnknown, ResourceTopic, "t", false},
			{alice, host1, OpRead, ResourceAny, "t", false},
			{alice, host1, OpRead, ResourceUnknown, "t", false},
			{bob, host1, OpRead, kmsg.ACLResourceType(8), "t", false},
			{bob, host1, kmsg.ACLOperation(15), ResourceTopic, "t", false},
		}},
	} {
		a := New(tc.bindings, tc.cfg)
		for _, c := range tc.checks {
			if got := a.Authorize(c.principal, c.host, c.op, c.rt, c.name); got != c.want {
				t.Errorf("%s: Authorize(%s, %s, %v, %v, %q) = %v, want %v", tc.name, c.principal, c.host, c.op, c.rt, c.name, got, c.want)
			}
		}
	}
}

// TestAclInheritance is AclAuthorizerTest.testAclInheritance: which
// operations an ALLOW or a DENY of one operation implies, on the cluster.
func TestAclInheritance(t *testing.T) {
	allOps := []kmsg.ACLOperation{OpAll, OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe,
		OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpCreateTokens, OpDescribeTokens}
	set := func(ops ...kmsg.ACLOperation) map[kmsg.ACLOperation]bool {
		m := map[kmsg.ACLOperation]bool{}
		for _, op := range ops {
			m[op] = true
		}
		return m
	}
	everything := set(allOps...)
	for _, tc := range []struct {
		perm    kmsg.ACLPermissionType
		parent  kmsg.ACLOperation
		implied map[kmsg.ACLOperation]bool
	}{
		{PermissionAllow, OpAll, everything},
		{PermissionDeny, OpAll, everything},
		{PermissionAllow, OpRead, set(OpDescribe)},
		{PermissionAllow, OpWrite, set(OpDescribe)},
		{PermissionAllow, OpDelete, set(OpDescribe)},
		{PermissionAllow, OpAlter, set(OpDescribe)},
		{PermissionDeny, OpDescribe, set()},
		{PermissionAllow, OpAlterConfigs, set(OpDescribeConfigs)},
		{PermissionDeny, OpDescribeConfigs, set()},
		// Not in Kafka's test, but what its rules give.
		{PermissionDeny, OpRead, set()},
		{PermissionDeny, OpAlterConfigs, set()},
		{PermissionAllow, OpDescribe, set()},
		{PermissionAllow, OpCreate, set()},
		{PermissionAllow, OpIdempotentWrite, set()},
	} {
		var bindings []Binding
		if tc.perm == PermissionAllow {
			bindings = []Binding{allow(clusterRes, alice, anyIP, tc.parent)}
		} else {
			bindings = []Binding{deny(clusterRes, alice, anyIP, tc.parent), allow(clusterRes, alice, anyIP, OpAll)}
		}
		a := New(bindings, Config{})
		for _, op := range allOps {
			got := a.Authorize(alice, "192.168.3.1", op, ResourceCluster, ClusterName)
			affected := op == tc.parent || tc.implied[op]
			if want := affected == (tc.perm == PermissionAllow); got != want {
				t.Errorf("%v %v: Authorize(%v) = %v, want %v", tc.perm, tc.parent, op, got, want)
			}
		}
	}
}

// TestAuthorizeByResourceType ports BaseAuthorizerTest's
// testAuthorizeByResourceType* cases: each step is the full set of
// bindings at that point of Kafka's test and the answers it expects.
func TestAuthorizeByResourceType(t *testing.T) {
	const user1, user2 = "User:user1", "User:user2"
	type step struct {
		bindings []Binding
		checks   []check
	}
	r1, r2 := topic("sb1-1"), topic("sb2-2")
	for _, tc := range []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"MultipleAddAndRemove", Config{}, []step{
			{nil, []check{{user1, host1, OpRead, ResourceTopic, "", false}}},
			{[]Binding{allow(r1, user1, host1, OpRead)}, []check{{user1, host1, OpRead, ResourceTopic, "", true}}},
			{[]Binding{allow(r1, user1, host1, OpRead), deny(r1, user1, host1, OpRead)},
				[]check{{user1, host1, OpRead, ResourceTopic, "", false}}},
		}},
		{"IsolationUnrelatedDenyWontDominateAllow", Config{}, []step{
			{[]Binding{
				deny(r1, user1, host1, OpRead), deny(r1, user2, host1, OpRead), deny(r1, user1, host2, OpWrite),
				deny(r1, user2, host2, OpRead), allow(r1, user1, host2, OpRead),
				deny(r2, user1, host2, OpRead),
				deny(groupPfx("s"), user1, host2, OpRead),
			}, []check{
				{user1, host1, OpRead, ResourceTopic, "", false},
				{user1, host1, OpRead, ResourceGroup, "", false},
				{user1, host1, OpRead, ResourceTransactionalID, "", false},
				{user1, host1, OpRead, ResourceCluster, "", false},
				{user1, host2, OpRead, ResourceTopic, "", true},
			}},
		}},
		{"DenyTakesPrecedence", Config{}, []step{
			{[]Binding{allow(r1, user1, host1, OpWrite)}, []check{{user1, host1, OpWrite, ResourceTopic, "", true}}},
			{[]Binding{allow(r1, user1, host1, OpWrite), deny(r1, user1, host1, OpWrite)},
				[]check{{user1, host1, OpWrite, ResourceTopic, "", false}}},
		}},
		{"PrefixedResourceDenyDominate", Config{}, []step{
			{[]Binding{allow(groupPfx("abcde"), user1, host1, OpRead)},
				[]check{{user1, host1, OpRead, ResourceGroup, "", true}}},
			{[]Binding{allow(groupPfx("abcde"), user1, host1, OpRead), deny(groupPfx("abcd"), user1, host1, OpRead)},
				[]check{{user1, host1, OpRead, ResourceGroup, "", false}}},
			{[]Binding{allow(groupPfx("abcde"), user1, host1, OpRead), deny(groupPfx("abcd"), user1, host1, OpRead),
				allow(groupPfx("abc"), user1, host1, OpRead)},
				[]check{{user1, host1, OpRead, ResourceGroup, "", true}}},
			{[]Binding{allow(groupPfx("abcde"), user1, host1, OpRead), deny(groupPfx("abcd"), user1, host1, OpRead),
				allow(groupPfx("abc"), user1, host1, OpRead), deny(groupPfx("a"), user1, host1, OpRead)},
				[]check{{user1, host1, OpRead, ResourceGroup, "", false}}},
			{[]Binding{allow(groupPfx("abcde"), user1, host1, OpRead), deny(groupPfx("abcd"), user1, host1, OpRead),
				allow(groupPfx("abc"), user1, host1, OpRead), deny(groupPfx("a"), user1, host1, OpRead),
				allow(groupPfx("ab"), user1, host1, OpRead)},
				[]check{{user1, host1, OpRead, ResourceGroup, "", false}}},
		}},
		{"WildcardResourceDenyDominate", Config{}, []step{
			{[]Binding{allow(groupPfx("hello"), user1, host1, OpWrite)},
				[]check{{user1, host1, OpWrite, ResourceGroup, "", true}}},
			{[]Binding{allow(groupPfx("hello"), user1, host1, OpWrite), deny(group("*"), user1, host1, OpWrite)},
				[]check{{user1, host1, OpWrite, ResourceGroup, "", false}}},
			{[]Binding{allow(groupPfx("hello"), user1, host1, OpWrite), deny(group("*"), user1, host1, OpWrite),
				allow(group("*"), user1, host1, OpWrite), allow(group("aloha"), user1, host1, OpWrite)},
				[]check{{user1, host1, OpWrite, ResourceGroup, "", false}}},
		}},
		{"WithAllOperationAce", Config{}, []step{
			{nil, []check{{user1, host1, OpRead, ResourceTopic, "", false}}},
			{[]Binding{deny(r1, user1, host1, OpWrite), allow(r1, user1, host1, OpAll)},
				[]check{{user1, host1, OpRead, ResourceTopic, "", true}}},
			{[]Binding{deny(r1, user1, host1, OpWrite), allow(r1, user1, host1, OpAll), deny(r1, user1, host1, OpAll)},
				[]check{{user1, host1, OpRead, ResourceTopic, "", false}}},
		}},
		{"WithAllHostAce", Config{}, []step{
			{[]Binding{allow(r1, user1, host1, OpRead)}, []check{{user1, host1, OpRead, ResourceTopic, "", true}}},
			{[]Binding{allow(r1, user1, host1, OpRead), deny(r1, user1, anyIP, OpRead)},
				[]check{{user1, host1, OpRead, ResourceTopic, "", false}}},
			{[]Binding{allow(r1, user1, host1, OpRead), deny(r1, user1, anyIP, OpRead), deny(r2, user1, host1, OpRead)},
				[]check{{user1, host1, OpRead, ResourceTopic, "", false}, {user1, host2, OpRead, ResourceTopic, "", false}}},
			{[]Binding{allow(r1, user1, host1, OpRead), deny(r1, user1, anyIP, OpRead), deny(r2, user1, host1, OpRead),
				allow(r2, user1, anyIP, OpRead)},
				[]check{{user1, host2, OpRead, ResourceTopic, "", true}}},
			{[]Binding{allow(r1, user1, host1, OpRead), deny(r1, user1, anyIP, OpRead), deny(r2, user1, host1, OpRead),
				allow(r2, user1, anyIP, OpRead), deny(r2, user1, anyIP, OpRead)},
				[]check{{user1, host2, OpRead, ResourceTopic, "", false}}},
		}},
		{"WithAllPrincipalAce", Config{}, []step{
			{[]Binding{allow(r1, user1, host1, OpRead)}, []check{{user1, host1, OpRead, ResourceTopic, "", true}}},
			{[]Binding{allow(r1, user1, host1, OpRead), deny(r1, anyone, host1, OpRead)},
				[]check{{user1, host1, OpRead, ResourceTopic, "", false}}},
			{[]Binding{allow(r1, user1, host1, OpRead), deny(r1, anyone, host1, OpRead), deny(r2, user1, host1, OpRead)},
				[]check{{user1, host1, OpRead, ResourceTopic, "", false}, {user2, host1, OpRead, ResourceTopic, "", false}}},
			{[]Binding{allow(r1, user1, host1, OpRead), deny(r1, anyone, host1, OpRead), deny(r2, user1, host1, OpRead),
				allow(r2, anyone, host1, OpRead)},
				[]check{{user2, host1, OpRead, ResourceTopic, "", true}}},
			{[]Binding{allow(r1, user1, host1, OpRead), deny(r1, anyone, host1, OpRead), deny(r2, user1, host1, OpRead),
				allow(r2, anyone, host1, OpRead), deny(r2, anyone, host1, OpRead)},
				[]check{{user2, host1, OpRead, ResourceTopic, "", false}}},
		}},
		{"SuperUserHasAccess", Config{SuperUsers: []string{"User:superuser1"}}, []step{
			{[]Binding{
				deny(topic("*"), anyone, anyIP, OpAll), deny(Resource{ResourceCluster, "*", PatternLiteral}, anyone, anyIP, OpAll),
				deny(group("*"), anyone, anyIP, OpAll), deny(Resource{ResourceTransactionalID, "*", PatternLiteral}, anyone, anyIP, OpAll),
			}, []check{
				{"User:superuser1", "192.0.4.4", OpRead, ResourceTopic, "", true},
				{"User:superuser1", "192.0.4.4", OpRead, ResourceCluster, "", true},
				{"User:superuser1", "192.0.4.4", OpRead, ResourceGroup, "", true},
				{"User:superuser1", "192.0.4.4", OpRead, ResourceTransactionalID, "", true},
				{user1, "192.0.4.4", OpRead, ResourceTopic, "", false},
			}},
		}},
		// AclAuthorizerTest.testAuthorizeByResourceTypeNoAclFoundOverride,
		// and the one thing that still denies then: a DENY on "*".
		{"NoAclFoundOverride", Config{AllowEveryoneIfNoACLFound: true}, []step{
			{nil, []check{
				{alice, "192.168.0.1", OpRead, ResourceTopic, "", true},
				{alice, "192.168.0.1", OpWrite, ResourceTopic, "", true},
			}},
			{[]Binding{deny(topicPfx("a"), alice, anyIP, OpWrite), deny(r1, alice, anyIP, OpWrite)},
				[]check{{alice, "192.168.0.1", OpWrite, ResourceTopic, "", true}}},
			{[]Binding{deny(topic("*"), alice, anyIP, OpWrite)},
				[]check{{alice, "192.168.0.1", OpWrite, ResourceTopic, "", false}}},
		}},
		{"no implied operations", Config{}, []step{
			{[]Binding{allow(r1, alice, anyIP, OpWrite)}, []check{
				{alice, host1, OpDescribe, ResourceTopic, "", false},
				{alice, host1, OpWrite, ResourceTopic, "", true},
			}},
		}},
		{"a literal allow under a denied prefix", Config{}, []step{
			{[]Binding{allow(topic("payments.eu"), alice, anyIP, OpWrite), deny(topicPfx("pay"), alice, anyIP, OpWrite)},
				[]check{{alice, host1, OpWrite, ResourceTopic, "", false}}},
			{[]Binding{allow(topic("*"), alice, anyIP, OpWrite), deny(topicPfx("pay"), alice, anyIP, OpWrite)},
				[]check{{alice, host1, OpWrite, ResourceTopic, "", true}}},
			{[]Binding{allow(topicPfx("p"), alice, anyIP, OpWrite), deny(topicPfx("pay"), alice, anyIP, OpWrite)},
				[]check{{alice, host1, OpWrite, ResourceTopic, "", true}}},
		}},
		{"filter-only values are refused", Config{AllowEveryoneIfNoACLFound: true}, []step{
			{nil, []check{
				{alice, host1, OpAny, ResourceTopic, "", false},
				{alice, host1, OpWrite, ResourceAny, "", false},
				{alice, host1, OpUnknown, ResourceTopic, "", false},
				{alice, host1, OpWrite, ResourceUnknown, "", false},
			}},
		}},
	} {
		for i, s := range tc.steps {
			a := New(s.bindings, tc.cfg)
			for _, c := range s.checks {
				if got := a.AuthorizeByResourceType(c.principal, c.host, c.op, c.rt); got != c.want {
					t.Errorf("%s step %d: AuthorizeByResourceType(%s, %s, %v, %v) = %v, want %v",
						tc.name, i, c.principal, c.host, c.op, c.rt, got, c.want)
				}
			}
		}
	}
}

func TestParseSuperUsers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"", nil, false},
		{"  ", nil, false},
		{"User:admin", []string{"User:admin"}, false},
		{"User:admin;User:broker", []string{"User:admin", "User:broker"}, false},
		{"User:superuser1; User:superuser2", []string{"User:superuser1", "User:superuser2"}, false},
		{"User:CN=broker,O=kbroker;", []string{"User:CN=broker,O=kbroker"}, false},
		{"User:a;;", []string{"User:a"}, false},
		{"User:", []string{"User:"}, false},
		{"User:a;;User:b", nil, true},
		{";User:a", nil, true},
		// Kafka reads the raw value and fails on this one; a trailing
		// blank is forgiven here (config files end lines with them).
		{"User:a; ", []string{"User:a"}, false},
		{"admin", nil, true},
	} {
		got, err := ParseSuperUsers(tc.in)
		if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseSuperUsers(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestBindingsAndDescribe(t *testing.T) {
	b1 := allow(topic("b"), alice, anyIP, OpRead)
	b2 := allow(topic("a"), bob, anyIP, OpRead)
	b3 := deny(group("a"), alice, anyIP, OpRead)
	b4 := allow(topicPfx("a"), alice, anyIP, OpRead)
	a := New([]Binding{b1, b3, b2, b1, b4}, Config{})
	want := []Binding{b2, b1, b4, b3}
	if got := a.Bindings(); !reflect.DeepEqual(got, want) {
		t.Errorf("Bindings() = %v\nwant %v", got, want)
	}
	name := "ab"
	f := AnyFilter()
	f.ResourceName, f.PatternType = &name, PatternMatch
	if got := a.Describe(f); !reflect.DeepEqual(got, []Binding{b4}) {
		t.Errorf("Describe(MATCH ab) = %v", got)
	}
}

// BenchmarkAuthorize measures one decision with many ACLs loaded, for a
// mix close to a real cluster: per-user literal topic and group ACLs,
// some prefixed, a few on "*", with the requester's own ACLs among them.
func BenchmarkAuthorize(b *testing.B) {
	for _, n := range []int{0, 1000, 10000} {
		bindings := benchBindings(n)
		a := New(bindings, Config{SuperUsers: []string{"User:admin"}})
		b.Run(fmt.Sprintf("bindings=%d/literal", n), func(b *testing.B) {
			for b.Loop() {
				a.Authorize("User:user-7", "10.0.0.7", OpWrite, ResourceTopic, "topic-107")
			}
		})
		b.Run(fmt.Sprintf("bindings=%d/prefixed", n), func(b *testing.B) {
			for b.Loop() {
				a.Authorize("User:user-7", "10.0.0.7", OpRead, ResourceTopic, "team-7.orders.v2")
			}
		})
		b.Run(fmt.Sprintf("bindings=%d/denied", n), func(b *testing.B) {
			for b.Loop() {
				a.Authorize("User:stranger", "10.0.0.7", OpWrite, ResourceTopic, "topic-107")
			}
		})
		b.Run(fmt.Sprintf("bindings=%d/describe-implied", n), func(b *testing.B) {
			for b.Loop() {
				a.Authorize("User:user-7", "10.0.0.7", OpDescribe, ResourceGroup, "group-7")
			}
		})
		b.Run(fmt.Sprintf("bindings=%d/by-resource-type", n), func(b *testing.B) {
			for b.Loop() {
				a.AuthorizeByResourceType("User:user-7", "10.0.0.7", OpWrite, ResourceTopic)
			}
		})
	}
}

// BenchmarkNew is the cost of rebuilding the snapshot after a change.
func BenchmarkNew(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		bindings := benchBindings(n)
		b.Run(fmt.Sprintf("bindings=%d", n), func(b *testing.B) {
			for b.Loop() {
				New(bindings, Config{})
			}
		})
	}
}

func benchBindings(n int) []Binding {
	const users = 100
	var out []Binding
	for i := 0; len(out) < n; i++ {
		u := fmt.Sprintf("User:user-%d", i%users)
		switch i % 10 {
		case 0, 1, 2, 3, 4, 5:
			out = append(out, allow(topic(fmt.Sprintf("topic-%d", i)), u, anyIP, OpWrite))
		case 6:
			out = append(out, allow(topicPfx(fmt.Sprintf("team-%d.", i%users)), u, anyIP, OpRead))
		case 7:
			out = append(out, allow(group(fmt.Sprintf("group-%d", i%users)), u, anyIP, OpRead))
		case 8:
			out = append(out, deny(topic(fmt.Sprintf("topic-%d", i)), u, fmt.Sprintf("10.1.%d.%d", i/250%250, i%250), OpWrite))
		case 9:
			if i%1000 == 9 {
				out = append(out, allow(topic("*"), u, anyIP, OpDescribe))
			} else {
				out = append(out, allow(topicPfx(fmt.Sprintf("svc-%d-", i)), u, anyIP, OpWrite))
			}
		}
	}
	return out
}
