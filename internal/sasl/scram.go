package sasl

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The SCRAM exchange (RFC 5802, RFC 7677) is hand-written rather than
// built on github.com/xdg-go/scram: the version this module already pulls
// in (v1.1.2, through kafka-go) panics on some malformed client messages
// (an empty gs2 flag, a proof longer than the hash), and the fixed
// release would mean raising a dependency other packages share. The
// parsing we need on top (Kafka's tokenauth extension, saslname escapes,
// the gs2 header rules) would have had to be written here anyway.

type scramState int

const (
	scramClientFirst scramState = iota
	scramClientFinal
	scramOver
)

type scramExchange struct {
	mechanism string
	hash      func() hash.Hash
	lookup    Lookup
	secret    []byte

	state           scramState
	user            string
	gs2Header       string
	clientFirstBare string
	serverFirst     string
	nonce           string // client nonce + server nonce
	cred            Credential
	// whyNot is set when cred is a fake: the reason the exchange must
	// fail, reported only at client-final.
	whyNot    string
	principal string
}

func (e *scramExchange) Step(in []byte) ([]byte, bool, error) {
	switch e.state {
	case scramClientFirst:
		out, err := e.clientFirst(string(in))
		if err != nil {
			e.state = scramOver
			return nil, false, err
		}
		e.state = scramClientFinal
		return out, false, nil
	case scramClientFinal:
		e.state = scramOver
		out, err := e.clientFinal(string(in))
		// Drop the credential either way: nothing needs it any more.
		e.cred = Credential{}
		if err != nil {
			return nil, false, err
		}
		e.principal = e.user
		return out, true, nil
	default:
		return nil, false, ErrExchangeOver
	}
}

func (e *scramExchange) Principal() string { return e.principal }

func (e *scramExchange) fail(format string, args ...any) *AuthError {
	return genericFailure(e.mechanism, fmt.Sprintf(format, args...))
}

// clientFirst reads
//
//	gs2-header = "n," [ "a=" saslname ] ","
//	client-first-message-bare = "n=" saslname ",r=" c-nonce ["," extensions]
//
// and answers server-first-message = "r=" nonce ",s=" salt ",i=" count.
//
// Kafka's ScramSaslServer fails an unknown user right here. We instead
// answer with a fake credential derived from the Secret and fail at
// client-final, so that an unknown user and a wrong password take the
// same round trips, the same work and the same final message: otherwise
// the step at which a login fails tells an attacker which user names
// exist.
func (e *scramExchange) clientFirst(msg string) ([]byte, error) {
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return nil, e.fail("malformed client-first message: no gs2 header")
	}
	switch {
	case flag == "n":
	case flag == "y" || strings.HasPrefix(flag, "p="):
		// Kafka accepts only "n": no channel binding on its listeners.
		return nil, e.fail("client-first message asks for channel binding (gs2 flag %s)", quote(flag))
	default:
		return nil, e.fail("malformed client-first message: bad gs2 flag")
	}
	authzField, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, e.fail("malformed client-first message: gs2 header not terminated")
	}
	var authzid string
	if authzField != "" {
		v, ok := strings.CutPrefix(authzField, "a=")
		if !ok {
			return nil, e.fail("malformed client-first message: bad authzid field")
		}
		var err error
		if authzid, err = decodeSaslName(v); err != nil {
			return nil, e.fail("malformed client-first message: authzid: %v", err)
		}
	}
	e.gs2Header = msg[:len(msg)-len(bare)]

	fields := strings.Split(bare, ",")
	if strings.HasPrefix(fields[0], "m=") {
		return nil, e.fail("client-first message has a mandatory extension")
	}
	if len(fields) < 2 {
		return nil, e.fail("malformed client-first message: want n= and r= fields")
	}
	name, ok := strings.CutPrefix(fields[0], "n=")
	if !ok {
		return nil, e.fail("malformed client-first message: no n= field")
	}
	user, err := decodeSaslName(name)
	if err != nil {
		return nil, e.fail("malformed client-first message: user name: %v", err)
	}
	clientNonce, ok := strings.CutPrefix(fields[1], "r=")
	if !ok || !printable(clientNonce) {
		return nil, e.fail("malformed client-first message: bad r= field")
	}
	exts, err := parseExtensions(fields[2:])
	if err != nil {
		return nil, e.fail("malformed client-first message: %v", err)
	}
	// Kafka's only extension: the user and password are a delegation
	// token's id and HMAC. kbroker has no delegation tokens.
	if strings.EqualFold(exts["tokenauth"], "true") {
		return nil, e.fail("user %s asked for delegation token authentication, which is not supported", quote(user))
	}
	// Kafka checks this at the same point, for known and (here) unknown
	// users alike, so it reveals nothing about the user.
	if authzid != "" && authzid != user {
		return nil, &AuthError{Mechanism: e.mechanism, Message: msgAuthzMismatch, Reason: "user " + quote(user) + " asked for another authorization id"}
	}
	e.user = user
	e.clientFirstBare = bare

	// The fake is derived for every user, known or not, so both paths do
	// the same work before the lookup.
	e.cred = fakeCredential(e.secret, e.mechanism, e.hash, user)
	e.whyNot = "unknown user " + quote(user)
	if c, ok := e.lookup.ScramCredential(user, e.mechanism); ok {
		if why := e.unusable(c); why != "" {
			e.whyNot = "credential of user " + quote(user) + " " + why
		} else {
			e.cred, e.whyNot = c, ""
		}
	}

	e.nonce = clientNonce + randomBase36()
	e.serverFirst = "r=" + e.nonce +
		",s=" + base64.StdEncoding.EncodeToString(e.cred.Salt) +
		",i=" + strconv.FormatInt(int64(e.cred.Iterations), 10)
	return []byte(e.serverFirst), nil
}

// unusable says why a stored credential cannot be served ("" if it can).
// Kafka refuses one below the minimum iteration count too; here such a
// user looks unknown rather than failing a step early.
func (e *scramExchange) unusable(c Credential) string {
	size := e.hash().Size()
	switch {
	case c.Mechanism != "" && c.Mechanism != e.mechanism:
		return "is for " + c.Mechanism
	case len(c.Salt) == 0:
		return "has no salt"
	case len(c.StoredKey) != size || len(c.ServerKey) != size:
		return "has keys of the wrong length"
	case c.Iterations < MinIterations:
		return fmt.Sprintf("has %d iterations, below the minimum %d", c.Iterations, MinIterations)
	}
	return ""
}

// clientFinal reads
//
//	client-final-message = "c=" base64(gs2-header) ",r=" nonce ["," extensions] ",p=" base64(proof)
//
// verifies the proof and answers server-final-message = "v=" signature.
func (e *scramExchange) clientFinal(msg string) ([]byte, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, e.fail("malformed client-final message: no proof")
	}
	withoutProof := msg[:i]
	proof, err := base64.StdEncoding.Strict().DecodeString(msg[i+len(",p="):])
	if err != nil {
		return nil, e.fail("malformed client-final message: proof: %v", err)
	}
	fields := strings.Split(withoutProof, ",")
	if len(fields) < 2 {
		return nil, e.fail("malformed client-final message: want c= and r= fields")
	}
	cb, ok := strings.CutPrefix(fields[0], "c=")
	if !ok {
		return nil, e.fail("malformed client-final message: no c= field")
	}
	// Without channel binding, c= carries the gs2 header of client-first
	// (RFC 5802 section 5.1). Kafka does not check it; the RFC says to.
	if cbind, err := base64.StdEncoding.Strict().DecodeString(cb); err != nil || string(cbind) != e.gs2Header {
		return nil, e.fail("client-final message: channel binding does not match the gs2 header")
	}
	nonce, ok := strings.CutPrefix(fields[1], "r=")
	if !ok {
		return nil, e.fail("malformed client-final message: no r= field")
	}
	if _, err := parseExtensions(fields[2:]); err != nil {
		return nil, e.fail("malformed client-final message: %v", err)
	}
	// Kafka's ScramSaslServer checks only that the nonce ends with the
	// server's (client nonce + server part): librdkafka sends the client
	// nonce twice (its own, then the server's whole nonce), and Kafka
	// accepts it. The proof still covers the message exactly as sent.
	if !strings.HasSuffix(nonce, e.nonce) {
		return nil, e.fail("client-final message: nonce does not match")
	}
	size := e.hash().Size()
	if len(proof) != size {
		return nil, e.fail("client-final message: proof has %d bytes, want %d", len(proof), size)
	}

	authMessage := []byte(e.clientFirstBare + "," + e.serverFirst + "," + withoutProof)
	// ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage); the proof
	// holds if H(ClientKey) is the stored key.
	clientKey := hmacBytes(e.hash, e.cred.StoredKey, authMessage)
	subtle.XORBytes(clientKey, clientKey, proof)
	h := e.hash()
	h.Write(clientKey)
	valid := subtle.ConstantTimeCompare(h.Sum(nil), e.cred.StoredKey) == 1
	// Both failures look the same to the client: a fake credential fails
	// here, after the same computation as a wrong password.
	if e.whyNot != "" {
		return nil, e.fail("%s", e.whyNot)
	}
	if !valid {
		return nil, e.fail("wrong password for user %s", quote(e.user))
	}
	sig := hmacBytes(e.hash, e.cred.ServerKey, authMessage)
	return []byte("v=" + base64.StdEncoding.EncodeToString(sig)), nil
}

func hmacBytes(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// decodeSaslName undoes RFC 5802's escaping of ',' as "=2C" and '=' as
// "=3D"; any other '=' is an error, as are NUL and invalid UTF-8.
func decodeSaslName(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty")
	}
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return "", errors.New("not UTF-8 text")
	}
	var b strings.Builder
	for s != "" {
		i := strings.IndexByte(s, '=')
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errors.New("bad '=' escape")
		}
		s = s[i+3:]
	}
	return b.String(), nil
}

// printable is RFC 5802's nonce alphabet: non-empty, 0x21-0x7E except ','.
func printable(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

// parseExtensions reads the name=value fields after the nonce: names are
// letters, values any UTF-8 but NUL (the ',' split already removed
// commas).
func parseExtensions(fields []string) (map[string]string, error) {
	exts := map[string]string{}
	for _, f := range fields {
		name, value, ok := strings.Cut(f, "=")
		if !ok || name == "" || value == "" {
			return nil, errors.New("malformed extension")
		}
		for i := 0; i < len(name); i++ {
			if c := name[i]; (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
				return nil, errors.New("malformed extension name")
			}
		}
		if !utf8.ValidString(value) || strings.IndexByte(value, 0) >= 0 {
			return nil, errors.New("malformed extension value")
		}
		exts[name] = value
	}
	return exts, nil
}

// fakeIterations is the count a fake credential advertises: Kafka's
// minimum, which is also what its tools use by default.
const fakeIterations = 4096

// fakeCredential is what an unknown user is served: stable for a given
// Secret, mechanism and user (a real user's salt does not change between
// attempts either), unpredictable without the Secret, and shaped like a
// credential made by Kafka's tools (a salt of base36 text, 4096
// iterations). No proof can match it short of inverting the hash.
func fakeCredential(secret []byte, mechanism string, h func() hash.Hash, user string) Credential {
	derive := func(label string) []byte {
		m := hmac.New(h, secret)
		m.Write([]byte(label + "\x00" + mechanism + "\x00" + user))
		return m.Sum(nil)
	}
	return Credential{
		Mechanism:  mechanism,
		Salt:       []byte(base36of130(derive("salt"))),
		StoredKey:  derive("stored_key"),
		ServerKey:  derive("server_key"),
		Iterations: fakeIterations,
	}
}

// randomBase36 is a fresh server nonce in the form Kafka's
// ScramFormatter.secureRandomString makes.
func randomBase36() string {
	b := make([]byte, 17)
	// crypto/rand.Read does not fail (Go 1.24+): it aborts the program
	// rather than return weak bytes.
	_, _ = rand.Read(b)
	return base36of130(b)
}

// base36of130 renders the first 130 bits of b (at least 17 bytes) in base
// 36, as Java's new BigInteger(130, random).toString(36) does: the form of
// Kafka's nonces and of the salts its Admin client generates.
func base36of130(b []byte) string {
	n := make([]byte, 17)
	copy(n, b)
	n[0] &= 0x03 // 17 bytes are 136 bits; keep 130
	return new(big.Int).SetBytes(n).Text(36)
}
