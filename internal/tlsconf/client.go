package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
)

// NewClient returns the configuration for dialing serverName (a host name
// or IP address) with these settings, as a broker dials another: the
// truststore's certificates as roots (the system's without one), the
// keystore's certificate when one is configured, and the protocols and
// cipher suites of the settings.
//
// ssl.endpoint.identification.algorithm is "https" by default: the server's
// certificate must name serverName. Empty turns that check off, but the
// certificate chain is still verified against the roots, as in Kafka.
//
// Unlike Server, the result is not reloaded: make a new one for new stores.
func NewClient(s Settings, serverName string) (*tls.Config, error) {
	p, err := parseParams(s, true)
	if err != nil {
		return nil, err
	}
	verifyHost := true
	if v, ok := s[EndpointIdentificationAlgorithm]; ok {
		switch v = strings.TrimSpace(v); strings.ToLower(v) {
		case "https":
		case "":
			verifyHost = false
		default:
			return nil, fmt.Errorf("tlsconf: %s %q not supported (https, or empty to turn hostname verification off)", EndpointIdentificationAlgorithm, v)
		}
	}
	m, err := loadMaterial(s)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{ServerName: serverName, RootCAs: m.roots}
	p.apply(c)
	if m.cert != nil {
		c.Certificates = []tls.Certificate{*m.cert}
	}
	if !verifyHost {
		// Go verifies chain and host name together; skip both and verify
		// the chain alone.
		c.InsecureSkipVerify = true
		c.VerifyConnection = verifyChain(m.roots)
	}
	return c, nil
}

// verifyChain verifies the server's certificate chain without its name.
func verifyChain(roots *x509.CertPool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("tlsconf: the server sent no certificate")
		}
		opts := x509.VerifyOptions{
			Roots:         roots,
			Intermediates: x509.NewCertPool(),
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
			return fmt.Errorf("tlsconf: server certificate: %w", err)
		}
		return nil
	}
}
