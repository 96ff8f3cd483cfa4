package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/internal/sasl"
)

// A broker whose inter-broker mechanism is OAUTHBEARER logs in with a
// fresh unsecured token per connection, made from the JAAS entry's
// unsecuredLogin* options; options that cannot make a token the same
// entry's validator accepts, or another login handler, stop it at start.
func TestInterBrokerOAuthBearer(t *testing.T) {
	const module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
	load := func(jaasOptions string, extra ...string) config.Config {
		t.Helper()
		cfg, _, err := config.Load("", append([]string{
			"listeners=SASL_PLAINTEXT://127.0.0.1:0",
			"inter.broker.listener.name=SASL_PLAINTEXT",
			"sasl.enabled.mechanisms=OAUTHBEARER",
			"sasl.mechanism.inter.broker.protocol=OAUTHBEARER",
			"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=" + module + jaasOptions + ";",
		}, extra...))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}

	sec, err := interBrokerSecurity(load(`unsecuredLoginStringClaim_sub="broker" unsecuredLoginListClaim_scope=",kafka" unsecuredValidatorRequiredScope="kafka"`))
	if err != nil {
		t.Fatal(err)
	}
	if sec.SASL == nil || sec.SASL.Name() != sasl.OAuthBearer {
		t.Fatalf("inter-broker mechanism %v", sec.SASL)
	}
	v := sasl.UnsecuredValidator{PrincipalClaim: "sub", ScopeClaim: "scope", RequiredScope: []string{"kafka"}}
	for i := range 2 {
		before := time.Now().UnixMilli()
		_, msg, err := sec.SASL.Authenticate(context.Background(), "peer:9092")
		after := time.Now().UnixMilli()
		if err != nil {
			t.Fatal(err)
		}
		token, ok := strings.CutPrefix(string(msg), "n,,\x01auth=Bearer ")
		if !ok {
			t.Fatalf("client first message %q", msg)
		}
		token, _, _ = strings.Cut(token, "\x01")
		if err := v.Validate(token, time.Now()); err != nil {
			t.Fatalf("login %d: the broker's token is refused: %v", i, err)
		}
		// Made for this login: a reconnect gets a fresh iat and exp.
		parts := strings.Split(token, ".")
		raw, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			t.Fatal(err)
		}
		var claims struct{ Iat, Exp float64 }
		if err := json.Unmarshal(raw, &claims); err != nil {
			t.Fatal(err)
		}
		if iat := int64(claims.Iat * 1000); iat < before-1 || iat > after+1 || claims.Exp-claims.Iat != 3600 {
			t.Fatalf("login %d between %d and %d ms: token iat %v, exp %v; want iat then, exp an hour later", i, before, after, claims.Iat, claims.Exp)
		}
	}

	for _, tt := range []struct {
		name, options string
		extra         []string
		wantErr       string
	}{
		{"no principal", `unsecuredLoginStringClaim_user="broker"`, nil, "no principal"},
		{"scope its validator requires missing", `unsecuredLoginStringClaim_sub="broker" unsecuredValidatorRequiredScope="kafka"`, nil, "insufficient_scope"},
		{"another principal claim for the validator", `unsecuredLoginStringClaim_sub="broker" unsecuredValidatorPrincipalClaimName="cid"`, nil, "invalid_token"},
		{"an OIDC login handler", `unsecuredLoginStringClaim_sub="broker"`,
			[]string{"listener.name.sasl_plaintext.oauthbearer.sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"}, "makes unsecured tokens only"},
	} {
		if _, err := interBrokerSecurity(load(tt.options, tt.extra...)); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: %v, want an error saying %q", tt.name, err, tt.wantErr)
		}
	}
}
