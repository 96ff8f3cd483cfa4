package acl

import (
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestNames(t *testing.T) {
	// SecurityUtils.resourceTypeName / operationName / permissionTypeName.
	types := map[kmsg.ACLResourceType]string{
		ResourceTopic: "Topic", ResourceGroup: "Group", ResourceCluster: "Cluster",
		ResourceTransactionalID: "TransactionalId", ResourceDelegationToken: "DelegationToken",
		ResourceUser: "User", ResourceAny: "Any", ResourceUnknown: "Unknown",
	}
	for typ, name := range types {
		if got := ResourceTypeName(typ); got != name {
			t.Errorf("ResourceTypeName(%v) = %q, want %q", typ, got, name)
		}
		for _, in := range []string{name, strings.ToUpper(name), strings.ToLower(name), typ.String()} {
			if got := ParseResourceType(in); got != typ {
				t.Errorf("ParseResourceType(%q) = %v, want %v", in, got, typ)
			}
		}
	}
	ops := map[kmsg.ACLOperation]string{
		OpAll: "All", OpRead: "Read", OpWrite: "Write", OpCreate: "Create", OpDelete: "Delete",
		OpAlter: "Alter", OpDescribe: "Describe", OpClusterAction: "ClusterAction",
		OpDescribeConfigs: "DescribeConfigs", OpAlterConfigs: "AlterConfigs",
		OpIdempotentWrite: "IdempotentWrite", OpCreateTokens: "CreateTokens",
		OpDescribeTokens: "DescribeTokens", OpAny: "Any",
	}
	for op, name := range ops {
		if got := OperationName(op); got != name {
			t.Errorf("OperationName(%v) = %q, want %q", op, got, name)
		}
		for _, in := range []string{name, strings.ToUpper(name)} {
			if got := ParseOperation(in); got != op {
				t.Errorf("ParseOperation(%q) = %v, want %v", in, got, op)
			}
		}
	}
	// Kafka's lookup upper-cases the PascalCase name: the enum spelling
	// with underscores is not a name it reads.
	for _, in := range []string{"IDEMPOTENT_WRITE", "", "Reads"} {
		if got := ParseOperation(in); got != OpUnknown {
			t.Errorf("ParseOperation(%q) = %v, want UNKNOWN", in, got)
		}
	}
	for p, name := range map[kmsg.ACLPermissionType]string{PermissionAllow: "Allow", PermissionDeny: "Deny", PermissionAny: "Any"} {
		if got := PermissionName(p); got != name {
			t.Errorf("PermissionName(%v) = %q, want %q", p, got, name)
		}
		if got := ParsePermission(strings.ToUpper(name)); got != p {
			t.Errorf("ParsePermission(%q) = %v, want %v", strings.ToUpper(name), got, p)
		}
	}
	for p, name := range map[kmsg.ACLResourcePatternType]string{PatternLiteral: "LITERAL", PatternPrefixed: "PREFIXED", PatternMatch: "MATCH", PatternAny: "ANY"} {
		if got := PatternTypeName(p); got != name {
			t.Errorf("PatternTypeName(%v) = %q, want %q", p, got, name)
		}
		if got := ParsePatternType(name); got != p {
			t.Errorf("ParsePatternType(%q) = %v, want %v", name, got, p)
		}
	}
	// PatternType.fromString is case-sensitive.
	if got := ParsePatternType("prefixed"); got != PatternUnknown {
		t.Errorf("ParsePatternType(prefixed) = %v, want UNKNOWN", got)
	}
}

func TestZNodePath(t *testing.T) {
	for _, tc := range []struct {
		r    Resource
		path string
		err  bool
	}{
		{Resource{ResourceTopic, "orders", PatternLiteral}, "/kafka-acl/Topic/orders", false},
		{Resource{ResourceTopic, "*", PatternLiteral}, "/kafka-acl/Topic/*", false},
		{Resource{ResourceGroup, "g.1", PatternLiteral}, "/kafka-acl/Group/g.1", false},
		{Resource{ResourceCluster, "kafka-cluster", PatternLiteral}, "/kafka-acl/Cluster/kafka-cluster", false},
		{Resource{ResourceTransactionalID, "tx", PatternLiteral}, "/kafka-acl/TransactionalId/tx", false},
		{Resource{ResourceDelegationToken, "tok", PatternLiteral}, "/kafka-acl/DelegationToken/tok", false},
		{Resource{ResourceUser, "User:bob", PatternLiteral}, "/kafka-acl/User/User:bob", false},
		{Resource{ResourceTopic, "pay.", PatternPrefixed}, "/kafka-acl-extended/prefixed/Topic/pay.", false},
		{Resource{ResourceGroup, "team-", PatternPrefixed}, "/kafka-acl-extended/prefixed/Group/team-", false},
		{Resource{ResourceGroup, "a/b", PatternLiteral}, "", true},
		{Resource{ResourceTopic, "", PatternLiteral}, "", true},
		{Resource{ResourceTopic, "..", PatternLiteral}, "", true},
		{Resource{ResourceTopic, "a\x00b", PatternLiteral}, "", true},
		{Resource{ResourceTopic, "a\x7fb", PatternLiteral}, "", true},
		{Resource{ResourceTopic, "a\xffb", PatternLiteral}, "", true},
		{Resource{ResourceTopic, "x", PatternMatch}, "", true},
		{Resource{ResourceTopic, "x", PatternAny}, "", true},
		{Resource{ResourceAny, "x", PatternLiteral}, "", true},
		{Resource{ResourceUnknown, "x", PatternLiteral}, "", true},
	} {
		path, err := ZNodePath(tc.r)
		if (err != nil) != tc.err || path != tc.path {
			t.Errorf("ZNodePath(%v) = %q, %v; want %q, error %v", tc.r, path, err, tc.path, tc.err)
			continue
		}
		if tc.err {
			continue
		}
		back, err := ParseZNodePath(path)
		if err != nil || back != tc.r {
			t.Errorf("ParseZNodePath(%q) = %v, %v; want %v", path, back, err, tc.r)
		}
	}
}

func TestParseZNodePath(t *testing.T) {
	for _, tc := range []struct {
		path string
		want Resource
		err  bool
	}{
		{"/kafka-acl/topic/x", Resource{ResourceTopic, "x", PatternLiteral}, false},
		{"/kafka-acl/TOPIC/x", Resource{ResourceTopic, "x", PatternLiteral}, false},
		{"/kafka-acl-extended/prefixed/TransactionalId/t", Resource{ResourceTransactionalID, "t", PatternPrefixed}, false},
		{"/kafka-acl/Topic", Resource{}, true},
		{"/kafka-acl/Topic/", Resource{}, true},
		{"/kafka-acl/Topic/a/b", Resource{}, true},
		{"/kafka-acl/Widget/x", Resource{}, true},
		{"/kafka-acl/Any/x", Resource{}, true},
		{"/kafka-acl-extended/literal/Topic/x", Resource{}, true},
		{"/kafka-acl-changes/acl_changes_0000000001", Resource{}, true},
		{"/brokers/topics/x", Resource{}, true},
	} {
		got, err := ParseZNodePath(tc.path)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseZNodePath(%q) = %v, %v; want %v, error %v", tc.path, got, err, tc.want, tc.err)
		}
	}
}

func TestSetupPaths(t *testing.T) {
	want := []string{
		"/kafka-acl",
		"/kafka-acl/Topic", "/kafka-acl/Group", "/kafka-acl/Cluster", "/kafka-acl/TransactionalId",
		"/kafka-acl/DelegationToken", "/kafka-acl/User",
		"/kafka-acl-extended", "/kafka-acl-extended/prefixed",
		"/kafka-acl-extended/prefixed/Topic", "/kafka-acl-extended/prefixed/Group",
		"/kafka-acl-extended/prefixed/Cluster", "/kafka-acl-extended/prefixed/TransactionalId",
		"/kafka-acl-extended/prefixed/DelegationToken", "/kafka-acl-extended/prefixed/User",
		"/kafka-acl-changes", "/kafka-acl-extended-changes",
	}
	if got := SetupPaths(); !reflect.DeepEqual(got, want) {
		t.Errorf("SetupPaths() = %q\nwant %q", got, want)
	}
}

func TestEncodeZNode(t *testing.T) {
	alice := Entry{"User:alice", "*", OpRead, PermissionAllow}
	for _, tc := range []struct {
		name    string
		entries []Entry
		json    string
	}{
		{"one", []Entry{alice},
			`{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}`},
		{"two, duplicate dropped", []Entry{
			alice,
			{"User:*", "10.0.0.1", OpIdempotentWrite, PermissionDeny},
			alice,
		}, `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},` +
			`{"principal":"User:*","permissionType":"Deny","operation":"IdempotentWrite","host":"10.0.0.1"}]}`},
		{"all and configs", []Entry{
			{"User:CN=a/b,O=\"x\"", "::1", OpAll, PermissionAllow},
			{"User:é", "*", OpDescribeConfigs, PermissionAllow},
		}, `{"version":1,"acls":[{"principal":"User:CN=a/b,O=\"x\"","permissionType":"Allow","operation":"All","host":"::1"},` +
			`{"principal":"User:é","permissionType":"Allow","operation":"DescribeConfigs","host":"*"}]}`},
		{"control characters", []Entry{{"User:a\tb\x01<&>", "*", OpWrite, PermissionAllow}},
			`{"version":1,"acls":[{"principal":"User:a\tb\u0001<&>","permissionType":"Allow","operation":"Write","host":"*"}]}`},
		{"empty", nil, `{"version":1,"acls":[]}`},
	} {
		got := string(EncodeZNode(tc.entries))
		if got != tc.json {
			t.Errorf("%s: EncodeZNode =\n%s\nwant\n%s", tc.name, got, tc.json)
			continue
		}
		back, err := DecodeZNode([]byte(got))
		if err != nil {
			t.Errorf("%s: DecodeZNode: %v", tc.name, err)
			continue
		}
		want := dedupe(tc.entries)
		if len(back) != len(want) || (len(want) > 0 && !reflect.DeepEqual(back, want)) {
			t.Errorf("%s: DecodeZNode = %v, want %v", tc.name, back, want)
		}
	}
}

func dedupe(entries []Entry) []Entry {
	var out []Entry
	seen := map[Entry]bool{}
	for _, e := range entries {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out
}

func TestDecodeZNode(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		want []Entry
		err  bool
	}{
		{"empty data", "", nil, false},
		// The layout Kafka's own doc comment shows: spaces, another key order.
		{"kafka doc example", `{"version": 1, "acls": [ { "host":"host1", "permissionType": "Deny","operation": "Read","principal": "User:alice"}]}`,
			[]Entry{{"User:alice", "host1", OpRead, PermissionDeny}}, false},
		{"upper-case names", `{"version":1,"acls":[{"principal":"User:bob","permissionType":"ALLOW","operation":"DESCRIBECONFIGS","host":"*"}]}`,
			[]Entry{{"User:bob", "*", OpDescribeConfigs, PermissionAllow}}, false},
		{"unknown keys ignored", `{"version":1,"extra":{"a":[1]},"acls":[{"principal":"User:bob","permissionType":"Allow","operation":"Write","host":"*","comment":"x"}]}`,
			[]Entry{{"User:bob", "*", OpWrite, PermissionAllow}}, false},
		{"unknown names kept as Unknown", `{"version":1,"acls":[{"principal":"User:bob","permissionType":"Maybe","operation":"Fly","host":"*"}]}`,
			[]Entry{{"User:bob", "*", OpUnknown, PermissionUnknown}}, false},
		{"no acls", `{"version":1,"acls":[]}`, []Entry{}, false},
		{"version 2", `{"version":2,"acls":[]}`, nil, true},
		{"version as string", `{"version":"1","acls":[]}`, nil, true},
		{"no version", `{"acls":[]}`, nil, true},
		{"no acls key", `{"version":1}`, nil, true},
		{"acls not array", `{"version":1,"acls":{}}`, nil, true},
		{"entry not object", `{"version":1,"acls":[1]}`, nil, true},
		{"missing host", `{"version":1,"acls":[{"principal":"User:bob","permissionType":"Allow","operation":"Write"}]}`, nil, true},
		{"principal without type", `{"version":1,"acls":[{"principal":"bob","permissionType":"Allow","operation":"Write","host":"*"}]}`, nil, true},
		{"operation Any", `{"version":1,"acls":[{"principal":"User:bob","permissionType":"Allow","operation":"Any","host":"*"}]}`, nil, true},
		{"permission Any", `{"version":1,"acls":[{"principal":"User:bob","permissionType":"Any","operation":"Read","host":"*"}]}`, nil, true},
		{"case-sensitive keys", `{"Version":1,"acls":[]}`, nil, true},
		{"truncated", `{"version":1,"acls":[`, nil, true},
		{"not json", `Topic:x`, nil, true},
		{"array", `[]`, nil, true},
		{"null", `null`, nil, true},
	} {
		got, err := DecodeZNode([]byte(tc.data))
		if (err != nil) != tc.err {
			t.Errorf("%s: DecodeZNode error = %v, want error %v", tc.name, err, tc.err)
			continue
		}
		if !tc.err && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: DecodeZNode = %#v, want %#v", tc.name, got, tc.want)
		}
	}
}

func TestDecodeZNodeErrorIsShort(t *testing.T) {
	huge := `{"version":1,"acls":[` + strings.Repeat(`{"principal":"User:a","permissionType":"Allow","operation":"Read","host":"*"},`, 100000) + `x]}`
	_, err := DecodeZNode([]byte(huge))
	if err == nil {
		t.Fatal("no error")
	}
	if len(err.Error()) > 300 {
		t.Errorf("error is %d bytes long", len(err.Error()))
	}
}

func TestChangeNotification(t *testing.T) {
	for _, tc := range []struct {
		r      Resource
		parent string
		data   string
		err    bool
	}{
		// LiteralAclChangeStore.encode: ResourceType.toString (the enum name).
		{Resource{ResourceTopic, "orders", PatternLiteral}, "/kafka-acl-changes", "TOPIC:orders", false},
		{Resource{ResourceTopic, "*", PatternLiteral}, "/kafka-acl-changes", "TOPIC:*", false},
		{Resource{ResourceTransactionalID, "a:b", PatternLiteral}, "/kafka-acl-changes", "TRANSACTIONAL_ID:a:b", false},
		{Resource{ResourceCluster, "kafka-cluster", PatternLiteral}, "/kafka-acl-changes", "CLUSTER:kafka-cluster", false},
		// ExtendedAclChangeStore.encode: ExtendedAclChangeEvent, enum names.
		{Resource{ResourceTopic, "pay.", PatternPrefixed}, "/kafka-acl-extended-changes",
			`{"version":1,"resourceType":"TOPIC","name":"pay.","patternType":"PREFIXED"}`, false},
		{Resource{ResourceDelegationToken, `q"`, PatternPrefixed}, "/kafka-acl-extended-changes",
			`{"version":1,"resourceType":"DELEGATION_TOKEN","name":"q\"","patternType":"PREFIXED"}`, false},
		{Resource{ResourceTopic, "x", PatternMatch}, "", "", true},
		{Resource{ResourceAny, "x", PatternLiteral}, "", "", true},
	} {
		parent, data, err := ChangeNotification(tc.r)
		if (err != nil) != tc.err || parent != tc.parent || string(data) != tc.data {
			t.Errorf("ChangeNotification(%v) = %q, %q, %v; want %q, %q, error %v", tc.r, parent, data, err, tc.parent, tc.data, tc.err)
			continue
		}
		if tc.err {
			continue
		}
		back, err := ParseChangeNotification(parent, data)
		if err != nil || back != tc.r {
			t.Errorf("ParseChangeNotification(%q, %q) = %v, %v; want %v", parent, data, back, err, tc.r)
		}
	}
}

func TestParseChangeNotification(t *testing.T) {
	for _, tc := range []struct {
		parent, data string
		want         Resource
		err          bool
	}{
		// Kafka before 2.0 wrote "Topic:name"; fromString upper-cases.
		{LiteralChanges, "Topic:t", Resource{ResourceTopic, "t", PatternLiteral}, false},
		{LiteralChanges, "group:g", Resource{ResourceGroup, "g", PatternLiteral}, false},
		{LiteralChanges, "TOPIC:", Resource{ResourceTopic, "", PatternLiteral}, false},
		{LiteralChanges, "TOPIC", Resource{}, true},
		{LiteralChanges, "WIDGET:x", Resource{}, true},
		{ExtendedChanges, `{"name":"p","patternType":"PREFIXED","resourceType":"Group","version":1,"x":2}`,
			Resource{ResourceGroup, "p", PatternPrefixed}, false},
		{ExtendedChanges, `{"resourceType":"TOPIC","name":"p","patternType":"PREFIXED"}`,
			Resource{ResourceTopic, "p", PatternPrefixed}, false},
		{ExtendedChanges, `{"version":2,"resourceType":"TOPIC","name":"p","patternType":"PREFIXED"}`, Resource{}, true},
		{ExtendedChanges, `{"version":1,"resourceType":"TOPIC","name":"p","patternType":"prefixed"}`, Resource{}, true},
		{ExtendedChanges, `{"version":1,"resourceType":"TOPIC","name":"p","patternType":"LITERAL"}`, Resource{}, true},
		{ExtendedChanges, `{"version":1,"resourceType":"TOPIC","patternType":"PREFIXED"}`, Resource{}, true},
		{ExtendedChanges, `{"version":1,"resourceType":"ANY","name":"p","patternType":"PREFIXED"}`, Resource{}, true},
		{ExtendedChanges, `TOPIC:x`, Resource{}, true},
		{"/kafka-acl", "TOPIC:x", Resource{}, true},
	} {
		got, err := ParseChangeNotification(tc.parent, []byte(tc.data))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseChangeNotification(%q, %q) = %v, %v; want %v, error %v", tc.parent, tc.data, got, err, tc.want, tc.err)
		}
	}
}
