package integration

// Every client library of the suite through secured listeners (Kafka's
// "Listeners, TLS and SASL"): franz-go, sarama, segmentio/kafka-go, kcat
// (librdkafka), kafka-python, confluent-kafka-python (librdkafka) and
// kafkajs each produce records and consume them back in a consumer group,
// committing offsets, through
//
//   - SASL_SSL with SCRAM-SHA-512 (a user created with
//     AlterUserScramCredentials through the PLAINTEXT listener),
//   - SASL_PLAINTEXT with PLAIN (a user of the listener's JAAS config),
//   - SSL with a client certificate (ssl.client.auth=required),
//
// given only that listener's address. One broker serves all cases; its
// certificates are made by the test (internal/testpki): a PEM keystore
// (key and chain in one file) and PEM truststore for the broker, a PKCS#12
// keystore on the SASL_SSL listener. The secrets (JAAS config, keystore
// password) reach the broker in a properties file, never on a command line.
//
// Each case checks that the group consumed exactly the produced records,
// that its committed offsets are the partitions' end offsets (read through
// PLAINTEXT), and that the Produce, Fetch, JoinGroup and OffsetCommit
// requests of the case arrived on its listener and on no other one (the
// broker's kbroker_requests_total by listener). Beforehand, a wrong SCRAM
// and PLAIN password, PLAIN on the SCRAM-only SASL_SSL listener and a TLS
// client without certificate on the SSL listener are refused. At the end
// no secret, right or wrong, appears in the broker's output.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/kbroker/kbroker/internal/launch"
	"github.com/kbroker/kbroker/internal/sasl"
	"github.com/kbroker/kbroker/internal/testpki"
	"github.com/segmentio/kafka-go"
	kgosasl "github.com/segmentio/kafka-go/sasl"
	kgoplain "github.com/segmentio/kafka-go/sasl/plain"
	kgoscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xdgscram "github.com/xdg-go/scram"
)

const (
	secRecords    = 40 // records per case
	secPartitions = 2
	secTimeout    = 60 * time.Second // bounds each client's produce and consume
	secUser       = "alice"
	// secIterations: SCRAM iterations of the user's credential.
	secIterations = 8192
)

// secMode is one secured listener as a client sees it.
type secMode struct {
	name      string // subtest name
	listener  string // listener name, which is also its security protocol
	addr      string
	mechanism string // PLAIN, SCRAM-SHA-512 or OAUTHBEARER; "" on SSL
	password  string // or, for OAUTHBEARER, the token
	certAuth  bool   // the client presents a certificate (SSL)
}

func (m secMode) tls() bool  { return strings.HasSuffix(m.listener, "SSL") }
func (m secMode) sasl() bool { return m.mechanism != "" }

// secPKI is what the clients need of the test's certificates.
type secPKI struct {
	ca                        *testpki.CA
	client                    *testpki.Leaf
	caFile, certFile, keyFile string // PEM
}

// tlsConfig is a Go client's TLS configuration for m, nil without TLS.
// ServerName is left empty: every Go client fills it in from the address
// it dials, so the broker's certificate is checked for 127.0.0.1.
func (p *secPKI) tlsConfig(m secMode) *tls.Config {
	if !m.tls() {
		return nil
	}
	c := &tls.Config{RootCAs: p.ca.Pool(), MinVersion: tls.VersionTLS12}
	if m.certAuth {
		c.Certificates = []tls.Certificate{p.client.TLSCertificate()}
	}
	return c
}

// secCase is what one client run gets: where to go and what to do.
type secCase struct {
	mode         secMode
	pki          *secPKI
	topic, group string
	prefix       string
	values       []string // to produce, "<prefix>-<i>"
}

// secClient produces c.values to c.topic and consumes them back in group
// c.group, committing; it returns the values consumed.
type secClient struct {
	name string
	run  func(t *testing.T, c secCase) []string
}

func TestSecurityClients(t *testing.T) {
	start := time.Now()
	dir := t.TempDir()
	saslSSL := "127.0.0.1:" + strconv.Itoa(freePort(t))
	saslPlain := "127.0.0.1:" + strconv.Itoa(freePort(t))
	sslAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	metrics := "127.0.0.1:" + strconv.Itoa(freePort(t))
	scramPassword := "scram-" + secRandom(t)
	plainPassword := "plain-" + secRandom(t)
	keystorePassword := "p12-" + secRandom(t)
	wrongPassword := "wrong-" + secRandom(t)
	pki, brokerProps := secMakePKI(t, dir, keystorePassword)
	// OAUTHBEARER tokens: unsecured JWTs, as Kafka's default validator
	// takes (librdkafka makes its own from sasl.oauthbearer.config).
	token := secOAuthToken(t, time.Now().Add(time.Hour), "kafka") // outlives every case before it

	// The secrets go into the broker's properties file; everything else
	// is an override.
	props := append(brokerProps,
		"listener.name.sasl_ssl.ssl.keystore.password="+keystorePassword,
		`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_`+secUser+`="`+plainPassword+`";`,
		`listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorRequiredScope="kafka";`,
	)
	propsFile := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(propsFile, []byte(strings.Join(props, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBrokerWithProperties(t, propsFile,
		"listeners=PLAINTEXT://{addr},SASL_SSL://"+saslSSL+",SASL_PLAINTEXT://"+saslPlain+",SSL://"+sslAddr,
		"inter.broker.listener.name=PLAINTEXT",
		"listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512",
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,OAUTHBEARER",
		"listener.name.ssl.ssl.client.auth=required",
		"kbroker.metrics.address="+metrics,
		"offsets.topic.replication.factor=1",
		"offsets.topic.num.partitions=1",
		"group.initial.rebalance.delay.ms=0",
		"group.min.session.timeout.ms=1000",
	)
	adm := b.Admin(t)
	secCreateSCRAMUser(t, adm, scramPassword)

	modes := []secMode{
		{name: "SASL_SSL-SCRAM-SHA-512", listener: "SASL_SSL", addr: saslSSL, mechanism: "SCRAM-SHA-512", password: scramPassword},
		{name: "SASL_PLAINTEXT-PLAIN", listener: "SASL_PLAINTEXT", addr: saslPlain, mechanism: "PLAIN", password: plainPassword},
		{name: "SSL-mTLS", listener: "SSL", addr: sslAddr, certAuth: true},
		{name: "SASL_PLAINTEXT-OAUTHBEARER", listener: "SASL_PLAINTEXT", addr: saslPlain, mechanism: "OAUTHBEARER", password: token},
	}
	// The SCRAM credential is usable once a client authenticates with it
	// (the broker may apply AlterUserScramCredentials asynchronously, as
	// Kafka does).
	checkFor(t, 15*time.Second, 100*time.Millisecond, func() error {
		return secPing(modes[0], pki, "")
	})

	t.Run("refused", func(t *testing.T) {
		secCheckRefusals(t, modes, pki, wrongPassword)
	})

	clients := []secClient{
		{"franz-go", secFranz},
		{"sarama", secSarama},
		{"kafka-go", secKafkaGo},
		{"kcat", secKcat},
		{"kafka-python", secPython("kafka-python")},
		{"confluent-kafka-python", secPython("confluent")},
		{"kafkajs", secKafkajs},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			for _, cl := range clients {
				t.Run(cl.name, func(t *testing.T) {
					caseStart := time.Now()
					id := strings.ToLower(cl.name + "-" + m.name)
					c := secCase{mode: m, pki: pki, topic: "sec-" + id, group: "g-" + id, prefix: id}
					for i := range secRecords {
						c.values = append(c.values, fmt.Sprintf("%s-%d", c.prefix, i))
					}
					createTopic(t, adm, c.topic, secPartitions, nil)
					before := secRequestCounts(t, metrics)
					got := cl.run(t, c)
					if t.Failed() || t.Skipped() {
						return
					}
					secCheckConsumed(t, got, c.values)
					secCheckCommitted(t, adm, c.topic, c.group)
					secCheckListenerUse(t, before, secRequestCounts(t, metrics), m.listener)
					t.Logf("%s over %s: %d records produced and consumed in a group in %v", cl.name, m.name,
						len(got), time.Since(caseStart).Round(time.Millisecond))
				})
			}
		})
	}

	secCheckNoSecretsLogged(t, b, map[string]string{
		"the SCRAM password": scramPassword, "the PLAIN password": plainPassword,
		"the keystore password": keystorePassword, "a refused password": wrongPassword,
		"the OAUTHBEARER token": token,
	})
	t.Logf("whole test: %v", time.Since(start).Round(time.Millisecond))
}

// secMakePKI makes a CA, the broker's certificate (for 127.0.0.1 and
// localhost) as a PEM keystore and as a PKCS#12 keystore encrypted with
// p12Password, the CA as a PEM truststore and a client certificate for
// alice. It returns the broker's TLS properties but the PKCS#12 password.
func secMakePKI(t *testing.T, dir, p12Password string) (*secPKI, []string) {
	t.Helper()
	ca, err := testpki.NewCA("kbroker-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue("kbroker", testpki.ServerOnly(), testpki.WithHosts("127.0.0.1", "localhost"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue(secUser, testpki.ClientOnly())
	if err != nil {
		t.Fatal(err)
	}
	p := &secPKI{ca: ca, client: client,
		caFile:   filepath.Join(dir, "ca.pem"),
		certFile: filepath.Join(dir, "client-cert.pem"),
		keyFile:  filepath.Join(dir, "client-key.pem"),
	}
	keystorePEM := filepath.Join(dir, "server-keystore.pem")
	keystoreP12 := filepath.Join(dir, "server-keystore.p12")
	for _, err := range []error{
		ca.WriteCAPEM(p.caFile),
		client.WritePEM(p.certFile, p.keyFile),
		server.WriteKeystorePEM(keystorePEM),
		server.WritePKCS12(keystoreP12, p12Password),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return p, []string{
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + keystorePEM,
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + p.caFile,
		"listener.name.sasl_ssl.ssl.keystore.type=PKCS12",
		"listener.name.sasl_ssl.ssl.keystore.location=" + keystoreP12,
	}
}

// secRandom returns 16 random hex digits.
func secRandom(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// startBrokerWithProperties is StartBroker with a properties file (the
// broker's --config) besides the overrides: settings that hold secrets go
// there, because the harness writes each broker's command line into its
// log.
func startBrokerWithProperties(t *testing.T, propsFile string, overrides ...string) *Broker {
	t.Helper()
	if brokerBin == "" {
		t.Fatal("integration: broker binary not set up (TestMain must call setupBinary)")
	}
	dataDir := t.TempDir()
	b := &Broker{t: t, dataDir: dataDir, k: launch.NewKbroker(launch.KbrokerSpec{
		Bin:          brokerBin,
		Attempts:     launch.PortAttempts,
		DataDir:      dataDir,
		Args:         append([]string{"--config", propsFile}, launch.Overrides(overrides...)...),
		Dir:          dataDir,
		LogPath:      filepath.Join(t.TempDir(), "kbroker.log"),
		Timeout:      startTimeout,
		Every:        50 * time.Millisecond,
		ProbeTimeout: 500 * time.Millisecond,
	})}
	t.Cleanup(func() {
		b.killQuietly()
		b.checkLog()
		if t.Failed() {
			b.dumpLog()
		}
	})
	if err := b.k.Start(context.Background()); err != nil {
		t.Fatalf("starting kbroker: %v", err)
	}
	return b
}

// secCreateSCRAMUser creates alice's SCRAM-SHA-512 credential through the
// PLAINTEXT listener (AlterUserScramCredentials).
func secCreateSCRAMUser(t *testing.T, adm *kadm.Client, password string) {
	t.Helper()
	ctx := testContext(t, 15*time.Second)
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: secUser, Mechanism: kadm.ScramSha512, Iterations: secIterations, Password: password},
	})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("AlterUserScramCredentials for %s: %v", secUser, err)
	}
}

// secFranzOpts are franz-go's options for mode m with password pw (m's
// own when pw is "").
func secFranzOpts(m secMode, pki *secPKI, pw string) []kgo.Opt {
	if pw == "" {
		pw = m.password
	}
	opts := []kgo.Opt{kgo.SeedBrokers(m.addr), kgo.RetryTimeout(20 * time.Second)}
	if tc := pki.tlsConfig(m); tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	switch m.mechanism {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: secUser, Pass: pw}.AsMechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: secUser, Pass: pw}.AsSha512Mechanism()))
	case "OAUTHBEARER":
		opts = append(opts, kgo.SASL(oauth.Auth{Token: pw, Extensions: map[string]string{"traceId": "franz-go"}}.AsMechanism()))
	}
	return opts
}

// secOAuthToken is an unsecured JWT for secUser expiring at exp, with the
// given scope items.
func secOAuthToken(t *testing.T, exp time.Time, scope ...string) string {
	t.Helper()
	tok, err := sasl.EncodeUnsecuredJWT(map[string]any{"sub": secUser, "iat": time.Now().Unix() - 1,
		"exp": float64(exp.UnixMilli()) / 1000, "scope": scope})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// secPing sends one Metadata request through m with password pw.
func secPing(m secMode, pki *secPKI, pw string, extra ...kgo.Opt) error {
	opts := append(secFranzOpts(m, pki, pw), kgo.RetryTimeout(2*time.Second))
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err
}

// secCheckRefusals: a wrong password on both SASL listeners, PLAIN on the
// SCRAM-only listener and a client without certificate on the SSL listener
// are all refused, while the right settings pass.
func secCheckRefusals(t *testing.T, modes []secMode, pki *secPKI, wrong string) {
	scramMode, plainMode, sslMode, oauthMode := modes[0], modes[1], modes[2], modes[3]
	plainOnSSL := scramMode
	plainOnSSL.mechanism = "PLAIN"
	noCert := sslMode
	noCert.certAuth = false
	for _, tc := range []struct {
		what string
		m    secMode
		pw   string
		want error  // the Kafka error the refusal must be, or
		text string // what the error must say
	}{
		{"wrong SCRAM-SHA-512 password on SASL_SSL", scramMode, wrong, kerr.SaslAuthenticationFailed, ""},
		{"wrong PLAIN password on SASL_PLAINTEXT", plainMode, wrong, kerr.SaslAuthenticationFailed, ""},
		{"PLAIN on the SCRAM-SHA-512-only SASL_SSL listener", plainOnSSL, "", kerr.UnsupportedSaslMechanism, ""},
		// Kafka's unsecured validator: the JSON status of RFC 7628 is the
		// whole error message.
		{"expired OAUTHBEARER token", oauthMode, secOAuthToken(t, time.Now().Add(-time.Minute), "kafka"), kerr.SaslAuthenticationFailed, `{"status":"invalid_token"}`},
		{"OAUTHBEARER token without the required scope", oauthMode, secOAuthToken(t, time.Now().Add(time.Minute), "other"), kerr.SaslAuthenticationFailed, `{"status":"insufficient_scope", "scope":"[kafka]"}`},
		{"signed OAUTHBEARER token", oauthMode, "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln", kerr.SaslAuthenticationFailed, `{"status":"invalid_token"}`},
		// TLS 1.3's certificate_required alert.
		{"TLS without client certificate on SSL (ssl.client.auth=required)", noCert, "", nil, "certificate required"},
	} {
		err := secPing(tc.m, pki, tc.pw)
		switch {
		case err == nil:
			t.Errorf("%s: accepted, want refused", tc.what)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: %v, want %v", tc.what, err, tc.want)
		case tc.text != "" && !strings.Contains(err.Error(), tc.text):
			t.Errorf("%s: %v, want an error saying %q", tc.what, err, tc.text)
		default:
			t.Logf("%s: refused: %v", tc.what, err)
		}
	}
	for _, m := range modes {
		if err := secPing(m, pki, ""); err != nil {
			t.Errorf("%s with the right settings: %v", m.name, err)
		}
	}
}

// secCheckConsumed: the group consumed each produced value exactly once.
func secCheckConsumed(t *testing.T, got, want []string) {
	t.Helper()
	got, want = slices.Clone(got), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("consumed %d records, want the %d produced, each once (%s)", len(got), len(want), firstDiff(got, want))
	}
}

// secCheckCommitted: the group's committed offsets, read through
// PLAINTEXT, are the end offsets of every partition, which together hold
// the case's records.
func secCheckCommitted(t *testing.T, adm *kadm.Client, topic, group string) {
	t.Helper()
	ends := endOffsets(t, adm, topic)
	var total int64
	for _, e := range ends {
		total += e
	}
	if total != secRecords {
		t.Errorf("%s holds %d records (end offsets %v), want %d", topic, total, ends, secRecords)
	}
	ctx := testContext(t, 15*time.Second)
	committed, err := groupsFetchCommitted(ctx, adm, group, topic)
	if err != nil {
		t.Fatalf("committed offsets of %s: %v", group, err)
	}
	for p, end := range ends {
		if end > 0 && committed[p] != end {
			t.Errorf("group %s committed offset %d on %s/%d, want the end offset %d (all offsets: %v)", group, committed[p], topic, p, end, committed)
		}
	}
}

// secListeners are the broker's listener names.
var secListeners = []string{"PLAINTEXT", "SASL_SSL", "SASL_PLAINTEXT", "SSL"}

// secRequests are the requests a produce-and-consume-in-a-group run makes
// on its listener, as kbroker_requests_total names them.
var secRequests = []string{"Produce", "FetchConsumer", "JoinGroup", "OffsetCommit"}

// secRequestCounts reads kbroker_requests_total of secRequests on every
// listener.
func secRequestCounts(t *testing.T, metrics string) map[string]float64 {
	t.Helper()
	m, err := scrapeMetrics(metrics)
	if err != nil {
		t.Fatalf("scraping %s: %v", metrics, err)
	}
	out := map[string]float64{}
	for _, l := range secListeners {
		for _, r := range secRequests {
			out[l+" "+r] = m[metricKey("kbroker_requests_total", "listener", l, "request", r)]
		}
	}
	return out
}

// secCheckListenerUse: the case's requests arrived on its listener, none
// on the others.
func secCheckListenerUse(t *testing.T, before, after map[string]float64, listener string) {
	t.Helper()
	for _, l := range secListeners {
		for _, r := range secRequests {
			d := after[l+" "+r] - before[l+" "+r]
			if l == listener && d == 0 {
				t.Errorf("no %s request arrived on %s during the case", r, l)
			}
			if l != listener && d != 0 {
				t.Errorf("%v %s requests arrived on %s during a case on %s", d, r, l, listener)
			}
		}
	}
}

// secCheckNoSecretsLogged: the broker's output (command lines included)
// holds none of the passwords.
func secCheckNoSecretsLogged(t *testing.T, b *Broker, secrets map[string]string) {
	t.Helper()
	data, err := os.ReadFile(b.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	for what, s := range secrets {
		if bytes.Contains(data, []byte(s)) {
			t.Errorf("the broker's output %s holds %s", b.LogPath(), what)
		}
	}
}

// ---- franz-go ----

func secFranz(t *testing.T, c secCase) []string {
	ctx := testContext(t, secTimeout)
	opts := secFranzOpts(c.mode, c.pki, "")
	prod, err := kgo.NewClient(append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var recs []*kgo.Record
	for _, v := range c.values {
		recs = append(recs, &kgo.Record{Topic: c.topic, Key: []byte(v), Value: []byte(v)})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("franz-go produce: %v", err)
	}
	cons, err := kgo.NewClient(append(opts, kgo.ConsumerGroup(c.group), kgo.ConsumeTopics(c.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	for len(got) < len(c.values) {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("franz-go group consumed %d of %d records: %v", len(got), len(c.values), err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("franz-go fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("franz-go commit: %v", err)
	}
	return got
}

// ---- IBM/sarama ----

// saramaSCRAM is sarama's SCRAM client over xdg-go/scram, as sarama's
// examples make it (sarama brings none of its own).
type saramaSCRAM struct {
	hash xdgscram.HashGeneratorFcn
	conv *xdgscram.ClientConversation
}

func (s *saramaSCRAM) Begin(user, password, authzID string) error {
	c, err := s.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

func (s *saramaSCRAM) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *saramaSCRAM) Done() bool                            { return s.conv.Done() }

func secSaramaConfig(c secCase) *sarama.Config {
	cfg := saramaConfig()
	if tc := c.pki.tlsConfig(c.mode); tc != nil {
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = tc
	}
	if c.mode.sasl() {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Handshake = true
		cfg.Net.SASL.User = secUser
		cfg.Net.SASL.Password = c.mode.password
		switch c.mode.mechanism {
		case "PLAIN":
			cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		case "SCRAM-SHA-512":
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient {
				return &saramaSCRAM{hash: xdgscram.SHA512}
			}
		case "OAUTHBEARER":
			cfg.Net.SASL.Mechanism = sarama.SASLTypeOAuth
			cfg.Net.SASL.TokenProvider = saramaToken(c.mode.password)
		}
	}
	return cfg
}

// saramaToken gives sarama one OAUTHBEARER token.
type saramaToken string

func (s saramaToken) Token() (*sarama.AccessToken, error) {
	return &sarama.AccessToken{Token: string(s), Extensions: map[string]string{"traceId": "sarama"}}, nil
}

// saramaGroupHandler marks every message it is given and, once want of
// them were marked, commits synchronously and closes done.
type saramaGroupHandler struct {
	want   int64
	n      atomic.Int64
	values chan string
	done   chan struct{}
	once   sync.Once
}

func (h *saramaGroupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaGroupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaGroupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			sess.MarkMessage(msg, "")
			select {
			case h.values <- string(msg.Value):
			case <-sess.Context().Done():
				return nil
			}
			// Marks happen before the count: when it reaches want,
			// every consumed message is marked.
			if h.n.Add(1) == h.want {
				sess.Commit()
				h.once.Do(func() { close(h.done) })
			}
		case <-sess.Context().Done():
			return nil
		}
	}
}

func secSarama(t *testing.T, c secCase) []string {
	cfg := secSaramaConfig(c)
	p, err := sarama.NewSyncProducer([]string{c.mode.addr}, cfg)
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	var msgs []*sarama.ProducerMessage
	for _, v := range c.values {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: c.topic, Key: sarama.StringEncoder(v), Value: sarama.StringEncoder(v)})
	}
	err = bounded(secTimeout, "sarama SendMessages", func() error { return p.SendMessages(msgs) })
	_ = bounded(10*time.Second, "sarama producer close", p.Close)
	if err != nil {
		t.Fatalf("sarama SendMessages: %v", firstSaramaError(err))
	}

	ccfg := secSaramaConfig(c)
	ccfg.Consumer.Offsets.AutoCommit.Enable = false
	ccfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	ccfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	g, err := sarama.NewConsumerGroup([]string{c.mode.addr}, c.group, ccfg)
	if err != nil {
		t.Fatalf("sarama consumer group: %v", err)
	}
	defer func() { _ = bounded(10*time.Second, "sarama consumer group close", g.Close) }()
	h := &saramaGroupHandler{want: int64(len(c.values)), values: make(chan string, len(c.values)*2),
		done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), secTimeout)
	defer cancel()
	consumed := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{c.topic}, h); err != nil && ctx.Err() == nil {
				consumed <- err
				return
			}
		}
		consumed <- nil
	}()
	var got []string
	for done := false; !done; {
		select {
		case v := <-h.values:
			got = append(got, v)
		case <-h.done:
			done = true
		case err := <-g.Errors():
			t.Fatalf("sarama consumer group: %v", err)
		case err := <-consumed:
			t.Fatalf("sarama Consume ended after %d of %d records: %v", len(got), len(c.values), err)
		case <-ctx.Done():
			t.Fatalf("sarama group consumed %d of %d records within %v", len(got), len(c.values), secTimeout)
		}
	}
	for len(h.values) > 0 {
		got = append(got, <-h.values)
	}
	cancel()
	select {
	case err := <-consumed:
		if err != nil {
			t.Fatalf("sarama Consume: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("sarama Consume did not return within 15s of its context's end")
	}
	return got
}

// ---- segmentio/kafka-go ----

func secKafkaGoMechanism(t *testing.T, m secMode) kgosasl.Mechanism {
	switch m.mechanism {
	case "PLAIN":
		return kgoplain.Mechanism{Username: secUser, Password: m.password}
	case "SCRAM-SHA-512":
		mech, err := kgoscram.Mechanism(kgoscram.SHA512, secUser, m.password)
		if err != nil {
			t.Fatal(err)
		}
		return mech
	case "OAUTHBEARER":
		return kafkaGoOAuth(m.password)
	}
	return nil
}

// kafkaGoOAuth is OAUTHBEARER for kafka-go, which brings PLAIN, SCRAM and
// AWS IAM only: RFC 7628's client first message with the token; an error
// challenge ends the attempt.
type kafkaGoOAuth string

func (kafkaGoOAuth) Name() string { return "OAUTHBEARER" }

func (m kafkaGoOAuth) Start(context.Context) (kgosasl.StateMachine, []byte, error) {
	return m, []byte("n,,\x01auth=Bearer " + string(m) + "\x01\x01"), nil
}

func (kafkaGoOAuth) Next(_ context.Context, challenge []byte) (bool, []byte, error) {
	if len(challenge) > 0 {
		return false, nil, fmt.Errorf("OAUTHBEARER refused: %s", challenge)
	}
	return true, nil, nil
}

func secKafkaGo(t *testing.T, c secCase) []string {
	ctx := testContext(t, secTimeout)
	tc := c.pki.tlsConfig(c.mode)
	mech := secKafkaGoMechanism(t, c.mode)
	tr := &kafka.Transport{DialTimeout: 5 * time.Second, TLS: tc, SASL: mech}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{
		Addr:         kafka.TCP(c.mode.addr),
		Transport:    tr,
		Topic:        c.topic,
		Balancer:     &kafka.Hash{},
		BatchTimeout: 5 * time.Millisecond,
		RequiredAcks: kafka.RequireAll,
		WriteTimeout: 30 * time.Second,
	}
	var msgs []kafka.Message
	for _, v := range c.values {
		msgs = append(msgs, kafka.Message{Key: []byte(v), Value: []byte(v)})
	}
	err := w.WriteMessages(ctx, msgs...)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("kafka-go write: %v", err)
	}

	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           []string{c.mode.addr},
		GroupID:           c.group,
		Topic:             c.topic,
		Dialer:            &kafka.Dialer{Timeout: 5 * time.Second, TLS: tc, SASLMechanism: mech},
		StartOffset:       kafka.FirstOffset,
		MinBytes:          1,
		MaxBytes:          1 << 20,
		MaxWait:           200 * time.Millisecond,
		HeartbeatInterval: 500 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
	})
	defer func() {
		if err := r.Close(); err != nil {
			t.Errorf("kafka-go Reader.Close: %v", err)
		}
	}()
	var got []string
	var fetched []kafka.Message
	for len(got) < len(c.values) {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go group fetch after %d of %d records: %v", len(got), len(c.values), err)
		}
		got = append(got, string(m.Value))
		fetched = append(fetched, m)
	}
	// CommitInterval 0: CommitMessages commits synchronously.
	if err := r.CommitMessages(ctx, fetched...); err != nil {
		t.Fatalf("kafka-go commit: %v", err)
	}
	return got
}

// ---- kcat (librdkafka) ----

// secKcatConfig writes mode m's librdkafka properties to a file for kcat -F,
// so the password is on no command line.
func secKcatConfig(t *testing.T, c secCase) string {
	t.Helper()
	lines := []string{"security.protocol=" + c.mode.listener}
	switch {
	case c.mode.mechanism == "OAUTHBEARER":
		// librdkafka makes the unsecured JWT itself.
		lines = append(lines, "sasl.mechanisms=OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt=true",
			"sasl.oauthbearer.config=principal="+secUser+" scope=kafka extension_traceId=kcat")
	case c.mode.sasl():
		lines = append(lines, "sasl.mechanisms="+c.mode.mechanism, "sasl.username="+secUser, "sasl.password="+c.mode.password)
	}
	if c.mode.tls() {
		lines = append(lines, "ssl.ca.location="+c.pki.caFile, "ssl.endpoint.identification.algorithm=https")
		if c.mode.certAuth {
			lines = append(lines, "ssl.certificate.location="+c.pki.certFile, "ssl.key.location="+c.pki.keyFile)
		}
	}
	path := filepath.Join(t.TempDir(), "kcat.conf")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func secKcat(t *testing.T, c secCase) []string {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed (scripts/test.sh installs it)")
	}
	conf := secKcatConfig(t, c)
	var in strings.Builder
	for _, v := range c.values {
		in.WriteString(v + ":" + v + "\n")
	}
	ctx, cancel := context.WithTimeout(context.Background(), secTimeout)
	defer cancel()
	stderr := &kcatStderr{cancel: cancel}
	cmd := exec.CommandContext(ctx, "kcat", "-F", conf, "-b", c.mode.addr, "-P", "-t", c.topic, "-K:",
		"-X", "acks=all", "-X", "linger.ms=5", "-X", "message.timeout.ms=30000")
	cmd.Stdin = strings.NewReader(in.String())
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil || stderr.failed() {
		t.Fatalf("kcat -P: %v\n%s", err, stderr.tail())
	}

	// A balanced consumer (-G) that exits after the case's records; its
	// close commits the offsets librdkafka stored for the records it
	// returned.
	stderr = &kcatStderr{cancel: cancel}
	var stdout bytes.Buffer
	cmd = exec.CommandContext(ctx, "kcat", "-F", conf, "-b", c.mode.addr, "-G", c.group, "-q", "-u",
		"-c", strconv.Itoa(len(c.values)), "-f", `R %s\n`,
		"-X", "auto.offset.reset=earliest", "-X", "fetch.wait.max.ms=200",
		"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500", c.topic)
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Run(); err != nil || stderr.failed() {
		t.Fatalf("kcat -G: %v (%d bytes of records read)\n%s", err, stdout.Len(), stderr.tail())
	}
	var got []string
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "R ")
		if !ok {
			t.Fatalf("kcat -G printed %q", sc.Text())
		}
		got = append(got, v)
	}
	return got
}

// ---- kafka-python, confluent-kafka-python, kafkajs ----

// secScriptEnv is the environment integration/py/security_client.py and
// integration/js/security_client.js read their security settings from.
func secScriptEnv(c secCase) []string {
	env := append(os.Environ(), "KB_PROTOCOL="+c.mode.listener)
	switch {
	case c.mode.mechanism == "OAUTHBEARER":
		env = append(env, "KB_MECHANISM=OAUTHBEARER", "KB_USER="+secUser, "KB_TOKEN="+c.mode.password)
	case c.mode.sasl():
		env = append(env, "KB_MECHANISM="+c.mode.mechanism, "KB_USER="+secUser, "KB_PASSWORD="+c.mode.password)
	}
	if c.mode.tls() {
		env = append(env, "KB_CA="+c.pki.caFile)
		if c.mode.certAuth {
			env = append(env, "KB_CERT="+c.pki.certFile, "KB_KEY="+c.pki.keyFile)
		}
	}
	return env
}

func secPython(lib string) func(t *testing.T, c secCase) []string {
	return func(t *testing.T, c secCase) []string {
		py := "/usr/bin/python3"
		module, pkg := "kafka", "python3-kafka"
		if lib == "confluent" {
			module, pkg = "confluent_kafka", "python3-confluent-kafka"
		}
		if exec.Command(py, "-c", "import "+module).Run() != nil {
			t.Skipf("%s not installed (apt-get install -y %s)", pkg, pkg)
		}
		script, err := filepath.Abs(filepath.Join("py", "security_client.py"))
		if err != nil {
			t.Fatal(err)
		}
		ctx := testContext(t, 2*secTimeout)
		cmd := exec.CommandContext(ctx, py, "-u", script, lib, c.mode.addr, c.topic, c.group,
			strconv.Itoa(len(c.values)), c.prefix)
		cmd.Env = secScriptEnv(c)
		got, _ := runTxnScript(t, cmd)
		return got
	}
}

func secKafkajs(t *testing.T, c secCase) []string {
	dir := groupsJSDir(t)
	ctx := testContext(t, 2*secTimeout)
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "security_client.js"), c.mode.addr, c.topic, c.group,
		strconv.Itoa(len(c.values)), c.prefix)
	cmd.Dir = dir
	cmd.Env = secScriptEnv(c)
	got, _ := runTxnScript(t, cmd)
	return got
}
