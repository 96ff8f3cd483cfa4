package tlsconf

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"software.sslmate.com/src/go-pkcs12"
)

// material is what the stores yield: the certificate to present and the
// roots to verify peers with.
type material struct {
	cert  *tls.Certificate // nil: no keystore configured
	roots *x509.CertPool   // nil: the system's roots, as Java's cacerts
}

// storeFiles are the files the stores are read from, which a Server
// watches: "" where a store is inline or absent.
type storeFiles struct {
	keystore, truststore string
}

func filesOf(s Settings) storeFiles {
	return storeFiles{keystore: s.get(KeystoreLocation), truststore: s.get(TruststoreLocation)}
}

// loadMaterial reads the keystore and truststore the settings describe.
func loadMaterial(s Settings) (material, error) {
	cert, err := loadKeystore(s)
	if err != nil {
		return material{}, err
	}
	roots, err := loadTruststore(s)
	if err != nil {
		return material{}, err
	}
	return material{cert: cert, roots: roots}, nil
}

// storeType reads ssl.keystore.type or ssl.truststore.type: PKCS12 (the
// default), PEM, or JKS. JKS is accepted as a type because Java reads a
// PKCS#12 file under either name (keystore.type.compat); a file that really
// is JKS is refused when read.
func storeType(s Settings, prop string) (string, error) {
	switch t := strings.ToUpper(s.get(prop)); t {
	case "":
		return "PKCS12", nil
	case "PKCS12", "PEM", "JKS":
		return t, nil
	default:
		return "", fmt.Errorf("tlsconf: %s %q not supported (PKCS12 or PEM)", prop, s.get(prop))
	}
}

// loadKeystore follows the checks of Kafka's DefaultSslEngineFactory
// createKeystore, so that a configuration Kafka refuses is refused here with
// the same reason.
func loadKeystore(s Settings) (*tls.Certificate, error) {
	typ, err := storeType(s, KeystoreType)
	if err != nil {
		return nil, err
	}
	loc, pass := s.get(KeystoreLocation), s.get(KeystorePassword)
	key, chain := s.get(KeystoreKey), s.get(KeystoreCertificateChain)
	switch {
	case key != "":
		switch {
		case typ != "PEM":
			return nil, fmt.Errorf("tlsconf: %s needs %s=PEM, not %s", KeystoreKey, KeystoreType, typ)
		case chain == "":
			return nil, fmt.Errorf("tlsconf: %s is set but %s is not", KeystoreKey, KeystoreCertificateChain)
		case loc != "":
			return nil, fmt.Errorf("tlsconf: %s and %s are both set; use one", KeystoreLocation, KeystoreKey)
		case pass != "":
			return nil, fmt.Errorf("tlsconf: %s cannot be used with a PEM keystore (only %s)", KeystorePassword, KeyPassword)
		}
		k, err := pemPrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: %s: %w", KeystoreKey, err)
		}
		certs, err := pemCertificates(chain)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: %s: %w", KeystoreCertificateChain, err)
		}
		c, err := orderChain(k, certs)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: %s and %s: %w", KeystoreKey, KeystoreCertificateChain, err)
		}
		return c, nil
	case chain != "":
		return nil, fmt.Errorf("tlsconf: %s is set but %s is not", KeystoreCertificateChain, KeystoreKey)
	case loc == "" && pass != "":
		return nil, fmt.Errorf("tlsconf: %s is set but %s is not", KeystorePassword, KeystoreLocation)
	case loc == "":
		return nil, nil // a client that presents no certificate
	}

	data, err := os.ReadFile(loc)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: %s: %w", KeystoreLocation, err)
	}
	if typ == "PEM" {
		if pass != "" {
			return nil, fmt.Errorf("tlsconf: %s cannot be used with a PEM keystore (only %s)", KeystorePassword, KeyPassword)
		}
		k, err := pemPrivateKey(string(data))
		if err == nil {
			var certs []*x509.Certificate
			if certs, err = pemCertificates(string(data)); err == nil {
				var c *tls.Certificate
				if c, err = orderChain(k, certs); err == nil {
					return c, nil
				}
			}
		}
		return nil, fmt.Errorf("tlsconf: PEM keystore %s (%s): %w", loc, KeystoreLocation, err)
	}

	if pass == "" {
		return nil, fmt.Errorf("tlsconf: %s is set but %s is not", KeystoreLocation, KeystorePassword)
	}
	if err := checkPKCS12(data, KeystoreType); err != nil {
		return nil, fmt.Errorf("tlsconf: keystore %s (%s): %w", loc, KeystoreLocation, err)
	}
	k, leaf, cas, err := pkcs12.DecodeChain(data, pass)
	if err != nil {
		err = pkcs12Error(err, KeystorePassword, false)
		if kp := s.get(KeyPassword); kp != "" && kp != pass {
			err = fmt.Errorf("%w (a %s different from %s is not supported for PKCS12)", err, KeyPassword, KeystorePassword)
		}
		return nil, fmt.Errorf("tlsconf: keystore %s (%s): %w", loc, KeystoreLocation, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("tlsconf: keystore %s (%s): private key type %T cannot sign", loc, KeystoreLocation, k)
	}
	c, err := orderChain(signer, append([]*x509.Certificate{leaf}, cas...))
	if err != nil {
		return nil, fmt.Errorf("tlsconf: keystore %s (%s): %w", loc, KeystoreLocation, err)
	}
	return c, nil
}

// loadTruststore follows Kafka's createTruststore. No truststore means the
// system's roots, as Java falls back to its cacerts.
func loadTruststore(s Settings) (*x509.CertPool, error) {
	typ, err := storeType(s, TruststoreType)
	if err != nil {
		return nil, err
	}
	loc, pass, inline := s.get(TruststoreLocation), s.get(TruststorePassword), s.get(TruststoreCertificates)
	var certs []*x509.Certificate
	switch {
	case inline != "":
		switch {
		case typ != "PEM":
			return nil, fmt.Errorf("tlsconf: %s needs %s=PEM, not %s", TruststoreCertificates, TruststoreType, typ)
		case loc != "":
			return nil, fmt.Errorf("tlsconf: %s and %s are both set; use one", TruststoreLocation, TruststoreCertificates)
		case pass != "":
			return nil, fmt.Errorf("tlsconf: %s cannot be used with a PEM truststore", TruststorePassword)
		}
		if certs, err = pemCertificates(inline); err != nil {
			return nil, fmt.Errorf("tlsconf: %s: %w", TruststoreCertificates, err)
		}
	case loc == "" && pass != "":
		return nil, fmt.Errorf("tlsconf: %s is set but %s is not", TruststorePassword, TruststoreLocation)
	case loc == "":
		return nil, nil
	default:
		data, err := os.ReadFile(loc)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: %s: %w", TruststoreLocation, err)
		}
		if typ == "PEM" {
			if pass != "" {
				return nil, fmt.Errorf("tlsconf: %s cannot be used with a PEM truststore", TruststorePassword)
			}
			if certs, err = pemCertificates(string(data)); err != nil {
				return nil, fmt.Errorf("tlsconf: PEM truststore %s (%s): %w", loc, TruststoreLocation, err)
			}
			break
		}
		if err := checkPKCS12(data, TruststoreType); err != nil {
			return nil, fmt.Errorf("tlsconf: truststore %s (%s): %w", loc, TruststoreLocation, err)
		}
		// Without a password Java reads the store without checking its
		// integrity; go-pkcs12 likewise reads an unencrypted store given
		// an empty one.
		if certs, err = pkcs12.DecodeTrustStore(data, pass); err != nil {
			return nil, fmt.Errorf("tlsconf: truststore %s (%s): %w", loc, TruststoreLocation, truststoreError(err, pass == ""))
		}
		if len(certs) == 0 {
			return nil, fmt.Errorf("tlsconf: truststore %s (%s) holds no certificate", loc, TruststoreLocation)
		}
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// checkPKCS12 recognizes the files that are not PKCS#12 by their first
// bytes, to say what to do about them rather than report an ASN.1 error.
func checkPKCS12(data []byte, typeProp string) error {
	switch {
	case bytes.HasPrefix(data, []byte{0xfe, 0xed, 0xfe, 0xed}):
		return errors.New("JKS keystores are not supported; convert with keytool -importkeystore -deststoretype PKCS12")
	case bytes.HasPrefix(data, []byte{0xce, 0xce, 0xce, 0xce}):
		return errors.New("JCEKS keystores are not supported; convert with keytool -importkeystore -deststoretype PKCS12")
	case bytes.Contains(data[:min(len(data), 1024)], []byte("-----BEGIN")):
		return fmt.Errorf("the file is PEM; set %s=PEM", typeProp)
	}
	return nil
}

// pkcs12Error names the password property on a wrong password, and never
// the password.
func pkcs12Error(err error, passProp string, unset bool) error {
	switch {
	case errors.Is(err, pkcs12.ErrIncorrectPassword) && unset:
		return fmt.Errorf("the store has a password but %s is not set", passProp)
	case errors.Is(err, pkcs12.ErrIncorrectPassword):
		return fmt.Errorf("wrong %s", passProp)
	case errors.Is(err, pkcs12.ErrDecryption):
		return fmt.Errorf("wrong %s or corrupt file: %w", passProp, err)
	}
	return err
}

func truststoreError(err error, unset bool) error {
	switch msg := err.Error(); {
	case strings.Contains(msg, "not marked as trusted"):
		// OpenSSL's pkcs12 -export -nokeys makes such files; Java does not
		// trust their certificates either (keytool lists no entry).
		return fmt.Errorf("%w: make it with keytool -importcert, or openssl pkcs12 -export -nokeys -jdktrust anyExtendedKeyUsage (OpenSSL 3.2 or later), or use %s=PEM", err, TruststoreType)
	case strings.Contains(msg, "authenticated safe"), strings.Contains(msg, "expected only certificate bags"):
		return fmt.Errorf("%w: a PKCS12 truststore holds trusted certificates only; is this a keystore?", err)
	}
	return pkcs12Error(err, TruststorePassword, unset)
}

// orderChain builds the certificate to present from a key and certificates
// in any order: the leaf is the certificate the key belongs to, followed by
// its issuers as far as they are present. Others are dropped: a keytool
// keystore made the way Kafka's documentation shows also holds the CA as a
// trusted entry, which may come before the leaf.
func orderChain(key crypto.Signer, certs []*x509.Certificate) (*tls.Certificate, error) {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	leafAt := -1
	for i, c := range certs {
		if pub, ok := c.PublicKey.(equaler); ok && pub.Equal(key.Public()) {
			leafAt = i
			break
		}
	}
	if leafAt < 0 {
		return nil, errors.New("the private key matches none of the certificates")
	}
	chain := []*x509.Certificate{certs[leafAt]}
	used := map[int]bool{leafAt: true}
	for cur := certs[leafAt]; !bytes.Equal(cur.RawIssuer, cur.RawSubject); {
		next := -1
		for i, c := range certs {
			if !used[i] && bytes.Equal(c.RawSubject, cur.RawIssuer) && cur.CheckSignatureFrom(c) == nil {
				next = i
				break
			}
		}
		if next < 0 {
			break
		}
		used[next] = true
		cur = certs[next]
		chain = append(chain, cur)
	}
	out := &tls.Certificate{PrivateKey: key, Leaf: chain[0]}
	for _, c := range chain {
		out.Certificate = append(out.Certificate, c.Raw)
	}
	return out, nil
}
