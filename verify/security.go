package verify

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kbroker/kbroker/internal/launch"
	"github.com/kbroker/kbroker/internal/testpki"
)

// Security modes (Options.Security, kverify --security).
const (
	SecurityPlaintext = "plaintext" // one PLAINTEXT listener per broker (the default)
	SecuritySASLSSL   = "sasl_ssl"  // one SASL_SSL listener per broker, inter-broker too
)

// SASL mechanisms of the workload clients under SecuritySASLSSL
// (Options.SASLMechanism, kverify --sasl-mechanism).
const (
	MechanismPlain  = "PLAIN"
	MechanismSCRAM  = "SCRAM-SHA-512"
	scramIterations = 4096 // Kafka's minimum
)

// Security is how every broker's listener is secured and what kverify's
// clients bring to reach it. A nil *Security is plaintext: its methods
// then add nothing.
//
// Under SASL_SSL every broker has a single SASL_SSL listener, which the
// other brokers also use (PLAIN as "broker"), with a server certificate
// for 127.0.0.1 and localhost from a CA made for the run. The proxies
// relay TLS unchanged, and everybody dials them at 127.0.0.1 (the
// advertised addresses), which the certificate names. kverify's own
// clients (admin, readiness probes) log in with PLAIN as "kverify"; the
// workload's (producers, consumers, kcat, the final read) with Mechanism
// as the same user, whose SCRAM credential CreateUser stores through a
// broker.
type Security struct {
	Mechanism string

	caFile, keystore string
	tls              *tls.Config
	user, password   string
	brokerPassword   string
	kcatConfig       string // kcat -F file with the SASL_SSL settings
}

// NewSecurity makes mode's key material and settings in dir: nil for
// plaintext ("" too).
func NewSecurity(mode, mechanism, dir string) (*Security, error) {
	switch mode {
	case "", SecurityPlaintext:
		return nil, nil
	case SecuritySASLSSL:
	default:
		return nil, fmt.Errorf("unknown security mode %q (want %s or %s)", mode, SecurityPlaintext, SecuritySASLSSL)
	}
	switch mechanism {
	case "":
		mechanism = MechanismSCRAM
	case MechanismPlain, MechanismSCRAM:
	default:
		return nil, fmt.Errorf("unknown SASL mechanism %q (want %s or %s)", mechanism, MechanismPlain, MechanismSCRAM)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := testpki.NewCA("kverify CA")
	if err != nil {
		return nil, err
	}
	// Clients and brokers dial the proxies at 127.0.0.1.
	server, err := ca.Issue("kbroker", testpki.WithHosts("127.0.0.1", "localhost"))
	if err != nil {
		return nil, err
	}
	s := &Security{
		Mechanism: mechanism,
		caFile:    filepath.Join(dir, "ca.pem"),
		keystore:  filepath.Join(dir, "broker.pem"),
		tls:       &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12},
		user:      "kverify",
	}
	if err := server.WriteKeystorePEM(s.keystore); err != nil {
		return nil, err
	}
	if err := ca.WriteCAPEM(s.caFile); err != nil {
		return nil, err
	}
	if s.password, err = secret(); err != nil {
		return nil, err
	}
	if s.brokerPassword, err = secret(); err != nil {
		return nil, err
	}
	// The password stays out of kcat's command line.
	s.kcatConfig = filepath.Join(dir, "kcat.conf")
	conf := strings.Join([]string{
		"security.protocol=SASL_SSL",
		"sasl.mechanisms=" + mechanism,
		"sasl.username=" + s.user,
		"sasl.password=" + s.password,
		"ssl.ca.location=" + s.caFile,
	}, "\n") + "\n"
	if err := os.WriteFile(s.kcatConfig, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	return s, nil
}

func secret() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// Name is the mode's name, as --security takes it.
func (s *Security) Name() string {
	if s == nil {
		return SecurityPlaintext
	}
	return SecuritySASLSSL
}

// String describes the mode for the report.
func (s *Security) String() string {
	if s == nil {
		return "PLAINTEXT listeners"
	}
	return fmt.Sprintf("SASL_SSL listeners only (inter-broker PLAIN over TLS; admin clients PLAIN, workload clients %s)", s.Mechanism)
}

// Protocol is the listener's security protocol.
func (s *Security) Protocol() string {
	if s == nil {
		return "PLAINTEXT"
	}
	return "SASL_SSL"
}

// BrokerSettings are the broker settings after listeners=PLAINTEXT://
// (which launch.Kbroker adds, and the first of them replaces).
func (s *Security) BrokerSettings() []string {
	if s == nil {
		return nil
	}
	return []string{
		"listeners=SASL_SSL://{addr}",
		"inter.broker.listener.name=SASL_SSL",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol=PLAIN",
		fmt.Sprintf(`listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="%s" user_broker="%s" user_%s="%s";`,
			s.brokerPassword, s.brokerPassword, s.user, s.password),
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + s.keystore,
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + s.caFile,
	}
}

func (s *Security) opts(m sasl.Mechanism, more []kgo.Opt) []kgo.Opt {
	if s == nil {
		return more
	}
	return append([]kgo.Opt{kgo.DialTLSConfig(s.tls.Clone()), kgo.SASL(m)}, more...)
}

// Admin returns more after the options of kverify's own clients (admin
// requests, readiness probes): TLS and PLAIN.
func (s *Security) Admin(more ...kgo.Opt) []kgo.Opt {
	if s == nil {
		return more
	}
	return s.opts(plain.Auth{User: s.user, Pass: s.password}.AsMechanism(), more)
}

// Client returns more after the workload clients' options: TLS and
// Mechanism.
func (s *Security) Client(more ...kgo.Opt) []kgo.Opt {
	if s == nil {
		return more
	}
	if s.Mechanism == MechanismSCRAM {
		return s.opts(scram.Auth{User: s.user, Pass: s.password}.AsSha512Mechanism(), more)
	}
	return s.Admin(more...)
}

// AcksAllProducer is the franz-go producer every workload writes with:
// idempotent acks=all to topic, records placed on their partition by the
// caller, delivery given up after 10 s (so an error is indefinite: it
// retried first), at most 1,000 records buffered. rec gets a warning
// whenever franz-go meets OUT_OF_ORDER_SEQUENCE_NUMBER or
// UNKNOWN_PRODUCER_ID: it then starts a new epoch and may write batches in
// flight a second time, so duplicates in the report come with their cause.
func (s *Security) AcksAllProducer(seeds []string, topic string, rec *Recorder, name string) (*kgo.Client, error) {
	return kgo.NewClient(s.Client(
		kgo.ProducerOnDataLossDetected(func(topic string, partition int32) {
			rec.Add(Event{Kind: KindPhase, Detail: fmt.Sprintf("warning: %s: franz-go detected data loss on %s partition %d (an out-of-order sequence or unknown producer answer): it resets its producer epoch and may write in-flight batches again", name, topic, partition)})
		}),
		kgo.SeedBrokers(seeds...),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(10*time.Second),
		kgo.ProduceRequestTimeout(3*time.Second),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.MaxBufferedRecords(1000),
	)...)
}

// KcatArgs are kcat's arguments for the workload's mechanism.
func (s *Security) KcatArgs() []string {
	if s == nil {
		return nil
	}
	return []string{"-F", s.kcatConfig}
}

// Probe tells whether a broker is ready: under plaintext that it accepts
// connections (as kverify always had it); else that a client logs in over
// TLS and gets metadata.
func (s *Security) Probe() func(addr string, timeout time.Duration) error {
	if s == nil {
		return launch.Accepts
	}
	return launch.KafkaPingWith(s.Admin()...)
}

// CreateUser stores the workload user's SCRAM credential through a broker
// (AlterUserScramCredentials) and waits until each of seeds accepts a
// login with it. Nothing to do unless the workload uses SCRAM.
func (s *Security) CreateUser(ctx context.Context, seeds []string, within time.Duration) error {
	if s == nil || s.Mechanism != MechanismSCRAM {
		return nil
	}
	cl, err := kgo.NewClient(s.Admin(kgo.SeedBrokers(seeds...))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := waitFor(ctx, within, func() error {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		res, err := adm.AlterUserSCRAMs(rctx, nil, []kadm.UpsertSCRAM{
			{User: s.user, Mechanism: kadm.ScramSha512, Iterations: scramIterations, Password: s.password},
		})
		if err == nil {
			err = res.Error()
		}
		return err
	}); err != nil {
		return fmt.Errorf("AlterUserScramCredentials for %s: %w", s.user, err)
	}
	ping := launch.KafkaPingWith(s.Client()...)
	return waitFor(ctx, within, func() error {
		var errs []error
		for _, addr := range seeds {
			if err := ping(addr, 2*time.Second); err != nil {
				errs = append(errs, fmt.Errorf("%s login at %s: %w", s.Mechanism, addr, err))
			}
		}
		return errors.Join(errs...)
	})
}
