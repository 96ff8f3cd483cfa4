// Package testpki generates throwaway certificate authorities and leaf
// certificates for unit and integration tests. The project checks in no key
// material: every test makes what it needs, in memory or in its temporary
// directory, with this package.
//
// Keys are ECDSA P-256 unless WithRSA is given: Go, librdkafka, kafkajs,
// kafka-python and the JVM clients all accept ECDSA. Certificates are valid
// from an hour ago (tolerating clock skew between processes) for two days.
//
// This is not a _test package, so integration tests in other packages can
// import it; it does not import "testing" and reports errors instead of
// failing a test itself.
package testpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"strings"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

// defaultHosts are the subject alternative names of a server certificate
// unless WithHosts says otherwise: what tests dial.
var defaultHosts = []string{"127.0.0.1", "localhost"}

// Option adjusts a certificate made by NewCA, (*CA).Intermediate or
// (*CA).Issue. Options about TLS usage and hosts only apply to leaves.
type Option func(*config)

type config struct {
	rsaBits   int
	subject   *pkix.Name
	org, ou   []string
	hosts     []string
	hostsSet  bool
	server    bool
	client    bool
	notBefore time.Time
	notAfter  time.Time
}

// WithRSA makes an RSA key of the given size instead of ECDSA P-256, for a
// peer that needs RSA.
func WithRSA(bits int) Option { return func(c *config) { c.rsaBits = bits } }

// WithOrganization sets the subject's O attribute(s).
func WithOrganization(o ...string) Option { return func(c *config) { c.org = o } }

// WithOrganizationalUnit sets the subject's OU attribute(s).
func WithOrganizationalUnit(ou ...string) Option { return func(c *config) { c.ou = ou } }

// WithSubject sets the whole subject, for tests of distinguished-name
// handling; its CommonName, if empty, is the name given to Issue or NewCA.
func WithSubject(name pkix.Name) Option { return func(c *config) { c.subject = &name } }

// WithHosts sets a leaf's subject alternative names (IP addresses or DNS
// names) instead of 127.0.0.1 and localhost; with no argument it has none.
func WithHosts(hosts ...string) Option {
	return func(c *config) { c.hosts, c.hostsSet = hosts, true }
}

// ServerOnly makes a leaf usable only for TLS servers (extended key usage
// serverAuth). A leaf is for both servers and clients by default, as a
// broker's certificate is: it serves clients and dials other brokers.
func ServerOnly() Option { return func(c *config) { c.server, c.client = true, false } }

// ClientOnly makes a leaf usable only as a TLS client certificate (extended
// key usage clientAuth), with no subject alternative names unless WithHosts
// gives some.
func ClientOnly() Option { return func(c *config) { c.server, c.client = false, true } }

// WithValidity sets the validity period, e.g. for expired-certificate tests.
func WithValidity(notBefore, notAfter time.Time) Option {
	return func(c *config) { c.notBefore, c.notAfter = notBefore, notAfter }
}

func newConfig(opts []Option) *config {
	now := time.Now()
	c := &config{
		server:    true,
		client:    true,
		notBefore: now.Add(-time.Hour),
		notAfter:  now.Add(48 * time.Hour),
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func (c *config) name(cn string) pkix.Name {
	var n pkix.Name
	if c.subject != nil {
		n = *c.subject
	}
	if n.CommonName == "" {
		n.CommonName = cn
	}
	if c.org != nil {
		n.Organization = c.org
	}
	if c.ou != nil {
		n.OrganizationalUnit = c.ou
	}
	return n
}

func (c *config) newKey() (crypto.Signer, error) {
	if c.rsaBits > 0 {
		k, err := rsa.GenerateKey(rand.Reader, c.rsaBits)
		if err != nil {
			return nil, fmt.Errorf("testpki: generating RSA-%d key: %w", c.rsaBits, err)
		}
		return k, nil
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testpki: generating ECDSA key: %w", err)
	}
	return k, nil
}

// serial returns a random 128-bit serial number, so that two certificates
// made for the same name (a reload test's old and new one) differ.
func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("testpki: serial number: %w", err)
	}
	return n, nil
}

// CA is a certificate authority that issues leaves and intermediates.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// Parents are the CAs above this one, nearest first, ending with the
	// root; empty for a root.
	Parents []*x509.Certificate
}

// NewCA makes a self-signed root CA whose subject CN is name.
func NewCA(name string, opts ...Option) (*CA, error) {
	return newCA(name, nil, opts)
}

// Intermediate makes a CA signed by ca.
func (ca *CA) Intermediate(name string, opts ...Option) (*CA, error) {
	return newCA(name, ca, opts)
}

func newCA(name string, parent *CA, opts []Option) (*CA, error) {
	c := newConfig(opts)
	key, err := c.newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               c.name(name),
		NotBefore:             c.notBefore,
		NotAfter:              c.notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	issuer, signer := tmpl, key
	var parents []*x509.Certificate
	if parent != nil {
		issuer, signer = parent.Cert, parent.Key
		parents = append([]*x509.Certificate{parent.Cert}, parent.Parents...)
	}
	cert, err := create(tmpl, issuer, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("testpki: CA %q: %w", name, err)
	}
	return &CA{Cert: cert, Key: key, Parents: parents}, nil
}

func create(tmpl, issuer *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, pub, signer)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// Issue makes a leaf certificate signed by ca with subject CN cn. By default
// it serves TLS for 127.0.0.1 and localhost and may also be used as a client
// certificate; see ServerOnly, ClientOnly and WithHosts.
func (ca *CA) Issue(cn string, opts ...Option) (*Leaf, error) {
	c := newConfig(opts)
	key, err := c.newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      c.name(cn),
		NotBefore:    c.notBefore,
		NotAfter:     c.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if _, ok := key.(*rsa.PrivateKey); ok {
		// TLS 1.2's RSA key-exchange suites encrypt to the key.
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	if c.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if c.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	hosts := c.hosts
	if !c.hostsSet && c.server {
		hosts = defaultHosts
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	cert, err := create(tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("testpki: leaf %q: %w", cn, err)
	}
	chain := append([]*x509.Certificate{ca.Cert}, ca.Parents...)
	return &Leaf{Cert: cert, Key: key, Chain: chain}, nil
}

// CertPEM returns the CA's own certificate in PEM form, for
// ssl.truststore.certificates.
func (ca *CA) CertPEM() string { return certsPEM(ca.Cert) }

// Pool returns a pool that trusts the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteCAPEM writes the CA's certificate as a PEM truststore.
func (ca *CA) WriteCAPEM(path string) error {
	return writeFile(path, []byte(ca.CertPEM()), 0o644)
}

// WritePKCS12Truststore writes a Java-style PKCS#12 truststore (the CA marked
// as a trusted certificate entry, as keytool -importcert makes). An empty
// password makes an unencrypted store without integrity MAC, which Java and
// Kafka read with no ssl.truststore.password.
func (ca *CA) WritePKCS12Truststore(path, password string) error {
	enc := pkcs12.Modern
	if password == "" {
		enc = pkcs12.Passwordless
	}
	data, err := enc.EncodeTrustStore([]*x509.Certificate{ca.Cert}, password)
	if err != nil {
		return fmt.Errorf("testpki: encoding PKCS#12 truststore %s: %w", path, err)
	}
	return writeFile(path, data, 0o644)
}

// Leaf is an end-entity certificate with its key and issuing chain.
type Leaf struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// Chain are the issuing CAs, nearest first, up to and including the
	// root.
	Chain []*x509.Certificate
}

// TLSCertificate returns the leaf and its chain for tls.Config.Certificates.
func (l *Leaf) TLSCertificate() tls.Certificate {
	c := tls.Certificate{PrivateKey: l.Key, Leaf: l.Cert}
	for _, x := range append([]*x509.Certificate{l.Cert}, l.Chain...) {
		c.Certificate = append(c.Certificate, x.Raw)
	}
	return c
}

// CertPEM returns only the leaf certificate in PEM form.
func (l *Leaf) CertPEM() string { return certsPEM(l.Cert) }

// ChainPEM returns the leaf followed by its issuing CAs in PEM form, for
// ssl.keystore.certificate.chain.
func (l *Leaf) ChainPEM() string {
	return certsPEM(append([]*x509.Certificate{l.Cert}, l.Chain...)...)
}

// KeyPEM returns the private key as an unencrypted PKCS#8 PEM block, for
// ssl.keystore.key.
func (l *Leaf) KeyPEM() string {
	der, err := x509.MarshalPKCS8PrivateKey(l.Key)
	if err != nil {
		// Only unsupported key types fail, and this package makes none.
		panic(fmt.Sprintf("testpki: marshalling a generated key: %v", err))
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// WritePEM writes the chain (leaf first) to certPath and the key to keyPath.
func (l *Leaf) WritePEM(certPath, keyPath string) error {
	if err := writeFile(certPath, []byte(l.ChainPEM()), 0o644); err != nil {
		return err
	}
	return writeFile(keyPath, []byte(l.KeyPEM()), 0o600)
}

// WriteKeystorePEM writes key and chain into one file: the form Kafka reads
// with ssl.keystore.type=PEM and ssl.keystore.location.
func (l *Leaf) WriteKeystorePEM(path string) error {
	return writeFile(path, []byte(l.KeyPEM()+l.ChainPEM()), 0o600)
}

// WritePKCS12 writes a PKCS#12 keystore holding the key, the leaf and its
// chain, encrypted with password using modern algorithms (what keytool and
// OpenSSL 3 make by default).
func (l *Leaf) WritePKCS12(path, password string) error {
	data, err := pkcs12.Modern.Encode(l.Key, l.Cert, l.Chain, password)
	if err != nil {
		return fmt.Errorf("testpki: encoding PKCS#12 keystore %s: %w", path, err)
	}
	return writeFile(path, data, 0o600)
}

func certsPEM(certs ...*x509.Certificate) string {
	var b strings.Builder
	for _, c := range certs {
		b.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
	}
	return b.String()
}

func writeFile(path string, data []byte, perm os.FileMode) error {
	if err := os.WriteFile(path, data, perm); err != nil {
		return fmt.Errorf("testpki: %w", err)
	}
	return nil
}
