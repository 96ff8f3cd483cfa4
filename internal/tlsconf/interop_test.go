package tlsconf

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Stores made by the tools Kafka users make them with: keytool (as Kafka's
// security documentation shows) and OpenSSL. Skipped where the tools are
// not installed.
func TestStoresFromTools(t *testing.T) {
	if testing.Short() {
		t.Skip("runs keytool and openssl")
	}
	p := newPKI(t)
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	if err := p.ca.WriteCAPEM(path("ca.pem")); err != nil {
		t.Fatal(err)
	}
	if err := p.broker.WritePEM(path("chain.pem"), path("key.pem")); err != nil {
		t.Fatal(err)
	}
	if err := p.broker.WritePKCS12(path("broker.p12"), "kspass"); err != nil {
		t.Fatal(err)
	}
	run := func(tool string, args ...string) bool {
		t.Helper()
		bin, err := exec.LookPath(tool)
		if err != nil {
			return false
		}
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", tool, strings.Join(args, " "), err, out)
		}
		return true
	}
	keytool := func(args ...string) bool { return run("keytool", append(args, "-noprompt")...) }

	for _, tc := range []struct {
		name    string
		make    func() bool // false: the tool is missing
		s       Settings
		wantErr string
	}{
		{"keytool truststore",
			func() bool {
				return keytool("-importcert", "-alias", "caroot", "-file", path("ca.pem"),
					"-keystore", path("kt-ts.p12"), "-storetype", "PKCS12", "-storepass", "tspass")
			},
			Settings{TruststoreLocation: path("kt-ts.p12"), TruststorePassword: "tspass"}, ""},
		{"keytool keystore with the CA as a trusted entry first",
			func() bool {
				return keytool("-importcert", "-alias", "CARoot", "-file", path("ca.pem"),
					"-keystore", path("kt-ks.p12"), "-storetype", "PKCS12", "-storepass", "kspass") &&
					keytool("-importkeystore", "-srckeystore", path("broker.p12"), "-srcstoretype", "PKCS12", "-srcstorepass", "kspass",
						"-destkeystore", path("kt-ks.p12"), "-deststoretype", "PKCS12", "-deststorepass", "kspass")
			},
			Settings{KeystoreLocation: path("kt-ks.p12"), KeystorePassword: "kspass", TruststoreType: "PEM", TruststoreLocation: path("ca.pem")}, ""},
		{"keytool JKS truststore",
			func() bool {
				return keytool("-importcert", "-alias", "caroot", "-file", path("ca.pem"),
					"-keystore", path("kt-ts.jks"), "-storetype", "JKS", "-storepass", "tspass")
			},
			Settings{TruststoreType: "JKS", TruststoreLocation: path("kt-ts.jks"), TruststorePassword: "tspass"},
			"JKS keystores are not supported; convert with keytool -importkeystore -deststoretype PKCS12"},
		{"openssl keystore",
			func() bool {
				return run("openssl", "pkcs12", "-export", "-inkey", path("key.pem"), "-in", path("chain.pem"),
					"-out", path("ossl-ks.p12"), "-passout", "pass:kspass")
			},
			Settings{KeystoreLocation: path("ossl-ks.p12"), KeystorePassword: "kspass", TruststoreType: "PEM", TruststoreLocation: path("ca.pem")}, ""},
		{"openssl truststore without the Java trust attribute",
			func() bool {
				return run("openssl", "pkcs12", "-export", "-nokeys", "-in", path("ca.pem"),
					"-out", path("ossl-ts.p12"), "-passout", "pass:tspass")
			},
			Settings{TruststoreLocation: path("ossl-ts.p12"), TruststorePassword: "tspass"}, "-jdktrust"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.make() {
				t.Skip("tool not installed")
			}
			s := tc.s
			if s[KeystoreLocation] == "" {
				s = with(s, KeystoreLocation, path("broker.p12"), KeystorePassword, "kspass")
			}
			srv, err := NewServer(with(s, ClientAuth, "required"), nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sr, cr := handshake(t, srv.Config(), clientOf(p.ca, p.client))
			if sr.err != nil || cr.err != nil {
				t.Fatalf("handshake: server %v, client %v", sr.err, cr.err)
			}
			if got := cr.state.PeerCertificates; !got[0].Equal(p.broker.Cert) || len(got) != 2 {
				t.Errorf("served %s and %d more", got[0].Subject, len(got)-1)
			}
		})
	}
}
