package controller

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/kbroker/kbroker/controller/zk"
	"github.com/kbroker/kbroker/internal/zktest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func name(s string) *string { return &s }

func userEntity(u *string) []QuotaEntityPart {
	return []QuotaEntityPart{{Type: QuotaEntityUser, Name: u}}
}

func clientEntity(c *string) []QuotaEntityPart {
	return []QuotaEntityPart{{Type: QuotaEntityClientID, Name: c}}
}

func set(key string, v float64) QuotaOp { return QuotaOp{Key: key, Value: v} }
func remove(key string) QuotaOp         { return QuotaOp{Key: key, Remove: true} }

// Kafka's validation (ClientQuotaControlManager) with its codes and
// messages; each entry fails or passes on its own.
func TestCheckQuotaAlterations(t *testing.T) {
	for _, tc := range []struct {
		name   string
		alt    QuotaAlteration
		entity QuotaEntity
		msg    string // "" valid; otherwise INVALID_REQUEST with this message
	}{
		{name: "user", alt: QuotaAlteration{userEntity(name("alice")), []QuotaOp{set(ProducerByteRate, 1048576)}}, entity: QuotaEntity{User: "alice"}},
		{name: "default user", alt: QuotaAlteration{userEntity(nil), []QuotaOp{set(ConsumerByteRate, 1)}}, entity: QuotaEntity{User: DefaultQuotaEntity}},
		{name: "client id", alt: QuotaAlteration{clientEntity(name("app")), []QuotaOp{set(RequestPercentage, 12.5)}}, entity: QuotaEntity{Client: "app"}},
		{name: "default client id", alt: QuotaAlteration{clientEntity(nil), []QuotaOp{set(ControllerMutationRate, 10)}}, entity: QuotaEntity{Client: DefaultQuotaEntity}},
		{name: "user and client id, client first", alt: QuotaAlteration{append(clientEntity(name("app")), userEntity(name("alice"))...), []QuotaOp{remove(ProducerByteRate)}},
			entity: QuotaEntity{User: "alice", Client: "app"}},
		{name: "default user and default client id", alt: QuotaAlteration{append(userEntity(nil), clientEntity(nil)...), nil}, entity: QuotaEntity{User: DefaultQuotaEntity, Client: DefaultQuotaEntity}},
		{name: "removing an unknown key is fine", alt: QuotaAlteration{userEntity(name("alice")), []QuotaOp{remove("nope")}}, entity: QuotaEntity{User: "alice"}},
		{name: "integral within 1e-6", alt: QuotaAlteration{userEntity(name("alice")), []QuotaOp{set(ProducerByteRate, 1024.0000001)}}, entity: QuotaEntity{User: "alice"}},

		{name: "empty entity", alt: QuotaAlteration{nil, []QuotaOp{set(ProducerByteRate, 1)}}, msg: "Invalid empty client quota entity"},
		{name: "unknown entity type", alt: QuotaAlteration{[]QuotaEntityPart{{Type: "group", Name: name("g")}}, nil}, msg: "Unhandled client quota entity type: group"},
		{name: "duplicate entity type", alt: QuotaAlteration{append(userEntity(name("a")), userEntity(name("b"))...), nil}, msg: "Invalid client quota entity, duplicate entity entry user"},
		{name: "empty user", alt: QuotaAlteration{userEntity(name("")), nil}, msg: "Empty user not supported"},
		{name: "empty client id", alt: QuotaAlteration{clientEntity(name("")), nil}, msg: "Empty client-id not supported"},
		{name: "user named <default>", alt: QuotaAlteration{userEntity(name("<default>")), nil},
			msg: "kbroker cannot keep quotas of a user named <default>: it would be the default user (send a null name for the default)"},
		{name: "ip", alt: QuotaAlteration{[]QuotaEntityPart{{Type: QuotaEntityIP, Name: name("127.0.0.1")}}, nil}, msg: "kbroker does not support IP quotas (connection_creation_rate)"},
		{name: "ip with a user", alt: QuotaAlteration{append(userEntity(name("a")), QuotaEntityPart{Type: QuotaEntityIP}), nil},
			msg: "Invalid quota entity combination, IP entity should not be combined with User or ClientId"},
		{name: "unknown key", alt: QuotaAlteration{userEntity(name("alice")), []QuotaOp{set("producer_rate", 1)}}, msg: "Invalid configuration key producer_rate"},
		{name: "zero", alt: QuotaAlteration{userEntity(name("alice")), []QuotaOp{set(ProducerByteRate, 0)}}, msg: "Quota producer_byte_rate must be greater than 0"},
		{name: "negative", alt: QuotaAlteration{clientEntity(nil), []QuotaOp{set(RequestPercentage, -5)}}, msg: "Quota request_percentage must be greater than 0"},
		{name: "fractional byte rate", alt: QuotaAlteration{userEntity(name("alice")), []QuotaOp{set(ConsumerByteRate, 1.5)}}, msg: "consumer_byte_rate cannot be a fractional value."},
		{name: "too large", alt: QuotaAlteration{userEntity(name("alice")), []QuotaOp{set(ProducerByteRate, 1e19)}}, msg: "Proposed value for producer_byte_rate is too large for a LONG."},
		{name: "not a number", alt: QuotaAlteration{userEntity(name("alice")), []QuotaOp{set(RequestPercentage, math.NaN())}}, msg: "Quota request_percentage must be a finite number"},
		{name: "duplicate key", alt: QuotaAlteration{userEntity(name("alice")), []QuotaOp{set(ProducerByteRate, 1), remove(ProducerByteRate)}},
			msg: "Duplicate quota key producer_byte_rate not updating quota for this entity user alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entities, errs := checkQuotaAlterations([]QuotaAlteration{tc.alt})
			if tc.msg == "" {
				if errs[0] != nil || entities[0] != tc.entity {
					t.Fatalf("got %+v, %v; want %+v", entities[0], errs[0], tc.entity)
				}
				return
			}
			if !errors.Is(errs[0], kerr.InvalidRequest) || errs[0].Error() != tc.msg {
				t.Fatalf("got %v, want INVALID_REQUEST %q", errs[0], tc.msg)
			}
		})
	}
	// An entity twice in one request: every appearance fails, others pass.
	_, errs := checkQuotaAlterations([]QuotaAlteration{
		{userEntity(name("alice")), []QuotaOp{set(ProducerByteRate, 1)}},
		{clientEntity(name("app")), []QuotaOp{set(ProducerByteRate, 1)}},
		{userEntity(name("alice")), []QuotaOp{set(ConsumerByteRate, 1)}},
	})
	if errs[1] != nil || errs[0] == nil || errs[0].Error() != "Ignoring duplicate entity user alice" || errs[2] == nil {
		t.Fatalf("duplicate entity: %v", errs)
	}
}

// DOUBLE quotas are stored as Java's Double.toString writes them, LONG
// ones as integers, as ZkAdminManager.alterClientQuotas does.
func TestQuotaValueForms(t *testing.T) {
	for v, want := range map[float64]string{
		50: "50.0", 0.5: "0.5", 12.25: "12.25", 0.001: "0.001", 9999999: "9999999.0",
		1e7: "1.0E7", 2147483647: "2.147483647E9", 0.0001: "1.0E-4", 1.5e-5: "1.5E-5", 1.7976931348623157e308: "1.7976931348623157E308",
	} {
		if got := javaDouble(v); got != want {
			t.Errorf("javaDouble(%v) = %q, want %q", v, got, want)
		}
	}
	got := applyQuotaOps(map[string]string{"SCRAM-SHA-256": "cred", ConsumerByteRate: "1"},
		[]QuotaOp{set(ProducerByteRate, 1048576), set(RequestPercentage, 200), remove(ConsumerByteRate), set(ControllerMutationRate, 1e7)})
	want := map[string]string{"SCRAM-SHA-256": "cred", ProducerByteRate: "1048576", RequestPercentage: "200.0", ControllerMutationRate: "1.0E7"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("applyQuotaOps = %v, want %v", got, want)
	}
}

// The controller applies alterations over the store and publishes them:
// every entity kind in its view map, a user's SCRAM credential kept,
// removals emptying an entity away, validate_only writing nothing.
func TestAlterClientQuotas(t *testing.T) {
	store := &localStore{state: &localState{Metadata: &Metadata{ClusterID: "quotas", ControllerID: -1, Topics: map[string]*Topic{},
		UserConfigs: map[string]map[string]string{"alice": {"SCRAM-SHA-256": "cred"}}}}}
	store.brokers = []zk.BrokerInfo{zkBroker(scenarioBroker(1))}
	c := startLocalController(t, store, 1, 0)
	both := func(u, c *string) []QuotaEntityPart { return append(userEntity(u), clientEntity(c)...) }

	type view struct {
		users       map[string]map[string]string
		clients     map[string]map[string]string
		userClients map[string]map[string]map[string]string
	}
	for _, step := range []struct {
		name         string
		alts         []QuotaAlteration
		validateOnly bool
		errs         []error
		want         view
	}{
		{name: "validate only", validateOnly: true,
			alts: []QuotaAlteration{{userEntity(name("alice")), []QuotaOp{set(ProducerByteRate, 1024)}}, {userEntity(name("bob")), []QuotaOp{set("nope", 1)}}},
			errs: []error{nil, kerr.InvalidRequest},
			want: view{users: map[string]map[string]string{"alice": {"SCRAM-SHA-256": "cred"}}}},
		{name: "every kind of entity",
			alts: []QuotaAlteration{
				{userEntity(name("alice")), []QuotaOp{set(ProducerByteRate, 1024)}},
				{userEntity(nil), []QuotaOp{set(ConsumerByteRate, 2048)}},
				{clientEntity(name("app")), []QuotaOp{set(RequestPercentage, 50)}},
				{clientEntity(nil), []QuotaOp{set(ProducerByteRate, 4096)}},
				{both(name("alice"), name("app")), []QuotaOp{set(ProducerByteRate, 1)}},
				{both(name("alice"), nil), []QuotaOp{set(ProducerByteRate, 2)}},
				{both(nil, name("app")), []QuotaOp{set(ProducerByteRate, 3)}},
				{both(nil, nil), []QuotaOp{set(ProducerByteRate, 4)}},
				{userEntity(name("bob")), []QuotaOp{set(ProducerByteRate, -1)}},
			},
			errs: []error{nil, nil, nil, nil, nil, nil, nil, nil, kerr.InvalidRequest},
			want: view{
				users:       map[string]map[string]string{"alice": {"SCRAM-SHA-256": "cred", ProducerByteRate: "1024"}, "<default>": {ConsumerByteRate: "2048"}},
				clients:     map[string]map[string]string{"app": {RequestPercentage: "50.0"}, "<default>": {ProducerByteRate: "4096"}},
				userClients: map[string]map[string]map[string]string{"alice": {"app": {ProducerByteRate: "1"}, "<default>": {ProducerByteRate: "2"}}, "<default>": {"app": {ProducerByteRate: "3"}, "<default>": {ProducerByteRate: "4"}}},
			}},
		{name: "removals",
			alts: []QuotaAlteration{
				{userEntity(name("alice")), []QuotaOp{remove(ProducerByteRate)}},
				{userEntity(nil), []QuotaOp{remove(ConsumerByteRate), remove(ProducerByteRate)}},
				{clientEntity(name("app")), []QuotaOp{remove(RequestPercentage), set(ConsumerByteRate, 10)}},
				{both(name("alice"), name("app")), []QuotaOp{remove(ProducerByteRate)}},
				{both(name("alice"), nil), []QuotaOp{remove(ProducerByteRate)}},
				{both(nil, nil), []QuotaOp{remove(ProducerByteRate)}},
				{clientEntity(name("never")), []QuotaOp{remove(ProducerByteRate)}},
			},
			errs: make([]error, 7),
			want: view{
				users:       map[string]map[string]string{"alice": {"SCRAM-SHA-256": "cred"}},
				clients:     map[string]map[string]string{"app": {ConsumerByteRate: "10"}, "<default>": {ProducerByteRate: "4096"}},
				userClients: map[string]map[string]map[string]string{"<default>": {"app": {ProducerByteRate: "3"}}},
			}},
	} {
		errs, err := c.AlterClientQuotas(step.alts, step.validateOnly)
		if err != nil || len(errs) != len(step.errs) {
			t.Fatalf("%s: %v, %v", step.name, errs, err)
		}
		for i, want := range step.errs {
			if want == nil && errs[i] != nil || want != nil && !errors.Is(errs[i], want) {
				t.Fatalf("%s: entry %d: %v, want %v", step.name, i, errs[i], want)
			}
		}
		md := c.Metadata()
		got := view{md.UserConfigs, md.ClientConfigs, md.UserClientConfigs}
		if !reflect.DeepEqual(got, step.want) {
			t.Fatalf("%s: view\n%v\nwant\n%v", step.name, got, step.want)
		}
		// The store holds what the view shows.
		st := store.state.Metadata
		if stored := (view{st.UserConfigs, st.ClientConfigs, st.UserClientConfigs}); !reflect.DeepEqual(stored, step.want) {
			t.Fatalf("%s: store\n%v\nwant\n%v", step.name, stored, step.want)
		}
	}
	if got := c.Metadata().EntityConfig(QuotaEntity{User: DefaultQuotaEntity, Client: "app"}); got[ProducerByteRate] != "3" {
		t.Fatalf("EntityConfig = %v", got)
	}
	// A deposed controller changes nothing.
	store.electController()
	errs, err := c.AlterClientQuotas([]QuotaAlteration{{clientEntity(name("x")), []QuotaOp{set(ProducerByteRate, 1)}}}, false)
	if err != nil || !errors.Is(errs[0], kerr.NotController) {
		t.Fatalf("alteration by a deposed controller: %v, %v", errs, err)
	}
	other := &Cluster{cfg: ClusterConfig{Self: scenarioBroker(2)}, logger: quietLogger(), store: store}
	if _, err := other.AlterClientQuotas(nil, false); !errors.Is(err, kerr.NotController) {
		t.Fatalf("alteration on a non-controller: %v", err)
	}
}

// The embedded node keeps quotas in its state file, across restarts.
func TestEmbeddedQuotasPersist(t *testing.T) {
	dir := t.TempDir()
	self := ClusterConfig{Self: BrokerInfo{ID: 0, Host: "127.0.0.1", Port: 9092}}
	c, err := NewEmbedded(dir, self, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	alts := []QuotaAlteration{
		{clientEntity(name("app")), []QuotaOp{set(ProducerByteRate, 1048576)}},
		{append(userEntity(name("alice")), clientEntity(nil)...), []QuotaOp{set(RequestPercentage, 25)}},
	}
	if errs, err := c.AlterClientQuotas(alts, false); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("alter: %v, %v", errs, err)
	}
	c.Close()
	data, err := os.ReadFile(filepath.Join(dir, localStateFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"client_configs"`) || !strings.Contains(string(data), `"user_client_configs"`) {
		t.Fatalf("state file has no quotas:\n%s", data)
	}
	c, err = NewEmbedded(dir, self, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	md := c.Metadata()
	if md.ClientConfigs["app"][ProducerByteRate] != "1048576" || md.UserClientConfigs["alice"]["<default>"][RequestPercentage] != "25.0" {
		t.Fatalf("after restart: %v %v", md.ClientConfigs, md.UserClientConfigs)
	}
}

// Quotas travel in UpdateMetadata, and a clone does not share them.
func TestUpdateMetadataCarriesQuotas(t *testing.T) {
	md := &Metadata{ClusterID: "c", ControllerID: 1, Topics: map[string]*Topic{}, Sequence: 3,
		UserConfigs:       map[string]map[string]string{"<default>": {ProducerByteRate: "10"}},
		ClientConfigs:     map[string]map[string]string{"app": {ConsumerByteRate: "20"}, "<default>": {RequestPercentage: "5.0"}},
		UserClientConfigs: map[string]map[string]map[string]string{"alice": {"<default>": {ProducerByteRate: "30"}}},
	}
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
	bad.UnknownTags.Set(tagQuotaConfigs, []byte(`{"clients":1}`))
	if _, err := DecodeUpdateMetadata(bad); err == nil {
		t.Fatal("bad quota configs tag accepted")
	}
	clone := md.clone()
	clone.ClientConfigs["app"][ConsumerByteRate] = "1"
	clone.UserClientConfigs["alice"]["<default>"][ProducerByteRate] = "1"
	if md.ClientConfigs["app"][ConsumerByteRate] != "20" || md.UserClientConfigs["alice"]["<default>"][ProducerByteRate] != "30" {
		t.Fatal("changing a clone changed the original's quotas")
	}
}

// On ZooKeeper: the controller writes Kafka's znodes and notifications, a
// takeover loads every entity kind, and changes written as kafka-configs.sh
// --zookeeper writes them (the znode, then a notification) reach the view
// within a second.
func TestClientQuotasInZooKeeper(t *testing.T) {
	srv := zktest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, _, err := gozk.Connect([]string{srv.Addr()}, 5*time.Second, gozk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	acl := gozk.WorldACL(gozk.PermAll)
	// Written before the controller starts: loaded with the rest.
	for _, p := range []struct{ path, data string }{
		{"/quotas", ""}, {"/quotas/config", ""}, {"/quotas/config/clients", ""},
		{"/quotas/config/clients/<default>", `{"version":1,"config":{"consumer_byte_rate":"100"}}`},
		{"/quotas/config/users", ""}, {"/quotas/config/users/<default>", ""}, {"/quotas/config/users/<default>/clients", ""},
		{"/quotas/config/users/<default>/clients/<default>", `{"version":1,"config":{"producer_byte_rate":"200"}}`},
	} {
		if _, err := conn.Create(p.path, []byte(p.data), 0, acl); err != nil {
			t.Fatalf("create %s: %v", p.path, err)
		}
	}
	c, err := NewCluster(ctx, ClusterConfig{Self: scenarioBroker(1), ZookeeperConnect: srv.Addr() + "/quotas", SessionTimeout: 4 * time.Second, ConnectionTimeout: 10 * time.Second}, quietLogger())
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
	md := c.Metadata()
	if md.ClientConfigs["<default>"][ConsumerByteRate] != "100" || md.UserClientConfigs["<default>"]["<default>"][ProducerByteRate] != "200" || md.UserConfigs != nil {
		t.Fatalf("loaded %v %v %v", md.UserConfigs, md.ClientConfigs, md.UserClientConfigs)
	}

	errs, err := c.AlterClientQuotas([]QuotaAlteration{
		{append(userEntity(name("bob@x.org")), clientEntity(name("app 1"))...), []QuotaOp{set(ProducerByteRate, 1048576), set(RequestPercentage, 50)}},
	}, false)
	if err != nil || errs[0] != nil {
		t.Fatalf("alter: %v, %v", errs, err)
	}
	data, _, err := conn.Get("/quotas/config/users/bob%40x.org/clients/app%201")
	if err != nil || string(data) != `{"version":1,"config":{"producer_byte_rate":"1048576","request_percentage":"50.0"}}` {
		t.Fatalf("znode %s, %v", data, err)
	}
	names, _, err := conn.Children("/quotas/config/changes")
	if err != nil || len(names) != 1 {
		t.Fatalf("notifications %v, %v", names, err)
	}
	if data, _, err := conn.Get("/quotas/config/changes/" + names[0]); err != nil || string(data) != `{"version":2,"entity_path":"users/bob%40x.org/clients/app%201"}` {
		t.Fatalf("notification %s, %v", data, err)
	}

	// As kafka-configs.sh --zookeeper: the znode, then the notification.
	external := func(path, data, entityPath string) {
		t.Helper()
		_, err := conn.Create(path, []byte(data), 0, acl)
		if errors.Is(err, gozk.ErrNodeExists) {
			_, err = conn.Set(path, []byte(data), -1)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Create("/quotas/config/changes/config_change_", []byte(`{"version":2,"entity_path":"`+entityPath+`"}`), gozk.FlagSequence, acl); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	external("/quotas/config/clients/app", `{"version":1,"config":{"producer_byte_rate":"300"}}`, "clients/app")
	external("/quotas/config/users/<default>/clients/<default>", `{"version":1,"config":{"producer_byte_rate":"400"}}`, "users/<default>/clients/<default>")
	waitFor(t, time.Second, func() error {
		md := c.Metadata()
		if md.ClientConfigs["app"][ProducerByteRate] != "300" || md.UserClientConfigs["<default>"]["<default>"][ProducerByteRate] != "400" {
			return errors.New("external changes not in the view yet")
		}
		return nil
	})
	t.Logf("external changes reached the view in %v", time.Since(start))
	// Removal through the API: the znode goes with its parents.
	errs, err = c.AlterClientQuotas([]QuotaAlteration{
		{append(userEntity(name("bob@x.org")), clientEntity(name("app 1"))...), []QuotaOp{remove(ProducerByteRate), remove(RequestPercentage)}},
	}, false)
	if err != nil || errs[0] != nil {
		t.Fatalf("remove: %v, %v", errs, err)
	}
	if ok, _, _ := conn.Exists("/quotas/config/users/bob%40x.org"); ok {
		t.Fatal("emptied user + client entity left its user znode")
	}
	if _, ok := c.Metadata().UserClientConfigs["bob@x.org"]; ok {
		t.Fatal("removed quotas still in the view")
	}
}
