package server

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/kbroker/kbroker/config"
)

// A listener with OAUTHBEARER starts only with what Kafka needs for it: an
// OAuthBearerLoginModule JAAS entry and the unsecured validator (no other
// server callback handler), with valid validator options.
func TestNewListenersOAuthBearer(t *testing.T) {
	base := []string{
		"listeners=SASL_PLAINTEXT://127.0.0.1:0",
		"inter.broker.listener.name=SASL_PLAINTEXT",
		"sasl.enabled.mechanisms=OAUTHBEARER",
	}
	const module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
	tests := []struct {
		name    string
		extra   []string
		wantErr string
	}{
		{"JAAS on the listener", []string{"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=" + module + ";"}, ""},
		{"JAAS for every listener, with validator options", []string{"sasl.jaas.config=" + module + ` unsecuredValidatorRequiredScope="kafka" unsecuredValidatorAllowableClockSkewMs="500";`}, ""},
		{"the unsecured validator named", []string{"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=" + module + ";",
			"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"}, ""},
		{"no JAAS entry", nil, "oauthbearer.sasl.jaas.config is not set"},
		{"a signed-token validator", []string{"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=" + module + ";",
			"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"}, "unsecured JWTs only"},
		{"a bad clock skew", []string{"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=" + module + ` unsecuredValidatorAllowableClockSkewMs="-5";`}, "unsecuredValidatorAllowableClockSkewMs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := config.Load("", append(append([]string{}, base...), tt.extra...))
			if err != nil {
				t.Fatal(err)
			}
			ls, err := newListeners(cfg, nil, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ls["SASL_PLAINTEXT"].sasl.Enabled(); len(got) != 1 || got[0] != "OAUTHBEARER" {
				t.Fatalf("enabled %v", got)
			}
		})
	}
}
