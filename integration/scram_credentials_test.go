package integration

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SCRAM credentials through the one control plane, with franz-go's kadm:
// on the embedded single node they are created, described, kept across a
// restart and deleted.
func TestScramCredentialsEmbedded(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin(t)
	ctx := testContext(t, 60*time.Second)

	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Salt: []byte("bob-salt"), SaltedPassword: bytes.Repeat([]byte{7}, 64)},
	})
	if err != nil || altered.Error() != nil {
		t.Fatalf("alter: %v %+v", err, altered)
	}
	want := map[string][]kadm.CredInfo{
		"alice": {{Mechanism: kadm.ScramSha256, Iterations: 4096}, {Mechanism: kadm.ScramSha512, Iterations: 8192}},
		"bob":   {{Mechanism: kadm.ScramSha512, Iterations: 4096}},
	}
	checkDescribed := func(when string) {
		t.Helper()
		described, err := adm.DescribeUserSCRAMs(ctx)
		if err != nil || described.Error() != nil {
			t.Fatalf("%s: describe: %v %+v", when, err, described)
		}
		if len(described) != len(want) {
			t.Fatalf("%s: described %+v, want %v", when, described, want)
		}
		for user, infos := range want {
			if got := described[user].CredInfos; !slices.Equal(got, infos) {
				t.Fatalf("%s: %s's credentials %+v, want %+v", when, user, got, infos)
			}
		}
	}
	checkDescribed("after creation")

	// Kafka's per-user errors.
	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha256}}, []kadm.UpsertSCRAM{
		{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 100, Salt: []byte("s"), SaltedPassword: []byte("p")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := altered["bob"]; !errors.Is(r.Err, kerr.ResourceNotFound) || r.ErrMessage != "Attempt to delete a user credential that does not exist" {
		t.Fatalf("deleting a missing credential: %+v", r)
	}
	if r := altered["carol"]; !errors.Is(r.Err, kerr.UnacceptableCredential) || r.ErrMessage != "Too few iterations" {
		t.Fatalf("too few iterations: %+v", r)
	}
	described, err := adm.DescribeUserSCRAMs(ctx, "nobody")
	if err != nil || !errors.Is(described["nobody"].Err, kerr.ResourceNotFound) {
		t.Fatalf("describe nobody: %v %+v", err, described)
	}

	b.Restart()
	adm = b.Admin(t)
	checkDescribed("after a restart")

	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256}, {User: "alice", Mechanism: kadm.ScramSha512}, {User: "bob", Mechanism: kadm.ScramSha512},
	}, nil)
	if err != nil || altered.Error() != nil {
		t.Fatalf("delete: %v %+v", err, altered)
	}
	if described, err := adm.DescribeUserSCRAMs(ctx); err != nil || len(described) != 0 {
		t.Fatalf("describe after deleting all: %v %+v", err, described)
	}
}

// On a 3-broker cluster, a credential altered through a broker that is
// not the controller is forwarded to it, stored in ZooKeeper in Kafka's
// form (derived from the salted password given, with Kafka's change
// notification), and described by every broker within a second of the
// answer. A credential written to ZooKeeper as kafka-configs.sh
// --zookeeper does reaches every broker too.
func TestScramCredentialsCluster(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, chroot: "/kafka"})
	ctrl := c.controller()
	via := int32(1)
	if ctrl == via {
		via = 2
	}
	salt := []byte("cluster-salt-0123")
	salted := bytes.Repeat([]byte{0x5a}, sha256.Size)
	const user = "svc@example.com" // sanitized in the znode name

	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = user, 1, 4096, salt, salted
	req.Upsertions = append(req.Upsertions, up)
	kresp, err := c.request(via, 20*time.Second, req)
	if err != nil {
		t.Fatalf("alter through broker %d (controller %d): %v", via, ctrl, err)
	}
	answered := time.Now()
	res := kresp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results
	if len(res) != 1 || res[0].User != user || res[0].ErrorCode != 0 {
		t.Fatalf("alter through broker %d: %+v", via, res)
	}
	// The broker that forwarded answered once its own view had it.
	if infos, err := describeOn(c, via, user); err != nil || len(infos) != 1 {
		t.Fatalf("broker %d right after its answer: %v %v", via, infos, err)
	}
	for _, id := range c.running() {
		checkFor(t, time.Second, 10*time.Millisecond, func() error {
			infos, err := describeOn(c, id, user)
			if err != nil {
				return err
			}
			if len(infos) != 1 || infos[0].Mechanism != 1 || infos[0].Iterations != 4096 {
				return fmt.Errorf("broker %d describes %+v", id, infos)
			}
			return nil
		})
	}
	t.Logf("every broker described the credential %v after the answer", time.Since(answered).Round(time.Millisecond))

	// ZooKeeper holds Kafka's form.
	data, _, err := c.zkGet("/config/users/svc%40example.com")
	if err != nil {
		t.Fatal(err)
	}
	var znode struct {
		Version int               `json:"version"`
		Config  map[string]string `json:"config"`
	}
	if err := json.Unmarshal(data, &znode); err != nil || znode.Version != 1 || len(znode.Config) != 1 {
		t.Fatalf("user znode %s: %v", data, err)
	}
	if got, want := znode.Config["SCRAM-SHA-256"], kafkaScramString(sha256.New, salt, salted, 4096); got != want {
		t.Fatalf("stored credential\n%s\nwant (derived from the salted password)\n%s", got, want)
	}
	if !changeNotified(t, c, "users/svc%40example.com") {
		t.Fatal("no config change notification names users/svc%40example.com")
	}
	described, err := c.admin().DescribeUserSCRAMs(testContext(t, 20*time.Second), user)
	if err != nil || described.Error() != nil || len(described[user].CredInfos) != 1 {
		t.Fatalf("kadm describe: %v %+v", err, described)
	}

	// As kafka-configs.sh --zookeeper: the znode, then a notification.
	conn := c.zkConn()
	salted512 := bytes.Repeat([]byte{0x33}, sha512.Size)
	tool := fmt.Sprintf(`{"version":1,"config":{"SCRAM-SHA-512":%q}}`, kafkaScramString(sha512.New, salt, salted512, 8192))
	if _, err := conn.Create(c.zkPath("/config/users/tool-user"), []byte(tool), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create(c.zkPath("/config/changes/config_change_"), []byte(`{"version":2,"entity_path":"users/tool-user"}`), zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	for _, id := range c.running() {
		checkFor(t, 5*time.Second, 10*time.Millisecond, func() error {
			infos, err := describeOn(c, id, "tool-user")
			if err != nil {
				return err
			}
			if len(infos) != 1 || infos[0].Mechanism != 2 || infos[0].Iterations != 8192 {
				return fmt.Errorf("broker %d describes tool-user as %+v", id, infos)
			}
			return nil
		})
	}

	// Deleted through kadm (to the controller): gone everywhere.
	altered, err := c.admin().AlterUserSCRAMs(testContext(t, 20*time.Second), []kadm.DeleteSCRAM{{User: user, Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || altered.Error() != nil {
		t.Fatalf("delete: %v %+v", err, altered)
	}
	for _, id := range c.running() {
		checkFor(t, 5*time.Second, 10*time.Millisecond, func() error {
			if _, err := describeOn(c, id, user); !errors.Is(err, kerr.ResourceNotFound) {
				return fmt.Errorf("broker %d after the deletion: %v", id, err)
			}
			return nil
		})
	}
}

// describeOn asks broker id itself for user's SCRAM credentials; the
// user's error is returned as a kerr error.
func describeOn(c *testCluster, id int32, user string) ([]kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo, error) {
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
	ru.Name = user
	req.Users = append(req.Users, ru)
	kresp, err := c.request(id, time.Second, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	if len(resp.Results) != 1 || resp.Results[0].User != user {
		return nil, fmt.Errorf("broker %d answered %+v", id, resp.Results)
	}
	r := resp.Results[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return nil, fmt.Errorf("broker %d: %w", id, err)
	}
	return r.CredentialInfos, nil
}

// kafkaScramString is Kafka's ZooKeeper form of the credential for a salted
// password (ScramFormatter.generateCredential, then
// ScramCredentialUtils.credentialToString), computed here from RFC 5802
// rather than with the broker's own code.
func kafkaScramString(h func() hash.Hash, salt, saltedPassword []byte, iterations int) string {
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	stored := h()
	stored.Write(mac(saltedPassword, "Client Key"))
	enc := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("salt=%s,stored_key=%s,server_key=%s,iterations=%d",
		enc(salt), enc(stored.Sum(nil)), enc(mac(saltedPassword, "Server Key")), iterations)
}

// changeNotified reports whether a notification under /config/changes
// names entityPath, in Kafka's version 2 form.
func changeNotified(t *testing.T, c *testCluster, entityPath string) bool {
	t.Helper()
	names, _, err := c.zkConn().Children(c.zkPath("/config/changes"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "config_change_") {
			continue
		}
		data, _, err := c.zkGet("/config/changes/" + n)
		if err == nil && string(data) == `{"version":2,"entity_path":"`+entityPath+`"}` {
			return true
		}
	}
	return false
}
