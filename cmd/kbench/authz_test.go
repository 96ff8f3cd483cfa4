package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// bindings expands blocks into the ACLs kadm's builders create.
func bindings(blocks []aclBlock) []acl.Binding {
	var out []acl.Binding
	for _, b := range blocks {
		for _, name := range b.names {
			out = append(out, acl.Binding{
				Resource: acl.Resource{Type: b.rt, Name: name, Pattern: b.pattern},
				Entry:    acl.Entry{Principal: b.principal, Host: b.host, Operation: b.op, Permission: b.perm},
			})
		}
	}
	return out
}

// The filler ACLs: exactly as many as asked, valid, distinct, and none of
// them grants or denies the workload's principal anything on its
// resources, which the workload's own ACLs then allow, by the broker's
// authorizer (internal/acl) with allow.everyone.if.no.acl.found=false.
func TestFillerACLs(t *testing.T) {
	const (
		topic = "kbench-1700000000-0a1b2c3d"
		host  = "127.0.0.1"
	)
	txnID := transactionalID(topic)
	type check struct {
		op   kmsg.ACLOperation
		rt   kmsg.ACLResourceType
		name string
	}
	// What the workload asks the authorizer (internal/authz's table):
	// CreateTopics, Metadata, ListOffsets, Produce, Fetch, DeleteTopics
	// on the topic; the transactional producer's id.
	checks := []check{
		{acl.OpCreate, acl.ResourceTopic, topic},
		{acl.OpDescribeConfigs, acl.ResourceTopic, topic},
		{acl.OpDescribe, acl.ResourceTopic, topic},
		{acl.OpWrite, acl.ResourceTopic, topic},
		{acl.OpRead, acl.ResourceTopic, topic},
		{acl.OpDelete, acl.ResourceTopic, topic},
		{acl.OpWrite, acl.ResourceTransactionalID, txnID},
		{acl.OpDescribe, acl.ResourceTransactionalID, txnID},
	}
	for _, principal := range []string{anonymous, "User:" + scramUser} {
		for _, n := range []int{0, 1, 4, 5, 6, 33, 34, 1000, 1234} {
			filler := bindings(fillerACLs(n, principal))
			if len(filler) != n || countACLs(fillerACLs(n, principal)) != n {
				t.Fatalf("fillerACLs(%d): %d ACLs", n, len(filler))
			}
			sorted := slices.Clone(filler)
			slices.SortFunc(sorted, acl.CompareBindings)
			if len(slices.Compact(sorted)) != n {
				t.Fatalf("fillerACLs(%d): repeated ACLs", n)
			}
			for _, b := range filler {
				if err := acl.ValidateBinding(b); err != nil {
					t.Fatalf("%v: %v", b, err)
				}
			}
			cfg := acl.Config{SuperUsers: []string{"User:" + adminUser}}
			alone := acl.New(filler, cfg)
			workload := bindings(workloadACLs(principal, topic, txnID))
			with := acl.New(append(slices.Clone(filler), workload...), cfg)
			for _, c := range checks {
				if alone.Authorize(principal, host, c.op, c.rt, c.name) {
					t.Errorf("%d filler ACLs allow %s %v on %v %s", n, principal, c.op, c.rt, c.name)
				}
				if !with.Authorize(principal, host, c.op, c.rt, c.name) {
					t.Errorf("with %d filler ACLs, the workload's do not allow %s %v on %v %s", n, principal, c.op, c.rt, c.name)
				}
			}
			// An idempotent producer's InitProducerId: no IdempotentWrite
			// on the cluster, Write on some topic only with the
			// workload's ACLs.
			for _, a := range []*acl.Authorizer{alone, with} {
				if a.Authorize(principal, host, acl.OpIdempotentWrite, acl.ResourceCluster, acl.ClusterName) {
					t.Errorf("%d filler ACLs: IdempotentWrite on the cluster allowed", n)
				}
			}
			if alone.AuthorizeByResourceType(principal, host, acl.OpWrite, acl.ResourceTopic) {
				t.Errorf("%d filler ACLs allow Write on some topic", n)
			}
			if !with.AuthorizeByResourceType(principal, host, acl.OpWrite, acl.ResourceTopic) {
				t.Errorf("with %d filler ACLs, the workload's do not allow Write on some topic", n)
			}
			if n >= 5 && !alone.Authorize("User:monitoring", host, acl.OpDescribe, acl.ResourceTopic, topic) {
				t.Errorf("%d filler ACLs: monitoring may not describe the workload's topic", n)
			}
		}
	}

	// The mix: topics, groups, transactional ids and the cluster,
	// literal and prefixed, ALLOW and DENY, one host and any, prefixes of
	// many lengths.
	types := map[kmsg.ACLResourceType]int{}
	patterns := map[kmsg.ACLResourcePatternType]int{}
	perms := map[kmsg.ACLPermissionType]int{}
	hosts, prefixLens, principals := map[string]bool{}, map[int]bool{}, map[string]bool{}
	for _, b := range bindings(fillerACLs(1000, anonymous)) {
		types[b.Type]++
		patterns[b.Pattern]++
		perms[b.Permission]++
		hosts[b.Host] = true
		principals[b.Principal] = true
		if b.Pattern == acl.PatternPrefixed && b.Type == acl.ResourceTopic {
			prefixLens[len(b.Name)] = true
		}
	}
	if len(types) != 4 || len(patterns) != 2 || len(perms) != 2 || len(hosts) < 30 || len(prefixLens) < 8 || len(principals) < 90 {
		t.Errorf("1000 filler ACLs: types %v, patterns %v, permissions %v, %d hosts, %d topic prefix lengths, %d principals",
			types, patterns, perms, len(hosts), len(prefixLens), len(principals))
	}

	// The transactional producer's ACLs only with --txn-records.
	if n := countACLs(workloadACLs(anonymous, topic, "")); n != 6 {
		t.Errorf("workload ACLs without a transactional id: %d", n)
	}
	if n := countACLs(workloadACLs(anonymous, topic, txnID)); n != 8 {
		t.Errorf("workload ACLs with a transactional id: %d", n)
	}
}

// The broker of an --acls run: an admin listener whose JAAS entry is in a
// 0600 file, not on the command line, and the authorizer with the admin
// user its only super user.
func TestAuthorizerOverrides(t *testing.T) {
	dir := t.TempDir()
	path, err := writeAdminConfig(dir, "0123abcd")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := `listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="0123abcd";` + "\n"; string(data) != want {
		t.Fatalf("admin config %q, want %q", data, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || filepath.Dir(path) != dir {
		t.Fatalf("admin config: %v, %v", fi, err)
	}

	for _, c := range []struct {
		ports      brokerPorts
		authorizer bool
		want       []string
	}{
		{brokerPorts{admin: 9003}, true, []string{
			"--override", "listeners=PLAINTEXT://{addr},SASL_PLAINTEXT://127.0.0.1:9003",
			"--override", "inter.broker.listener.name=PLAINTEXT",
			"--override", "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
			"--override", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
			"--override", "allow.everyone.if.no.acl.found=false",
			"--override", "super.users=User:admin",
			"--config", path,
		}},
		// The other arm of a comparison: the same listeners, no
		// authorizer.
		{brokerPorts{admin: 9003}, false, []string{
			"--override", "listeners=PLAINTEXT://{addr},SASL_PLAINTEXT://127.0.0.1:9003",
			"--override", "inter.broker.listener.name=PLAINTEXT",
			"--override", "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
			"--config", path,
		}},
		{brokerPorts{ssl: 9001, saslSSL: 9002, admin: 9003}, true, []string{
			"--override", "listeners=PLAINTEXT://{addr},SSL://127.0.0.1:9001,SASL_SSL://127.0.0.1:9002,SASL_PLAINTEXT://127.0.0.1:9003",
			"--override", "inter.broker.listener.name=PLAINTEXT",
			"--override", "sasl.enabled.mechanisms=SCRAM-SHA-512",
			"--override", "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
			"--override", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
			"--override", "allow.everyone.if.no.acl.found=false",
			"--override", "super.users=User:admin",
			"--override", "ssl.keystore.type=PEM",
			"--config", path,
		}},
	} {
		var tlsProps []string
		if c.ports.ssl != 0 {
			tlsProps = []string{"ssl.keystore.type=PEM"}
		}
		got := brokerOverrides(c.ports, tlsProps, path, c.authorizer)
		if !slices.Equal(got, c.want) {
			t.Errorf("overrides\n%s\nwant\n%s", strings.Join(got, " "), strings.Join(c.want, " "))
		}
		if strings.Contains(strings.Join(got, " "), "0123abcd") {
			t.Errorf("the admin's password on the command line: %q", got)
		}
	}
}
