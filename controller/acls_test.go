package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/kbroker/kbroker/controller/zk"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/internal/zktest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// binding is a binding for the tests: resource type, name and pattern,
// then principal, operation and permission, from any host.
func binding(rt kmsg.ACLResourceType, name string, pattern kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) acl.Binding {
	return acl.Binding{
		Resource: acl.Resource{Type: rt, Name: name, Pattern: pattern},
		Entry:    acl.Entry{Principal: principal, Host: acl.WildcardHost, Operation: op, Permission: perm},
	}
}

func strPtr(s string) *string { return &s }

var (
	aliceReadsOrders  = binding(acl.ResourceTopic, "orders", acl.PatternLiteral, "User:alice", acl.OpRead, acl.PermissionAllow)
	bobWritesOrders   = binding(acl.ResourceTopic, "orders", acl.PatternLiteral, "User:bob", acl.OpWrite, acl.PermissionAllow)
	anyoneDeniedOrd   = binding(acl.ResourceTopic, "ord", acl.PatternPrefixed, "User:*", acl.OpDelete, acl.PermissionDeny)
	aliceInGroups     = binding(acl.ResourceGroup, "*", acl.PatternLiteral, "User:alice", acl.OpRead, acl.PermissionAllow)
	adminAltersKafka  = binding(acl.ResourceCluster, acl.ClusterName, acl.PatternLiteral, "User:admin", acl.OpAlter, acl.PermissionAllow)
	carolReadsOrders1 = binding(acl.ResourceTopic, "orders-1", acl.PatternLiteral, "User:carol", acl.OpRead, acl.PermissionAllow)
)

// Kafka's refusals (acl.ValidateBinding) fail the binding alone with
// INVALID_REQUEST; valid bindings of the same request are created.
func TestCreateACLsValidation(t *testing.T) {
	valid := aliceReadsOrders
	for _, tc := range []struct {
		name   string
		change func(*acl.Binding)
		msg    string // a part of the message ("" to only check the code)
	}{
		{name: "any resource type", change: func(b *acl.Binding) { b.Type = acl.ResourceAny }, msg: "resourceType must not be ANY"},
		{name: "unknown resource type", change: func(b *acl.Binding) { b.Type = acl.ResourceUnknown }},
		{name: "match pattern", change: func(b *acl.Binding) { b.Pattern = acl.PatternMatch }, msg: "patternType must not be MATCH"},
		{name: "any operation", change: func(b *acl.Binding) { b.Operation = acl.OpAny }, msg: "operation must not be ANY"},
		{name: "any permission", change: func(b *acl.Binding) { b.Permission = acl.PermissionAny }, msg: "permissionType must not be ANY"},
		{name: "cluster not named kafka-cluster", change: func(b *acl.Binding) { b.Type, b.Name = acl.ResourceCluster, "other" },
			msg: "The only valid name for the CLUSTER resource is kafka-cluster"},
		{name: "empty name", change: func(b *acl.Binding) { b.Name = "" }},
		{name: "slash in the name", change: func(b *acl.Binding) { b.Type, b.Name = acl.ResourceGroup, "a/b" }, msg: "a/b"},
		{name: "principal without a type", change: func(b *acl.Binding) { b.Principal = "alice" }, msg: "principalType:principalName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &localStore{state: &localState{Metadata: &Metadata{ClusterID: "acl", ControllerID: -1, Topics: map[string]*Topic{}}}}
			store.brokers = []zk.BrokerInfo{zkBroker(scenarioBroker(1))}
			c := startLocalController(t, store, 1, 0)
			bad := valid
			tc.change(&bad)
			errs := c.CreateACLs([]acl.Binding{bad, valid})
			if len(errs) != 2 {
				t.Fatalf("errors %v", errs)
			}
			if !errors.Is(errs[0], kerr.InvalidRequest) || !strings.Contains(errs[0].Error(), tc.msg) || strings.HasPrefix(errs[0].Error(), "acl: ") {
				t.Errorf("invalid binding: %v, want INVALID_REQUEST containing %q", errs[0], tc.msg)
			}
			if errs[1] != nil {
				t.Errorf("valid binding of the same request: %v", errs[1])
			}
			if got := c.Metadata().ACLs; !slices.Equal(got, []acl.Binding{valid}) {
				t.Errorf("view %v", got)
			}
		})
	}
}

// Creating and deleting through the controller on the local store: the
// view is sorted and follows every change, an ACL already present is no
// error (and publishes nothing), a binding several filters match is
// reported under the first, a refused filter fails alone, MATCH filters
// select the patterns that apply to a name, and a deposed controller or a
// broker that is not the controller changes nothing.
func TestCreateAndDeleteACLs(t *testing.T) {
	store := &localStore{state: &localState{Metadata: &Metadata{ClusterID: "acl", ControllerID: -1, Topics: map[string]*Topic{}}}}
	store.brokers = []zk.BrokerInfo{zkBroker(scenarioBroker(1))}
	c := startLocalController(t, store, 1, 0)

	all := []acl.Binding{adminAltersKafka, bobWritesOrders, aliceInGroups, anyoneDeniedOrd, aliceReadsOrders, carolReadsOrders1}
	if errs := c.CreateACLs(all); slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		t.Fatalf("create: %v", errs)
	}
	sorted := []acl.Binding{aliceReadsOrders, bobWritesOrders, carolReadsOrders1, anyoneDeniedOrd, aliceInGroups, adminAltersKafka}
	if got := c.Metadata().ACLs; !slices.Equal(got, sorted) {
		t.Fatalf("view\n%v\nwant\n%v", got, sorted)
	}
	checkStored := func(when string) {
		t.Helper()
		var stored []acl.Binding
		for _, rec := range store.state.ACLs {
			stored = append(stored, rec.binding())
		}
		if want := c.Metadata().ACLs; !slices.Equal(stored, want) {
			t.Fatalf("%s: stored %v, view %v", when, stored, want)
		}
	}
	checkStored("after creation")

	seq := c.Metadata().Sequence
	if errs := c.CreateACLs([]acl.Binding{aliceReadsOrders, aliceReadsOrders}); errs[0] != nil || errs[1] != nil {
		t.Fatalf("creating present ACLs: %v", errs)
	}
	if got := c.Metadata().Sequence; got != seq {
		t.Fatalf("creating present ACLs published view %d (was %d)", got, seq)
	}

	alice := "User:alice"
	deletions, err := c.DeleteACLs([]acl.Filter{
		{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Principal: &alice, Operation: acl.OpAny, Permission: acl.PermissionAny},
		{ResourceType: acl.ResourceTopic, ResourceName: strPtr("orders-1"), PatternType: acl.PatternMatch, Operation: acl.OpAny, Permission: acl.PermissionAny},
		{ResourceType: acl.ResourceUnknown, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny},
		{ResourceType: acl.ResourceTopic, ResourceName: strPtr("absent"), PatternType: acl.PatternLiteral, Operation: acl.OpAny, Permission: acl.PermissionAny},
	})
	if err != nil || len(deletions) != 4 {
		t.Fatalf("delete: %+v, %v", deletions, err)
	}
	deleted := func(d ACLDeletion) []acl.Binding {
		var out []acl.Binding
		for _, m := range d.Deleted {
			if m.Err != nil {
				t.Fatalf("deletion of %v: %v", m.Binding, m.Err)
			}
			out = append(out, m.Binding)
		}
		return out
	}
	// alice's topic ACL is matched by both filters: listed under the first.
	if got, want := deleted(deletions[0]), []acl.Binding{aliceReadsOrders, aliceInGroups}; deletions[0].Err != nil || !slices.Equal(got, want) {
		t.Fatalf("filter 0 deleted %v (%v), want %v", got, deletions[0].Err, want)
	}
	// MATCH orders-1: the literal name and the prefix "ord", not "orders".
	if got, want := deleted(deletions[1]), []acl.Binding{carolReadsOrders1, anyoneDeniedOrd}; deletions[1].Err != nil || !slices.Equal(got, want) {
		t.Fatalf("filter 1 deleted %v (%v), want %v", got, deletions[1].Err, want)
	}
	if d := deletions[2]; !errors.Is(d.Err, kerr.InvalidRequest) || d.Err.Error() != "Filters contain UNKNOWN elements" || len(d.Deleted) != 0 {
		t.Fatalf("unknown filter: %+v", d)
	}
	if d := deletions[3]; d.Err != nil || len(d.Deleted) != 0 {
		t.Fatalf("filter matching nothing: %+v", d)
	}
	if got, want := c.Metadata().ACLs, []acl.Binding{bobWritesOrders, adminAltersKafka}; !slices.Equal(got, want) {
		t.Fatalf("view after deletion %v, want %v", got, want)
	}
	checkStored("after deletion")

	// A deposed controller changes nothing.
	store.electController()
	errs := c.CreateACLs([]acl.Binding{aliceReadsOrders})
	if len(errs) != 1 || !errors.Is(errs[0], kerr.NotController) {
		t.Fatalf("creation by a deposed controller: %v", errs)
	}
	deletions, err = c.DeleteACLs([]acl.Filter{acl.AnyFilter()})
	if err != nil || len(deletions[0].Deleted) != 2 || !errors.Is(deletions[0].Deleted[0].Err, kerr.NotController) {
		t.Fatalf("deletion by a deposed controller: %+v, %v", deletions, err)
	}
	if got := c.Metadata().ACLs; len(got) != 2 {
		t.Fatalf("a fenced change reached the view: %v", got)
	}
	// A broker that is not the controller refuses everything.
	other := &Cluster{cfg: ClusterConfig{Self: scenarioBroker(2)}, logger: quietLogger(), store: store}
	if errs := other.CreateACLs([]acl.Binding{aliceReadsOrders, bobWritesOrders}); len(errs) != 2 || !errors.Is(errs[0], kerr.NotController) || !errors.Is(errs[1], kerr.NotController) {
		t.Fatalf("creation on a non-controller: %v", errs)
	}
	if _, err := other.DeleteACLs([]acl.Filter{acl.AnyFilter()}); !errors.Is(err, kerr.NotController) {
		t.Fatalf("deletion on a non-controller: %v", err)
	}
}

// countingStore counts the ACL record writes of the local store.
type countingStore struct {
	*localStore
	mu     sync.Mutex
	writes []acl.Resource
}

func (s *countingStore) SetResourceACLs(ctx context.Context, epochZkVersion int32, r acl.Resource, entries []acl.Entry, version int32) error {
	s.mu.Lock()
	s.writes = append(s.writes, r)
	s.mu.Unlock()
	return s.localStore.SetResourceACLs(ctx, epochZkVersion, r, entries, version)
}

// Bindings on the same resource pattern are one write (one record, one
// notification in ZooKeeper), patterns in order of first appearance, and
// a request changing nothing writes nothing.
func TestCreateACLsGroupsWritesPerResource(t *testing.T) {
	local := &localStore{state: &localState{Metadata: &Metadata{ClusterID: "acl", ControllerID: -1, Topics: map[string]*Topic{}}}}
	local.brokers = []zk.BrokerInfo{zkBroker(scenarioBroker(1))}
	store := &countingStore{localStore: local}
	c := &Cluster{cfg: ClusterConfig{Self: scenarioBroker(1)}, logger: quietLogger(), store: store, seenEpoch: -1,
		stop: make(chan struct{}), done: make(chan struct{})}
	c.view.Store(&Metadata{ClusterID: "acl", ControllerID: -1, Topics: map[string]*Topic{}})
	a, err := startActive(context.Background(), context.Background(), c, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.active = a
	t.Cleanup(c.Close)

	orders := aliceReadsOrders.Resource
	for _, step := range []struct {
		name     string
		bindings []acl.Binding
		writes   []acl.Resource
	}{
		{"two patterns, three bindings", []acl.Binding{bobWritesOrders, anyoneDeniedOrd, aliceReadsOrders}, []acl.Resource{orders, anyoneDeniedOrd.Resource}},
		{"nothing new", []acl.Binding{aliceReadsOrders, anyoneDeniedOrd}, nil},
		{"one new among present ones", []acl.Binding{aliceReadsOrders, carolReadsOrders1, bobWritesOrders}, []acl.Resource{carolReadsOrders1.Resource}},
	} {
		store.mu.Lock()
		store.writes = nil
		store.mu.Unlock()
		if errs := c.CreateACLs(step.bindings); slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
			t.Fatalf("%s: %v", step.name, errs)
		}
		store.mu.Lock()
		got := slices.Clone(store.writes)
		store.mu.Unlock()
		if !slices.Equal(got, step.writes) {
			t.Fatalf("%s: writes %v, want %v", step.name, got, step.writes)
		}
	}
	store.writes = nil
	if _, err := c.DeleteACLs([]acl.Filter{acl.AnyFilter()}); err != nil {
		t.Fatal(err)
	}
	if len(store.writes) != 3 || c.Metadata().ACLs != nil {
		t.Fatalf("deleting everything: writes %v, view %v", store.writes, c.Metadata().ACLs)
	}
}

// The embedded node keeps ACLs in its state file, across restarts.
func TestEmbeddedACLsPersist(t *testing.T) {
	dir := t.TempDir()
	self := ClusterConfig{Self: BrokerInfo{ID: 0, Host: "127.0.0.1", Port: 9092}}
	c, err := NewEmbedded(dir, self, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	want := []acl.Binding{aliceReadsOrders, anyoneDeniedOrd, adminAltersKafka}
	if errs := c.CreateACLs(want); slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		t.Fatalf("create: %v", errs)
	}
	c.Close()
	data, err := os.ReadFile(filepath.Join(dir, localStateFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"acls"`) || !strings.Contains(string(data), `"principal": "User:*"`) {
		t.Fatalf("state file has no ACLs:\n%s", data)
	}
	c, err = NewEmbedded(dir, self, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Metadata().ACLs; !slices.Equal(got, want) {
		t.Fatalf("after restart: %v, want %v", got, want)
	}
	if _, err := c.DeleteACLs([]acl.Filter{acl.AnyFilter()}); err != nil {
		t.Fatal(err)
	}
	if got := c.Metadata().ACLs; got != nil {
		t.Fatalf("after deleting every ACL: %v", got)
	}
}

// ACLs travel in UpdateMetadata, and a clone does not share them.
func TestUpdateMetadataCarriesACLs(t *testing.T) {
	md := &Metadata{ClusterID: "c", ControllerID: 1, Topics: map[string]*Topic{}, Sequence: 3,
		ACLs: []acl.Binding{aliceReadsOrders, anyoneDeniedOrd,
			{Resource: acl.Resource{Type: acl.ResourceTransactionalID, Name: "tx \"1\"", Pattern: acl.PatternLiteral},
				Entry: acl.Entry{Principal: "User:CN=a,O=b", Host: "10.0.0.1", Operation: acl.OpWrite, Permission: acl.PermissionDeny}}}}
	req := EncodeUpdateMetadata(md, 4)
	got := kmsg.NewPtrUpdateMetadataRequest()
	got.Version = req.Version
	if err := got.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeUpdateMetadata(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, md) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, md)
	}
	empty := EncodeUpdateMetadata(&Metadata{Topics: map[string]*Topic{}}, 4)
	empty.UnknownTags.Each(func(tag uint32, _ []byte) {
		if tag == tagACLs {
			t.Error("a view without ACLs carries the ACL tag")
		}
	})
	bad := EncodeUpdateMetadata(&Metadata{Topics: map[string]*Topic{}}, 4)
	bad.UnknownTags.Set(tagACLs, []byte(`{"not":"a list"}`))
	if _, err := DecodeUpdateMetadata(bad); err == nil {
		t.Fatal("a bad ACL tag decoded")
	}

	clone := md.clone()
	clone.ACLs[0].Principal = "User:mallory"
	if md.ACLs[0].Principal != "User:alice" {
		t.Fatal("changing a clone changed the original's ACLs")
	}
}

func TestNewestACLChanges(t *testing.T) {
	got := newestACLChanges([]string{
		"/kafka-acl-changes/acl_changes_0000000003",
		"/kafka-acl-changes/acl_changes_0000000011",
		"/kafka-acl-extended-changes/acl_changes_0000000002",
		"/kafka-acl-changes/junk",
		"/config/changes/config_change_0000000099",
	})
	want := map[string]int64{acl.LiteralChanges: 11, acl.ExtendedChanges: 2}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("newestACLChanges = %v, want %v", got, want)
	}
}

// On ZooKeeper: the controller writes Kafka's znodes and one notification
// per resource pattern in the right store, deletes a pattern's znode with
// its last ACL, and ACLs written directly, as kafka-acls.sh
// --authorizer-properties zookeeper.connect=... does (the znode, then a
// notification), reach the view within a second.
func TestACLsInZooKeeper(t *testing.T) {
	srv := zktest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := NewCluster(ctx, ClusterConfig{Self: scenarioBroker(1), ZookeeperConnect: srv.Addr() + "/acls", SessionTimeout: 4 * time.Second, ConnectionTimeout: 10 * time.Second}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() error {
		if !c.IsController() {
			return errors.New("not controller yet")
		}
		return nil
	})
	conn, _, err := gozk.Connect([]string{srv.Addr()}, 5*time.Second, gozk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	worldACL := gozk.WorldACL(gozk.PermAll)
	get := func(path string) string {
		t.Helper()
		data, _, err := conn.Get("/acls" + path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return string(data)
	}
	notifications := func(dir string) []string {
		t.Helper()
		names, _, err := conn.Children("/acls" + dir)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		var out []string
		for _, n := range names {
			out = append(out, get(dir+"/"+n))
		}
		return out
	}

	if errs := c.CreateACLs([]acl.Binding{aliceReadsOrders, anyoneDeniedOrd, bobWritesOrders}); slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		t.Fatalf("create: %v", errs)
	}
	if got, want := get("/kafka-acl/Topic/orders"), `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},{"principal":"User:bob","permissionType":"Allow","operation":"Write","host":"*"}]}`; got != want {
		t.Fatalf("literal znode\n%s\nwant\n%s", got, want)
	}
	if got, want := get("/kafka-acl-extended/prefixed/Topic/ord"), `{"version":1,"acls":[{"principal":"User:*","permissionType":"Deny","operation":"Delete","host":"*"}]}`; got != want {
		t.Fatalf("prefixed znode\n%s\nwant\n%s", got, want)
	}
	if got, want := notifications("/kafka-acl-changes"), []string{"TOPIC:orders"}; !slices.Equal(got, want) {
		t.Fatalf("literal notifications %q, want %q", got, want)
	}
	if got, want := notifications("/kafka-acl-extended-changes"), []string{`{"version":1,"resourceType":"TOPIC","name":"ord","patternType":"PREFIXED"}`}; !slices.Equal(got, want) {
		t.Fatalf("extended notifications %q, want %q", got, want)
	}
	if got, want := c.Metadata().ACLs, []acl.Binding{aliceReadsOrders, bobWritesOrders, anyoneDeniedOrd}; !slices.Equal(got, want) {
		t.Fatalf("view %v, want %v", got, want)
	}

	// As kafka-acls.sh: the znode, then the notification.
	if _, err := conn.Create("/acls/kafka-acl/Group/payments", []byte(`{"version":1,"acls":[{"principal":"User:svc","permissionType":"Allow","operation":"Read","host":"10.1.2.3"}]}`), 0, worldACL); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/acls/kafka-acl-changes/acl_changes_", []byte("GROUP:payments"), gozk.FlagSequence, worldACL); err != nil {
		t.Fatal(err)
	}
	svc := acl.Binding{Resource: acl.Resource{Type: acl.ResourceGroup, Name: "payments", Pattern: acl.PatternLiteral},
		Entry: acl.Entry{Principal: "User:svc", Host: "10.1.2.3", Operation: acl.OpRead, Permission: acl.PermissionAllow}}
	start := time.Now()
	waitFor(t, time.Second, func() error {
		if !slices.Contains(c.Metadata().ACLs, svc) {
			return errors.New("the group ACL is not in the view")
		}
		return nil
	})
	t.Logf("a literal ACL written to ZooKeeper directly reached the view in %v", time.Since(start))
	if _, err := conn.Create("/acls/kafka-acl-extended/prefixed/TransactionalId/tx-", []byte(`{"version":1,"acls":[{"principal":"User:svc","permissionType":"Allow","operation":"Write","host":"*"}]}`), 0, worldACL); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/acls/kafka-acl-extended-changes/acl_changes_", []byte(`{"version":1,"resourceType":"TRANSACTIONAL_ID","name":"tx-","patternType":"PREFIXED"}`), gozk.FlagSequence, worldACL); err != nil {
		t.Fatal(err)
	}
	txw := binding(acl.ResourceTransactionalID, "tx-", acl.PatternPrefixed, "User:svc", acl.OpWrite, acl.PermissionAllow)
	start = time.Now()
	waitFor(t, time.Second, func() error {
		if !slices.Contains(c.Metadata().ACLs, txw) {
			return errors.New("the prefixed transactional id ACL is not in the view")
		}
		return nil
	})
	t.Logf("a prefixed ACL written to ZooKeeper directly reached the view in %v", time.Since(start))

	// Deleting through the controller: a pattern losing its last ACL
	// loses its znode, with a notification.
	bob := "User:bob"
	deletions, err := c.DeleteACLs([]acl.Filter{
		{ResourceType: acl.ResourceTopic, PatternType: acl.PatternAny, Principal: &bob, Operation: acl.OpAny, Permission: acl.PermissionAny},
		{ResourceType: acl.ResourceAny, ResourceName: strPtr("ord"), PatternType: acl.PatternPrefixed, Operation: acl.OpAny, Permission: acl.PermissionAny},
	})
	if err != nil || len(deletions) != 2 || len(deletions[0].Deleted) != 1 || len(deletions[1].Deleted) != 1 {
		t.Fatalf("delete: %+v, %v", deletions, err)
	}
	if got, want := get("/kafka-acl/Topic/orders"), `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}`; got != want {
		t.Fatalf("literal znode after deletion\n%s\nwant\n%s", got, want)
	}
	if ok, _, err := conn.Exists("/acls/kafka-acl-extended/prefixed/Topic/ord"); err != nil || ok {
		t.Fatalf("the prefixed znode without ACLs is still there (%v)", err)
	}
	if got := notifications("/kafka-acl-extended-changes"); len(got) != 3 || got[2] != `{"version":1,"resourceType":"TOPIC","name":"ord","patternType":"PREFIXED"}` {
		t.Fatalf("extended notifications %q", got)
	}
	if got, want := c.Metadata().ACLs, []acl.Binding{aliceReadsOrders, svc, txw}; !slices.Equal(got, want) {
		t.Fatalf("view after deletion %v, want %v", got, want)
	}

	// A removal by hand (kafka-acls.sh deletes the znode of a pattern's
	// last ACL, then notifies).
	if err := conn.Delete("/acls/kafka-acl/Group/payments", -1); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/acls/kafka-acl-changes/acl_changes_", []byte("Group:payments"), gozk.FlagSequence, worldACL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Second, func() error {
		if slices.Contains(c.Metadata().ACLs, svc) {
			return errors.New("the deleted group ACL is still in the view")
		}
		return nil
	})

	// A new controller loads everything written so far.
	c.Close()
	c2, err := NewCluster(ctx, ClusterConfig{Self: scenarioBroker(2), ZookeeperConnect: srv.Addr() + "/acls", SessionTimeout: 4 * time.Second, ConnectionTimeout: 10 * time.Second}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := c2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() error {
		if got, want := c2.Metadata().ACLs, []acl.Binding{aliceReadsOrders, txw}; !slices.Equal(got, want) {
			return errors.New("the new controller's view lacks the ACLs")
		}
		return nil
	})
}

// notifyingStore is the local store with ACL change notifications the
// test makes: as if a tool wrote ACLs behind the controller's back.
type notifyingStore struct {
	*localStore
	changes chan []string
	mu      sync.Mutex
	notes   map[string]zk.ACLChange
	purged  []string
}

func (s *notifyingStore) WatchACLChanges(context.Context) (<-chan []string, error) {
	return s.changes, nil
}

func (s *notifyingStore) ACLChange(_ context.Context, path string) (zk.ACLChange, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.notes[path]
	if !ok {
		return zk.ACLChange{}, zk.ErrNoNode
	}
	return c, nil
}

func (s *notifyingStore) DeleteACLChanges(_ context.Context, _ int32, paths []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purged = append(s.purged, paths...)
	return nil
}

// The controller re-reads the pattern a new notification names, tracks
// the sequence numbers of the two change directories apart, does not
// reload for notifications it found at takeover, and purges those older
// than 15 minutes.
func TestACLChangeNotifications(t *testing.T) {
	local := &localStore{state: &localState{Metadata: &Metadata{ClusterID: "acl", ControllerID: -1, Topics: map[string]*Topic{}}}}
	local.brokers = []zk.BrokerInfo{zkBroker(scenarioBroker(1))}
	now := time.Now()
	const lit0, lit1, ext0 = "/kafka-acl-changes/acl_changes_0000000000", "/kafka-acl-changes/acl_changes_0000000001", "/kafka-acl-extended-changes/acl_changes_0000000000"
	store := &notifyingStore{localStore: local, changes: make(chan []string, 1), notes: map[string]zk.ACLChange{
		lit0: {Path: lit0, Resource: aliceReadsOrders.Resource, Created: now.Add(-time.Hour)},
	}}
	store.changes <- []string{lit0}
	c := &Cluster{cfg: ClusterConfig{Self: scenarioBroker(1)}, logger: quietLogger(), store: store, seenEpoch: -1,
		stop: make(chan struct{}), done: make(chan struct{})}
	c.view.Store(&Metadata{ClusterID: "acl", ControllerID: -1, Topics: map[string]*Topic{}})
	a, err := startActive(context.Background(), context.Background(), c, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.active = a
	t.Cleanup(c.Close)
	waitFor(t, time.Second, func() error {
		store.mu.Lock()
		defer store.mu.Unlock()
		if !slices.Equal(store.purged, []string{lit0}) {
			return errors.New("the hour-old notification was not purged")
		}
		return nil
	})

	// A tool writes a literal ACL and notifies.
	if err := local.SetResourceACLs(context.Background(), 0, bobWritesOrders.Resource, []acl.Entry{bobWritesOrders.Entry}, -1); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	store.notes[lit1] = zk.ACLChange{Path: lit1, Resource: bobWritesOrders.Resource, Created: now}
	store.mu.Unlock()
	store.changes <- []string{lit1}
	waitFor(t, time.Second, func() error {
		if !slices.Equal(c.Metadata().ACLs, []acl.Binding{bobWritesOrders}) {
			return errors.New("the literal ACL is not in the view")
		}
		return nil
	})
	// Then a prefixed one: sequence 0 of the other directory is new.
	if err := local.SetResourceACLs(context.Background(), 0, anyoneDeniedOrd.Resource, []acl.Entry{anyoneDeniedOrd.Entry}, -1); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	store.notes[ext0] = zk.ACLChange{Path: ext0, Resource: anyoneDeniedOrd.Resource, Created: now}
	store.mu.Unlock()
	store.changes <- []string{lit1, ext0}
	waitFor(t, time.Second, func() error {
		if !slices.Equal(c.Metadata().ACLs, []acl.Binding{bobWritesOrders, anyoneDeniedOrd}) {
			return errors.New("the prefixed ACL is not in the view")
		}
		return nil
	})
}
