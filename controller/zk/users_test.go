package zk

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	gozk "github.com/go-zookeeper/zk"
	"github.com/kbroker/kbroker/internal/zktest"
)

// Sanitize is Kafka's Sanitizer.sanitize (Java's URLEncoder, '*' and ' '
// as %2A and %20); Desanitize is URLDecoder ('+' is a space).
func TestSanitize(t *testing.T) {
	for _, tc := range []struct{ name, sanitized string }{
		{"alice", "alice"},
		{"Al1ce.x-y_z", "Al1ce.x-y_z"},
		{"user@example.com", "user%40example.com"},
		{"CN=a b,O=c", "CN%3Da%20b%2CO%3Dc"},
		{"*", "%2A"},
		{"a+b", "a%2Bb"},
		{"a/b", "a%2Fb"},
		{"üser", "%C3%BCser"},
		{"~%", "%7E%25"},
	} {
		if got := Sanitize(tc.name); got != tc.sanitized {
			t.Errorf("Sanitize(%q) = %q, want %q", tc.name, got, tc.sanitized)
		}
		if got, err := Desanitize(tc.sanitized); err != nil || got != tc.name {
			t.Errorf("Desanitize(%q) = %q, %v; want %q", tc.sanitized, got, err, tc.name)
		}
	}
	if got, err := Desanitize("a+b"); err != nil || got != "a b" {
		t.Errorf("Desanitize(a+b) = %q, %v: URLDecoder reads + as a space", got, err)
	}
	if _, err := Desanitize("bad%zz"); err == nil {
		t.Error("Desanitize accepted a bad escape")
	}
}

func TestDecodeConfigChangeNotification(t *testing.T) {
	for _, tc := range []struct {
		data string
		path string
		bad  bool
	}{
		{`{"version":2,"entity_path":"users/alice"}`, "users/alice", false},
		{`{"version":1,"entity_type":"users","entity_name":"alice"}`, "users/alice", false},
		{`{"version":2}`, "", true},
		{`{"entity_path":"users/alice"}`, "", true},
		{`nope`, "", true},
	} {
		got, err := DecodeConfigChangeNotification("/config/changes/config_change_0000000001", []byte(tc.data))
		if got != tc.path || (err != nil) != tc.bad || (err != nil && !errors.Is(err, ErrMalformed)) {
			t.Errorf("DecodeConfigChangeNotification(%s) = %q, %v", tc.data, got, err)
		}
	}
}

// A user's znode holds key material: a damaged one is reported without
// its content.
func TestDecodeUserConfigHidesContent(t *testing.T) {
	for _, data := range []string{`{"config":{"SCRAM-SHA-256":1234567}} secret`, `{"config":{"SCRAM-SHA-256":["secret"]}}`} {
		_, err := DecodeUserConfig("alice", []byte(data))
		if !errors.Is(err, ErrMalformed) || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "1234567") {
			t.Errorf("DecodeUserConfig(%s): %v", data, err)
		}
	}
	for data, want := range map[string]map[string]string{
		``:                     {},
		`{"version":1}`:        {},
		`{"config":{"a":"b"}}`: {"a": "b"},
	} {
		got, err := DecodeUserConfig("alice", []byte(data))
		if err != nil || !maps.Equal(got, want) {
			t.Errorf("DecodeUserConfig(%q) = %v, %v", data, got, err)
		}
	}
}

func TestUserConfigsInZooKeeper(t *testing.T) {
	srv := zktest.Start(t)
	ctx := testCtx(t)
	s := connect(t, srv.Addr()+"/kafka")
	raw := rawConn(t, srv.Addr())
	_, v := mustElect(t, ctx, s)
	changes, err := s.WatchConfigChanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := recv(t, changes, "initial notifications"); len(names) != 0 {
		t.Fatalf("initial notifications %v", names)
	}

	// Creation: Kafka's JSON, and a notification in the same transaction.
	cred := "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096"
	if err := s.SetUserConfig(ctx, v, "bob@example.com", map[string]string{"SCRAM-SHA-256": cred}, -1); err != nil {
		t.Fatal(err)
	}
	if got, want := rawGet(t, raw, "/kafka/config/users/bob%40example.com"), `{"version":1,"config":{"SCRAM-SHA-256":"`+cred+`"}}`; got != want {
		t.Fatalf("user znode %s, want %s", got, want)
	}
	names := recvUntil(t, changes, "first notification", func(n []string) bool { return len(n) == 1 })
	if names[0] != "config_change_0000000000" {
		t.Fatalf("notification %q", names[0])
	}
	if got, want := rawGet(t, raw, "/kafka/config/changes/config_change_0000000000"), `{"version":2,"entity_path":"users/bob%40example.com"}`; got != want {
		t.Fatalf("notification %s, want %s", got, want)
	}
	change, err := s.ConfigChange(ctx, names[0])
	if err != nil || change.EntityPath != "users/bob%40example.com" || change.Created.IsZero() {
		t.Fatalf("ConfigChange = %+v, %v", change, err)
	}

	// Replacement is conditional on the version read: a stale one loses
	// and writes no notification.
	cfg, version, err := s.UserConfig(ctx, "bob@example.com")
	if err != nil || version != 0 || cfg["SCRAM-SHA-256"] != cred {
		t.Fatalf("UserConfig = %v, %d, %v", cfg, version, err)
	}
	if err := s.SetUserConfig(ctx, v, "bob@example.com", map[string]string{}, -1); !errors.Is(err, ErrVersionConflict) {
		t.Fatalf("create over an existing znode: %v", err)
	}
	if err := s.SetUserConfig(ctx, v, "bob@example.com", map[string]string{"producer_byte_rate": "10"}, version); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUserConfig(ctx, v, "bob@example.com", map[string]string{}, version); !errors.Is(err, ErrVersionConflict) {
		t.Fatalf("write at a stale version: %v", err)
	}
	if err := s.SetUserConfig(ctx, v+1, "carol", map[string]string{}, -1); !errors.Is(err, ErrControllerMoved) {
		t.Fatalf("write by a deposed controller: %v", err)
	}
	if err := s.SetUserConfig(ctx, v, "", map[string]string{}, -1); err == nil {
		t.Fatal("empty user name accepted")
	}
	names = recvUntil(t, changes, "second notification", func(n []string) bool { return len(n) == 2 })
	if names[1] != "config_change_0000000001" {
		t.Fatalf("notifications %v", names)
	}

	// Kafka's tools write directly: a user znode (quota parent without
	// data, too) and a notification, which the watch reports.
	acl := gozk.WorldACL(gozk.PermAll)
	if _, err := raw.Create("/kafka/config/users/dave", nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create("/kafka/config/users/carol", []byte(`{"version":1,"config":{"SCRAM-SHA-512":"x"}}`), 0, acl); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create("/kafka/config/changes/config_change_", []byte(`{"version":2,"entity_path":"users/carol"}`), gozk.FlagSequence, acl); err != nil {
		t.Fatal(err)
	}
	names = recvUntil(t, changes, "external notification", func(n []string) bool { return len(n) == 3 })
	if change, err := s.ConfigChange(ctx, names[2]); err != nil || change.EntityPath != "users/carol" {
		t.Fatalf("external notification %+v, %v", change, err)
	}
	users, err := s.Users(ctx)
	if err != nil || !slices.Equal(users, []string{"bob@example.com", "carol", "dave"}) {
		t.Fatalf("Users = %v, %v", users, err)
	}
	if cfg, _, err := s.UserConfig(ctx, "carol"); err != nil || cfg["SCRAM-SHA-512"] != "x" {
		t.Fatalf("carol = %v, %v", cfg, err)
	}
	if cfg, version, err := s.UserConfig(ctx, "dave"); err != nil || len(cfg) != 0 || version != 0 {
		t.Fatalf("dave = %v, %d, %v", cfg, version, err)
	}
	if cfg, version, err := s.UserConfig(ctx, "nobody"); err != nil || len(cfg) != 0 || version != -1 {
		t.Fatalf("nobody = %v, %d, %v", cfg, version, err)
	}
	if _, err := raw.Set("/kafka/config/users/dave", []byte(`{"config":{"SCRAM-SHA-256":42}}`), -1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.UserConfig(ctx, "dave"); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "/kafka/config/users/dave") || strings.Contains(err.Error(), "42") {
		t.Fatalf("malformed user znode: %v", err)
	}

	// Purging: fenced, and a missing one is fine.
	if err := s.DeleteConfigChanges(ctx, v+1, names[:1]); !errors.Is(err, ErrControllerMoved) {
		t.Fatalf("purge by a deposed controller: %v", err)
	}
	if err := s.DeleteConfigChanges(ctx, v, append(names[:2:2], "config_change_0000000099")); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, changes, "purged", func(n []string) bool { return slices.Equal(n, names[2:]) })
	if _, err := s.ConfigChange(ctx, names[0]); !errors.Is(err, ErrNoNode) {
		t.Fatalf("purged notification: %v", err)
	}
}
