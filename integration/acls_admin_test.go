package integration

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// aclRow is one ACL as DescribeAcls lists it.
type aclRow struct {
	Type      kmsg.ACLResourceType
	Name      string
	Pattern   kmsg.ACLResourcePatternType
	Principal string
	Host      string
	Op        kmsg.ACLOperation
	Perm      kmsg.ACLPermissionType
}

func (r aclRow) String() string {
	return fmt.Sprintf("%v:%s:%v %s@%s %v %v", r.Type, r.Name, r.Pattern, r.Principal, r.Host, r.Op, r.Perm)
}

// literalACL is an ACL on a literal resource from any host.
func literalACL(t kmsg.ACLResourceType, name, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) aclRow {
	return aclRow{t, name, kmsg.ACLResourcePatternTypeLiteral, principal, "*", op, perm}
}

// describeAllACLs asks one broker itself (send) for every ACL: DescribeAcls
// v3 with an ANY filter.
func describeAllACLs(send func(kmsg.Request) (kmsg.Response, error)) ([]aclRow, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	kresp, err := send(req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.DescribeACLsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("describe: %w", err)
	}
	var out []aclRow
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out = append(out, aclRow{r.ResourceType, r.ResourceName, r.ResourcePatternType, a.Principal, a.Host, a.Operation, a.PermissionType})
		}
	}
	return out, nil
}

// checkACLs tells whether rows has every one of want and none of gone.
func checkACLs(rows, want, gone []aclRow) error {
	for _, w := range want {
		if !slices.Contains(rows, w) {
			return fmt.Errorf("%v missing", w)
		}
	}
	for _, g := range gone {
		if slices.Contains(rows, g) {
			return fmt.Errorf("%v still there", g)
		}
	}
	return nil
}

// aclsEverywhere waits until every running broker describes want and none
// of gone, failing after maxACLDelay from since (the answer to the
// change). It logs and returns how long the slowest broker took.
func (c *testCluster) aclsEverywhere(t *testing.T, what string, since time.Time, want, gone []aclRow) time.Duration {
	t.Helper()
	var slowest time.Duration
	for _, id := range c.running() {
		var err error
		for {
			var rows []aclRow
			rows, err = describeAllACLs(func(req kmsg.Request) (kmsg.Response, error) { return c.request(id, time.Second, req) })
			if err == nil {
				err = checkACLs(rows, want, gone)
			}
			if err == nil || time.Since(since) > maxACLDelay {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("%s: broker %d after %v: %v", what, id, maxACLDelay, err)
		}
		slowest = max(slowest, time.Since(since))
	}
	t.Logf("%s: every broker described the change %v after the answer", what, slowest.Round(time.Millisecond))
	return slowest
}

// maxACLDelay bounds how long after a change's answer every broker must
// describe it.
const maxACLDelay = time.Second

// anyACLs is a kadm builder matching every ACL, of any principal, host,
// resource and pattern.
func anyACLs() *kadm.ACLBuilder {
	return kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternAny)
}

func describedRows(t *testing.T, res kadm.DescribeACLsResults) []aclRow {
	t.Helper()
	var out []aclRow
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("describe filter %+v: %v %s", r, r.Err, r.ErrMessage)
		}
		for _, d := range r.Described {
			out = append(out, aclRow{d.Type, d.Name, d.Pattern, d.Principal, d.Host, d.Operation, d.Permission})
		}
	}
	return out
}

func sameRows(got, want []aclRow) bool {
	less := func(a, b aclRow) int { return strings.Compare(a.String(), b.String()) }
	got, want = slices.Clone(got), slices.Clone(want)
	slices.SortFunc(got, less)
	slices.SortFunc(want, less)
	return slices.Equal(got, want)
}

// aclAdminOverrides switch on the authorizer, as the ACL APIs need, with
// the tests' PLAINTEXT clients (and the brokers) as super users.
func aclAdminOverrides() []string {
	return []string{
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
		"super.users=User:ANONYMOUS",
	}
}

// TestACLsSecurityDisabled: without an authorizer the ACL APIs answer
// SECURITY_DISABLED, as Kafka's, and nothing is stored.
func TestACLsSecurityDisabled(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin(t)
	ctx := testContext(t, 30*time.Second)
	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("orders").Allow("User:alice").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range created {
		if !errors.Is(r.Err, kerr.SecurityDisabled) {
			t.Errorf("CreateACLs without an authorizer: %v, want SECURITY_DISABLED", r.Err)
		}
	}
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, b.Client(t))
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if !errors.Is(err, kerr.SecurityDisabled) {
		t.Errorf("DescribeACLs without an authorizer: %v, want SECURITY_DISABLED", err)
	}
}

// ACLs on the embedded single node, with franz-go's kadm: created,
// described with filters, kept across a restart and deleted.
func TestACLsAdminEmbedded(t *testing.T) {
	b := StartBroker(t, aclAdminOverrides()...)
	adm := b.Admin(t)
	ctx := testContext(t, 60*time.Second)

	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("orders").Groups("billing").Allow("User:alice").
		Operations(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe))
	if err != nil {
		t.Fatal(err)
	}
	prefixed, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("logs-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Deny("User:mallory").DenyHosts("10.0.0.9").Operations(kmsg.ACLOperationWrite))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append(created, prefixed...) {
		if r.Err != nil {
			t.Fatalf("create %+v: %v %s", r, r.Err, r.ErrMessage)
		}
	}
	want := []aclRow{
		literalACL(kmsg.ACLResourceTypeTopic, "orders", "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		literalACL(kmsg.ACLResourceTypeTopic, "orders", "User:alice", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow),
		literalACL(kmsg.ACLResourceTypeGroup, "billing", "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		literalACL(kmsg.ACLResourceTypeGroup, "billing", "User:alice", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow),
		{kmsg.ACLResourceTypeTopic, "logs-", kmsg.ACLResourcePatternTypePrefixed, "User:mallory", "10.0.0.9", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny},
	}
	checkAll := func(when string) {
		t.Helper()
		res, err := adm.DescribeACLs(ctx, anyACLs())
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if got := describedRows(t, res); !sameRows(got, want) {
			t.Fatalf("%s: described\n%v\nwant\n%v", when, got, want)
		}
	}
	checkAll("after creation")

	// A MATCH filter: the ACLs that apply to topic logs-2024.
	res, err := adm.DescribeACLs(ctx, kadm.NewACLs().Topics("logs-2024").ResourcePatternType(kadm.ACLPatternMatch).
		Allow().AllowHosts().Deny().DenyHosts().Operations())
	if err != nil {
		t.Fatal(err)
	}
	if got := describedRows(t, res); !sameRows(got, want[4:]) {
		t.Fatalf("MATCH logs-2024 described %v, want %v", got, want[4:])
	}

	b.Restart()
	adm = b.Admin(t)
	checkAll("after a restart")

	deleted, err := adm.DeleteACLs(ctx, anyACLs())
	if err != nil {
		t.Fatal(err)
	}
	var rows []aclRow
	for _, r := range deleted {
		if r.Err != nil {
			t.Fatalf("delete filter %+v: %v", r, r.Err)
		}
		for _, d := range r.Deleted {
			if d.Err != nil {
				t.Fatalf("deleted %+v: %v", d, d.Err)
			}
			rows = append(rows, aclRow{d.Type, d.Name, d.Pattern, d.Principal, d.Host, d.Operation, d.Permission})
		}
	}
	if !sameRows(rows, want) {
		t.Fatalf("deleted %v, want %v", rows, want)
	}
	want = nil
	checkAll("after deleting everything")
}

// ACLs on a 3-broker cluster through every client that manages them:
// franz-go's kadm (which sends ACL requests to any broker), requests sent
// to a broker that is not the controller (forwarded to it), sarama's
// ClusterAdmin and kafkajs's admin (both to the controller; sarama also at
// v0), and ACLs written to ZooKeeper as kafka-acls.sh does. After each
// change's answer every broker describes it within a second (measured and
// logged), the broker that forwarded at once; ZooKeeper holds Kafka's
// znodes and change notifications.
func TestACLsAdminCluster(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, chroot: "/kafka", extra: aclAdminOverrides()})
	ctrl := c.controller()
	var others []int32
	for _, id := range c.running() {
		if id != ctrl {
			others = append(others, id)
		}
	}
	adm := c.admin()
	ctx := testContext(t, 3*time.Minute)
	var delays []time.Duration
	everywhere := func(what string, since time.Time, want, gone []aclRow) {
		t.Helper()
		delays = append(delays, c.aclsEverywhere(t, what, since, want, gone))
	}

	// kadm, to whichever broker it picks.
	aliceRead := literalACL(kmsg.ACLResourceTypeTopic, "orders", "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
	aliceDescribe := literalACL(kmsg.ACLResourceTypeTopic, "orders", "User:alice", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow)
	mallory := aclRow{kmsg.ACLResourceTypeTopic, "logs-", kmsg.ACLResourcePatternTypePrefixed, "User:mallory", "10.0.0.9", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny}
	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("orders").Allow("User:alice").Operations(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe))
	if err != nil {
		t.Fatal(err)
	}
	prefixed, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("logs-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Deny("User:mallory").DenyHosts("10.0.0.9").Operations(kmsg.ACLOperationWrite))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append(created, prefixed...) {
		if r.Err != nil {
			t.Fatalf("kadm create %+v: %v %s", r, r.Err, r.ErrMessage)
		}
	}
	everywhere("kadm CreateACLs", time.Now(), []aclRow{aliceRead, aliceDescribe, mallory}, nil)

	// ZooKeeper holds Kafka's znodes and one notification per pattern.
	if data, _, err := c.zkGet("/kafka-acl/Topic/orders"); err != nil || string(data) != `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},{"principal":"User:alice","permissionType":"Allow","operation":"Describe","host":"*"}]}` {
		t.Fatalf("/kafka-acl/Topic/orders: %s (%v)", data, err)
	}
	if data, _, err := c.zkGet("/kafka-acl-extended/prefixed/Topic/logs-"); err != nil || string(data) != `{"version":1,"acls":[{"principal":"User:mallory","permissionType":"Deny","operation":"Write","host":"10.0.0.9"}]}` {
		t.Fatalf("/kafka-acl-extended/prefixed/Topic/logs-: %s (%v)", data, err)
	}
	if got := aclNotifications(t, c, "/kafka-acl-changes"); !slices.Equal(got, []string{"TOPIC:orders"}) {
		t.Fatalf("literal notifications %q", got)
	}
	if got := aclNotifications(t, c, "/kafka-acl-extended-changes"); !slices.Equal(got, []string{`{"version":1,"resourceType":"TOPIC","name":"logs-","patternType":"PREFIXED"}`}) {
		t.Fatalf("extended notifications %q", got)
	}

	// Through each broker that is not the controller: forwarded, answered
	// once that broker's own view has the change; a refused creation fails
	// alone.
	for i, via := range others {
		admin := literalACL(kmsg.ACLResourceTypeCluster, "kafka-cluster", "User:admin"+strconv.Itoa(i), kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow)
		req := kmsg.NewPtrCreateACLsRequest()
		for _, name := range []string{"kafka-cluster", "other-cluster"} {
			cr := kmsg.NewCreateACLsRequestCreation()
			cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeCluster, name, kmsg.ACLResourcePatternTypeLiteral
			cr.Principal, cr.Host, cr.Operation, cr.PermissionType = admin.Principal, "*", kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow
			req.Creations = append(req.Creations, cr)
		}
		kresp, err := c.request(via, 20*time.Second, req)
		if err != nil {
			t.Fatalf("create through broker %d (controller %d): %v", via, ctrl, err)
		}
		answered := time.Now()
		res := kresp.(*kmsg.CreateACLsResponse).Results
		if len(res) != 2 || res[0].ErrorCode != 0 || res[1].ErrorCode != kerr.InvalidRequest.Code || res[1].ErrorMessage == nil ||
			*res[1].ErrorMessage != "The only valid name for the CLUSTER resource is kafka-cluster" {
			t.Fatalf("create through broker %d: %+v", via, res)
		}
		rows, err := describeAllACLs(func(req kmsg.Request) (kmsg.Response, error) { return c.request(via, time.Second, req) })
		if err != nil || !slices.Contains(rows, admin) {
			t.Fatalf("broker %d right after its answer: %v %v", via, rows, err)
		}
		everywhere(fmt.Sprintf("CreateAcls through broker %d", via), answered, []aclRow{admin}, nil)
	}

	// As kafka-acls.sh --authorizer-properties zookeeper.connect=...: the
	// znode, then the notification.
	conn := c.zkConn()
	if _, err := conn.Create(c.zkPath("/kafka-acl/TransactionalId/tx-1"), []byte(`{"version":1,"acls":[{"principal":"User:tool","permissionType":"Allow","operation":"Write","host":"*"}]}`), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create(c.zkPath("/kafka-acl-changes/acl_changes_"), []byte("TRANSACTIONAL_ID:tx-1"), zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	tool := literalACL(kmsg.ACLResourceTypeTransactionalId, "tx-1", "User:tool", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow)
	everywhere("kafka-acls.sh-style ZooKeeper write", time.Now(), []aclRow{tool}, nil)

	// sarama's ClusterAdmin (to the controller).
	testSaramaACLs(t, c, everywhere)
	// kafkajs's admin (to the controller), through broker others[0] as seed.
	testKafkaJSACLs(t, c, c.broker(others[0]).Addr(), everywhere)

	// DeleteAcls through a broker that is not the controller: the matching
	// ACLs listed per filter; a refused filter fails alone.
	via := others[len(others)-1]
	dreq := kmsg.NewPtrDeleteACLsRequest()
	adminFilter := kmsg.NewDeleteACLsRequestFilter()
	adminFilter.ResourceType, adminFilter.ResourcePatternType = kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeAny
	adminFilter.Operation, adminFilter.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	unknown := adminFilter
	unknown.Operation = kmsg.ACLOperationUnknown
	dreq.Filters = append(dreq.Filters, adminFilter, unknown)
	kresp, err := c.request(via, 20*time.Second, dreq)
	if err != nil {
		t.Fatalf("delete through broker %d: %v", via, err)
	}
	answered := time.Now()
	dres := kresp.(*kmsg.DeleteACLsResponse).Results
	if len(dres) != 2 || dres[0].ErrorCode != 0 || len(dres[0].MatchingACLs) != len(others) ||
		dres[1].ErrorCode != kerr.InvalidRequest.Code || len(dres[1].MatchingACLs) != 0 {
		t.Fatalf("delete through broker %d: %+v", via, dres)
	}
	var gone []aclRow
	for _, m := range dres[0].MatchingACLs {
		if m.ErrorCode != 0 {
			t.Fatalf("deleting %+v: error %d", m, m.ErrorCode)
		}
		gone = append(gone, aclRow{m.ResourceType, m.ResourceName, m.ResourcePatternType, m.Principal, m.Host, m.Operation, m.PermissionType})
	}
	rows, err := describeAllACLs(func(req kmsg.Request) (kmsg.Response, error) { return c.request(via, time.Second, req) })
	if err != nil || checkACLs(rows, nil, gone) != nil {
		t.Fatalf("broker %d right after its answer: %v %v", via, rows, err)
	}
	everywhere(fmt.Sprintf("DeleteAcls through broker %d", via), answered, nil, gone)

	// kadm deletes the rest; the patterns' znodes go.
	deleted, err := adm.DeleteACLs(ctx, anyACLs())
	if err != nil {
		t.Fatal(err)
	}
	gone = nil
	for _, r := range deleted {
		for _, d := range r.Deleted {
			if d.Err != nil {
				t.Fatalf("kadm delete %+v: %v", d, d.Err)
			}
			gone = append(gone, aclRow{d.Type, d.Name, d.Pattern, d.Principal, d.Host, d.Operation, d.Permission})
		}
	}
	if want := []aclRow{aliceRead, aliceDescribe, mallory, tool}; !sameRows(gone, want) {
		t.Fatalf("kadm deleted %v, want %v", gone, want)
	}
	everywhere("kadm DeleteACLs", time.Now(), nil, gone)
	for _, id := range c.running() {
		rows, err := describeAllACLs(func(req kmsg.Request) (kmsg.Response, error) { return c.request(id, time.Second, req) })
		if err != nil || len(rows) != 0 {
			t.Fatalf("broker %d still describes %v (%v)", id, rows, err)
		}
	}
	for _, p := range []string{"/kafka-acl/Topic/orders", "/kafka-acl-extended/prefixed/Topic/logs-", "/kafka-acl/TransactionalId/tx-1"} {
		if ok, err := c.zkExists(p); err != nil || ok {
			t.Fatalf("%s still exists (%v)", p, err)
		}
	}
	t.Logf("slowest broker per change: %v", delays)
}

// aclNotifications lists the data of the notifications under dir, in
// sequence order.
func aclNotifications(t *testing.T, c *testCluster, dir string) []string {
	t.Helper()
	names, _, err := c.zkConn().Children(c.zkPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		data, _, err := c.zkGet(dir + "/" + n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(data))
	}
	return out
}

// testSaramaACLs creates, lists and deletes ACLs with sarama's
// ClusterAdmin: as Kafka 3.0 (CreateAcls v1/v2, DescribeAcls and
// DeleteAcls v2) and as Kafka 1.1 (every ACL API at v0: literal only).
func testSaramaACLs(t *testing.T, c *testCluster, everywhere func(string, time.Time, []aclRow, []aclRow)) {
	t.Helper()
	for _, v := range []struct {
		name    string
		version sarama.KafkaVersion
		pattern sarama.AclResourcePatternType
	}{
		{"sarama (Kafka 3.0)", sarama.V3_0_0_0, sarama.AclPatternPrefixed},
		{"sarama (Kafka 1.1, v0)", sarama.V1_1_0_0, sarama.AclPatternLiteral},
	} {
		cfg := saramaConfig()
		cfg.Version = v.version
		var ca sarama.ClusterAdmin
		if err := bounded(30*time.Second, "sarama.NewClusterAdmin", func() (err error) {
			ca, err = sarama.NewClusterAdmin(c.addrs(), cfg)
			return err
		}); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		defer ca.Close()
		principal := "User:sarama-" + strconv.Itoa(int(v.pattern))
		patternCode := kmsg.ACLResourcePatternType(v.pattern)
		one := aclRow{kmsg.ACLResourceTypeTopic, "sarama-events", kmsg.ACLResourcePatternTypeLiteral, principal, "*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow}
		batch := []aclRow{
			{kmsg.ACLResourceTypeGroup, "sarama-", patternCode, principal, "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow},
			{kmsg.ACLResourceTypeTopic, "sarama-events", kmsg.ACLResourcePatternTypeLiteral, principal, "192.168.0.1", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeDeny},
		}
		toSarama := func(r aclRow) (sarama.Resource, sarama.Acl) {
			return sarama.Resource{ResourceType: sarama.AclResourceType(r.Type), ResourceName: r.Name, ResourcePatternType: sarama.AclResourcePatternType(r.Pattern)},
				sarama.Acl{Principal: r.Principal, Host: r.Host, Operation: sarama.AclOperation(r.Op), PermissionType: sarama.AclPermissionType(r.Perm)}
		}

		res, acl := toSarama(one)
		// CreateACL is the one sarama call that sends CreateAcls v2
		// (flexible) as Kafka 3.0; CreateACLs sends v1.
		//lint:ignore SA1019 deprecated in favour of CreateACLs, which never sends v2
		if err := bounded(30*time.Second, "CreateACL", func() error { return ca.CreateACL(res, acl) }); err != nil {
			t.Fatalf("%s CreateACL: %v", v.name, err)
		}
		everywhere(v.name+" CreateACL", time.Now(), []aclRow{one}, nil)
		var resourceACLs []*sarama.ResourceAcls
		for _, r := range batch {
			res, acl := toSarama(r)
			resourceACLs = append(resourceACLs, &sarama.ResourceAcls{Resource: res, Acls: []*sarama.Acl{&acl}})
		}
		if err := bounded(30*time.Second, "CreateACLs", func() error { return ca.CreateACLs(resourceACLs) }); err != nil {
			t.Fatalf("%s CreateACLs: %v", v.name, err)
		}
		everywhere(v.name+" CreateACLs", time.Now(), batch, nil)

		filter := sarama.AclFilter{ResourceType: sarama.AclResourceAny, ResourcePatternTypeFilter: sarama.AclPatternAny,
			Principal: &principal, Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}
		if v.pattern == sarama.AclPatternLiteral {
			filter.ResourcePatternTypeFilter = sarama.AclPatternLiteral
		}
		var listed []sarama.ResourceAcls
		if err := bounded(30*time.Second, "ListAcls", func() (err error) {
			listed, err = ca.ListAcls(filter)
			return err
		}); err != nil {
			t.Fatalf("%s ListAcls: %v", v.name, err)
		}
		var rows []aclRow
		for _, ra := range listed {
			pattern := kmsg.ACLResourcePatternType(ra.ResourcePatternType)
			if v.version == sarama.V1_1_0_0 {
				pattern = kmsg.ACLResourcePatternTypeLiteral // v0 answers carry no pattern type
			}
			for _, a := range ra.Acls {
				rows = append(rows, aclRow{kmsg.ACLResourceType(ra.ResourceType), ra.ResourceName, pattern, a.Principal, a.Host, kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.PermissionType)})
			}
		}
		if want := append([]aclRow{one}, batch...); !sameRows(rows, want) {
			t.Fatalf("%s ListAcls: %v, want %v", v.name, rows, want)
		}

		var matching []sarama.MatchingAcl
		if err := bounded(30*time.Second, "DeleteACL", func() (err error) {
			matching, err = ca.DeleteACL(filter, false)
			return err
		}); err != nil {
			t.Fatalf("%s DeleteACL: %v", v.name, err)
		}
		if len(matching) != 3 {
			t.Fatalf("%s DeleteACL matched %+v", v.name, matching)
		}
		for _, m := range matching {
			if !errors.Is(m.Err, sarama.ErrNoError) {
				t.Fatalf("%s DeleteACL: %+v", v.name, m)
			}
		}
		everywhere(v.name+" DeleteACL", time.Now(), nil, append([]aclRow{one}, batch...))
	}
}

// testKafkaJSACLs creates, describes and deletes ACLs with kafkajs's admin
// (integration/js/acls_admin.js).
func testKafkaJSACLs(t *testing.T, c *testCluster, seed string, everywhere func(string, time.Time, []aclRow, []aclRow)) {
	t.Helper()
	dir := groupsJSDir(t)
	run := func(args ...string) []string {
		t.Helper()
		ctx := testContext(t, 60*time.Second)
		cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(dir, "acls_admin.js"), seed}, args...)...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node acls_admin.js %v: %v\n%s", args, err, stderr.Bytes())
		}
		var lines []string
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		if len(lines) == 0 || lines[len(lines)-1] != "OK" {
			t.Fatalf("node acls_admin.js %v printed %q\n%s", args, lines, stderr.Bytes())
		}
		return lines[:len(lines)-1]
	}
	const principal = "User:js"
	want := []aclRow{
		literalACL(kmsg.ACLResourceTypeTopic, "js-orders", principal, kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		{kmsg.ACLResourceTypeGroup, "js-", kmsg.ACLResourcePatternTypePrefixed, principal, "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow},
		{kmsg.ACLResourceTypeTopic, "js-orders", kmsg.ACLResourcePatternTypeLiteral, principal, "10.0.0.1", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny},
	}
	parse := func(tag string, lines []string) []aclRow {
		t.Helper()
		var out []aclRow
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) != 8 || f[0] != tag {
				t.Fatalf("kafkajs printed %q", l)
			}
			n := func(s string) int8 {
				v, err := strconv.ParseInt(s, 10, 8)
				if err != nil {
					t.Fatalf("kafkajs printed %q", l)
				}
				return int8(v)
			}
			out = append(out, aclRow{kmsg.ACLResourceType(n(f[1])), f[2], kmsg.ACLResourcePatternType(n(f[3])), f[4], f[5], kmsg.ACLOperation(n(f[6])), kmsg.ACLPermissionType(n(f[7]))})
		}
		return out
	}

	run("create", principal, "js")
	everywhere("kafkajs createAcls", time.Now(), want, nil)
	if got := parse("ACL", run("describe", principal)); !sameRows(got, want) {
		t.Fatalf("kafkajs describeAcls: %v, want %v", got, want)
	}
	if got := parse("DELETED", run("delete", principal)); !sameRows(got, want) {
		t.Fatalf("kafkajs deleteAcls: %v, want %v", got, want)
	}
	everywhere("kafkajs deleteAcls", time.Now(), nil, want)
}
