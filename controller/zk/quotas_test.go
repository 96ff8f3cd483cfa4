package zk

import (
	"errors"
	"maps"
	"slices"
	"testing"

	gozk "github.com/go-zookeeper/zk"
	"github.com/kbroker/kbroker/internal/zktest"
)

// Entity paths are Kafka's: names sanitized, <default> as is, and the
// user + client form nested under the user.
func TestEntityPaths(t *testing.T) {
	for _, tc := range []struct {
		e          Entity
		entityPath string
		str        string
	}{
		{Entity{User: "alice"}, "users/alice", "user alice"},
		{Entity{User: "bob@x.org", Client: "app 1"}, "users/bob%40x.org/clients/app%201", "user bob@x.org client-id app 1"},
		{Entity{User: DefaultEntity}, "users/<default>", "default user"},
		{Entity{User: DefaultEntity, Client: DefaultEntity}, "users/<default>/clients/<default>", "default user default client-id"},
		{Entity{User: "alice", Client: DefaultEntity}, "users/alice/clients/<default>", "user alice default client-id"},
		{Entity{User: DefaultEntity, Client: "app"}, "users/<default>/clients/app", "default user client-id app"},
		{Entity{Client: "app"}, "clients/app", "client-id app"},
		{Entity{Client: DefaultEntity}, "clients/<default>", "default client-id"},
	} {
		if got := tc.e.EntityPath(); got != tc.entityPath {
			t.Errorf("%+v: entity path %q, want %q", tc.e, got, tc.entityPath)
		}
		if got := tc.e.ZNodePath(); got != "/config/"+tc.entityPath {
			t.Errorf("%+v: znode %q", tc.e, got)
		}
		if got := tc.e.String(); got != tc.str {
			t.Errorf("%+v: String %q, want %q", tc.e, got, tc.str)
		}
		if got, ok, err := ParseEntityPath(tc.entityPath); got != tc.e || !ok || err != nil {
			t.Errorf("ParseEntityPath(%q) = %+v, %v, %v", tc.entityPath, got, ok, err)
		}
	}
	for _, tc := range []struct {
		path string
		ok   bool
		err  bool
	}{
		{"topics/orders", false, false},
		{"brokers/<default>", false, false},
		{"ips/127.0.0.1", false, false},
		{"users/", false, true},
		{"clients/", false, true},
		{"users/a/clients", false, true},
		{"users/a/topics/b", false, true},
		{"clients/a/users/b", false, true},
		{"users/bad%zz", false, true},
		// A user named "<default>" (Kafka writes %3Cdefault%3E): kbroker
		// cannot tell it from the default user.
		{"users/%3Cdefault%3E", false, true},
	} {
		if _, ok, err := ParseEntityPath(tc.path); ok != tc.ok || (err != nil) != tc.err {
			t.Errorf("ParseEntityPath(%q) = %v, %v", tc.path, ok, err)
		}
	}
}

// The znodes and notifications of every entity kind, byte for byte as
// kafka-configs.sh (AdminZkClient) writes them, their listing, and Kafka
// 3.9's clean-up of emptied quota znodes.
func TestQuotaEntitiesInZooKeeper(t *testing.T) {
	srv := zktest.Start(t)
	ctx := testCtx(t)
	s := connect(t, srv.Addr()+"/kafka")
	raw := rawConn(t, srv.Addr())
	_, v := mustElect(t, ctx, s)
	changes, err := s.WatchConfigChanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recv(t, changes, "initial notifications")

	rate := map[string]string{"producer_byte_rate": "1048576"}
	writes := []struct {
		e     Entity
		znode string
	}{
		{Entity{User: "alice"}, "/kafka/config/users/alice"},
		{Entity{User: DefaultEntity}, "/kafka/config/users/<default>"},
		{Entity{User: "bob@x.org", Client: "app 1"}, "/kafka/config/users/bob%40x.org/clients/app%201"},
		{Entity{User: "alice", Client: DefaultEntity}, "/kafka/config/users/alice/clients/<default>"},
		{Entity{User: DefaultEntity, Client: "app"}, "/kafka/config/users/<default>/clients/app"},
		{Entity{User: DefaultEntity, Client: DefaultEntity}, "/kafka/config/users/<default>/clients/<default>"},
		{Entity{Client: "app"}, "/kafka/config/clients/app"},
		{Entity{Client: DefaultEntity}, "/kafka/config/clients/<default>"},
	}
	for i, w := range writes {
		if err := s.SetEntityConfig(ctx, v, w.e, rate, -1); err != nil {
			t.Fatalf("%s: %v", w.e, err)
		}
		if got, want := rawGet(t, raw, w.znode), `{"version":1,"config":{"producer_byte_rate":"1048576"}}`; got != want {
			t.Fatalf("%s: znode %s = %s, want %s", w.e, w.znode, got, want)
		}
		names := recvUntil(t, changes, "notification", func(n []string) bool { return len(n) == i+1 })
		if got, want := rawGet(t, raw, "/kafka/config/changes/"+names[i]), `{"version":2,"entity_path":"`+w.e.EntityPath()+`"}`; got != want {
			t.Fatalf("%s: notification %s, want %s", w.e, got, want)
		}
	}
	// The parents a user + client write made have no data, as Kafka's
	// createRecursive leaves them.
	if got := rawGet(t, raw, "/kafka/config/users/bob%40x.org"); got != "" {
		t.Fatalf("parent user znode %q", got)
	}
	if cfg, version, err := s.UserConfig(ctx, "bob@x.org"); err != nil || len(cfg) != 0 || version != 0 {
		t.Fatalf("parent user config %v, %d, %v", cfg, version, err)
	}

	// Listing: names decoded, <default> as is; a user named "<default>"
	// is left out.
	if _, err := raw.Create("/kafka/config/users/%3Cdefault%3E", nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if users, err := s.Users(ctx); err != nil || !slices.Equal(users, []string{"<default>", "alice", "bob@x.org"}) {
		t.Fatalf("Users = %q, %v", users, err)
	}
	if clients, err := s.Clients(ctx); err != nil || !slices.Equal(clients, []string{"<default>", "app"}) {
		t.Fatalf("Clients = %q, %v", clients, err)
	}
	for user, want := range map[string][]string{"alice": {"<default>"}, "bob@x.org": {"app 1"}, DefaultEntity: {"<default>", "app"}, "carol": {}} {
		if got, err := s.UserClients(ctx, user); err != nil || !slices.Equal(got, want) {
			t.Fatalf("UserClients(%s) = %q, %v", user, got, err)
		}
	}

	// Conditional on the version read.
	e := Entity{Client: "app"}
	cfg, version, err := s.EntityConfig(ctx, e)
	if err != nil || !maps.Equal(cfg, rate) || version != 0 {
		t.Fatalf("EntityConfig = %v, %d, %v", cfg, version, err)
	}
	both := map[string]string{"producer_byte_rate": "1048576", "request_percentage": "50.0"}
	if err := s.SetEntityConfig(ctx, v, e, both, -1); !errors.Is(err, ErrVersionConflict) {
		t.Fatalf("create over an existing znode: %v", err)
	}
	if err := s.SetEntityConfig(ctx, v, e, both, version); err != nil {
		t.Fatal(err)
	}
	if got, want := rawGet(t, raw, "/kafka/config/clients/app"), `{"version":1,"config":{"producer_byte_rate":"1048576","request_percentage":"50.0"}}`; got != want {
		t.Fatalf("znode %s, want %s", got, want)
	}
	if err := s.SetEntityConfig(ctx, v, e, rate, version); !errors.Is(err, ErrVersionConflict) {
		t.Fatalf("write at a stale version: %v", err)
	}
	if err := s.SetEntityConfig(ctx, v+1, e, rate, version+1); !errors.Is(err, ErrControllerMoved) {
		t.Fatalf("write by a deposed controller: %v", err)
	}

	// Emptying: a client's znode goes; a user + client's goes with the
	// clients directory and the user's znode when nothing else is left
	// there; a user's znode with children stays, emptied.
	empty := func(e Entity) {
		t.Helper()
		_, version, err := s.EntityConfig(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetEntityConfig(ctx, v, e, nil, version); err != nil {
			t.Fatalf("empty %s: %v", e, err)
		}
	}
	exists := func(path string) bool {
		t.Helper()
		ok, _, err := raw.Exists(path)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// Counts come from ZooKeeper itself: the watch may still hold a list
	// from before the last writes, and a stale count waits for a list
	// that never comes.
	notifications := func() int {
		t.Helper()
		names, _, err := raw.Children("/kafka/config/changes")
		if err != nil {
			t.Fatal(err)
		}
		return len(names)
	}
	before := notifications()
	empty(Entity{Client: "app"})
	if exists("/kafka/config/clients/app") {
		t.Fatal("emptied client znode kept")
	}
	recvUntil(t, changes, "clean-up notification", func(n []string) bool { return len(n) == before+1 })
	empty(Entity{User: "bob@x.org", Client: "app 1"})
	if exists("/kafka/config/users/bob%40x.org") {
		t.Fatal("user znode left with nothing in it")
	}
	empty(Entity{User: DefaultEntity, Client: "app"})
	if !exists("/kafka/config/users/<default>/clients/<default>") || exists("/kafka/config/users/<default>/clients/app") {
		t.Fatal("clean-up removed a sibling or kept the emptied znode")
	}
	empty(Entity{User: "alice"})
	if got := rawGet(t, raw, "/kafka/config/users/alice"); got != `{"version":1,"config":{}}` {
		t.Fatalf("user znode with children emptied to %q", got)
	}
	empty(Entity{User: "alice", Client: DefaultEntity})
	if exists("/kafka/config/users/alice") {
		t.Fatal("emptied user znode kept after its last client went")
	}
	// Nothing to empty: no write, no notification.
	n := notifications()
	if err := s.SetEntityConfig(ctx, v, Entity{Client: "nobody"}, nil, -1); err != nil {
		t.Fatal(err)
	}
	if _, version, _ := s.EntityConfig(ctx, Entity{User: "alice"}); version != -1 {
		t.Fatalf("alice at version %d", version)
	}
	// A user's second client id: the parents are there already.
	if err := s.SetEntityConfig(ctx, v, Entity{User: "dave", Client: "x"}, rate, -1); err != nil {
		t.Fatal(err)
	}
	if err := s.SetEntityConfig(ctx, v, Entity{User: "dave", Client: "y"}, rate, -1); err != nil {
		t.Fatal(err)
	}
	names := recvUntil(t, changes, "last notifications", func(got []string) bool { return len(got) == n+2 })
	if len(names) != n+2 {
		t.Fatalf("notifications %v", names)
	}
}
