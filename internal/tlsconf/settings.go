// Package tlsconf turns a Kafka listener's ssl.* properties into Go TLS
// configurations: NewServer for the listener, which reloads its key and
// trust stores when their files change; NewClient for broker-to-broker
// connections; and PrincipalRules for ssl.principal.mapping.rules.
//
// Stores are PKCS#12 (the default type, as Java's since 9) or PEM, in files
// or inline. JKS and JCEKS files are refused with the keytool command that
// converts them. Encrypted PEM private keys (PKCS#8 with ssl.key.password,
// or legacy Proc-Type encryption) are refused, no well-kept Go library
// decrypting them: use a PKCS#12 keystore, or a decrypted key in a file
// only the broker can read.
//
// Deliberate differences from Kafka: TLS 1.3 cipher suites cannot be chosen
// (Go always enables its three), see parseParams for how ssl.cipher.suites
// still decides which versions are on; an unknown ssl.client.auth is an
// error where Kafka warns and uses none; stores are reloaded when their
// files change, not on a dynamic config update; empty values count as
// unset; the key password of a PKCS#12 keystore must be its store password
// (which keytool enforces for PKCS#12 anyway).
package tlsconf

import (
	"crypto/tls"
	"fmt"
	"strings"
)

// Settings are a listener's ssl.* properties, named without any
// listener.name.<listener>. prefix: the caller resolves prefixes. Values are
// trimmed; an empty value counts as unset, except for
// ssl.endpoint.identification.algorithm, where empty disables hostname
// verification as in Kafka.
type Settings map[string]string

// The Kafka properties this package reads.
const (
	KeystoreType                    = "ssl.keystore.type"
	KeystoreLocation                = "ssl.keystore.location"
	KeystorePassword                = "ssl.keystore.password"
	KeyPassword                     = "ssl.key.password"
	KeystoreCertificateChain        = "ssl.keystore.certificate.chain"
	KeystoreKey                     = "ssl.keystore.key"
	TruststoreType                  = "ssl.truststore.type"
	TruststoreLocation              = "ssl.truststore.location"
	TruststorePassword              = "ssl.truststore.password"
	TruststoreCertificates          = "ssl.truststore.certificates"
	ClientAuth                      = "ssl.client.auth"
	EnabledProtocols                = "ssl.enabled.protocols"
	Protocol                        = "ssl.protocol"
	CipherSuites                    = "ssl.cipher.suites"
	EndpointIdentificationAlgorithm = "ssl.endpoint.identification.algorithm"
	PrincipalMappingRules           = "ssl.principal.mapping.rules"
)

// Properties returns the names of the properties Settings may hold, for a
// caller resolving listener prefixes.
func Properties() []string {
	return []string{
		KeystoreType, KeystoreLocation, KeystorePassword, KeyPassword,
		KeystoreCertificateChain, KeystoreKey,
		TruststoreType, TruststoreLocation, TruststorePassword, TruststoreCertificates,
		ClientAuth, EnabledProtocols, Protocol, CipherSuites,
		EndpointIdentificationAlgorithm, PrincipalMappingRules,
	}
}

// get returns a property's trimmed value; empty counts as unset.
func (s Settings) get(name string) string { return strings.TrimSpace(s[name]) }

// list splits a Kafka list property (comma separated, whitespace around
// items ignored) and drops empty items.
func (s Settings) list(name string) []string {
	var out []string
	for _, item := range strings.Split(s.get(name), ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// params are the protocol versions and TLS 1.2 cipher suites both sides
// share.
type params struct {
	minVersion, maxVersion uint16
	cipherSuites           []uint16 // nil: Go's defaults
}

func (p params) apply(c *tls.Config) {
	c.MinVersion, c.MaxVersion, c.CipherSuites = p.minVersion, p.maxVersion, p.cipherSuites
}

// parseParams reads ssl.enabled.protocols, ssl.protocol and
// ssl.cipher.suites.
//
// ssl.protocol only caps clients: Kafka documents that a client with
// ssl.protocol=TLSv1.2 does not use TLS 1.3 even when it is enabled, and a
// Java server offers every enabled protocol whatever its SSLContext.
//
// ssl.cipher.suites configures TLS 1.2 only, because Go does not let TLS 1.3
// suites be chosen. Like Java, which disables a protocol none of whose
// suites is enabled, a list without TLS 1.3 suites turns TLS 1.3 off, and a
// list of TLS 1.3 suites only turns TLS 1.2 off; naming any TLS 1.3 suite
// enables all of Go's.
func parseParams(s Settings, client bool) (params, error) {
	var p params
	enabled := s.list(EnabledProtocols)
	if len(enabled) == 0 {
		enabled = []string{"TLSv1.2", "TLSv1.3"}
	}
	for _, name := range enabled {
		v, err := protocolVersion(name)
		if err != nil {
			return params{}, fmt.Errorf("tlsconf: %s: %w", EnabledProtocols, err)
		}
		if p.minVersion == 0 || v < p.minVersion {
			p.minVersion = v
		}
		p.maxVersion = max(p.maxVersion, v)
	}

	switch proto := s.get(Protocol); strings.ToUpper(proto) {
	case "", "TLS", "TLSV1.3":
	case "TLSV1.2":
		if client {
			p.maxVersion = min(p.maxVersion, tls.VersionTLS12)
		}
	default:
		return params{}, fmt.Errorf("tlsconf: %s %q not supported (TLSv1.2, TLSv1.3 or TLS)", Protocol, proto)
	}

	suites, has12, has13, err := parseCipherSuites(s.list(CipherSuites))
	if err != nil {
		return params{}, err
	}
	if has12 || has13 {
		if !has12 {
			p.minVersion = max(p.minVersion, tls.VersionTLS13)
		}
		if !has13 {
			p.maxVersion = min(p.maxVersion, tls.VersionTLS12)
		}
		if has12 {
			p.cipherSuites = suites
		}
	}
	if p.minVersion > p.maxVersion {
		return params{}, fmt.Errorf("tlsconf: no protocol left: %s=%s, %s=%s, %s=%s",
			EnabledProtocols, s.get(EnabledProtocols), Protocol, s.get(Protocol), CipherSuites, s.get(CipherSuites))
	}
	return p, nil
}

// protocolVersion maps a Java protocol name to a Go version; only TLS 1.2
// and 1.3 are accepted, older ones being broken.
func protocolVersion(name string) (uint16, error) {
	switch strings.ToUpper(name) {
	case "TLSV1.2":
		return tls.VersionTLS12, nil
	case "TLSV1.3":
		return tls.VersionTLS13, nil
	default:
		return 0, fmt.Errorf("protocol %q not supported (only TLSv1.2 and TLSv1.3)", name)
	}
}

// parseCipherSuites maps IANA/Java suite names to Go's IDs. It returns the
// TLS 1.2 suites and whether the list names any TLS 1.2 and any TLS 1.3
// suite. Java's SSL_ prefix for old suites is read as TLS_, and the
// renegotiation signalling value Java lists is ignored.
func parseCipherSuites(names []string) (suites []uint16, has12, has13 bool, err error) {
	if len(names) == 0 {
		return nil, false, false, nil
	}
	known := make(map[string]*tls.CipherSuite)
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		known[cs.Name] = cs
	}
	for _, name := range names {
		if name == "TLS_EMPTY_RENEGOTIATION_INFO_SCSV" {
			continue
		}
		lookup := name
		if rest, ok := strings.CutPrefix(name, "SSL_"); ok {
			lookup = "TLS_" + rest
		}
		cs, ok := known[lookup]
		if !ok {
			return nil, false, false, fmt.Errorf("tlsconf: %s: unknown cipher suite %q", CipherSuites, name)
		}
		for _, v := range cs.SupportedVersions {
			switch v {
			case tls.VersionTLS12:
				has12 = true
				suites = append(suites, cs.ID)
			case tls.VersionTLS13:
				has13 = true
			}
		}
	}
	return suites, has12, has13, nil
}

// parseClientAuth reads ssl.client.auth (default none).
func parseClientAuth(s Settings) (tls.ClientAuthType, error) {
	switch v := s.get(ClientAuth); strings.ToLower(v) {
	case "", "none":
		return tls.NoClientCert, nil
	case "requested":
		return tls.VerifyClientCertIfGiven, nil
	case "required":
		return tls.RequireAndVerifyClientCert, nil
	default:
		// Kafka warns and falls back to none; a typo that silently
		// turns off client authentication is worse than a refusal.
		return 0, fmt.Errorf("tlsconf: %s %q not supported (none, requested or required)", ClientAuth, v)
	}
}
