package sasl

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// Any client message either authenticates or fails with an *AuthError;
// nothing panics. Run longer with
//
//	go test -run '^$' -fuzz FuzzPlainStep ./internal/sasl
func FuzzPlainStep(f *testing.F) {
	srv := testServer(f)
	for _, seed := range []string{
		"\x00alice\x00alice-secret",
		"alice\x00alice\x00alice-secret",
		"bob\x00alice\x00alice-secret",
		"\x00alice\x00wrong",
		"\x00\x00",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ex, err := srv.Start(Plain)
		if err != nil {
			t.Fatal(err)
		}
		out, done, err := ex.Step(in)
		if err == nil {
			ok := bytes.Equal(in, []byte("\x00alice\x00alice-secret")) || bytes.Equal(in, []byte("alice\x00alice\x00alice-secret")) ||
				bytes.Equal(in, []byte("\x00bob\x00bob-secret")) || bytes.Equal(in, []byte("bob\x00bob\x00bob-secret"))
			if !ok || !done || len(out) != 0 || ex.Principal() == "" {
				t.Fatalf("Step(%q) = %q, %v, principal %q", in, out, done, ex.Principal())
			}
		} else {
			checkAuthError(t, err, Plain)
		}
		if _, _, err := ex.Step(in); !errors.Is(err, ErrExchangeOver) {
			t.Fatalf("second Step: %v, want ErrExchangeOver", err)
		}
	})
}

// As FuzzPlainStep, for both SCRAM messages. In final, "NONCE" is replaced
// by the nonce the server chose, so the fuzzer gets past the nonce check
// to the proof.
func FuzzScramStep(f *testing.F) {
	srv := testServer(f)
	f.Add(false, []byte("n,,n=alice,r=abcdef"), []byte("c=biws,r=NONCE,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	f.Add(true, []byte("n,,n=nobody,r=abcdef"), []byte("c=biws,r=NONCE,ext=x,p=AAAA"))
	f.Add(false, []byte("n,a=alice,n=alice,r=x,tokenauth=false"), []byte("c=bixhPWFsaWNlLA==,r=NONCE,p="))
	f.Add(true, []byte("n,,n=odd=2Cuser=3D,r=x"), []byte("c=biws,r=NONCE"))
	f.Add(false, []byte("y,,n=alice,r=x"), []byte(""))
	f.Fuzz(func(t *testing.T, sha512 bool, first, final []byte) {
		mechanism := ScramSHA256
		if sha512 {
			mechanism = ScramSHA512
		}
		ex, err := srv.Start(mechanism)
		if err != nil {
			t.Fatal(err)
		}
		out, done, err := ex.Step(first)
		if err != nil {
			checkAuthError(t, err, mechanism)
			return
		}
		if done || !bytes.HasPrefix(out, []byte("r=")) {
			t.Fatalf("client-first %q: out %q, done %v", first, out, done)
		}
		nonce, _, _ := strings.Cut(string(out[2:]), ",")
		final = bytes.ReplaceAll(final, []byte("NONCE"), []byte(nonce))
		out, done, err = ex.Step(final)
		// Producing a valid proof blind is as hard as breaking the hash.
		if err == nil {
			t.Fatalf("client-final %q authenticated (out %q, done %v)", final, out, done)
		}
		checkAuthError(t, err, mechanism)
		if _, _, err := ex.Step(final); !errors.Is(err, ErrExchangeOver) {
			t.Fatalf("Step after failure: %v, want ErrExchangeOver", err)
		}
	})
}

// Any OAUTHBEARER client message authenticates, is answered with a JSON
// status (then ^A fails the exchange with it), or fails with an
// *AuthError; nothing panics.
func FuzzOAuthBearerStep(f *testing.F) {
	srv := oauthServer(f, UnsecuredValidator{RequiredScope: []string{"read"}})
	tok := jwt(f, map[string]any{"sub": "alice", "exp": oauthNow + 60, "scope": []string{"read"}})
	f.Add([]byte("n,,\x01auth=Bearer " + tok + "\x01\x01"))
	f.Add([]byte("n,a=alice,\x01auth=Bearer " + tok + "\x01traceId=x\x01\x01"))
	f.Add([]byte("n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.e30.\x01\x01"))
	f.Add([]byte("n,,\x01auth=Bearer a.b.c\x01\x01"))
	f.Add([]byte("\x01"))
	f.Fuzz(func(t *testing.T, in []byte) {
		ex, err := srv.Start(OAuthBearer)
		if err != nil {
			t.Fatal(err)
		}
		out, done, err := ex.Step(in)
		var ae *AuthError
		switch {
		case done:
			if err != nil || len(out) != 0 || ex.Principal() == "" {
				t.Fatalf("Step(%q) done with %q, %v, principal %q", in, out, err, ex.Principal())
			}
		case err != nil:
			if !errors.As(err, &ae) || ae.Mechanism != OAuthBearer ||
				(ae.Message != genericFailure(OAuthBearer, "").Message && !strings.HasPrefix(ae.Message, "Authentication failed: Client requested an authorization id")) {
				t.Fatalf("Step(%q): %#v", in, err)
			}
		default:
			if !strings.HasPrefix(string(out), `{"status":"`) {
				t.Fatalf("Step(%q) challenged with %q", in, out)
			}
			if _, _, err := ex.Step([]byte{0x01}); err == nil || err.Error() != string(out) {
				t.Fatalf("^A after challenge %q: %v", out, err)
			}
		}
	})
}

// checkAuthError asserts err is an *AuthError carrying one of the texts
// Kafka sends for mechanism.
func checkAuthError(t *testing.T, err error, mechanism string) {
	t.Helper()
	var ae *AuthError
	if !errors.As(err, &ae) || !errors.Is(err, ErrAuthenticationFailed) || ae.Mechanism != mechanism {
		t.Fatalf("error %#v is not an *AuthError for %s", err, mechanism)
	}
	switch ae.Message {
	case msgPlainInvalid, msgAuthzMismatch, genericFailure(mechanism, "").Message:
	default:
		t.Fatalf("unexpected client message %q", ae.Message)
	}
}

// ParseJAAS never panics and what it accepts is well formed.
func FuzzParseJAAS(f *testing.F) {
	f.Add(plainModule + ` required username="admin" password="admin-secret" user_alice="alice-secret";`)
	f.Add(scramModule + " optional a=b /* c */ d='e\\'\\101';")
	f.Add("x required a=\"\\477\"// y\n;")
	f.Fuzz(func(t *testing.T, s string) {
		j, err := ParseJAAS(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "sasl.jaas.config: ") {
				t.Fatalf("error %q lacks the config name", err)
			}
			return
		}
		switch j.Flag {
		case "required", "requisite", "sufficient", "optional":
		default:
			t.Fatalf("accepted flag %q", j.Flag)
		}
		if j.LoginModule == "" && !strings.ContainsAny(s, `"'`) {
			t.Fatalf("empty login module from %q", s)
		}
	})
}
