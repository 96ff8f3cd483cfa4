package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"time"

	"github.com/kbroker/kbroker/internal/launch"
	"github.com/kbroker/kbroker/internal/testpki"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security protocols of --security: the listener the producer and the
// consumer connect to.
const (
	secPlaintext = "plaintext"
	secSSL       = "ssl"
	secSASLSSL   = "sasl_ssl"
)

// The SCRAM-SHA-512 user kbench creates on a secured kbroker, with 4096
// iterations, Kafka's minimum and the client's cost at each login.
const (
	scramUser       = "kbench"
	scramIterations = 4096
)

// secured is what the clients need of a kbroker that kbench started with
// secured listeners besides PLAINTEXT (which stays for the readiness probe
// and, without --acls' admin listener, for creating the SCRAM user): their
// addresses, the throwaway CA that signed the broker's certificate and the
// SCRAM user's password.
type secured struct {
	sslAddr     string
	saslSSLAddr string
	ca          *testpki.CA
	password    string
}

// securedPKI makes a throwaway CA and a server certificate for 127.0.0.1
// in dir, as the PEM keystore (key and chain in one file) and PEM
// truststore that kbroker reads, and returns the CA and the broker's TLS
// settings.
func securedPKI(dir string) (*testpki.CA, []string, error) {
	ca, err := testpki.NewCA("kbench-ca")
	if err != nil {
		return nil, nil, err
	}
	server, err := ca.Issue("kbroker", testpki.ServerOnly(), testpki.WithHosts("127.0.0.1", "localhost"))
	if err != nil {
		return nil, nil, err
	}
	keystore := filepath.Join(dir, "server-keystore.pem")
	truststore := filepath.Join(dir, "ca.pem")
	if err := server.WriteKeystorePEM(keystore); err != nil {
		return nil, nil, err
	}
	if err := ca.WriteCAPEM(truststore); err != nil {
		return nil, nil, err
	}
	return ca, []string{
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + keystore,
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + truststore,
	}, nil
}

// newPassword returns a random SCRAM password.
func newPassword() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// tlsConfig trusts only the throwaway CA. ServerName is left empty: kgo
// fills it in from the address it dials (127.0.0.1, in the certificate).
func (s *secured) tlsConfig() *tls.Config {
	return &tls.Config{RootCAs: s.ca.Pool(), MinVersion: tls.VersionTLS12}
}

// listener returns the address of the listener for security and the kgo
// options that connect to it.
func (s *secured) listener(security, plaintext string) (string, []kgo.Opt) {
	switch security {
	case secSSL:
		return s.sslAddr, []kgo.Opt{kgo.DialTLSConfig(s.tlsConfig())}
	case secSASLSSL:
		return s.saslSSLAddr, []kgo.Opt{
			kgo.DialTLSConfig(s.tlsConfig()),
			kgo.SASL(scram.Auth{User: scramUser, Pass: s.password}.AsSha512Mechanism()),
		}
	}
	return plaintext, nil
}

// createUser creates the SCRAM-SHA-512 user through a client with opts
// (seed brokers included: PLAINTEXT, or the admin listener) and waits
// until it can log in on SASL_SSL (a broker may apply
// AlterUserScramCredentials asynchronously, as Kafka does).
func (s *secured) createUser(ctx context.Context, opts []kgo.Opt, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: scramUser, Mechanism: kadm.ScramSha512, Iterations: scramIterations, Password: s.password},
	})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		return fmt.Errorf("creating SCRAM user %s: %w", scramUser, err)
	}
	addr, sopts := s.listener(secSASLSSL, "")
	ping := launch.KafkaPingWith(sopts...)
	if err := launch.WaitReady(ctx, nil, 20*time.Millisecond, func() error { return ping(addr, probeTimeout) }); err != nil {
		return fmt.Errorf("SCRAM user %s cannot log in on SASL_SSL %s: %w", scramUser, addr, err)
	}
	return nil
}
