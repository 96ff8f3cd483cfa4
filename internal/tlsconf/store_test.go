package tlsconf

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kbroker/kbroker/internal/testpki"
)

// Every keystore and truststore form serves the broker's certificate and
// verifies clients of the CA.
func TestStoreForms(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.broker.WritePKCS12(path("ks.p12"), "ks-pass"))
	must(p.ca.WritePKCS12Truststore(path("ts.p12"), "ts-pass"))
	must(p.ca.WritePKCS12Truststore(path("ts-nopass.p12"), ""))
	must(p.broker.WriteKeystorePEM(path("ks.pem")))
	must(p.ca.WriteCAPEM(path("ca.pem")))

	// A chain whose certificates come in the wrong order, through an
	// intermediate CA, after the key: the leaf is found by its key.
	inter, err := p.ca.Intermediate("test-intermediate")
	must(err)
	deep, err := inter.Issue("broker-deep")
	must(err)
	shuffled := testpkiPEM(deep.Chain[1]) + testpkiPEM(deep.Cert) + testpkiPEM(deep.Chain[0])

	// Kafka's documented inline form written with properties-file
	// continuations: the lines arrive joined by spaces.
	oneLine := func(s string) string { return strings.Join(strings.Fields(s), " ") }

	ecKey, ok := p.broker.Key.(*ecdsa.PrivateKey)
	if !ok {
		t.Fatalf("broker key %T", p.broker.Key)
	}
	sec1, err := x509.MarshalECPrivateKey(ecKey)
	must(err)
	rsaLeaf, err := p.ca.Issue("broker-rsa", testpki.WithRSA(2048))
	must(err)
	pkcs1 := x509.MarshalPKCS1PrivateKey(rsaLeaf.Key.(*rsa.PrivateKey))

	for _, tc := range []struct {
		name string
		s    Settings
		leaf *testpki.Leaf
	}{
		{"pkcs12 keystore and truststore", Settings{
			KeystoreLocation: path("ks.p12"), KeystorePassword: "ks-pass",
			TruststoreLocation: path("ts.p12"), TruststorePassword: "ts-pass",
		}, p.broker},
		{"pkcs12 explicit types, passwordless truststore", Settings{
			KeystoreType: "PKCS12", KeystoreLocation: path("ks.p12"), KeystorePassword: "ks-pass",
			TruststoreType: "pkcs12", TruststoreLocation: path("ts-nopass.p12"),
		}, p.broker},
		{"pkcs12 file named JKS, as Java reads it", Settings{
			KeystoreType: "JKS", KeystoreLocation: path("ks.p12"), KeystorePassword: "ks-pass",
			TruststoreType: "JKS", TruststoreLocation: path("ts.p12"), TruststorePassword: "ts-pass",
		}, p.broker},
		{"pem files", Settings{
			KeystoreType: "PEM", KeystoreLocation: path("ks.pem"),
			TruststoreType: "PEM", TruststoreLocation: path("ca.pem"),
		}, p.broker},
		{"pem file with key password set", Settings{
			KeystoreType: "pem", KeystoreLocation: path("ks.pem"), KeyPassword: "unused",
			TruststoreType: "PEM", TruststoreLocation: path("ca.pem"),
		}, p.broker},
		{"inline pem", inline(p.broker, p.ca), p.broker},
		{"inline pem on one line", with(inline(p.broker, p.ca),
			KeystoreKey, oneLine(p.broker.KeyPEM()),
			KeystoreCertificateChain, oneLine(p.broker.ChainPEM()),
			TruststoreCertificates, oneLine(p.ca.CertPEM())), p.broker},
		{"inline SEC 1 EC key", with(inline(p.broker, p.ca),
			KeystoreKey, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}))), p.broker},
		{"inline PKCS#1 RSA key", with(inline(rsaLeaf, p.ca),
			KeystoreKey, string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: pkcs1}))), rsaLeaf},
		{"chain out of order", with(inline(deep, p.ca), KeystoreCertificateChain, shuffled), deep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := NewServer(with(tc.s, ClientAuth, "required"), nil)
			if err != nil {
				t.Fatal(err)
			}
			s, c := handshake(t, srv.Config(), clientOf(p.ca, p.client))
			if s.err != nil || c.err != nil {
				t.Fatalf("handshake: server %v, client %v", s.err, c.err)
			}
			if got := c.state.PeerCertificates[0]; !got.Equal(tc.leaf.Cert) {
				t.Errorf("served %s, want %s", got.Subject, tc.leaf.Cert.Subject)
			}
			if n, want := len(c.state.PeerCertificates), 1+len(tc.leaf.Chain); n != want {
				t.Errorf("served a chain of %d, want %d", n, want)
			}
			if name, err := srv.Principal(s.state); err != nil || name != "CN=alice,OU=eng,O=acme" {
				t.Errorf("principal %q, %v", name, err)
			}
		})
	}
}

func testpkiPEM(c *x509.Certificate) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
}

// Configurations Kafka refuses, and stores that cannot be read, fail
// NewServer with an error naming the property and file and never a
// password.
func TestStoreErrors(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t)
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	const ksPass, tsPass = "ks-S3cret-pw", "ts-S3cret-pw"
	if err := p.broker.WritePKCS12(path("ks.p12"), ksPass); err != nil {
		t.Fatal(err)
	}
	if err := p.ca.WritePKCS12Truststore(path("ts.p12"), tsPass); err != nil {
		t.Fatal(err)
	}
	if err := p.broker.WriteKeystorePEM(path("ks.pem")); err != nil {
		t.Fatal(err)
	}
	jks := append([]byte{0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2}, make([]byte, 64)...)
	if err := os.WriteFile(path("ks.jks"), jks, 0o600); err != nil {
		t.Fatal(err)
	}
	encrypted := string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte("not really")}))
	legacy := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY",
		Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: []byte("x")}))
	pkcs12 := Settings{KeystoreLocation: path("ks.p12"), KeystorePassword: ksPass}

	for _, tc := range []struct {
		name string
		s    Settings
		want []string // substrings of the error
	}{
		{"no keystore", Settings{}, []string{"needs a keystore", KeystoreLocation}},
		{"wrong keystore password", Settings{KeystoreLocation: path("ks.p12"), KeystorePassword: "wrong-" + ksPass},
			[]string{"wrong " + KeystorePassword, path("ks.p12")}},
		{"wrong truststore password", with(pkcs12, TruststoreLocation, path("ts.p12"), TruststorePassword, "wrong-"+tsPass),
			[]string{"wrong " + TruststorePassword, path("ts.p12")}},
		{"truststore password missing", with(pkcs12, TruststoreLocation, path("ts.p12")),
			[]string{TruststorePassword, path("ts.p12")}},
		{"keystore password missing", Settings{KeystoreLocation: path("ks.p12")}, []string{KeystorePassword}},
		{"keystore password without location", Settings{KeystorePassword: ksPass}, []string{KeystoreLocation}},
		{"jks keystore", Settings{KeystoreType: "JKS", KeystoreLocation: path("ks.jks"), KeystorePassword: ksPass},
			[]string{"JKS keystores are not supported; convert with keytool -importkeystore -deststoretype PKCS12", path("ks.jks")}},
		{"jks truststore", with(pkcs12, TruststoreLocation, path("ks.jks"), TruststorePassword, tsPass),
			[]string{"JKS keystores are not supported", TruststoreLocation}},
		{"pem file as pkcs12", Settings{KeystoreLocation: path("ks.pem"), KeystorePassword: ksPass},
			[]string{KeystoreType + "=PEM", path("ks.pem")}},
		{"pem keystore with keystore password", Settings{KeystoreType: "PEM", KeystoreLocation: path("ks.pem"), KeystorePassword: ksPass},
			[]string{KeystorePassword, "PEM"}},
		{"missing file", Settings{KeystoreLocation: path("nope.p12"), KeystorePassword: ksPass},
			[]string{KeystoreLocation, path("nope.p12")}},
		{"unsupported keystore type", with(pkcs12, KeystoreType, "BCFKS"), []string{KeystoreType, "BCFKS"}},
		{"inline key, type pkcs12", Settings{KeystoreKey: p.broker.KeyPEM(), KeystoreCertificateChain: p.broker.ChainPEM()},
			[]string{KeystoreKey, "PEM"}},
		{"inline key without chain", Settings{KeystoreType: "PEM", KeystoreKey: p.broker.KeyPEM()},
			[]string{KeystoreCertificateChain}},
		{"inline chain without key", Settings{KeystoreType: "PEM", KeystoreCertificateChain: p.broker.ChainPEM()},
			[]string{KeystoreKey}},
		{"inline key and location", with(inline(p.broker, p.ca), KeystoreLocation, path("ks.pem")),
			[]string{KeystoreLocation, KeystoreKey}},
		{"inline truststore with password", with(inline(p.broker, p.ca), TruststorePassword, tsPass),
			[]string{TruststorePassword}},
		{"inline truststore, type pkcs12", with(pkcs12, TruststoreCertificates, p.ca.CertPEM()),
			[]string{TruststoreCertificates, "PEM"}},
		{"encrypted pkcs8 key", with(inline(p.broker, p.ca), KeystoreKey, encrypted, KeyPassword, ksPass),
			[]string{KeystoreKey, "encrypted PEM private keys are not supported"}},
		{"legacy encrypted key", with(inline(p.broker, p.ca), KeystoreKey, legacy, KeyPassword, ksPass),
			[]string{KeystoreKey, "encrypted PEM private keys are not supported"}},
		{"key of another certificate", with(inline(p.broker, p.ca), KeystoreKey, other.broker.KeyPEM()),
			[]string{KeystoreKey, "matches none"}},
		{"no certificate in chain", with(inline(p.broker, p.ca), KeystoreCertificateChain, "garbage"),
			[]string{KeystoreCertificateChain, "no CERTIFICATE"}},
		{"bad base64", with(inline(p.broker, p.ca), TruststoreCertificates, "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n"),
			[]string{TruststoreCertificates}},
		{"client auth typo", with(inline(p.broker, p.ca), ClientAuth, "require"), []string{ClientAuth, "require"}},
		{"old protocol", with(inline(p.broker, p.ca), EnabledProtocols, "TLSv1.1,TLSv1.2"), []string{EnabledProtocols, "TLSv1.1"}},
		{"bad principal rules", with(inline(p.broker, p.ca), PrincipalMappingRules, "RULE:^CN=(.*)$/$1/X"),
			[]string{PrincipalMappingRules}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewServer(tc.s, nil)
			if err == nil {
				t.Fatal("NewServer succeeded")
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
			for _, secret := range []string{ksPass, tsPass} {
				if strings.Contains(msg, secret) {
					t.Errorf("error %q contains a password", msg)
				}
			}
		})
	}
}
