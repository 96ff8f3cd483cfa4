package server

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The two SCRAM APIs on an embedded broker, and the lookup SASL uses,
// all over the one view.
func TestScramCredentialAPIs(t *testing.T) {
	b := newAdminTestBroker(t)
	alter := func(dels []kmsg.AlterUserSCRAMCredentialsRequestDeletion, ups ...kmsg.AlterUserSCRAMCredentialsRequestUpsertion) map[string]kmsg.AlterUserSCRAMCredentialsResponseResult {
		t.Helper()
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		req.Deletions, req.Upsertions = dels, ups
		resp, err := handleAlterUserSCRAMCredentials(context.Background(), b, &requestContext{}, req)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]kmsg.AlterUserSCRAMCredentialsResponseResult{}
		for _, r := range resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
			if _, dup := out[r.User]; dup {
				t.Fatalf("user %q answered twice", r.User)
			}
			out[r.User] = r
		}
		return out
	}
	describe := func(users ...string) []kmsg.DescribeUserSCRAMCredentialsResponseResult {
		t.Helper()
		req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		for _, u := range users {
			ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
			ru.Name = u
			req.Users = append(req.Users, ru)
		}
		resp, err := handleDescribeUserSCRAMCredentials(context.Background(), b, &requestContext{}, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.DescribeUserSCRAMCredentialsResponse).Results
	}
	upsertion := func(user string, mechanism int8, iterations int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations = user, mechanism, iterations
		u.Salt, u.SaltedPassword = []byte("salt"), []byte("salted password of "+user)
		return u
	}
	deletion := func(user string, mechanism int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = user, mechanism
		return d
	}

	res := alter(nil, upsertion("alice", 1, 4096), upsertion("alice", 2, 8192), upsertion("bob", 2, 4096), upsertion("eve", 3, 4096), upsertion("mallory", 1, 100))
	for user, want := range map[string]struct {
		code int16
		msg  string
	}{"alice": {}, "bob": {}, "eve": {kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism"}, "mallory": {kerr.UnacceptableCredential.Code, "Too few iterations"}} {
		r := res[user]
		if r.ErrorCode != want.code || want.msg != "" && (r.ErrorMessage == nil || *r.ErrorMessage != want.msg) {
			t.Errorf("alter %s: code %d message %v, want %d %q", user, r.ErrorCode, r.ErrorMessage, want.code, want.msg)
		}
	}

	all := describe()
	if len(all) != 2 || all[0].User != "alice" || all[1].User != "bob" {
		t.Fatalf("describe all: %+v", all)
	}
	if infos := all[0].CredentialInfos; len(infos) != 2 || infos[0].Mechanism != 1 || infos[0].Iterations != 4096 || infos[1].Mechanism != 2 || infos[1].Iterations != 8192 {
		t.Fatalf("alice's credentials %+v", infos)
	}
	named := describe("bob", "nobody", "alice", "alice")
	if len(named) != 3 || named[0].User != "bob" || named[0].ErrorCode != 0 || len(named[0].CredentialInfos) != 1 {
		t.Fatalf("describe named: %+v", named)
	}
	if r := named[1]; r.User != "nobody" || r.ErrorCode != kerr.ResourceNotFound.Code || *r.ErrorMessage != "Attempt to describe nonexistent user." {
		t.Fatalf("nonexistent user: %+v", r)
	}
	if r := named[2]; r.User != "alice" || r.ErrorCode != kerr.DuplicateResource.Code || len(r.CredentialInfos) != 0 ||
		*r.ErrorMessage != "Cannot describe SCRAM credentials for the same user twice in a single request: alice" {
		t.Fatalf("user named twice: %+v", r)
	}

	// The lookup finds what was altered, derived from the salted password.
	lookup := b.scramCredentials()
	cred, ok := lookup.ScramCredential("alice", sasl.ScramSHA512)
	want, _ := sasl.NewScramCredential(sasl.ScramSHA512, []byte("salt"), []byte("salted password of alice"), 8192)
	if !ok || !bytes.Equal(cred.StoredKey, want.StoredKey) || !bytes.Equal(cred.ServerKey, want.ServerKey) || cred.Iterations != 8192 {
		t.Fatalf("lookup of alice: %v, %v", cred, ok)
	}
	for _, q := range [][2]string{{"bob", sasl.ScramSHA256}, {"nobody", sasl.ScramSHA256}, {"alice", sasl.Plain}} {
		if _, ok := lookup.ScramCredential(q[0], q[1]); ok {
			t.Errorf("lookup of %s %s found a credential", q[0], q[1])
		}
	}

	res = alter([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("bob", 1), deletion("alice", 2)})
	if r := res["bob"]; r.ErrorCode != kerr.ResourceNotFound.Code || *r.ErrorMessage != "Attempt to delete a user credential that does not exist" {
		t.Fatalf("deleting a missing credential: %+v", r)
	}
	if res["alice"].ErrorCode != 0 {
		t.Fatalf("deleting alice's SCRAM-SHA-512: %+v", res["alice"])
	}
	if _, ok := lookup.ScramCredential("alice", sasl.ScramSHA512); ok {
		t.Fatal("a deleted credential is still found")
	}
}

// A stored value that does not parse is absent for SASL, and logged once
// per value, without it.
func TestScramCredentialsMalformedValue(t *testing.T) {
	const secretish = "salt=c2VjcmV0,stored_key=AAAA,server_key=AAAA,iterations=4096" // keys of the wrong length
	md := &controller.Metadata{UserConfigs: map[string]map[string]string{"alice": {sasl.ScramSHA256: secretish}}}
	var logs bytes.Buffer
	s := newScramCredentials(func() *controller.Metadata { return md }, slog.New(slog.NewTextHandler(&logs, nil)))
	for range 3 {
		if _, ok := s.ScramCredential("alice", sasl.ScramSHA256); ok {
			t.Fatal("a malformed credential was found")
		}
	}
	if n := strings.Count(logs.String(), "malformed"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "c2VjcmV0") || !strings.Contains(logs.String(), "user=alice") {
		t.Fatalf("log line shows the value or not the user:\n%s", logs.String())
	}
	md = &controller.Metadata{UserConfigs: map[string]map[string]string{"alice": {sasl.ScramSHA256: secretish + "0"}}}
	s.ScramCredential("alice", sasl.ScramSHA256)
	if n := strings.Count(logs.String(), "malformed"); n != 2 {
		t.Fatalf("a new bad value logged %d times in all, want 2", n)
	}
}
