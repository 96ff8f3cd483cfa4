package tlsconf

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/testpki"
)

// result is one side of a test handshake.
type result struct {
	state tls.ConnectionState
	err   error
}

// handshake connects a client to a server over loopback TCP (not
// net.Pipe, on which both sides writing at once, as in a resumed TLS 1.3
// handshake, deadlock). The server writes a byte once its handshake
// succeeds and the client reads it, so that a TLS 1.3 server refusing the
// client's certificate, which it does after the client's handshake
// returned, fails the client too.
func handshake(t *testing.T, server, client *tls.Config) (srv, cli result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan result, 1)
	go func() {
		sc, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer sc.Close()
		conn := tls.Server(sc, server)
		err = conn.HandshakeContext(ctx)
		if err == nil {
			_, err = conn.Write([]byte{1})
		}
		done <- result{conn.ConnectionState(), err}
	}()
	var d net.Dialer
	cc, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn := tls.Client(cc, client)
	err = conn.HandshakeContext(ctx)
	if err == nil {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = conn.Read(make([]byte, 1))
	}
	cli = result{conn.ConnectionState(), err}
	cc.Close()
	return <-done, cli
}

// pki is a CA with a broker and a client certificate.
type pki struct {
	ca     *testpki.CA
	broker *testpki.Leaf
	client *testpki.Leaf
}

func newPKI(t *testing.T) pki {
	t.Helper()
	ca, err := testpki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	broker, err := ca.Issue("broker-1", testpki.WithOrganization("acme"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue("alice", testpki.ClientOnly(), testpki.WithOrganization("acme"), testpki.WithOrganizationalUnit("eng"))
	if err != nil {
		t.Fatal(err)
	}
	return pki{ca: ca, broker: broker, client: client}
}

// clientOf returns a client configuration that trusts the CA and presents
// leaf, if not nil.
func clientOf(ca *testpki.CA, leaf *testpki.Leaf) *tls.Config {
	c := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
	if leaf != nil {
		c.Certificates = []tls.Certificate{leaf.TLSCertificate()}
	}
	return c
}

// inline is the settings of a PEM keystore and truststore given inline.
func inline(leaf *testpki.Leaf, ca *testpki.CA) Settings {
	return Settings{
		KeystoreType:             "PEM",
		KeystoreKey:              leaf.KeyPEM(),
		KeystoreCertificateChain: leaf.ChainPEM(),
		TruststoreType:           "PEM",
		TruststoreCertificates:   ca.CertPEM(),
	}
}

// with returns s with more settings.
func with(s Settings, kv ...string) Settings {
	out := Settings{}
	for k, v := range s {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// logBuffer collects a logger's output across goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, nil)), b
}

// fakeClock is a clock the test moves.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
