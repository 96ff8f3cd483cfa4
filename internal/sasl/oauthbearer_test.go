package sasl

import (
	"encoding/base64"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// oauthNow is the clock of the OAUTHBEARER tests, in seconds.
const oauthNow = 1_800_000_000

func oauthServer(t testing.TB, v UnsecuredValidator) *Server {
	t.Helper()
	if v.PrincipalClaim == "" {
		v.PrincipalClaim = "sub"
	}
	if v.ScopeClaim == "" {
		v.ScopeClaim = "scope"
	}
	s, err := NewServer(ServerConfig{Enabled: []string{OAuthBearer}, OAuthBearer: &v,
		Now: func() time.Time { return time.Unix(oauthNow, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jwt is an unsecured token of claims with the given header and signature
// segments (alg none and empty for a well-formed one).
func jwt(t testing.TB, claims map[string]any) string {
	t.Helper()
	tok, err := EncodeUnsecuredJWT(claims)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func b64url(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func oauthMech(zid, token string, ext map[string]string) kgosasl.Mechanism {
	return oauth.Auth{Zid: zid, Token: token, Extensions: ext}.AsMechanism()
}

const invalidTokenJSON = `{"status":"invalid_token"}`

func TestOAuthBearerExchange(t *testing.T) {
	good := func(extra map[string]any) map[string]any {
		c := map[string]any{"sub": "alice", "iat": float64(oauthNow - 10), "exp": float64(oauthNow + 60)}
		for k, v := range extra {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return c
	}
	header := b64url(`{"alg":"none"}`)
	tests := []struct {
		name      string
		validator UnsecuredValidator
		zid       string
		token     string
		// want: the principal, or the failure: the Step it happens at
		// and the message the client gets.
		want     string
		failStep int
		message  string
	}{
		{name: "valid", token: jwt(t, good(nil)), want: "alice"},
		{name: "no iat", token: jwt(t, good(map[string]any{"iat": nil})), want: "alice"},
		{name: "authzid of the principal", zid: "alice", token: jwt(t, good(nil)), want: "alice"},
		{name: "authzid of another", zid: "bob", token: jwt(t, good(nil)), failStep: 1,
			message: "Authentication failed: Client requested an authorization id (bob) that is different from the token's principal name (alice)"},
		{name: "expired", token: jwt(t, good(map[string]any{"exp": float64(oauthNow - 1)})), failStep: 2, message: invalidTokenJSON},
		{name: "expiring now", token: jwt(t, good(map[string]any{"exp": float64(oauthNow)})), failStep: 2, message: invalidTokenJSON},
		{name: "expired within the clock skew", validator: UnsecuredValidator{ClockSkew: 2 * time.Second},
			token: jwt(t, good(map[string]any{"exp": float64(oauthNow - 1)})), want: "alice"},
		{name: "issued in the future", token: jwt(t, good(map[string]any{"iat": float64(oauthNow + 1)})), failStep: 2, message: invalidTokenJSON},
		{name: "issued in the future within the skew", validator: UnsecuredValidator{ClockSkew: time.Second},
			token: jwt(t, good(map[string]any{"iat": float64(oauthNow + 1)})), want: "alice"},
		{name: "exp not after iat", validator: UnsecuredValidator{ClockSkew: time.Hour},
			token: jwt(t, good(map[string]any{"iat": float64(oauthNow + 60)})), failStep: 2, message: invalidTokenJSON},
		{name: "no exp", token: jwt(t, good(map[string]any{"exp": nil})), failStep: 2, message: invalidTokenJSON},
		{name: "exp a string", token: jwt(t, good(map[string]any{"exp": "tomorrow"})), failStep: 2, message: invalidTokenJSON},
		{name: "iat a string", token: jwt(t, good(map[string]any{"iat": "today"})), failStep: 2, message: invalidTokenJSON},
		{name: "no sub", token: jwt(t, good(map[string]any{"sub": nil})), failStep: 2, message: invalidTokenJSON},
		{name: "blank sub", token: jwt(t, good(map[string]any{"sub": "  "})), failStep: 2, message: invalidTokenJSON},
		{name: "sub a number", token: jwt(t, good(map[string]any{"sub": 7})), failStep: 2, message: invalidTokenJSON},
		// Blank as Java's trim sees it: controls are, a no-break space
		// is not.
		{name: "sub a control character", token: jwt(t, good(map[string]any{"sub": "\x00\t"})), failStep: 2, message: invalidTokenJSON},
		{name: "sub a no-break space", token: jwt(t, good(map[string]any{"sub": "\u00a0"})), want: "\u00a0"},
		{name: "another principal claim", validator: UnsecuredValidator{PrincipalClaim: "client_id"},
			token: jwt(t, good(map[string]any{"client_id": "svc-1"})), want: "svc-1"},
		{name: "the principal claim missing", validator: UnsecuredValidator{PrincipalClaim: "client_id"},
			token: jwt(t, good(nil)), failStep: 2, message: invalidTokenJSON},
		// Kafka drops the connection without an answer for the next two
		// (a NullPointerException, an IllegalArgumentException); kbroker
		// answers as for any other bad token or message.
		{name: "a signed token", token: b64url(`{"alg":"HS256"}`) + "." + b64url(`{"sub":"alice","exp":1800000060}`) + ".c2ln",
			failStep: 2, message: invalidTokenJSON},
		{name: "alg none with a signature", token: jwt(t, good(nil)) + "c2ln", failStep: 2, message: invalidTokenJSON},
		{name: "no alg", token: b64url(`{"typ":"JWT"}`) + "." + b64url(`{"sub":"alice","exp":1800000060}`) + ".", failStep: 2, message: invalidTokenJSON},
		{name: "two segments", token: header + "." + b64url(`{"sub":"alice","exp":1800000060}`), failStep: 2, message: invalidTokenJSON},
		{name: "four segments", token: jwt(t, good(nil)) + ".", failStep: 2, message: invalidTokenJSON},
		{name: "'..'", token: header + ".." + b64url(`{}`) + ".", failStep: 2, message: invalidTokenJSON},
		{name: "claims not JSON", token: header + "." + b64url(`sub=alice`) + ".", failStep: 2, message: invalidTokenJSON},
		{name: "claims a JSON array", token: header + "." + b64url(`["alice"]`) + ".", failStep: 2, message: invalidTokenJSON},
		{name: "claims not base64", token: header + ".e30+~.", failStep: 2, message: invalidTokenJSON},
		// Kafka's decoder takes only the basic alphabet; kbroker takes the
		// URL-safe one too, which RFC 7515 prescribes and clients use.
		{name: "claims with URL-safe characters", token: header + "." + b64url(`{"sub":"al?ce>","exp":1800000060}`) + ".", want: "al?ce>"},
		// Kafka's auth pattern takes '=' only at the end of the token.
		{name: "claims with padding", token: header + "." + base64.URLEncoding.EncodeToString([]byte(`{"sub":"alice","exp":1800000060}`)) + ".",
			failStep: 1, message: genericFailure(OAuthBearer, "").Message},
		{name: "required scope held", validator: UnsecuredValidator{RequiredScope: []string{"read", "write"}},
			token: jwt(t, good(map[string]any{"scope": []string{" write ", "read", "admin"}})), want: "alice"},
		{name: "required scope missing", validator: UnsecuredValidator{RequiredScope: []string{"read", "write"}},
			token: jwt(t, good(map[string]any{"scope": []string{"read"}})), failStep: 2, message: `{"status":"insufficient_scope", "scope":"[read, write]"}`},
		// As in Kafka, a string scope claim is one item, spaces and all.
		{name: "required scope in a string claim", validator: UnsecuredValidator{RequiredScope: []string{"read"}},
			token: jwt(t, good(map[string]any{"scope": "read write"})), failStep: 2, message: `{"status":"insufficient_scope", "scope":"[read]"}`},
		{name: "scope a number", token: jwt(t, good(map[string]any{"scope": 3})), failStep: 2, message: invalidTokenJSON},
		{name: "another scope claim", validator: UnsecuredValidator{ScopeClaim: "scp", RequiredScope: []string{"read"}},
			token: jwt(t, good(map[string]any{"scp": "read"})), want: "alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := oauthServer(t, tt.validator)
			r := drive(t, srv, oauthMech(tt.zid, tt.token, map[string]string{"traceId": "abc 123"}))
			if tt.failStep == 0 {
				if r.err != nil || r.principal != tt.want {
					t.Fatalf("principal %q, error %v; want %q", r.principal, r.err, tt.want)
				}
				return
			}
			var ae *AuthError
			if !errors.As(r.err, &ae) || ae.Mechanism != OAuthBearer || r.failStep != tt.failStep || ae.Message != tt.message {
				t.Fatalf("failed at step %d with %#v; want step %d with message %q", r.failStep, r.err, tt.failStep, tt.message)
			}
			if ae.Reason == "" {
				t.Fatal("no reason for the broker's log")
			}
		})
	}
}

// The session may not outlive the token: the exchange reports its expiry,
// to the millisecond.
func TestOAuthBearerCredentialExpiry(t *testing.T) {
	srv := oauthServer(t, UnsecuredValidator{})
	ex, err := srv.Start(OAuthBearer)
	if err != nil {
		t.Fatal(err)
	}
	tok := jwt(t, map[string]any{"sub": "alice", "exp": oauthNow + 90.1234})
	if _, done, err := ex.Step([]byte("n,,\x01auth=Bearer " + tok + "\x01\x01")); err != nil || !done {
		t.Fatalf("Step: done %v, %v", done, err)
	}
	exp, ok := ex.(Expiring)
	if !ok {
		t.Fatal("the OAUTHBEARER exchange does not report its credential's expiry")
	}
	if got, want := exp.CredentialExpiry(), time.UnixMilli(oauthNow*1000+90_123); !got.Equal(want) {
		t.Fatalf("CredentialExpiry %v, want %v", got, want)
	}

	// An exp beyond int64 milliseconds (nanoseconds by mistake, or out of
	// float64's range) saturates, as Java's Math.round: no end.
	for _, claims := range []string{`{"sub":"alice","exp":9.3e15}`, `{"sub":"alice","exp":1e400}`} {
		ex, _ := srv.Start(OAuthBearer)
		tok := b64url(`{"alg":"none"}`) + "." + b64url(claims) + "."
		if _, done, err := ex.Step([]byte("n,,\x01auth=Bearer " + tok + "\x01\x01")); err != nil || !done {
			t.Fatalf("%s: done %v, %v", claims, done, err)
		}
		if got := ex.(Expiring).CredentialExpiry(); !got.Equal(time.UnixMilli(math.MaxInt64)) {
			t.Fatalf("%s: CredentialExpiry %v, want the largest", claims, got)
		}
	}
}

// After a refused token the client may answer ^A (the exchange fails with
// the JSON status) or, as Kafka allows, send a new first message.
func TestOAuthBearerAfterRefusal(t *testing.T) {
	srv := oauthServer(t, UnsecuredValidator{})
	expired := jwt(t, map[string]any{"sub": "alice", "exp": oauthNow - 5})
	valid := jwt(t, map[string]any{"sub": "alice", "exp": oauthNow + 5})
	first := func(tok string) []byte { return []byte("n,,\x01auth=Bearer " + tok + "\x01\x01") }

	ex, _ := srv.Start(OAuthBearer)
	out, done, err := ex.Step(first(expired))
	if err != nil || done || string(out) != invalidTokenJSON {
		t.Fatalf("expired token: %q, %v, %v; want the invalid_token challenge", out, done, err)
	}
	if _, _, err := ex.Step([]byte{0x01}); err == nil || err.Error() != invalidTokenJSON {
		t.Fatalf("^A after the challenge: %v, want the challenge as the failure", err)
	}
	if _, _, err := ex.Step(first(valid)); !errors.Is(err, ErrExchangeOver) {
		t.Fatalf("Step after the failure: %v, want ErrExchangeOver", err)
	}

	ex, _ = srv.Start(OAuthBearer)
	if _, _, err := ex.Step(first(expired)); err != nil {
		t.Fatal(err)
	}
	if out, done, err := ex.Step(first(valid)); err != nil || !done || len(out) != 0 || ex.Principal() != "alice" {
		t.Fatalf("a new token after the challenge: %q, %v, %v, principal %q; want authenticated as alice", out, done, err, ex.Principal())
	}

	// ^A with no challenge outstanding is just a malformed first message.
	ex, _ = srv.Start(OAuthBearer)
	if _, _, err := ex.Step([]byte{0x01}); err == nil || err.Error() != genericFailure(OAuthBearer, "").Message {
		t.Fatalf("^A first: %v, want the generic failure", err)
	}
}

func TestOAuthBearerMalformed(t *testing.T) {
	tok := jwt(t, map[string]any{"sub": "alice", "exp": oauthNow + 60})
	for _, in := range []string{
		"",
		"n,,\x01auth=Bearer " + tok + "\x01",     // no final ^A
		"n,,auth=Bearer " + tok + "\x01\x01",     // no ^A after the GS2 header
		"y,,\x01auth=Bearer " + tok + "\x01\x01", // channel binding flag
		"p=tls-unique,,\x01auth=Bearer " + tok + "\x01\x01",
		"n,a=al,ice,\x01auth=Bearer " + tok + "\x01\x01", // ',' in the authzid
		"n,,\x01\x01",                                        // no auth
		"n,,\x01traceId=1\x01\x01",                           // no auth
		"n,,\x01auth=Basic " + tok + "\x01\x01",              // another scheme
		"n,,\x01auth=Bearer\x01\x01",                         // no token
		"n,,\x01auth=Bearer " + tok + " x\x01\x01",           // space in the token
		"n,,\x01auth=Bearer " + tok + "\x01trace1=x\x01\x01", // digit in a key
		"n,,\x01auth=Bearer " + tok + "\x01trace=\x01\x01",   // empty value
		"n,,\x01auth=Bearer " + tok + "\x01trace=\xff\x01\x01",
	} {
		srv := oauthServer(t, UnsecuredValidator{})
		ex, _ := srv.Start(OAuthBearer)
		out, done, err := ex.Step([]byte(in))
		var ae *AuthError
		if !errors.As(err, &ae) || ae.Message != genericFailure(OAuthBearer, "").Message || done || out != nil {
			t.Errorf("Step(%q) = %q, %v, %v; want the generic failure", in, out, done, err)
		}
	}
	// The bearer scheme is case-insensitive, and a SASL name may escape
	// ',' and '=' (the authzid must still be the principal).
	srv := oauthServer(t, UnsecuredValidator{})
	ex, _ := srv.Start(OAuthBearer)
	if _, done, err := ex.Step([]byte("n,,\x01auth=BEARER " + tok + "\x01\x01")); err != nil || !done {
		t.Errorf("scheme BEARER: %v", err)
	}
	ex, _ = srv.Start(OAuthBearer)
	_, _, err := ex.Step([]byte("n,a=a=2Cb=3D,\x01auth=Bearer " + tok + "\x01\x01"))
	if err == nil || !strings.Contains(err.Error(), "authorization id (a=2Cb=3D)") {
		t.Errorf("escaped authzid: %v, want the authorization id mismatch", err)
	}
}

func TestUnsecuredValidatorOptions(t *testing.T) {
	tests := []struct {
		name    string
		options map[string]string
		want    UnsecuredValidator
		wantErr string
	}{
		{"defaults", nil, UnsecuredValidator{PrincipalClaim: "sub", ScopeClaim: "scope"}, ""},
		{"all", map[string]string{
			"unsecuredValidatorPrincipalClaimName":   " client_id ",
			"unsecuredValidatorScopeClaimName":       "scp",
			"unsecuredValidatorRequiredScope":        " read  write ",
			"unsecuredValidatorAllowableClockSkewMs": "1500",
			"unsecuredLoginStringClaim_sub":          "admin",
		}, UnsecuredValidator{PrincipalClaim: "client_id", ScopeClaim: "scp", RequiredScope: []string{"read", "write"}, ClockSkew: 1500 * time.Millisecond}, ""},
		{"blank names keep the defaults", map[string]string{"unsecuredValidatorPrincipalClaimName": " ", "unsecuredValidatorScopeClaimName": ""},
			UnsecuredValidator{PrincipalClaim: "sub", ScopeClaim: "scope"}, ""},
		{"bad scope token", map[string]string{"unsecuredValidatorRequiredScope": `read "write"`}, UnsecuredValidator{}, "invalid scope token"},
		// Kafka splits on spaces only: a tab is inside an item.
		{"tab-separated scope", map[string]string{"unsecuredValidatorRequiredScope": "read\twrite"}, UnsecuredValidator{}, "invalid scope token"},
		{"negative skew", map[string]string{"unsecuredValidatorAllowableClockSkewMs": "-1"}, UnsecuredValidator{}, "not a number of milliseconds"},
		{"skew not a number", map[string]string{"unsecuredValidatorAllowableClockSkewMs": "1s"}, UnsecuredValidator{}, "not a number of milliseconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := JAAS{Options: tt.options}.UnsecuredValidator()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.PrincipalClaim != tt.want.PrincipalClaim || got.ScopeClaim != tt.want.ScopeClaim ||
				strings.Join(got.RequiredScope, " ") != strings.Join(tt.want.RequiredScope, " ") || got.ClockSkew != tt.want.ClockSkew {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// The broker's own token, made from unsecuredLogin* options, passes the
// unsecured validator with the claims the options give.
func TestUnsecuredLoginToken(t *testing.T) {
	now := time.Unix(oauthNow, 0)
	opts := map[string]string{
		"unsecuredLoginStringClaim_sub":   "broker",
		"unsecuredLoginListClaim_scope":   "|read|write",
		"unsecuredLoginNumberClaim_level": "3",
		"unsecuredLoginLifetimeSeconds":   "120",
		"unsecuredLoginExtension_traceId": "t-1",
		"unsecuredValidatorRequiredScope": "read",
		"unsecuredLoginStringClaim_":      "ignored",
		"username":                        "not a claim",
	}
	tok, ext, err := UnsecuredLoginToken(opts, now)
	if err != nil {
		t.Fatal(err)
	}
	if ext["traceId"] != "t-1" || len(ext) != 1 {
		t.Fatalf("extensions %v", ext)
	}
	v := UnsecuredValidator{PrincipalClaim: "sub", ScopeClaim: "scope", RequiredScope: []string{"read", "write"}}
	got, terr := v.validate(tok, now)
	if terr != nil {
		t.Fatalf("the broker's own token refused: %v", terr)
	}
	if got.principal != "broker" || got.expires != oauthNow+120 || got.issuedAt != oauthNow {
		t.Fatalf("token %+v", got)
	}
	claims, err := jwtSegment(strings.Split(tok, ".")[1])
	if err != nil || claims["level"] != 3.0 {
		t.Fatalf("claims %v, %v", claims, err)
	}
	if _, terr := v.validate(tok, now.Add(121*time.Second)); terr == nil {
		t.Fatal("the token is still valid after its lifetime")
	}

	// Another principal claim, and the default lifetime of an hour.
	tok, _, err = UnsecuredLoginToken(map[string]string{"unsecuredLoginPrincipalClaimName": "cid", "unsecuredLoginStringClaim_cid": "b1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	got, terr = (&UnsecuredValidator{PrincipalClaim: "cid", ScopeClaim: "scope"}).validate(tok, now)
	if terr != nil || got.principal != "b1" || got.expires != oauthNow+3600 {
		t.Fatalf("token %+v, %v", got, terr)
	}

	for _, bad := range []map[string]string{
		{},
		{"unsecuredLoginStringClaim_sub": " "},
		{"unsecuredLoginStringClaim_user": "broker"},
		{"unsecuredLoginStringClaim_sub": "broker", "unsecuredLoginNumberClaim_exp": "5"},
		{"unsecuredLoginStringClaim_sub": "broker", "unsecuredLoginStringClaim_iat": "5"},
		{"unsecuredLoginStringClaim_sub": "broker", "unsecuredLoginLifetimeSeconds": "0"},
		{"unsecuredLoginStringClaim_sub": "broker", "unsecuredLoginNumberClaim_n": "three"},
		{"unsecuredLoginStringClaim_sub": "broker", "unsecuredLoginExtension_auth": "x"},
		{"unsecuredLoginStringClaim_sub": "broker", "unsecuredLoginExtension_t1": "x"},
	} {
		if _, _, err := UnsecuredLoginToken(bad, now); err == nil {
			t.Errorf("UnsecuredLoginToken(%v) made a token", bad)
		}
	}
}

func TestCheckOAuthBearerCallbackHandler(t *testing.T) {
	for _, ok := range []string{"", unsecuredValidatorClass} {
		if err := CheckOAuthBearerCallbackHandler(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	secured := "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
	if err := CheckOAuthBearerCallbackHandler(secured); err == nil || !strings.Contains(err.Error(), "unsecured JWTs only") {
		t.Errorf("%s: %v, want refused", secured, err)
	}
}
