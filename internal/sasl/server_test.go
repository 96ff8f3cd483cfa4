package sasl

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// mapLookup is a fixed /config/users view.
type mapLookup map[string]Credential // mechanism + "/" + user

func (m mapLookup) ScramCredential(user, mechanism string) (Credential, bool) {
	c, ok := m[mechanism+"/"+user]
	return c, ok
}

var testSecret = []byte("0123456789abcdef-test-secret")

// scramUser makes a credential the way Kafka's Admin client would: a salt
// of base36 text, the password salted client-side.
func scramUser(t testing.TB, mechanism, password string, iterations int32) Credential {
	t.Helper()
	salt := []byte(randomBase36())
	salted, err := SaltPassword(mechanism, password, salt, iterations)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewScramCredential(mechanism, salt, salted, iterations)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testServer offers all three mechanisms with users alice (all
// mechanisms), "odd,user=" (SCRAM-SHA-256, a name that needs escaping),
// slow (8192 iterations) and weak (a credential below Kafka's minimum).
func testServer(t testing.TB) *Server {
	t.Helper()
	s, err := NewServer(ServerConfig{
		Enabled:    []string{Plain, ScramSHA256, ScramSHA512},
		PlainUsers: map[string]string{"alice": "alice-secret", "bob": "bob-secret"},
		Scram: mapLookup{
			ScramSHA256 + "/alice":      scramUser(t, ScramSHA256, "alice-secret", 4096),
			ScramSHA512 + "/alice":      scramUser(t, ScramSHA512, "alice-secret", 4096),
			ScramSHA256 + "/odd,user=":  scramUser(t, ScramSHA256, "odd-secret", 4096),
			ScramSHA512 + "/slow":       scramUser(t, ScramSHA512, "slow-secret", 8192),
			ScramSHA256 + "/weak":       scramUser(t, ScramSHA256, "weak-secret", 1024),
			ScramSHA256 + "/wrong-kind": scramUser(t, ScramSHA512, "wrong-kind-secret", 4096),
		},
		Secret: testSecret,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// result is how one client-driven exchange ended.
type result struct {
	principal string
	failStep  int // 1-based Step that failed; 0 on success
	err       error
}

// drive runs franz-go's client side of mech against srv, feeding each
// message to Step until the server is done or fails. A client that
// rejects the server's answers fails the test: that would be a server bug.
func drive(t testing.TB, srv *Server, mech kgosasl.Mechanism) result {
	t.Helper()
	sess, msg, err := mech.Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatalf("client Authenticate: %v", err)
	}
	ex, err := srv.Start(mech.Name())
	if err != nil {
		t.Fatalf("Start(%s): %v", mech.Name(), err)
	}
	for step := 1; step <= 5; step++ {
		out, done, err := ex.Step(msg)
		if err != nil {
			if ex.Principal() != "" {
				t.Fatalf("Principal %q after a failure", ex.Principal())
			}
			return result{failStep: step, err: err}
		}
		clientDone, next, err := sess.Challenge(out)
		if err != nil {
			t.Fatalf("client rejected server message %d %q: %v", step, out, err)
		}
		if done != clientDone {
			t.Fatalf("step %d: server done=%v, client done=%v", step, done, clientDone)
		}
		if done {
			if _, _, err := ex.Step(nil); !errors.Is(err, ErrExchangeOver) {
				t.Fatalf("Step after success: %v, want ErrExchangeOver", err)
			}
			return result{principal: ex.Principal()}
		}
		if ex.Principal() != "" {
			t.Fatalf("Principal %q before the exchange is done", ex.Principal())
		}
		msg = next
	}
	t.Fatal("exchange did not finish in 5 steps")
	return result{}
}

func encodeB64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func plainMech(zid, user, pass string) kgosasl.Mechanism {
	return plain.Auth{Zid: zid, User: user, Pass: pass}.AsMechanism()
}

func scramMech(mechanism, zid, user, pass string, token bool) kgosasl.Mechanism {
	a := scram.Auth{Zid: zid, User: user, Pass: pass, IsToken: token}
	if mechanism == ScramSHA512 {
		return a.AsSha512Mechanism()
	}
	return a.AsSha256Mechanism()
}

func TestExchangeSuccess(t *testing.T) {
	srv := testServer(t)
	tests := []struct {
		name string
		mech kgosasl.Mechanism
		want string
	}{
		{"PLAIN", plainMech("", "alice", "alice-secret"), "alice"},
		{"PLAIN second user", plainMech("", "bob", "bob-secret"), "bob"},
		{"PLAIN authzid same as user", plainMech("alice", "alice", "alice-secret"), "alice"},
		{"SCRAM-SHA-256", scramMech(ScramSHA256, "", "alice", "alice-secret", false), "alice"},
		{"SCRAM-SHA-512", scramMech(ScramSHA512, "", "alice", "alice-secret", false), "alice"},
		{"SCRAM authzid same as user", scramMech(ScramSHA256, "alice", "alice", "alice-secret", false), "alice"},
		{"SCRAM escaped user name", scramMech(ScramSHA256, "", "odd,user=", "odd-secret", false), "odd,user="},
		{"SCRAM 8192 iterations", scramMech(ScramSHA512, "", "slow", "slow-secret", false), "slow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := drive(t, srv, tt.mech)
			if r.err != nil {
				t.Fatalf("step %d: %v", r.failStep, r.err)
			}
			if r.principal != tt.want {
				t.Fatalf("Principal = %q, want %q", r.principal, tt.want)
			}
		})
	}
}

const (
	genericPlain  = "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"
	genericSHA256 = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
	genericSHA512 = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
)

func TestExchangeFailure(t *testing.T) {
	srv := testServer(t)
	tests := []struct {
		name     string
		mech     kgosasl.Mechanism
		password string // must not appear in the error or its Reason
		wantStep int
		wantMsg  string
	}{
		{"PLAIN wrong password", plainMech("", "alice", "bob-secret"), "bob-secret", 1, msgPlainInvalid},
		{"PLAIN unknown user", plainMech("", "mallory", "alice-secret"), "alice-secret", 1, msgPlainInvalid},
		{"PLAIN password prefix", plainMech("", "alice", "alice-secre"), "alice-secre", 1, msgPlainInvalid},
		{"PLAIN authzid of another user", plainMech("bob", "alice", "alice-secret"), "alice-secret", 1, msgAuthzMismatch},
		{"SCRAM-SHA-256 wrong password", scramMech(ScramSHA256, "", "alice", "bob-secret", false), "bob-secret", 2, genericSHA256},
		{"SCRAM-SHA-256 unknown user", scramMech(ScramSHA256, "", "mallory", "alice-secret", false), "alice-secret", 2, genericSHA256},
		{"SCRAM-SHA-512 wrong password", scramMech(ScramSHA512, "", "alice", "bob-secret", false), "bob-secret", 2, genericSHA512},
		{"SCRAM-SHA-512 unknown user", scramMech(ScramSHA512, "", "mallory", "alice-secret", false), "alice-secret", 2, genericSHA512},
		{"SCRAM user known for the other mechanism only", scramMech(ScramSHA256, "", "slow", "slow-secret", false), "slow-secret", 2, genericSHA256},
		{"SCRAM credential below minimum iterations", scramMech(ScramSHA256, "", "weak", "weak-secret", false), "weak-secret", 2, genericSHA256},
		{"SCRAM credential of the wrong mechanism", scramMech(ScramSHA256, "", "wrong-kind", "wrong-kind-secret", false), "wrong-kind-secret", 2, genericSHA256},
		{"SCRAM authzid of another user", scramMech(ScramSHA256, "bob", "alice", "alice-secret", false), "alice-secret", 1, msgAuthzMismatch},
		{"SCRAM authzid for an unknown user", scramMech(ScramSHA256, "bob", "mallory", "x", false), "\x00", 1, msgAuthzMismatch},
		{"SCRAM delegation token", scramMech(ScramSHA256, "", "alice", "alice-secret", true), "alice-secret", 1, genericSHA256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := drive(t, srv, tt.mech)
			if r.err == nil {
				t.Fatalf("authenticated as %q, want a failure", r.principal)
			}
			if r.failStep != tt.wantStep {
				t.Errorf("failed at step %d, want %d", r.failStep, tt.wantStep)
			}
			if !errors.Is(r.err, ErrAuthenticationFailed) {
				t.Errorf("error %v does not match ErrAuthenticationFailed", r.err)
			}
			if r.err.Error() != tt.wantMsg {
				t.Errorf("error %q, want %q", r.err, tt.wantMsg)
			}
			var ae *AuthError
			if !errors.As(r.err, &ae) || ae.Reason == "" || ae.Mechanism != tt.mech.Name() {
				t.Fatalf("error %#v is not an *AuthError with a reason and mechanism %s", r.err, tt.mech.Name())
			}
			if strings.Contains(ae.Error(), tt.password) || strings.Contains(ae.Reason, tt.password) {
				t.Errorf("error %q / reason %q contains the password", ae.Error(), ae.Reason)
			}
		})
	}
}

// A wrong password and an unknown user must look the same to the client:
// same failing step, same text.
func TestUnknownUserLooksLikeWrongPassword(t *testing.T) {
	srv := testServer(t)
	for _, mechanism := range []string{Plain, ScramSHA256, ScramSHA512} {
		t.Run(mechanism, func(t *testing.T) {
			var wrong, unknown result
			if mechanism == Plain {
				wrong = drive(t, srv, plainMech("", "alice", "nope"))
				unknown = drive(t, srv, plainMech("", "nobody", "nope"))
			} else {
				wrong = drive(t, srv, scramMech(mechanism, "", "alice", "nope", false))
				unknown = drive(t, srv, scramMech(mechanism, "", "nobody", "nope", false))
			}
			if wrong.err == nil || unknown.err == nil {
				t.Fatalf("wrong password: %v, unknown user: %v; want both to fail", wrong.err, unknown.err)
			}
			if wrong.failStep != unknown.failStep || wrong.err.Error() != unknown.err.Error() {
				t.Fatalf("wrong password fails at step %d with %q, unknown user at step %d with %q",
					wrong.failStep, wrong.err, unknown.failStep, unknown.err)
			}
		})
	}
}

// serverFirst runs client-first for user and returns the server's answer
// split into its fields, with the client nonce used.
func serverFirst(t *testing.T, srv *Server, mechanism, user string) (nonce, salt, iterations, clientNonce string) {
	t.Helper()
	sess, msg, err := scramMech(mechanism, "", user, "whatever", false).Authenticate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	_ = sess
	clientNonce = string(msg[strings.Index(string(msg), ",r=")+3:])
	ex, err := srv.Start(mechanism)
	if err != nil {
		t.Fatal(err)
	}
	out, done, err := ex.Step(msg)
	if err != nil || done {
		t.Fatalf("client-first for %q: done=%v err=%v", user, done, err)
	}
	f := strings.Split(string(out), ",")
	if len(f) != 3 || !strings.HasPrefix(f[0], "r=") || !strings.HasPrefix(f[1], "s=") || !strings.HasPrefix(f[2], "i=") {
		t.Fatalf("server-first %q is not r=,s=,i=", out)
	}
	return f[0][2:], f[1][2:], f[2][2:], clientNonce
}

// The server-first message of a known and an unknown user have the same
// shape: Kafka-style base36 salt, the same iteration count, a fresh nonce
// of the same form; and an unknown user's salt is stable across attempts.
func TestServerFirstShape(t *testing.T) {
	srv := testServer(t)
	other, err := NewServer(ServerConfig{Enabled: []string{ScramSHA256}, Scram: mapLookup{}, Secret: []byte("another-secret-of-16+-bytes")})
	if err != nil {
		t.Fatal(err)
	}
	type shape struct{ saltLen, nonceLen int }
	check := func(t *testing.T, srv *Server, user string) (shape, string) {
		nonce, salt, iterations, clientNonce := serverFirst(t, srv, ScramSHA256, user)
		if iterations != "4096" {
			t.Errorf("user %q: i=%s, want 4096", user, iterations)
		}
		if !strings.HasPrefix(nonce, clientNonce) || len(nonce) == len(clientNonce) {
			t.Errorf("user %q: nonce %q does not extend the client nonce %q", user, nonce, clientNonce)
		}
		raw := b64(t, salt)
		for _, c := range raw {
			if (c < '0' || c > '9') && (c < 'a' || c > 'z') {
				t.Errorf("user %q: salt %q is not base36 text", user, raw)
			}
		}
		// 130 bits in base 36 take at most 26 digits; below 24 is one
		// chance in 36*36*... so never in practice.
		if len(raw) < 23 || len(raw) > 26 {
			t.Errorf("user %q: salt has %d bytes, want 23-26", user, len(raw))
		}
		suffix := nonce[len(clientNonce):]
		if len(suffix) < 23 || len(suffix) > 26 {
			t.Errorf("user %q: server nonce %q has %d characters, want 23-26", user, suffix, len(suffix))
		}
		return shape{len(raw), len(suffix)}, salt
	}
	_, knownSalt1 := check(t, srv, "alice")
	_, knownSalt2 := check(t, srv, "alice")
	_, unknownSalt1 := check(t, srv, "nobody")
	_, unknownSalt2 := check(t, srv, "nobody")
	_, otherUnknownSalt := check(t, srv, "nobody-else")
	_, otherSecretSalt := check(t, other, "nobody")
	if knownSalt1 != knownSalt2 {
		t.Error("a known user's salt changed between attempts")
	}
	if unknownSalt1 != unknownSalt2 {
		t.Error("an unknown user's salt changed between attempts; a real one would not")
	}
	if unknownSalt1 == otherUnknownSalt {
		t.Error("two unknown users got the same salt")
	}
	if unknownSalt1 == otherSecretSalt {
		t.Error("the fake salt does not depend on the secret")
	}
	n1, _, _, _ := serverFirst(t, srv, ScramSHA256, "alice")
	n2, _, _, _ := serverFirst(t, srv, ScramSHA256, "alice")
	if n1 == n2 {
		t.Error("two exchanges got the same nonce")
	}
}

func TestNewServer(t *testing.T) {
	users := map[string]string{"alice": "pw"}
	tests := []struct {
		name    string
		cfg     ServerConfig
		want    []string
		wantErr string
	}{
		{"all", ServerConfig{Enabled: []string{ScramSHA512, Plain, ScramSHA256}, PlainUsers: users, Scram: mapLookup{}, Secret: testSecret}, []string{ScramSHA512, Plain, ScramSHA256}, ""},
		{"duplicates dropped", ServerConfig{Enabled: []string{Plain, Plain}, PlainUsers: users}, []string{Plain}, ""},
		{"PLAIN alone needs no lookup", ServerConfig{Enabled: []string{Plain}, PlainUsers: users}, []string{Plain}, ""},
		{"SCRAM alone needs no users", ServerConfig{Enabled: []string{ScramSHA256}, Scram: mapLookup{}, Secret: testSecret}, []string{ScramSHA256}, ""},
		{"nothing enabled", ServerConfig{}, nil, "no mechanisms enabled"},
		{"Kafka's default", ServerConfig{Enabled: []string{"GSSAPI"}}, nil, "mechanism GSSAPI is not supported"},
		{"OAUTHBEARER", ServerConfig{Enabled: []string{Plain, OAuthBearer}, PlainUsers: users, OAuthBearer: &UnsecuredValidator{PrincipalClaim: "sub", ScopeClaim: "scope"}}, []string{Plain, OAuthBearer}, ""},
		{"OAUTHBEARER without validator", ServerConfig{Enabled: []string{OAuthBearer}}, nil, "no token validator"},
		{"unknown", ServerConfig{Enabled: []string{"scram-sha-256"}}, nil, `unknown mechanism "scram-sha-256"`},
		{"PLAIN without users", ServerConfig{Enabled: []string{Plain}}, nil, "no users are configured"},
		{"SCRAM without lookup", ServerConfig{Enabled: []string{ScramSHA512}, Secret: testSecret}, nil, "no credential lookup"},
		{"SCRAM without secret", ServerConfig{Enabled: []string{ScramSHA256}, Scram: mapLookup{}}, nil, "has 0 bytes, want at least 16"},
		{"SCRAM short secret", ServerConfig{Enabled: []string{ScramSHA256}, Scram: mapLookup{}, Secret: []byte("short")}, nil, "has 5 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewServer(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := s.Enabled()
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("Enabled = %v, want %v", got, tt.want)
			}
			got[0] = "changed"
			if s.Enabled()[0] == "changed" {
				t.Fatal("Enabled returned the server's own slice")
			}
		})
	}
}

// The server keeps its own copy of the users: changing the caller's map
// later changes nothing.
func TestNewServerCopiesUsers(t *testing.T) {
	users := map[string]string{"alice": "alice-secret"}
	srv, err := NewServer(ServerConfig{Enabled: []string{Plain}, PlainUsers: users})
	if err != nil {
		t.Fatal(err)
	}
	users["alice"] = "changed"
	if r := drive(t, srv, plainMech("", "alice", "alice-secret")); r.err != nil {
		t.Fatalf("login after the caller's map changed: %v", r.err)
	}
}

func TestStartUnsupported(t *testing.T) {
	srv, err := NewServer(ServerConfig{Enabled: []string{ScramSHA512, Plain}, PlainUsers: map[string]string{"a": "b"}, Scram: mapLookup{}, Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{ScramSHA256, "GSSAPI", "", "plain", "PLAIN\n"} {
		_, err := srv.Start(m)
		if !errors.Is(err, ErrUnsupportedMechanism) {
			t.Fatalf("Start(%q): %v, want ErrUnsupportedMechanism", m, err)
		}
		if !strings.Contains(err.Error(), "enabled: SCRAM-SHA-512, PLAIN") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("Start(%q): %q should list the enabled mechanisms on one line", m, err)
		}
	}
}

func TestPlainMalformed(t *testing.T) {
	srv := testServer(t)
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"no NUL", "alice"},
		{"one NUL", "alice\x00alice-secret"},
		{"three NULs", "\x00alice\x00alice-secret\x00"},
		{"empty user", "\x00\x00alice-secret"},
		{"empty password", "\x00alice\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex, err := srv.Start(Plain)
			if err != nil {
				t.Fatal(err)
			}
			_, done, err := ex.Step([]byte(tt.in))
			if done || err == nil || err.Error() != genericPlain || !errors.Is(err, ErrAuthenticationFailed) {
				t.Fatalf("Step: done=%v err=%v, want %q", done, err, genericPlain)
			}
			if _, _, err := ex.Step([]byte("\x00alice\x00alice-secret")); !errors.Is(err, ErrExchangeOver) {
				t.Fatalf("Step after failure: %v, want ErrExchangeOver", err)
			}
		})
	}
}

func TestScramMalformedClientFirst(t *testing.T) {
	srv := testServer(t)
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"flag only", "n"},
		{"header only", "n,"},
		{"header without bare", "n,,"},
		{"channel binding y", "y,,n=alice,r=abc"},
		{"channel binding p", "p=tls-unique,,n=alice,r=abc"},
		{"bad flag", "x,,n=alice,r=abc"},
		{"bad authzid field", "n,b=alice,n=alice,r=abc"},
		{"empty authzid", "n,a=,n=alice,r=abc"},
		{"mandatory extension", "n,,m=ext,n=alice,r=abc"},
		{"no nonce", "n,,n=alice"},
		{"empty user", "n,,n=,r=abc"},
		{"user not first", "n,,r=abc,n=alice"},
		{"bad escape", "n,,n=al=ice,r=abc"},
		{"short escape", "n,,n=alice=2,r=abc"},
		{"NUL in user", "n,,n=al\x00ice,r=abc"},
		{"invalid UTF-8 user", "n,,n=al\xffice,r=abc"},
		{"empty nonce", "n,,n=alice,r="},
		{"nonce with space", "n,,n=alice,r=a c"},
		{"nonce with DEL", "n,,n=alice,r=a\x7fc"},
		{"extension without value", "n,,n=alice,r=abc,ext"},
		{"extension with digit name", "n,,n=alice,r=abc,e1=x"},
		{"extension empty value", "n,,n=alice,r=abc,ext="},
		{"trailing comma", "n,,n=alice,r=abc,"},
		{"tokenauth any case", "n,,n=alice,r=abc,tokenauth=TRUE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex, err := srv.Start(ScramSHA256)
			if err != nil {
				t.Fatal(err)
			}
			out, done, err := ex.Step([]byte(tt.in))
			if done || out != nil || err == nil || err.Error() != genericSHA256 || !errors.Is(err, ErrAuthenticationFailed) {
				t.Fatalf("Step: out=%q done=%v err=%v, want %q", out, done, err, genericSHA256)
			}
			if _, _, err := ex.Step([]byte("c=biws,r=abc,p=AAAA")); !errors.Is(err, ErrExchangeOver) {
				t.Fatalf("Step after failure: %v, want ErrExchangeOver", err)
			}
		})
	}
	// Extensions Kafka ignores are ignored here too.
	ex, _ := srv.Start(ScramSHA256)
	if _, _, err := ex.Step([]byte("n,,n=alice,r=abc,tokenauth=false,other=x=y")); err != nil {
		t.Fatalf("client-first with ignored extensions: %v", err)
	}
}

// clientFinal runs a real client up to its client-final message for a
// known or unknown user and returns the exchange waiting for it.
func clientFinal(t *testing.T, srv *Server, mechanism, user, password string) (Exchange, string) {
	t.Helper()
	sess, first, err := scramMech(mechanism, "", user, password, false).Authenticate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := srv.Start(mechanism)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := ex.Step(first)
	if err != nil {
		t.Fatal(err)
	}
	_, final, err := sess.Challenge(out)
	if err != nil {
		t.Fatal(err)
	}
	return ex, string(final)
}

func TestScramMalformedClientFinal(t *testing.T) {
	srv := testServer(t)
	// Each mutation is applied to a valid client-final message
	// c=biws,r=<nonce>,p=<proof>.
	flipProof := func(m string) string {
		i := strings.LastIndex(m, ",p=") + 3
		p := b64(t, m[i:])
		p[0] ^= 1
		return m[:i] + encodeB64(p)
	}
	tests := []struct {
		name   string
		mutate func(string) string
	}{
		{"bad proof", flipProof},
		{"nonce mismatch", func(m string) string { return strings.Replace(m, ",r=", ",r=x", 1) }},
		{"nonce truncated", func(m string) string {
			i := strings.LastIndex(m, ",p=")
			return m[:i-1] + m[i:]
		}},
		{"client nonce only", func(m string) string {
			i, j := strings.Index(m, ",r="), strings.LastIndex(m, ",p=")
			return m[:i+3+10] + m[j:]
		}},
		{"bad base64 proof", func(m string) string { return m + "!" }},
		{"unpadded proof", func(m string) string { return strings.TrimRight(m, "=") }},
		{"short proof", func(m string) string {
			i := strings.LastIndex(m, ",p=") + 3
			return m[:i] + encodeB64(b64(t, m[i:])[:16])
		}},
		{"long proof", func(m string) string {
			i := strings.LastIndex(m, ",p=") + 3
			return m[:i] + encodeB64(append(b64(t, m[i:]), 0))
		}},
		{"empty proof", func(m string) string { return m[:strings.LastIndex(m, ",p=")+3] }},
		{"no proof", func(m string) string { return m[:strings.LastIndex(m, ",p=")] }},
		{"truncated", func(m string) string { return m[:len(m)/2] }},
		{"empty", func(string) string { return "" }},
		{"channel binding of another header", func(m string) string { return strings.Replace(m, "c=biws", "c="+encodeB64([]byte("n,a=alice,")), 1) }},
		{"channel binding y", func(m string) string { return strings.Replace(m, "c=biws", "c="+encodeB64([]byte("y,,")), 1) }},
		{"channel binding not base64", func(m string) string { return strings.Replace(m, "c=biws", "c=bi!s", 1) }},
		{"no channel binding", func(m string) string { return strings.TrimPrefix(m, "c=biws,") }},
		{"fields swapped", func(m string) string {
			i := strings.LastIndex(m, ",p=")
			f := strings.Split(m[:i], ",")
			return f[1] + "," + f[0] + m[i:]
		}},
		{"bad extension", func(m string) string { return strings.Replace(m, ",p=", ",1=2,p=", 1) }},
	}
	for _, mechanism := range []string{ScramSHA256, ScramSHA512} {
		for _, tt := range tests {
			t.Run(mechanism+"/"+tt.name, func(t *testing.T) {
				want := genericSHA256
				if mechanism == ScramSHA512 {
					want = genericSHA512
				}
				ex, final := clientFinal(t, srv, mechanism, "alice", "alice-secret")
				bad := tt.mutate(final)
				if bad == final {
					t.Fatal("mutation left the message unchanged")
				}
				out, done, err := ex.Step([]byte(bad))
				if done || out != nil || err == nil || err.Error() != want || !errors.Is(err, ErrAuthenticationFailed) {
					t.Fatalf("Step(%q): out=%q done=%v err=%v, want %q", bad, out, done, err, want)
				}
				if ex.Principal() != "" {
					t.Fatalf("Principal %q after a failure", ex.Principal())
				}
				if _, _, err := ex.Step([]byte(final)); !errors.Is(err, ErrExchangeOver) {
					t.Fatalf("Step after failure: %v, want ErrExchangeOver", err)
				}
			})
		}
	}
	// The unmutated message succeeds.
	ex, final := clientFinal(t, srv, ScramSHA256, "alice", "alice-secret")
	if _, done, err := ex.Step([]byte(final)); err != nil || !done {
		t.Fatalf("valid client-final: done=%v err=%v", done, err)
	}
}
