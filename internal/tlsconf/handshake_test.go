package tlsconf

import (
	"crypto/tls"
	"path/filepath"
	"slices"
	"testing"
)

// ssl.client.auth decides whether a client certificate is asked for and
// required, in TLS 1.2 and 1.3; the principal is the mapped subject of a
// verified certificate and ANONYMOUS otherwise.
func TestClientAuth(t *testing.T) {
	p := newPKI(t)
	stranger := newPKI(t) // a client of another CA
	for _, tc := range []struct {
		auth      string
		client    *tls.Config
		ok        bool
		principal string
	}{
		{"none", clientOf(p.ca, p.client), true, "ANONYMOUS"},
		{"none", clientOf(p.ca, nil), true, "ANONYMOUS"},
		{"requested", clientOf(p.ca, nil), true, "ANONYMOUS"},
		{"requested", clientOf(p.ca, p.client), true, "alice"},
		{"requested", clientOf(p.ca, stranger.client), false, ""},
		{"required", clientOf(p.ca, p.client), true, "alice"},
		{"REQUIRED", clientOf(p.ca, p.client), true, "alice"},
		{"required", clientOf(p.ca, nil), false, ""},
		{"required", clientOf(p.ca, stranger.client), false, ""},
		{"", clientOf(p.ca, p.client), true, "ANONYMOUS"},
	} {
		for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			name := tc.auth + "/" + tls.VersionName(version)
			if tc.client.Certificates != nil {
				name += "/" + tc.client.Certificates[0].Leaf.Subject.CommonName
			}
			t.Run(name, func(t *testing.T) {
				s := with(inline(p.broker, p.ca), ClientAuth, tc.auth, PrincipalMappingRules, `RULE:^CN=([^,]+),.*$/$1/L, DEFAULT`)
				srv, err := NewServer(s, nil)
				if err != nil {
					t.Fatal(err)
				}
				client := tc.client.Clone()
				client.MaxVersion = version
				sr, cr := handshake(t, srv.Config(), client)
				if ok := sr.err == nil && cr.err == nil; ok != tc.ok {
					t.Fatalf("handshake: server %v, client %v; want success %v", sr.err, cr.err, tc.ok)
				}
				if !tc.ok {
					return
				}
				if sr.state.Version != version {
					t.Errorf("negotiated %s", tls.VersionName(sr.state.Version))
				}
				if got, err := srv.Principal(sr.state); err != nil || got != tc.principal {
					t.Errorf("principal %q, %v; want %q", got, err, tc.principal)
				}
			})
		}
	}
}

// ssl.enabled.protocols and ssl.protocol bound the negotiated version.
func TestProtocols(t *testing.T) {
	p := newPKI(t)
	for _, tc := range []struct {
		name           string
		server, client Settings
		want           uint16 // 0: the handshake fails
	}{
		{"defaults", nil, nil, tls.VersionTLS13},
		{"TLS 1.2 client, TLS 1.3 server", Settings{EnabledProtocols: "TLSv1.3"}, Settings{EnabledProtocols: "TLSv1.2"}, 0},
		{"TLS 1.3 client, TLS 1.2 server", Settings{EnabledProtocols: "TLSv1.2"}, Settings{EnabledProtocols: "TLSv1.3"}, 0},
		{"TLS 1.2 server", Settings{EnabledProtocols: "TLSv1.2"}, nil, tls.VersionTLS12},
		{"ssl.protocol caps a client", nil, Settings{Protocol: "TLSv1.2"}, tls.VersionTLS12},
		{"ssl.protocol does not cap a server", Settings{Protocol: "TLSv1.2"}, nil, tls.VersionTLS13},
		{"spaces in the list", Settings{EnabledProtocols: " TLSv1.3 , TLSv1.2 "}, Settings{Protocol: "TLS"}, tls.VersionTLS13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := NewServer(with(inline(p.broker, p.ca), flatten(tc.server)...), nil)
			if err != nil {
				t.Fatal(err)
			}
			client, err := NewClient(with(Settings{TruststoreType: "PEM", TruststoreCertificates: p.ca.CertPEM()}, flatten(tc.client)...), "localhost")
			if err != nil {
				t.Fatal(err)
			}
			sr, cr := handshake(t, srv.Config(), client)
			if tc.want == 0 {
				if sr.err == nil || cr.err == nil {
					t.Fatalf("handshake succeeded with %s", tls.VersionName(cr.state.Version))
				}
				return
			}
			if sr.err != nil || cr.err != nil {
				t.Fatalf("handshake: server %v, client %v", sr.err, cr.err)
			}
			if cr.state.Version != tc.want {
				t.Errorf("negotiated %s, want %s", tls.VersionName(cr.state.Version), tls.VersionName(tc.want))
			}
		})
	}
}

func flatten(s Settings) []string {
	var kv []string
	for k, v := range s {
		kv = append(kv, k, v)
	}
	return kv
}

// Protocol and cipher suite settings become the versions and TLS 1.2
// suites of the configuration.
func TestParseParams(t *testing.T) {
	const (
		ecdsa128 = tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
		rsa256   = tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
	)
	for _, tc := range []struct {
		name     string
		s        Settings
		client   bool
		min, max uint16
		suites   []uint16
		err      bool
	}{
		{"defaults", nil, false, tls.VersionTLS12, tls.VersionTLS13, nil, false},
		{"empty values", Settings{EnabledProtocols: " ", CipherSuites: ""}, false, tls.VersionTLS12, tls.VersionTLS13, nil, false},
		{"TLS 1.2 suite turns TLS 1.3 off", Settings{CipherSuites: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}, false,
			tls.VersionTLS12, tls.VersionTLS12, []uint16{ecdsa128}, false},
		{"TLS 1.3 suite only turns TLS 1.2 off", Settings{CipherSuites: "TLS_AES_128_GCM_SHA256"}, false,
			tls.VersionTLS13, tls.VersionTLS13, nil, false},
		{"both", Settings{CipherSuites: "TLS_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"}, false,
			tls.VersionTLS12, tls.VersionTLS13, []uint16{ecdsa128, rsa256}, false},
		{"Java SSL_ names and SCSV", Settings{CipherSuites: "SSL_RSA_WITH_3DES_EDE_CBC_SHA,TLS_EMPTY_RENEGOTIATION_INFO_SCSV"}, false,
			tls.VersionTLS12, tls.VersionTLS12, []uint16{tls.TLS_RSA_WITH_3DES_EDE_CBC_SHA}, false},
		{"unknown suite", Settings{CipherSuites: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA255"}, false, 0, 0, nil, true},
		{"TLS 1.2 suites, TLS 1.3 only", Settings{EnabledProtocols: "TLSv1.3", CipherSuites: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}, false, 0, 0, nil, true},
		{"TLS 1.3 only", Settings{EnabledProtocols: "TLSv1.3"}, false, tls.VersionTLS13, tls.VersionTLS13, nil, false},
		{"TLSv1.1", Settings{EnabledProtocols: "TLSv1.2,TLSv1.1"}, false, 0, 0, nil, true},
		{"TLSv1", Settings{EnabledProtocols: "TLSv1"}, false, 0, 0, nil, true},
		{"SSLv3 context", Settings{Protocol: "SSLv3"}, false, 0, 0, nil, true},
		{"TLSv1.1 context", Settings{Protocol: "TLSv1.1"}, true, 0, 0, nil, true},
		{"TLSv1.2 context, client", Settings{Protocol: "TLSv1.2"}, true, tls.VersionTLS12, tls.VersionTLS12, nil, false},
		{"TLSv1.2 context, server", Settings{Protocol: "TLSv1.2"}, false, tls.VersionTLS12, tls.VersionTLS13, nil, false},
		{"TLSv1.2 context, TLS 1.3 only client", Settings{Protocol: "TLSv1.2", EnabledProtocols: "TLSv1.3"}, true, 0, 0, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parseParams(tc.s, tc.client)
			if tc.err {
				if err == nil {
					t.Fatalf("parsed as %+v", p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.minVersion != tc.min || p.maxVersion != tc.max || !slices.Equal(p.cipherSuites, tc.suites) {
				t.Errorf("got %s-%s %v, want %s-%s %v", tls.VersionName(p.minVersion), tls.VersionName(p.maxVersion), p.cipherSuites,
					tls.VersionName(tc.min), tls.VersionName(tc.max), tc.suites)
			}
		})
	}
}

// A server's ssl.cipher.suites decides the TLS 1.2 suite, and a client
// offering none of them fails.
func TestCipherSuiteHandshake(t *testing.T) {
	p := newPKI(t)
	srv, err := NewServer(with(inline(p.broker, p.ca), CipherSuites, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"), nil)
	if err != nil {
		t.Fatal(err)
	}
	sr, cr := handshake(t, srv.Config(), clientOf(p.ca, nil))
	if sr.err != nil || cr.err != nil {
		t.Fatalf("handshake: server %v, client %v", sr.err, cr.err)
	}
	if cr.state.Version != tls.VersionTLS12 || cr.state.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 {
		t.Errorf("negotiated %s %s", tls.VersionName(cr.state.Version), tls.CipherSuiteName(cr.state.CipherSuite))
	}
	other := clientOf(p.ca, nil)
	other.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}
	if sr, cr := handshake(t, srv.Config(), other); sr.err == nil || cr.err == nil {
		t.Errorf("a client without the server's suite connected with %s", tls.CipherSuiteName(cr.state.CipherSuite))
	}
}

// NewClient verifies the broker's certificate, its name unless
// ssl.endpoint.identification.algorithm is empty, and presents its
// keystore's certificate.
func TestNewClient(t *testing.T) {
	p := newPKI(t)
	stranger := newPKI(t)
	dir := t.TempDir()
	if err := p.client.WritePKCS12(filepath.Join(dir, "client.p12"), "pw"); err != nil {
		t.Fatal(err)
	}
	trust := Settings{TruststoreType: "PEM", TruststoreCertificates: p.ca.CertPEM()}
	for _, tc := range []struct {
		name       string
		s          Settings
		serverName string
		ok         bool
		principal  string
	}{
		{"host name verified", trust, "localhost", true, "ANONYMOUS"},
		{"IP address verified", trust, "127.0.0.1", true, "ANONYMOUS"},
		{"wrong host name", trust, "broker-9.example", false, ""},
		{"explicit https, wrong name", with(trust, EndpointIdentificationAlgorithm, "HTTPS"), "broker-9.example", false, ""},
		{"no endpoint identification", with(trust, EndpointIdentificationAlgorithm, ""), "broker-9.example", true, "ANONYMOUS"},
		{"no endpoint identification, other CA", Settings{TruststoreType: "PEM", TruststoreCertificates: stranger.ca.CertPEM(), EndpointIdentificationAlgorithm: ""},
			"localhost", false, ""},
		{"system roots", Settings{}, "localhost", false, ""},
		{"client certificate", with(trust, KeystoreLocation, filepath.Join(dir, "client.p12"), KeystorePassword, "pw"), "localhost", true, "CN=alice,OU=eng,O=acme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := NewServer(with(inline(p.broker, p.ca), ClientAuth, "requested"), nil)
			if err != nil {
				t.Fatal(err)
			}
			client, err := NewClient(tc.s, tc.serverName)
			if err != nil {
				t.Fatal(err)
			}
			sr, cr := handshake(t, srv.Config(), client)
			if ok := sr.err == nil && cr.err == nil; ok != tc.ok {
				t.Fatalf("handshake: server %v, client %v; want success %v", sr.err, cr.err, tc.ok)
			}
			if !tc.ok {
				return
			}
			if got, err := srv.Principal(sr.state); err != nil || got != tc.principal {
				t.Errorf("principal %q, %v; want %q", got, err, tc.principal)
			}
		})
	}
	if _, err := NewClient(with(trust, EndpointIdentificationAlgorithm, "ldaps"), "localhost"); err == nil {
		t.Error("NewClient accepted ssl.endpoint.identification.algorithm=ldaps")
	}
}
