package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/internal/kafkaconn"
	"github.com/kbroker/kbroker/internal/sasl"
	"github.com/kbroker/kbroker/internal/tlsconf"
	franzsasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// interBrokerSecurity is how this broker connects to the others (follower
// fetches, controller requests, forwarded requests): as a client of the
// inter-broker listener. TLS uses that listener's ssl.* settings (its
// keystore as the client certificate, its truststore for the peers');
// SASL uses sasl.mechanism.inter.broker.protocol with the username and
// password of that mechanism's JAAS entry on the listener, as Kafka, or
// for OAUTHBEARER an unsecured token made from the entry's unsecuredLogin*
// options (Kafka's default login callback handler).
func interBrokerSecurity(cfg config.Config) (kafkaconn.Security, error) {
	var sec kafkaconn.Security
	name := strings.ToUpper(cfg.InterBrokerListenerName)
	protocol := cfg.ListenerProtocol(name)
	settings := cfg.ListenerSettings(name)
	if strings.HasSuffix(protocol, "SSL") {
		c, err := tlsconf.NewClient(tlsconf.Settings(settings), "")
		if err != nil {
			return sec, fmt.Errorf("inter-broker listener %s: %w", name, err)
		}
		sec.TLS = c
	}
	if strings.HasPrefix(protocol, "SASL_") {
		mech := settings["sasl.mechanism.inter.broker.protocol"]
		if mech == "" {
			return sec, fmt.Errorf("inter-broker listener %s (%s): sasl.mechanism.inter.broker.protocol is not set (Kafka's default, GSSAPI, is not supported)", name, protocol)
		}
		jaas, err := listenerJAAS(settings, mech)
		if err != nil {
			return sec, fmt.Errorf("inter-broker listener %s: %w", name, err)
		}
		if mech == sasl.OAuthBearer {
			_, class, _ := mechanismSetting(settings, mech, "sasl.login.callback.handler.class")
			if err := sasl.CheckOAuthBearerLoginCallbackHandler(strings.TrimSpace(class)); err != nil {
				return sec, fmt.Errorf("inter-broker listener %s: %w", name, err)
			}
			m, err := oauthBearerLogin(jaas)
			if err != nil {
				return sec, fmt.Errorf("inter-broker listener %s: %w", name, err)
			}
			sec.SASL = m
			return sec, nil
		}
		user, pass := jaas.Username(), jaas.Password()
		if user == "" || pass == "" {
			return sec, fmt.Errorf("inter-broker listener %s: the %s JAAS entry needs username and password options for this broker's own connections", name, mech)
		}
		switch mech {
		case sasl.Plain:
			sec.SASL = plain.Auth{User: user, Pass: pass}.AsMechanism()
		case sasl.ScramSHA256:
			sec.SASL = scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
		case sasl.ScramSHA512:
			sec.SASL = scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
		default:
			return sec, fmt.Errorf("sasl.mechanism.inter.broker.protocol: %s is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)", mech)
		}
	}
	return sec, nil
}

// oauthBearerLogin is the broker's own OAUTHBEARER login: a fresh unsecured
// token for each connection (its iat and exp from the moment it connects).
// One is made now and checked against the validator of the same JAAS
// entry, which the other brokers' inter-broker listener runs, so that
// options that cannot make an acceptable token stop the broker at start
// instead of failing every connection to a peer.
func oauthBearerLogin(jaas sasl.JAAS) (franzsasl.Mechanism, error) {
	token, _, err := sasl.UnsecuredLoginToken(jaas.Options, time.Now())
	if err != nil {
		return nil, fmt.Errorf("the OAUTHBEARER JAAS entry cannot make this broker's token: %w", err)
	}
	v, err := jaas.UnsecuredValidator()
	if err != nil {
		return nil, fmt.Errorf("oauthbearer.sasl.jaas.config: %w", err)
	}
	if err := v.Validate(token, time.Now()); err != nil {
		return nil, fmt.Errorf("the OAUTHBEARER JAAS entry makes a token for this broker that its own validator options refuse (%w): set unsecuredLogin* to match unsecuredValidator*", err)
	}
	return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
		token, ext, err := sasl.UnsecuredLoginToken(jaas.Options, time.Now())
		return oauth.Auth{Token: token, Extensions: ext}, err
	}), nil
}
