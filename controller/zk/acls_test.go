package zk

import (
	"errors"
	"slices"
	"strings"
	"testing"

	gozk "github.com/go-zookeeper/zk"
	aclmodel "github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/internal/zktest"
)

func TestACLChangeSequence(t *testing.T) {
	for _, tc := range []struct {
		path   string
		parent string
		seq    int64
		ok     bool
	}{
		{"/kafka-acl-changes/acl_changes_0000000012", aclmodel.LiteralChanges, 12, true},
		{"/kafka-acl-extended-changes/acl_changes_0000000000", aclmodel.ExtendedChanges, 0, true},
		{"/kafka-acl-changes/acl_changes_", "", 0, false},
		{"/kafka-acl-changes/acl_changes_x1", "", 0, false},
		{"/kafka-acl-changes/other_0000000001", "", 0, false},
		{"/config/changes/acl_changes_0000000001", "", 0, false},
		{"acl_changes_0000000001", "", 0, false},
	} {
		parent, seq, ok := ACLChangeSequence(tc.path)
		if parent != tc.parent || seq != tc.seq || ok != tc.ok {
			t.Errorf("ACLChangeSequence(%q) = %q, %d, %v", tc.path, parent, seq, ok)
		}
	}
}

// The store writes Kafka's ACL znodes and notifications byte for byte,
// conditionally on the znode version and fenced on the controller epoch,
// deletes a pattern's znode with its last entry, follows both change
// directories, and reads what Kafka's tools write.
func TestACLsInZooKeeper(t *testing.T) {
	srv := zktest.Start(t)
	ctx := testCtx(t)
	s := connect(t, srv.Addr()+"/kafka")
	raw := rawConn(t, srv.Addr())
	_, v := mustElect(t, ctx, s)
	changes, err := s.WatchACLChanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if paths := recv(t, changes, "initial notifications"); len(paths) != 0 {
		t.Fatalf("initial notifications %v", paths)
	}
	// Kafka's layout is there, as its brokers make it at start.
	for _, p := range aclmodel.SetupPaths() {
		if ok, _, err := raw.Exists("/kafka" + p); err != nil || !ok {
			t.Fatalf("%s missing (%v)", p, err)
		}
	}

	orders := aclmodel.Resource{Type: aclmodel.ResourceTopic, Name: "orders", Pattern: aclmodel.PatternLiteral}
	ord := aclmodel.Resource{Type: aclmodel.ResourceTopic, Name: "ord", Pattern: aclmodel.PatternPrefixed}
	alice := aclmodel.Entry{Principal: "User:alice", Host: "*", Operation: aclmodel.OpRead, Permission: aclmodel.PermissionAllow}
	bob := aclmodel.Entry{Principal: "User:bob", Host: "10.0.0.7", Operation: aclmodel.OpIdempotentWrite, Permission: aclmodel.PermissionDeny}

	// Creation of a literal pattern: its znode and a literal notification.
	if err := s.SetResourceACLs(ctx, v, orders, []aclmodel.Entry{alice, bob}, -1); err != nil {
		t.Fatal(err)
	}
	if got, want := rawGet(t, raw, "/kafka/kafka-acl/Topic/orders"), `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},{"principal":"User:bob","permissionType":"Deny","operation":"IdempotentWrite","host":"10.0.0.7"}]}`; got != want {
		t.Fatalf("literal znode\n%s\nwant\n%s", got, want)
	}
	paths := recvUntil(t, changes, "literal notification", func(p []string) bool { return len(p) == 1 })
	if paths[0] != "/kafka-acl-changes/acl_changes_0000000000" {
		t.Fatalf("notification %q", paths[0])
	}
	if got := rawGet(t, raw, "/kafka"+paths[0]); got != "TOPIC:orders" {
		t.Fatalf("literal notification %q", got)
	}
	change, err := s.ACLChange(ctx, paths[0])
	if err != nil || change.Resource != orders || change.Created.IsZero() || change.Path != paths[0] {
		t.Fatalf("ACLChange = %+v, %v", change, err)
	}

	// Creation of a prefixed pattern: the extended store and notification.
	if err := s.SetResourceACLs(ctx, v, ord, []aclmodel.Entry{alice}, -1); err != nil {
		t.Fatal(err)
	}
	if got, want := rawGet(t, raw, "/kafka/kafka-acl-extended/prefixed/Topic/ord"), `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}`; got != want {
		t.Fatalf("prefixed znode\n%s\nwant\n%s", got, want)
	}
	paths = recvUntil(t, changes, "extended notification", func(p []string) bool { return len(p) == 2 })
	if want := []string{"/kafka-acl-changes/acl_changes_0000000000", "/kafka-acl-extended-changes/acl_changes_0000000000"}; !slices.Equal(paths, want) {
		t.Fatalf("notifications %v, want %v", paths, want)
	}
	if got, want := rawGet(t, raw, "/kafka"+paths[1]), `{"version":1,"resourceType":"TOPIC","name":"ord","patternType":"PREFIXED"}`; got != want {
		t.Fatalf("extended notification %s, want %s", got, want)
	}
	if change, err := s.ACLChange(ctx, paths[1]); err != nil || change.Resource != ord {
		t.Fatalf("ACLChange = %+v, %v", change, err)
	}

	// Replacement is conditional on the version read; a lost race writes
	// no notification.
	entries, version, err := s.ResourceACLs(ctx, orders)
	if err != nil || version != 0 || !slices.Equal(entries, []aclmodel.Entry{alice, bob}) {
		t.Fatalf("ResourceACLs = %v, %d, %v", entries, version, err)
	}
	if err := s.SetResourceACLs(ctx, v, orders, []aclmodel.Entry{alice}, -1); !errors.Is(err, ErrVersionConflict) {
		t.Fatalf("create over an existing znode: %v", err)
	}
	if err := s.SetResourceACLs(ctx, v, orders, []aclmodel.Entry{bob}, version); err != nil {
		t.Fatal(err)
	}
	if err := s.SetResourceACLs(ctx, v, orders, []aclmodel.Entry{alice}, version); !errors.Is(err, ErrVersionConflict) {
		t.Fatalf("write at a stale version: %v", err)
	}
	if err := s.SetResourceACLs(ctx, v, orders, nil, version); !errors.Is(err, ErrVersionConflict) {
		t.Fatalf("delete at a stale version: %v", err)
	}
	if err := s.SetResourceACLs(ctx, v+1, ord, nil, 0); !errors.Is(err, ErrControllerMoved) {
		t.Fatalf("write by a deposed controller: %v", err)
	}
	if err := s.SetResourceACLs(ctx, v, aclmodel.Resource{Type: aclmodel.ResourceGroup, Name: "a/b", Pattern: aclmodel.PatternLiteral}, []aclmodel.Entry{alice}, -1); err == nil {
		t.Fatal("a name with '/' was written")
	}
	if err := s.SetResourceACLs(ctx, v, aclmodel.Resource{Type: aclmodel.ResourceGroup, Name: "absent", Pattern: aclmodel.PatternLiteral}, nil, -1); err != nil {
		t.Fatalf("removing nothing: %v", err)
	}
	paths = recvUntil(t, changes, "replacement notification", func(p []string) bool { return len(p) == 3 })
	if got := rawGet(t, raw, "/kafka"+paths[1]); got != "TOPIC:orders" || paths[1] != "/kafka-acl-changes/acl_changes_0000000001" {
		t.Fatalf("replacement notification %s = %q", paths[1], got)
	}

	// The last entry gone: the znode goes, with a notification.
	if err := s.SetResourceACLs(ctx, v, ord, nil, 0); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := raw.Exists("/kafka/kafka-acl-extended/prefixed/Topic/ord"); err != nil || ok {
		t.Fatalf("the prefixed znode is still there (%v)", err)
	}
	recvUntil(t, changes, "deletion notification", func(p []string) bool { return len(p) == 4 })
	if entries, version, err := s.ResourceACLs(ctx, ord); err != nil || len(entries) != 0 || version != -1 {
		t.Fatalf("deleted pattern = %v, %d, %v", entries, version, err)
	}

	// A missing type directory (removed by hand) is made again.
	if err := raw.Delete("/kafka/kafka-acl/User", -1); err != nil {
		t.Fatal(err)
	}
	users := aclmodel.Resource{Type: aclmodel.ResourceUser, Name: "svc", Pattern: aclmodel.PatternLiteral}
	if err := s.SetResourceACLs(ctx, v, users, []aclmodel.Entry{alice}, -1); err != nil {
		t.Fatalf("write under a missing type directory: %v", err)
	}
	recvUntil(t, changes, "user notification", func(p []string) bool { return len(p) == 5 })

	// kafka-acls.sh writes the znode, then the notification (Kafka 1.x
	// spelled the literal type in PascalCase).
	worldACL := gozk.WorldACL(gozk.PermAll)
	if _, err := raw.Create("/kafka/kafka-acl/Group/payments", []byte(`{"version":1,"acls":[{"principal":"User:svc","permissionType":"Allow","operation":"Describe","host":"*"}]}`), 0, worldACL); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create("/kafka/kafka-acl-changes/acl_changes_", []byte("Group:payments"), gozk.FlagSequence, worldACL); err != nil {
		t.Fatal(err)
	}
	paths = recvUntil(t, changes, "external notification", func(p []string) bool { return len(p) == 6 })
	payments := aclmodel.Resource{Type: aclmodel.ResourceGroup, Name: "payments", Pattern: aclmodel.PatternLiteral}
	if change, err := s.ACLChange(ctx, paths[3]); err != nil || change.Resource != payments {
		t.Fatalf("external notification %s: %+v, %v", paths[3], change, err)
	}
	resources, err := s.ACLResources(ctx)
	if want := []aclmodel.Resource{orders, payments, users}; err != nil || !slices.Equal(resources, want) {
		t.Fatalf("ACLResources = %v, %v; want %v", resources, err, want)
	}

	// Damage is reported, naming the znode.
	if _, err := raw.Set("/kafka/kafka-acl/Group/payments", []byte(`{"version":2,"acls":[]}`), -1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ResourceACLs(ctx, payments); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "/kafka/kafka-acl/Group/payments") {
		t.Fatalf("malformed ACL znode: %v", err)
	}
	if _, err := raw.Create("/kafka/kafka-acl-extended-changes/acl_changes_", []byte(`{"version":1,"resourceType":"TOPIC","name":"x","patternType":"LITERAL"}`), gozk.FlagSequence, worldACL); err != nil {
		t.Fatal(err)
	}
	paths = recvUntil(t, changes, "bad notification", func(p []string) bool { return len(p) == 7 })
	bad := paths[len(paths)-1]
	if change, err := s.ACLChange(ctx, bad); !errors.Is(err, ErrMalformed) || change.Created.IsZero() {
		t.Fatalf("malformed notification %s: %+v, %v (its creation time is needed to purge it)", bad, change, err)
	}

	// Purging: fenced, and a missing one is fine.
	if err := s.DeleteACLChanges(ctx, v+1, paths[:1]); !errors.Is(err, ErrControllerMoved) {
		t.Fatalf("purge by a deposed controller: %v", err)
	}
	if err := s.DeleteACLChanges(ctx, v, []string{paths[0], bad, "/kafka-acl-changes/acl_changes_0000000099"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteACLChanges(ctx, v, []string{"/brokers/ids/1"}); err == nil {
		t.Fatal("a path that is no notification was deleted")
	}
	left := recvUntil(t, changes, "purged", func(p []string) bool { return len(p) == 5 })
	if slices.Contains(left, paths[0]) || slices.Contains(left, bad) {
		t.Fatalf("after purging: %v", left)
	}
	if _, err := s.ACLChange(ctx, paths[0]); !errors.Is(err, ErrNoNode) {
		t.Fatalf("purged notification: %v", err)
	}
}
