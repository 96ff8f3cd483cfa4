package controller

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/kbroker/kbroker/controller/zk"
	"github.com/kbroker/kbroker/internal/sasl"
	"github.com/kbroker/kbroker/internal/zktest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func upsert(user, mechanism string, iterations int32) ScramUpsertion {
	return ScramUpsertion{User: user, Mechanism: mechanism, Iterations: iterations,
		Salt: []byte("salt-" + user), SaltedPassword: []byte("salted-password-of-" + user + "-" + mechanism)}
}

func del(user, mechanism string) ScramDeletion {
	return ScramDeletion{User: user, Mechanism: mechanism}
}

// storedCredential is what the controller must store for u: the internal/sasl
// derivation in Kafka's string form.
func storedCredential(t *testing.T, u ScramUpsertion) string {
	t.Helper()
	c, err := sasl.NewScramCredential(u.Mechanism, u.Salt, u.SaltedPassword, u.Iterations)
	if err != nil {
		t.Fatal(err)
	}
	return c.String()
}

// Kafka's checks (ZkAdminManager.alterUserScramCredentials), each failing
// the whole user with Kafka's code and message.
func TestCheckScramAlterations(t *testing.T) {
	const sha256, sha512 = sasl.ScramSHA256, sasl.ScramSHA512
	for _, tc := range []struct {
		name  string
		ups   []ScramUpsertion
		dels  []ScramDeletion
		users []string
		// want: user -> Kafka error and message (absent: valid).
		want map[string]*kafkaError
	}{
		{name: "valid upsertion", ups: []ScramUpsertion{upsert("alice", sha256, 4096)}, users: []string{"alice"}},
		{name: "iteration bounds are inclusive", ups: []ScramUpsertion{upsert("a", sha256, sasl.MinIterations), upsert("b", sha512, sasl.MaxIterations)}, users: []string{"a", "b"}},
		{name: "both mechanisms of one user", ups: []ScramUpsertion{upsert("alice", sha256, 4096), upsert("alice", sha512, 8192)}, users: []string{"alice"}},
		{name: "a deletion and an upsertion of different mechanisms", ups: []ScramUpsertion{upsert("alice", sha512, 4096)}, dels: []ScramDeletion{del("alice", sha256)}, users: []string{"alice"}},
		{name: "empty user", ups: []ScramUpsertion{upsert("", sha256, 4096)}, users: []string{""},
			want: map[string]*kafkaError{"": {kerr.UnacceptableCredential, "Username must not be empty"}}},
		{name: "empty user in a deletion", dels: []ScramDeletion{del("", sha256)}, users: []string{""},
			want: map[string]*kafkaError{"": {kerr.UnacceptableCredential, "Username must not be empty"}}},
		{name: "unknown mechanism", ups: []ScramUpsertion{upsert("alice", "", 4096)}, users: []string{"alice"},
			want: map[string]*kafkaError{"alice": {kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism"}}},
		{name: "unknown mechanism in a deletion", dels: []ScramDeletion{del("alice", "PLAIN")}, users: []string{"alice"},
			want: map[string]*kafkaError{"alice": {kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism"}}},
		{name: "too few iterations", ups: []ScramUpsertion{upsert("alice", sha256, 4095)}, users: []string{"alice"},
			want: map[string]*kafkaError{"alice": {kerr.UnacceptableCredential, "Too few iterations"}}},
		{name: "too many iterations", ups: []ScramUpsertion{upsert("alice", sha512, 16385)}, users: []string{"alice"},
			want: map[string]*kafkaError{"alice": {kerr.UnacceptableCredential, "Too many iterations"}}},
		{name: "the same credential upserted twice", ups: []ScramUpsertion{upsert("alice", sha256, 4096), upsert("alice", sha256, 8192), upsert("bob", sha256, 4096)},
			users: []string{"alice", "bob"}, want: map[string]*kafkaError{"alice": {kerr.DuplicateResource, "A user credential cannot be altered twice in the same request"}}},
		{name: "the same credential deleted and upserted", ups: []ScramUpsertion{upsert("alice", sha256, 4096), upsert("alice", sha512, 4096)}, dels: []ScramDeletion{del("alice", sha256)},
			users: []string{"alice"}, want: map[string]*kafkaError{"alice": {kerr.DuplicateResource, "A user credential cannot be altered twice in the same request"}}},
		{name: "an invalid entry wins over a duplicate", ups: []ScramUpsertion{upsert("alice", sha256, 4096), upsert("alice", sha256, 1)},
			users: []string{"alice"}, want: map[string]*kafkaError{"alice": {kerr.UnacceptableCredential, "Too few iterations"}}},
		{name: "the upsertion's reason wins over the deletion's", ups: []ScramUpsertion{upsert("alice", sha256, 99999)}, dels: []ScramDeletion{del("alice", "")},
			users: []string{"alice"}, want: map[string]*kafkaError{"alice": {kerr.UnacceptableCredential, "Too many iterations"}}},
		{name: "users in order of first appearance, deletions first", ups: []ScramUpsertion{upsert("c", sha256, 4096), upsert("a", sha256, 4096)}, dels: []ScramDeletion{del("b", sha512)},
			users: []string{"b", "c", "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			users, failed := checkScramAlterations(tc.ups, tc.dels)
			if !slices.Equal(users, tc.users) {
				t.Errorf("users %q, want %q", users, tc.users)
			}
			if len(failed) != len(tc.want) {
				t.Errorf("failed %v, want %v", failed, tc.want)
			}
			for user, want := range tc.want {
				err := failed[user]
				if !errors.Is(err, want.code) || err.Error() != want.msg {
					t.Errorf("user %q: %v, want %s %q", user, err, want.code.Message, want.msg)
				}
			}
		})
	}
}

// The controller applies alterations over the store: the stored form is
// internal/sasl's, other keys of the user (quotas) are kept, a deletion of
// a missing credential fails the user, and the view follows every change.
func TestAlterScramCredentials(t *testing.T) {
	store := &localStore{state: &localState{Metadata: &Metadata{ClusterID: "scram", ControllerID: -1, Topics: map[string]*Topic{},
		UserConfigs: map[string]map[string]string{"quota-user": {"producer_byte_rate": "1024"}}}}}
	store.brokers = []zk.BrokerInfo{zkBroker(scenarioBroker(1))}
	c := startLocalController(t, store, 1, 0)

	alice256, alice512 := upsert("alice", sasl.ScramSHA256, 4096), upsert("alice", sasl.ScramSHA512, 8192)
	quota256 := upsert("quota-user", sasl.ScramSHA256, 4096)
	for _, step := range []struct {
		name string
		ups  []ScramUpsertion
		dels []ScramDeletion
		// want are the results' errors by user (nil: success).
		want map[string]error
		// view is every user's config in the view afterwards.
		view map[string]map[string]string
	}{
		{name: "create both credentials of alice and one of a user with a quota", ups: []ScramUpsertion{alice256, alice512, quota256},
			want: map[string]error{"alice": nil, "quota-user": nil},
			view: map[string]map[string]string{
				"alice":      {"SCRAM-SHA-256": storedCredential(t, alice256), "SCRAM-SHA-512": storedCredential(t, alice512)},
				"quota-user": {"SCRAM-SHA-256": storedCredential(t, quota256), "producer_byte_rate": "1024"},
			}},
		{name: "deleting a missing credential fails the user, others go on", dels: []ScramDeletion{del("quota-user", sasl.ScramSHA512), del("alice", sasl.ScramSHA512)},
			want: map[string]error{"quota-user": kerr.ResourceNotFound, "alice": nil},
			view: map[string]map[string]string{
				"alice":      {"SCRAM-SHA-256": storedCredential(t, alice256)},
				"quota-user": {"SCRAM-SHA-256": storedCredential(t, quota256), "producer_byte_rate": "1024"},
			}},
		{name: "a user that does not exist at all", dels: []ScramDeletion{del("nobody", sasl.ScramSHA256)},
			want: map[string]error{"nobody": kerr.ResourceNotFound},
			view: map[string]map[string]string{
				"alice":      {"SCRAM-SHA-256": storedCredential(t, alice256)},
				"quota-user": {"SCRAM-SHA-256": storedCredential(t, quota256), "producer_byte_rate": "1024"},
			}},
		{name: "an empty salt is an unacceptable credential", ups: []ScramUpsertion{{User: "carol", Mechanism: sasl.ScramSHA256, Iterations: 4096, SaltedPassword: []byte("x")}},
			want: map[string]error{"carol": kerr.UnacceptableCredential},
			view: map[string]map[string]string{
				"alice":      {"SCRAM-SHA-256": storedCredential(t, alice256)},
				"quota-user": {"SCRAM-SHA-256": storedCredential(t, quota256), "producer_byte_rate": "1024"},
			}},
		{name: "deleting the last credentials: alice goes, the quota stays", dels: []ScramDeletion{del("alice", sasl.ScramSHA256), del("quota-user", sasl.ScramSHA256)},
			want: map[string]error{"alice": nil, "quota-user": nil},
			view: map[string]map[string]string{"quota-user": {"producer_byte_rate": "1024"}}},
	} {
		res, err := c.AlterScramCredentials(step.ups, step.dels)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if len(res) != len(step.want) {
			t.Fatalf("%s: results %+v, want users %v", step.name, res, slices.Collect(maps.Keys(step.want)))
		}
		for _, r := range res {
			want, ok := step.want[r.User]
			switch {
			case !ok:
				t.Fatalf("%s: unexpected result for %q", step.name, r.User)
			case want == nil && r.Err != nil, want != nil && !errors.Is(r.Err, want):
				t.Fatalf("%s: user %q: %v, want %v", step.name, r.User, r.Err, want)
			}
		}
		if got := c.Metadata().UserConfigs; !reflect.DeepEqual(got, step.view) {
			t.Fatalf("%s: view\n%v\nwant\n%v", step.name, got, step.view)
		}
		// The store holds what the view shows.
		for user, want := range step.view {
			got, _, err := store.UserConfig(context.Background(), user)
			if err != nil || !maps.Equal(got, want) {
				t.Fatalf("%s: stored config of %q %v (%v), want %v", step.name, user, got, err, want)
			}
		}
	}
	if res, _ := c.AlterScramCredentials(nil, []ScramDeletion{del("nobody", sasl.ScramSHA256)}); res[0].Err.Error() != "Attempt to delete a user credential that does not exist" {
		t.Fatalf("message %q is not Kafka's", res[0].Err)
	}
	// A deposed controller changes nothing.
	store.electController()
	res, err := c.AlterScramCredentials([]ScramUpsertion{alice256}, nil)
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.NotController) {
		t.Fatalf("alteration by a deposed controller: %+v, %v", res, err)
	}
	if _, ok := c.Metadata().UserConfigs["alice"]; ok {
		t.Fatal("a fenced alteration reached the view")
	}
	// A broker that is not the controller refuses.
	other := &Cluster{cfg: ClusterConfig{Self: scenarioBroker(2)}, logger: quietLogger(), store: store}
	if _, err := other.AlterScramCredentials([]ScramUpsertion{alice256}, nil); !errors.Is(err, kerr.NotController) {
		t.Fatalf("alteration on a non-controller: %v", err)
	}
}

// The embedded node keeps credentials in its state file, across restarts.
func TestEmbeddedScramCredentialsPersist(t *testing.T) {
	dir := t.TempDir()
	self := ClusterConfig{Self: BrokerInfo{ID: 0, Host: "127.0.0.1", Port: 9092}}
	c, err := NewEmbedded(dir, self, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	u := upsert("alice", sasl.ScramSHA512, 10000)
	if res, err := c.AlterScramCredentials([]ScramUpsertion{u}, nil); err != nil || res[0].Err != nil {
		t.Fatalf("alter: %+v, %v", res, err)
	}
	c.Close()
	data, err := os.ReadFile(filepath.Join(dir, localStateFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"user_configs"`) {
		t.Fatalf("state file has no user configs:\n%s", data)
	}
	c, err = NewEmbedded(dir, self, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := map[string]map[string]string{"alice": {sasl.ScramSHA512: storedCredential(t, u)}}
	if got := c.Metadata().UserConfigs; !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart: %v, want %v", got, want)
	}
	if res, err := c.AlterScramCredentials(nil, []ScramDeletion{del("alice", sasl.ScramSHA512)}); err != nil || res[0].Err != nil {
		t.Fatalf("delete: %+v, %v", res, err)
	}
	if got := c.Metadata().UserConfigs; got != nil {
		t.Fatalf("after deleting the only credential: %v", got)
	}
}

// User configs travel in UpdateMetadata, and a clone does not share them.
func TestUpdateMetadataCarriesUserConfigs(t *testing.T) {
	md := &Metadata{ClusterID: "c", ControllerID: 1, Topics: map[string]*Topic{}, Sequence: 3,
		UserConfigs: map[string]map[string]string{
			"alice":     {"SCRAM-SHA-256": "salt=c2FsdA==,stored_key=AA==,server_key=AA==,iterations=4096", "producer_byte_rate": "1024"},
			"bob@x.org": {"SCRAM-SHA-512": "salt=c2FsdA==,stored_key=AA==,server_key=AA==,iterations=8192"},
		}}
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

	bad := EncodeUpdateMetadata(&Metadata{Topics: map[string]*Topic{}}, 4)
	bad.UnknownTags.Set(tagUserConfigs, []byte(`{"alice":"salt=secret"}`))
	if _, err := DecodeUpdateMetadata(bad); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("bad user configs tag: %v (must fail without quoting it)", err)
	}

	clone := md.clone()
	clone.UserConfigs["alice"]["producer_byte_rate"] = "1"
	delete(clone.UserConfigs, "bob@x.org")
	if md.UserConfigs["alice"]["producer_byte_rate"] != "1024" || md.UserConfigs["bob@x.org"] == nil {
		t.Fatal("changing a clone changed the original's user configs")
	}
}

func TestExpiredConfigChanges(t *testing.T) {
	now := time.Unix(10000, 0)
	created := map[string]time.Time{
		"config_change_0000000003": now.Add(-configChangeExpiry - time.Second),
		"config_change_0000000001": now.Add(-time.Hour),
		"config_change_0000000004": now.Add(-configChangeExpiry),
		"config_change_0000000005": now,
		"config_change_0000000006": {}, // creation unknown: kept
	}
	if got, want := expiredConfigChanges(created, now), []string{"config_change_0000000001", "config_change_0000000003"}; !slices.Equal(got, want) {
		t.Fatalf("expired %v, want %v", got, want)
	}
	for _, tc := range []struct {
		names []string
		want  int64
	}{
		{nil, -1},
		{[]string{"config_change_0000000000"}, 0},
		{[]string{"config_change_0000000007", "junk", "config_change_0000000012"}, 12},
	} {
		if got := newestConfigChange(tc.names); got != tc.want {
			t.Errorf("newestConfigChange(%v) = %d, want %d", tc.names, got, tc.want)
		}
	}
}

// On ZooKeeper: the controller writes Kafka's znode and notification, and a
// change written directly, as kafka-configs.sh --zookeeper does (the
// user's znode, then a notification), reaches the view within a second.
func TestScramCredentialsInZooKeeper(t *testing.T) {
	srv := zktest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := NewCluster(ctx, ClusterConfig{Self: scenarioBroker(1), ZookeeperConnect: srv.Addr() + "/scram", SessionTimeout: 4 * time.Second, ConnectionTimeout: 10 * time.Second}, quietLogger())
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
	acl := gozk.WorldACL(gozk.PermAll)

	// A quota set by Kafka's tools before: kept by the alteration.
	if _, err := conn.Create("/scram/config/users/bob%40example.com", []byte(`{"version":1,"config":{"consumer_byte_rate":"2048"}}`), 0, acl); err != nil {
		t.Fatal(err)
	}
	u := upsert("bob@example.com", sasl.ScramSHA256, 4096)
	res, err := c.AlterScramCredentials([]ScramUpsertion{u}, nil)
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %+v, %v", res, err)
	}
	data, _, err := conn.Get("/scram/config/users/bob%40example.com")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"version":1,"config":{"SCRAM-SHA-256":"` + storedCredential(t, u) + `","consumer_byte_rate":"2048"}}`; string(data) != want {
		t.Fatalf("user znode\n%s\nwant\n%s", data, want)
	}
	names, _, err := conn.Children("/scram/config/changes")
	if err != nil || len(names) != 1 || !strings.HasPrefix(names[0], "config_change_") || len(names[0]) != len("config_change_")+10 {
		t.Fatalf("notifications %v, %v", names, err)
	}
	if data, _, err := conn.Get("/scram/config/changes/" + names[0]); err != nil || string(data) != `{"version":2,"entity_path":"users/bob%40example.com"}` {
		t.Fatalf("notification %s, %v", data, err)
	}
	if got := c.Metadata().UserConfigs["bob@example.com"]; got["consumer_byte_rate"] != "2048" || got[sasl.ScramSHA256] != storedCredential(t, u) {
		t.Fatalf("view %v", got)
	}

	// As kafka-configs.sh --zookeeper: the znode, then the notification.
	carol := upsert("carol", sasl.ScramSHA512, 4096)
	if _, err := conn.Create("/scram/config/users/carol", zk.EncodeUserConfig(map[string]string{sasl.ScramSHA512: storedCredential(t, carol)}), 0, acl); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/scram/config/changes/config_change_", []byte(`{"version":2,"entity_path":"users/carol"}`), gozk.FlagSequence, acl); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor(t, time.Second, func() error {
		if c.Metadata().UserConfigs["carol"][sasl.ScramSHA512] != storedCredential(t, carol) {
			return errors.New("carol's credential is not in the view")
		}
		return nil
	})
	t.Logf("an external change reached the view in %v", time.Since(start))
	// And a removal of the znode's credential, with a version 1
	// notification of older tools.
	if _, err := conn.Set("/scram/config/users/carol", zk.EncodeUserConfig(nil), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/scram/config/changes/config_change_", []byte(`{"version":1,"entity_type":"users","entity_name":"carol"}`), gozk.FlagSequence, acl); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Second, func() error {
		if _, ok := c.Metadata().UserConfigs["carol"]; ok {
			return errors.New("carol is still in the view")
		}
		return nil
	})
}
