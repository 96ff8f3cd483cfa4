// Package sasl is the broker side of Kafka's SASL mechanisms (PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER with unsecured tokens): the
// credentials it stores, the
// sasl.jaas.config parser, and the challenge/response logic behind
// SaslHandshake and SaslAuthenticate. It does no I/O; the connection code
// feeds it the client's bytes.
//
// Not supported: GSSAPI (Kerberos), OAUTHBEARER with signed tokens (OIDC),
// and SCRAM with delegation tokens (the tokenauth extension fails
// authentication).
package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// Mechanism names as they appear in sasl.enabled.mechanisms and
// SaslHandshake requests.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
)

// Iteration bounds of Kafka's ScramMechanism, the same for both SCRAM
// variants. AlterUserScramCredentials rejects counts outside them; stored
// credentials (written by older tooling) are accepted with any positive
// count, so ParseCredential does not enforce them.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// hashFor is the hash behind a SCRAM mechanism; ok is false for anything
// else (PLAIN has no stored credential).
func hashFor(mechanism string) (h func() hash.Hash, ok bool) {
	switch mechanism {
	case ScramSHA256:
		return sha256.New, true
	case ScramSHA512:
		return sha512.New, true
	}
	return nil, false
}

// Credential is what the broker keeps for a SCRAM user (RFC 5802 section
// 3): enough to verify a client proof, not enough to log in as the user.
type Credential struct {
	Mechanism  string
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// NewScramCredential derives the stored form from what an
// AlterUserScramCredentials upsertion carries: the salt and the salted
// password (Hi(password, salt, i)), never the password itself.
// It checks only that iterations is positive; the caller applies
// MinIterations and MaxIterations where Kafka does.
func NewScramCredential(mechanism string, salt, saltedPassword []byte, iterations int32) (Credential, error) {
	h, ok := hashFor(mechanism)
	if !ok {
		return Credential{}, fmt.Errorf("sasl: new credential: %q is not a SCRAM mechanism", mechanism)
	}
	switch {
	case len(salt) == 0:
		return Credential{}, fmt.Errorf("sasl: new %s credential: empty salt", mechanism)
	case len(saltedPassword) == 0:
		return Credential{}, fmt.Errorf("sasl: new %s credential: empty salted password", mechanism)
	case iterations <= 0:
		return Credential{}, fmt.Errorf("sasl: new %s credential: %d iterations, want at least 1", mechanism, iterations)
	}
	clientKey := hmacSum(h, saltedPassword, "Client Key")
	storedKey := h()
	storedKey.Write(clientKey)
	return Credential{
		Mechanism:  mechanism,
		Salt:       append([]byte(nil), salt...),
		StoredKey:  storedKey.Sum(nil),
		ServerKey:  hmacSum(h, saltedPassword, "Server Key"),
		Iterations: iterations,
	}, nil
}

// SaltPassword is SCRAM's Hi(password, salt, i), PBKDF2 with the
// mechanism's HMAC. Like Kafka's ScramFormatter it uses the password's
// UTF-8 bytes as they are, without SASLprep.
func SaltPassword(mechanism string, password string, salt []byte, iterations int32) ([]byte, error) {
	h, ok := hashFor(mechanism)
	if !ok {
		return nil, fmt.Errorf("sasl: salt password: %q is not a SCRAM mechanism", mechanism)
	}
	if iterations <= 0 {
		return nil, fmt.Errorf("sasl: salt password: %d iterations, want at least 1", iterations)
	}
	out, err := pbkdf2.Key(h, password, salt, int(iterations), h().Size())
	if err != nil {
		// The error names no input: pbkdf2 complains only about lengths.
		return nil, fmt.Errorf("sasl: salt password for %s: %w", mechanism, err)
	}
	return out, nil
}

func hmacSum(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// Field names of Kafka's ZooKeeper form (ScramCredentialUtils).
const (
	fieldSalt       = "salt"
	fieldStoredKey  = "stored_key"
	fieldServerKey  = "server_key"
	fieldIterations = "iterations"
)

// String is Kafka's ZooKeeper form of the credential
// (ScramCredentialUtils.credentialToString):
//
//	salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>
//
// It is for storage only: never log it or put it in an error. The stored
// and server keys let whoever holds them brute-force the password offline
// and impersonate the broker to clients.
func (c Credential) String() string {
	enc := base64.StdEncoding
	return fieldSalt + "=" + enc.EncodeToString(c.Salt) +
		"," + fieldStoredKey + "=" + enc.EncodeToString(c.StoredKey) +
		"," + fieldServerKey + "=" + enc.EncodeToString(c.ServerKey) +
		"," + fieldIterations + "=" + strconv.FormatInt(int64(c.Iterations), 10)
}

// Format keeps the salt and keys out of anything printed through fmt
// (%v, %+v, %s, log and slog lines): a Credential printed by accident
// shows only its mechanism and iteration count. Call String explicitly
// for the stored form.
func (c Credential) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, "sasl.Credential{Mechanism:%s Iterations:%d (salt and keys redacted)}", c.Mechanism, c.Iterations)
}

// ParseCredential reads the form String writes
// (ScramCredentialUtils.credentialFromString) for the given SCRAM
// mechanism. Fields may come in any order; each of the four must appear
// exactly once. Errors name the field at fault, never its value.
func ParseCredential(mechanism, s string) (Credential, error) {
	h, ok := hashFor(mechanism)
	if !ok {
		return Credential{}, fmt.Errorf("sasl: parse credential: %q is not a SCRAM mechanism", mechanism)
	}
	c := Credential{Mechanism: mechanism}
	seen := map[string]bool{}
	for i, tok := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(tok, "=")
		if !ok || name == "" {
			return Credential{}, fmt.Errorf("sasl: parse %s credential: field %d is not name=value", mechanism, i+1)
		}
		if seen[name] {
			return Credential{}, fmt.Errorf("sasl: parse %s credential: field %s appears twice", mechanism, name)
		}
		seen[name] = true
		var err error
		switch name {
		case fieldSalt:
			c.Salt, err = decodeBase64(value)
		case fieldStoredKey:
			c.StoredKey, err = decodeBase64(value)
		case fieldServerKey:
			c.ServerKey, err = decodeBase64(value)
		case fieldIterations:
			var n int64
			n, err = strconv.ParseInt(value, 10, 32)
			if err == nil && n <= 0 {
				err = errors.New("not positive")
			}
			// strconv's error quotes the input; keep only the reason.
			var numErr *strconv.NumError
			if errors.As(err, &numErr) {
				err = numErr.Err
			}
			c.Iterations = int32(n)
		default:
			// Kafka rejects extra fields too (it wants exactly four). The
			// name is not echoed: in a mangled record it may be key material.
			return Credential{}, fmt.Errorf("sasl: parse %s credential: field %d has an unknown name", mechanism, i+1)
		}
		if err != nil {
			return Credential{}, fmt.Errorf("sasl: parse %s credential: field %s: %w", mechanism, name, err)
		}
	}
	for _, f := range []string{fieldSalt, fieldStoredKey, fieldServerKey, fieldIterations} {
		if !seen[f] {
			return Credential{}, fmt.Errorf("sasl: parse %s credential: missing field %s", mechanism, f)
		}
	}
	// A key of the wrong length can never match a proof; call the record
	// corrupt now rather than fail every login later.
	size := h().Size()
	switch {
	case len(c.Salt) == 0:
		return Credential{}, fmt.Errorf("sasl: parse %s credential: field %s: empty", mechanism, fieldSalt)
	case len(c.StoredKey) != size:
		return Credential{}, fmt.Errorf("sasl: parse %s credential: field %s: %d bytes, want %d", mechanism, fieldStoredKey, len(c.StoredKey), size)
	case len(c.ServerKey) != size:
		return Credential{}, fmt.Errorf("sasl: parse %s credential: field %s: %d bytes, want %d", mechanism, fieldServerKey, len(c.ServerKey), size)
	}
	return c, nil
}

// decodeBase64 accepts padded and unpadded standard base64, as Java's
// Base64.getDecoder() does.
func decodeBase64(s string) ([]byte, error) {
	if strings.HasSuffix(s, "=") || len(s)%4 == 0 {
		return base64.StdEncoding.Strict().DecodeString(s)
	}
	return base64.RawStdEncoding.Strict().DecodeString(s)
}
