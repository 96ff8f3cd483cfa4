package verify

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSecurityPlaintextIsNil(t *testing.T) {
	for _, mode := range []string{"", SecurityPlaintext} {
		s, err := NewSecurity(mode, "", t.TempDir())
		if err != nil || s != nil {
			t.Fatalf("%q: %v, %v", mode, s, err)
		}
	}
	var s *Security
	if s.Protocol() != "PLAINTEXT" || s.Name() != SecurityPlaintext || s.BrokerSettings() != nil || s.KcatArgs() != nil ||
		len(s.Admin()) != 0 || len(s.Client()) != 0 || s.Probe() == nil {
		t.Fatal("a nil Security must add nothing")
	}
	if _, err := NewSecurity("ssl", "", t.TempDir()); err == nil {
		t.Fatal("unknown mode accepted")
	}
	if _, err := NewSecurity(SecuritySASLSSL, "GSSAPI", t.TempDir()); err == nil {
		t.Fatal("unknown mechanism accepted")
	}
}

func TestSecuritySASLSSL(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	s, err := NewSecurity(SecuritySASLSSL, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Mechanism != MechanismSCRAM || s.Protocol() != "SASL_SSL" || s.Name() != SecuritySASLSSL {
		t.Fatalf("%+v", s)
	}
	settings := s.BrokerSettings()
	for _, want := range []string{"listeners=SASL_SSL://{addr}", "inter.broker.listener.name=SASL_SSL",
		"sasl.mechanism.inter.broker.protocol=PLAIN", "ssl.keystore.type=PEM", "ssl.truststore.type=PEM"} {
		if !slices.Contains(settings, want) {
			t.Errorf("broker settings lack %s: %v", want, settings)
		}
	}
	jaas := settings[slices.IndexFunc(settings, func(x string) bool { return strings.HasPrefix(x, "listener.name.sasl_ssl.plain.sasl.jaas.config=") })]
	if !strings.Contains(jaas, `user_kverify="`+s.password+`"`) || !strings.Contains(jaas, `user_broker="`+s.brokerPassword+`"`) ||
		s.password == s.brokerPassword || len(s.password) != 32 {
		t.Errorf("jaas config %s", jaas)
	}
	// The server certificate names what everybody dials: 127.0.0.1.
	data, err := os.ReadFile(s.keystore)
	if err != nil {
		t.Fatal(err)
	}
	var leaf *x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" && leaf == nil {
			if leaf, err = x509.ParseCertificate(b.Bytes); err != nil {
				t.Fatal(err)
			}
		}
	}
	if leaf == nil {
		t.Fatal("no certificate in the keystore")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: s.tls.RootCAs}); err != nil {
		t.Errorf("certificate for 127.0.0.1: %v", err)
	}
	for _, f := range []string{s.keystore, s.kcatConfig} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, fi, err)
		}
	}
	conf, err := os.ReadFile(s.kcatConfig)
	if err != nil || !strings.Contains(string(conf), "sasl.mechanisms=SCRAM-SHA-512\n") || !strings.Contains(string(conf), "ssl.ca.location="+s.caFile+"\n") {
		t.Errorf("kcat config %q %v", conf, err)
	}
	if len(s.Admin()) != 2 || len(s.Client()) != 2 {
		t.Errorf("client options: admin %d, workload %d", len(s.Admin()), len(s.Client()))
	}
	p, err := NewSecurity(SecuritySASLSSL, MechanismPlain, filepath.Join(t.TempDir(), "pki"))
	if err != nil || p.Mechanism != MechanismPlain {
		t.Fatalf("%+v %v", p, err)
	}
}
