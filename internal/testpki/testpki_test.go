package testpki

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

// handshake runs a TLS handshake over loopback TCP and returns the
// server's connection state and both sides' errors.
func handshake(t *testing.T, server, client *tls.Config) (tls.ConnectionState, error, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		state tls.ConnectionState
		err   error
	}
	done := make(chan result, 1)
	go func() {
		sc, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer sc.Close()
		srv := tls.Server(sc, server)
		err = srv.HandshakeContext(ctx)
		if err == nil {
			_, err = srv.Write([]byte{1})
		}
		done <- result{srv.ConnectionState(), err}
	}()
	var d net.Dialer
	cc, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cli := tls.Client(cc, client)
	cerr := cli.HandshakeContext(ctx)
	if cerr == nil {
		// A TLS 1.3 server judges the client's certificate after the
		// client's handshake returns: its byte says it accepted.
		_ = cli.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, cerr = cli.Read(make([]byte, 1))
	}
	r := <-done
	return r.state, r.err, cerr
}

// A server leaf and a client leaf of the same CA complete a mutual TLS
// handshake, the server seeing the client's subject.
func TestMutualTLS(t *testing.T) {
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	inter, err := ca.Intermediate("test-intermediate")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		issuer *CA
		opts   []Option
	}{
		{"ecdsa", ca, nil},
		{"rsa", ca, []Option{WithRSA(2048)}},
		{"intermediate", inter, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srvLeaf, err := tc.issuer.Issue("broker", append([]Option{ServerOnly()}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			cliLeaf, err := tc.issuer.Issue("alice", append([]Option{ClientOnly(), WithOrganization("acme"), WithOrganizationalUnit("eng")}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			server := &tls.Config{
				Certificates: []tls.Certificate{srvLeaf.TLSCertificate()},
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    ca.Pool(),
			}
			client := &tls.Config{
				Certificates: []tls.Certificate{cliLeaf.TLSCertificate()},
				RootCAs:      ca.Pool(),
				ServerName:   "localhost",
			}
			st, serr, cerr := handshake(t, server, client)
			if serr != nil || cerr != nil {
				t.Fatalf("handshake: server %v, client %v", serr, cerr)
			}
			if len(st.PeerCertificates) == 0 {
				t.Fatal("server saw no client certificate")
			}
			if got, want := st.PeerCertificates[0].Subject.String(), "CN=alice,OU=eng,O=acme"; got != want {
				t.Errorf("client subject %q, want %q", got, want)
			}
			_, rsaKey := srvLeaf.Key.(*rsa.PrivateKey)
			if rsaKey != (tc.opts != nil) {
				t.Errorf("server key %T", srvLeaf.Key)
			}
		})
	}
}

// Usage options decide extended key usages and alternative names.
func TestLeafUsage(t *testing.T) {
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		opts      []Option
		wantEKU   []x509.ExtKeyUsage
		wantIPs   int
		wantNames []string
	}{
		{"default", nil, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, 1, []string{"localhost"}},
		{"server", []Option{ServerOnly()}, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, 1, []string{"localhost"}},
		{"client", []Option{ClientOnly()}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, 0, nil},
		{"hosts", []Option{WithHosts("broker-1.test", "::1")}, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, 1, []string{"broker-1.test"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := ca.Issue("x", tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(l.Cert.ExtKeyUsage, tc.wantEKU) {
				t.Errorf("ExtKeyUsage %v, want %v", l.Cert.ExtKeyUsage, tc.wantEKU)
			}
			if len(l.Cert.IPAddresses) != tc.wantIPs || !slices.Equal(l.Cert.DNSNames, tc.wantNames) {
				t.Errorf("SANs %v %v, want %d IPs and %v", l.Cert.IPAddresses, l.Cert.DNSNames, tc.wantIPs, tc.wantNames)
			}
		})
	}
}

// The written files decode as what they claim to be.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	l, err := ca.Issue("broker")
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := l.WritePEM(certPath, keyPath); err != nil {
		t.Fatal(err)
	}
	if _, err := tls.LoadX509KeyPair(certPath, keyPath); err != nil {
		t.Errorf("PEM pair: %v", err)
	}
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode: %v %v", fi, err)
	}

	ksPath := filepath.Join(dir, "ks.p12")
	if err := l.WritePKCS12(ksPath, "changeit"); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(ksPath)
	_, cert, cas, err := pkcs12.DecodeChain(data, "changeit")
	if err != nil || cert.SerialNumber.Cmp(l.Cert.SerialNumber) != 0 || len(cas) != 1 {
		t.Errorf("PKCS#12 keystore: %v (%d CAs)", err, len(cas))
	}

	for _, pw := range []string{"changeit", ""} {
		tsPath := filepath.Join(dir, "ts-"+pw+".p12")
		if err := ca.WritePKCS12Truststore(tsPath, pw); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(tsPath)
		certs, err := pkcs12.DecodeTrustStore(data, pw)
		if err != nil || len(certs) != 1 || !certs[0].Equal(ca.Cert) {
			t.Errorf("PKCS#12 truststore with password %q: %v", pw, err)
		}
	}
}
