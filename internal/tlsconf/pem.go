package tlsconf

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// pemBlockRE finds PEM blocks as leniently as Kafka's PemParser does:
// anything may surround them, and the base64 body may be on the BEGIN line.
// That matters for inline values written in a properties file with
// backslash continuations, which join the lines with spaces:
//
//	ssl.keystore.certificate.chain=-----BEGIN CERTIFICATE----- \
//	  MIIB... \
//	  -----END CERTIFICATE-----
//
// encoding/pem wants each delimiter on a line of its own.
var pemBlockRE = regexp.MustCompile(`(?s)-+BEGIN ([A-Z0-9 ]+?) *-+(.*?)-+END ([A-Z0-9 ]+?) *-+`)

type pemBlock struct {
	label string
	der   []byte
	// headers tells that the block had RFC 1421 headers, which here only
	// ever mean legacy (Proc-Type: 4,ENCRYPTED) key encryption.
	headers bool
}

// parsePEM returns the PEM blocks in text, in order.
func parsePEM(text string) ([]pemBlock, error) {
	var blocks []pemBlock
	for i, m := range pemBlockRE.FindAllStringSubmatch(text, -1) {
		if m[1] != m[3] {
			return nil, fmt.Errorf("PEM block %d begins as %q but ends as %q", i+1, m[1], m[3])
		}
		b := pemBlock{label: m[1]}
		var body strings.Builder
		for _, line := range strings.Split(m[2], "\n") {
			if strings.Contains(line, ":") {
				b.headers = true
				continue
			}
			body.WriteString(strings.Join(strings.Fields(line), ""))
		}
		der, err := base64.StdEncoding.DecodeString(body.String())
		if err != nil {
			return nil, fmt.Errorf("PEM block %d (%s): %w", i+1, b.label, err)
		}
		b.der = der
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// pemCertificates parses the CERTIFICATE blocks of a PEM text; there must be
// at least one.
func pemCertificates(text string) ([]*x509.Certificate, error) {
	blocks, err := parsePEM(text)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for _, b := range blocks {
		if b.label != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.der)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no CERTIFICATE entries in PEM")
	}
	return certs, nil
}

// errEncryptedKey explains the missing support and the way around it.
var errEncryptedKey = errors.New("encrypted PEM private keys are not supported; " +
	"use a PKCS12 keystore, or decrypt the key (openssl pkcs8 -in key.pem -out plain-key.pem) into a file only the broker can read")

// pemPrivateKey parses the one private key of a PEM text: PKCS#8, PKCS#1
// (RSA) or SEC 1 (EC), unencrypted. Other blocks (certificates, EC
// parameters) are skipped.
func pemPrivateKey(text string) (crypto.Signer, error) {
	blocks, err := parsePEM(text)
	if err != nil {
		return nil, err
	}
	var keys []pemBlock
	for _, b := range blocks {
		if strings.HasSuffix(b.label, "PRIVATE KEY") {
			keys = append(keys, b)
		}
	}
	switch len(keys) {
	case 0:
		return nil, errors.New("no PRIVATE KEY entry in PEM")
	case 1:
	default:
		return nil, fmt.Errorf("expected one private key in PEM, found %d", len(keys))
	}
	b := keys[0]
	if b.label == "ENCRYPTED PRIVATE KEY" || b.headers {
		return nil, errEncryptedKey
	}
	var key any
	switch b.label {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(b.der)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.der)
	default:
		key, err = x509.ParsePKCS8PrivateKey(b.der)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.label, err)
	}
	switch k := key.(type) {
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
		return k.(crypto.Signer), nil
	default:
		return nil, fmt.Errorf("private key type %T cannot sign TLS handshakes", key)
	}
}
