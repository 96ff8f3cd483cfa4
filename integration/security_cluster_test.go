package integration

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/launch"
	"github.com/kbroker/kbroker/internal/sasl"
	"github.com/kbroker/kbroker/internal/testpki"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// clusterSecurity is how a test cluster's listeners are secured: the
// brokers' overrides, and what each kind of test client needs.
type clusterSecurity struct {
	overrides  []string
	probe      func(addr string, timeout time.Duration) error
	clientOpts []kgo.Opt
	kcatArgs   []string
	// brokerOpts are a client's options to authenticate as the brokers
	// themselves (the inter-broker principal).
	brokerOpts []kgo.Opt
	// setup, when set, runs once the cluster is up, before the scenario
	// (e.g. to create the clients' ACLs).
	setup func(t *testing.T, c *testCluster)
}

// saslSSLSecurity secures every listener of a cluster with SASL_SSL:
// certificates from a CA made for the test, brokers authenticating to
// each other with PLAIN over TLS, test clients as alice.
func saslSSLSecurity(t *testing.T) clusterSecurity {
	t.Helper()
	dir := t.TempDir()
	ca, err := testpki.NewCA("kbroker test CA")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue("kbroker", testpki.WithHosts("127.0.0.1", "localhost"))
	if err != nil {
		t.Fatal(err)
	}
	keystore, caFile := filepath.Join(dir, "broker.pem"), filepath.Join(dir, "ca.pem")
	if err := server.WriteKeystorePEM(keystore); err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteCAPEM(caFile); err != nil {
		t.Fatal(err)
	}
	tlsCfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	clientOpts := []kgo.Opt{
		kgo.DialTLSConfig(tlsCfg),
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
	}
	return clusterSecurity{
		overrides: []string{
			"listeners=SASL_SSL://{addr}",
			"inter.broker.listener.name=SASL_SSL",
			"sasl.enabled.mechanisms=PLAIN",
			"sasl.mechanism.inter.broker.protocol=PLAIN",
			`listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";`,
			"ssl.keystore.type=PEM",
			"ssl.keystore.location=" + keystore,
			"ssl.truststore.type=PEM",
			"ssl.truststore.location=" + caFile,
		},
		probe:      launch.KafkaPingWith(clientOpts...),
		clientOpts: clientOpts,
		brokerOpts: []kgo.Opt{
			kgo.DialTLSConfig(tlsCfg),
			kgo.SASL(plain.Auth{User: "broker", Pass: "broker-secret"}.AsMechanism()),
		},
		kcatArgs: []string{"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=PLAIN",
			"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-X", "ssl.ca.location=" + caFile},
	}
}

// TestReplicationKillLeaderUnderLoadSASLSSL is the leader-kill scenario on
// a cluster where every listener is SASL_SSL: replication, the
// controller's requests and the clients all go through TLS and SASL.
func TestReplicationKillLeaderUnderLoadSASLSSL(t *testing.T) {
	testKillLeaderUnderLoad(t, saslSSLSecurity(t))
}

// oauthBearerSecurity secures every listener of a cluster with
// SASL_PLAINTEXT and OAUTHBEARER only: the brokers log in to each other
// with the unsecured token Kafka's login callback handler makes from the
// JAAS entry's unsecuredLogin* options (principal "broker"), test clients
// with tokens of their own (alice).
func oauthBearerSecurity(t *testing.T) clusterSecurity {
	t.Helper()
	token := func(sub string) func(context.Context) (oauth.Auth, error) {
		return func(context.Context) (oauth.Auth, error) {
			tok, err := sasl.EncodeUnsecuredJWT(map[string]any{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()})
			return oauth.Auth{Token: tok}, err
		}
	}
	clientOpts := []kgo.Opt{kgo.SASL(oauth.Oauth(token("alice")))}
	return clusterSecurity{
		overrides: []string{
			"listeners=SASL_PLAINTEXT://{addr}",
			"inter.broker.listener.name=SASL_PLAINTEXT",
			"sasl.enabled.mechanisms=OAUTHBEARER",
			"sasl.mechanism.inter.broker.protocol=OAUTHBEARER",
			`listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker" unsecuredLoginLifetimeSeconds="600";`,
		},
		probe:      launch.KafkaPingWith(clientOpts...),
		clientOpts: clientOpts,
		brokerOpts: []kgo.Opt{kgo.SASL(oauth.Oauth(token("broker")))},
		kcatArgs: []string{"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=OAUTHBEARER",
			"-X", "enable.sasl.oauthbearer.unsecure.jwt=true", "-X", "sasl.oauthbearer.config=principal=alice"},
	}
}

// TestReplicationKillLeaderUnderLoadOAuthBearer is the leader-kill scenario
// with OAUTHBEARER on every connection, the brokers' own included.
func TestReplicationKillLeaderUnderLoadOAuthBearer(t *testing.T) {
	testKillLeaderUnderLoad(t, oauthBearerSecurity(t))
}
