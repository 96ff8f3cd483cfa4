package tlsconf

import (
	"crypto/tls"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/testpki"
)

// A replaced keystore file is served from the first handshake after the
// next check; a broken one is logged once and the previous certificate
// stays; a fixed one is picked up again. For each keystore file form.
func TestReloadKeystore(t *testing.T) {
	p := newPKI(t)
	for _, tc := range []struct {
		name     string
		settings func(path string) Settings
		write    func(l *testpki.Leaf, path string) error
	}{
		{"pem",
			func(path string) Settings { return Settings{KeystoreType: "PEM", KeystoreLocation: path} },
			func(l *testpki.Leaf, path string) error { return l.WriteKeystorePEM(path) }},
		{"pkcs12",
			func(path string) Settings { return Settings{KeystoreLocation: path, KeystorePassword: "pw"} },
			func(l *testpki.Leaf, path string) error { return l.WritePKCS12(path, "pw") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "keystore")
			// replace writes a file and moves its modification time on,
			// as a later write would on a file system with coarse times.
			step := 0
			replace := func(write func() error) {
				t.Helper()
				if err := write(); err != nil {
					t.Fatal(err)
				}
				step++
				mt := time.Now().Add(time.Duration(step) * time.Minute)
				if err := os.Chtimes(path, mt, mt); err != nil {
					t.Fatal(err)
				}
			}
			issue := func() *testpki.Leaf {
				t.Helper()
				l, err := p.ca.Issue("broker-1")
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			served := func(srv *Server) *big.Int {
				t.Helper()
				sr, cr := handshake(t, srv.Config(), clientOf(p.ca, nil))
				if sr.err != nil || cr.err != nil {
					t.Fatalf("handshake: server %v, client %v", sr.err, cr.err)
				}
				return cr.state.PeerCertificates[0].SerialNumber
			}

			first, second, third := issue(), issue(), issue()
			replace(func() error { return tc.write(first, path) })
			clock := newFakeClock()
			logger, logs := newLogger()
			srv, err := newServer(tc.settings(path), logger, clock.Now)
			if err != nil {
				t.Fatal(err)
			}
			if got := served(srv); got.Cmp(first.Cert.SerialNumber) != 0 {
				t.Fatalf("serving serial %v, want %v", got, first.Cert.SerialNumber)
			}

			replace(func() error { return tc.write(second, path) })
			if got := served(srv); got.Cmp(first.Cert.SerialNumber) != 0 {
				t.Errorf("reloaded before a second passed")
			}
			clock.Advance(checkEvery)
			if got := served(srv); got.Cmp(second.Cert.SerialNumber) != 0 {
				t.Errorf("after the file changed: serving serial %v, want %v", got, second.Cert.SerialNumber)
			}
			if l := logs.String(); !strings.Contains(l, "reloaded TLS keystore") || !strings.Contains(l, path) {
				t.Errorf("no reload logged with the file:\n%s", l)
			}

			replace(func() error { return os.WriteFile(path, []byte("half written"), 0o600) })
			for range 3 {
				clock.Advance(checkEvery)
				if got := served(srv); got.Cmp(second.Cert.SerialNumber) != 0 {
					t.Errorf("after a broken file: serving serial %v, want the previous %v", got, second.Cert.SerialNumber)
				}
			}
			if n := strings.Count(logs.String(), "reloading TLS stores failed"); n != 1 {
				t.Errorf("failed reload logged %d times, want once:\n%s", n, logs.String())
			}
			if strings.Contains(logs.String(), `"pw"`) || strings.Contains(logs.String(), "=pw ") {
				t.Errorf("password in the log:\n%s", logs.String())
			}

			replace(func() error { return tc.write(third, path) })
			clock.Advance(checkEvery)
			if got := served(srv); got.Cmp(third.Cert.SerialNumber) != 0 {
				t.Errorf("after the file was fixed: serving serial %v, want %v", got, third.Cert.SerialNumber)
			}
		})
	}
}

// A replaced truststore takes effect too: clients of a new CA are
// accepted and those of the old one refused.
func TestReloadTruststore(t *testing.T) {
	old, next := newPKI(t), newPKI(t)
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := old.ca.WriteCAPEM(path); err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	logger, logs := newLogger()
	s := with(inline(old.broker, old.ca), TruststoreCertificates, "", TruststoreLocation, path, ClientAuth, "required")
	srv, err := newServer(s, logger, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	if sr, _ := handshake(t, srv.Config(), clientOf(old.ca, old.client)); sr.err != nil {
		t.Fatalf("old client refused: %v", sr.err)
	}
	if err := next.ca.WriteCAPEM(path); err != nil {
		t.Fatal(err)
	}
	mt := time.Now().Add(time.Minute)
	if err := os.Chtimes(path, mt, mt); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * checkEvery)
	if sr, _ := handshake(t, srv.Config(), clientOf(old.ca, next.client)); sr.err != nil {
		t.Errorf("client of the new CA refused: %v", sr.err)
	}
	if sr, _ := handshake(t, srv.Config(), clientOf(old.ca, old.client)); sr.err == nil {
		t.Error("client of the old CA still accepted")
	}
	if l := logs.String(); !strings.Contains(l, "reloaded TLS truststore") {
		t.Errorf("no truststore reload logged:\n%s", l)
	}
}

// Sessions resume while the stores stay, and not once they are reloaded: a
// client whose CA left the truststore must not get back in on a session
// ticket it got before.
func TestReloadEndsSessions(t *testing.T) {
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(version), func(t *testing.T) {
			old, next := newPKI(t), newPKI(t)
			path := filepath.Join(t.TempDir(), "ca.pem")
			if err := old.ca.WriteCAPEM(path); err != nil {
				t.Fatal(err)
			}
			clock := newFakeClock()
			s := with(inline(old.broker, old.ca), TruststoreCertificates, "", TruststoreLocation, path,
				ClientAuth, "required", PrincipalMappingRules, `RULE:^CN=([^,]+),.*$/$1/`)
			srv, err := newServer(s, nil, clock.Now)
			if err != nil {
				t.Fatal(err)
			}
			client := clientOf(old.ca, old.client)
			client.MaxVersion = version
			client.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			for i, wantResumed := range []bool{false, true} {
				sr, cr := handshake(t, srv.Config(), client)
				if sr.err != nil || cr.err != nil {
					t.Fatalf("handshake %d: server %v, client %v", i, sr.err, cr.err)
				}
				if sr.state.DidResume != wantResumed {
					t.Errorf("handshake %d: resumed %v", i, sr.state.DidResume)
				}
				if name, err := srv.Principal(sr.state); err != nil || name != "alice" {
					t.Errorf("handshake %d: principal %q, %v", i, name, err)
				}
			}

			if err := next.ca.WriteCAPEM(path); err != nil {
				t.Fatal(err)
			}
			mt := time.Now().Add(time.Minute)
			if err := os.Chtimes(path, mt, mt); err != nil {
				t.Fatal(err)
			}
			clock.Advance(checkEvery)
			if sr, _ := handshake(t, srv.Config(), client); sr.err == nil {
				t.Errorf("client of the removed CA accepted (resumed %v)", sr.state.DidResume)
			}
		})
	}
}
