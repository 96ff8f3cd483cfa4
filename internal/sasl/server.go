package sasl

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrUnsupportedMechanism is returned (wrapped, with the enabled list) by
// Start for a mechanism the listener does not offer; the connection code
// answers UNSUPPORTED_SASL_MECHANISM with Enabled().
var ErrUnsupportedMechanism = errors.New("sasl: unsupported mechanism")

// ErrAuthenticationFailed is what every failed exchange matches with
// errors.Is, whatever the cause: the connection code answers
// SASL_AUTHENTICATION_FAILED with the error's text and closes the
// connection. The concrete error is an *AuthError.
var ErrAuthenticationFailed = errors.New("sasl: authentication failed")

// ErrExchangeOver is returned by Step once an exchange has succeeded or
// failed; Kafka answers ILLEGAL_SASL_STATE to such a request.
var ErrExchangeOver = errors.New("sasl: Step called after the exchange ended")

// AuthError is a failed exchange. Its Error text is exactly what Kafka
// puts in the SaslAuthenticate error_message, so it says nothing the
// client should not learn (in particular not whether the user exists).
// Reason is for the broker's own log: it may name the user, never a
// password or key.
type AuthError struct {
	Mechanism string
	Message   string
	Reason    string
}

func (e *AuthError) Error() string { return e.Message }

// Is makes every AuthError match ErrAuthenticationFailed.
func (e *AuthError) Is(target error) bool { return target == ErrAuthenticationFailed }

// Messages Kafka sends on failure. Kafka's SaslServerAuthenticator passes
// a mechanism's SaslAuthenticationException text through and replaces any
// other SaslException (bad proof, malformed message, unknown SCRAM user)
// with the generic text, so a client learns only what these say.
const (
	msgPlainInvalid  = "Authentication failed: Invalid username or password"
	msgAuthzMismatch = "Authentication failed: Client requested an authorization id that is different from username"
)

// genericFailure is Kafka's text for a SaslException; reason stays on the
// broker's side.
func genericFailure(mechanism, reason string) *AuthError {
	return &AuthError{
		Mechanism: mechanism,
		Message:   "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism,
		Reason:    reason,
	}
}

// Lookup is the broker's current view of the SCRAM credentials
// (/config/users). It is called once per SCRAM exchange, possibly from
// many connections at once, so it must be safe for concurrent use.
type Lookup interface {
	ScramCredential(user, mechanism string) (Credential, bool)
}

// ServerConfig configures a Server.
type ServerConfig struct {
	// Enabled is sasl.enabled.mechanisms for the listener, in the order
	// SaslHandshake should advertise them.
	Enabled []string
	// PlainUsers maps user name to password, from the user_<name> options
	// of the listener's PlainLoginModule JAAS entry (JAAS.PlainUsers).
	PlainUsers map[string]string
	// Scram finds SCRAM credentials; needed when a SCRAM mechanism is on.
	Scram Lookup
	// OAuthBearer checks OAUTHBEARER tokens; needed when OAUTHBEARER is
	// on (JAAS.UnsecuredValidator of the listener's entry).
	OAuthBearer *UnsecuredValidator
	// Now is the clock OAUTHBEARER tokens are checked against; nil means
	// time.Now.
	Now func() time.Time
	// Secret keys the fake credentials served for unknown SCRAM users. It
	// must stay the same across restarts and across the brokers of a
	// cluster: a real user's salt is the same everywhere, so a fake one
	// that changed would give the unknown user away.
	Secret []byte
}

// minSecretLen is the shortest Secret accepted: a guessable one would let
// an attacker recompute the fake salts and tell unknown users apart.
const minSecretLen = 16

// Server starts SASL exchanges for one listener. It is immutable once
// built and safe for concurrent use.
type Server struct {
	enabled []string
	// plain holds SHA-256 of each password: comparing fixed-size digests
	// keeps the password length out of the timing.
	plain  map[string][sha256.Size]byte
	scram  Lookup
	secret []byte
	oauth  *UnsecuredValidator
	now    func() time.Time
}

// NewServer checks cfg and builds a Server. PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512 and OAUTHBEARER (unsecured tokens) are implemented; any
// other name (including Kafka's default GSSAPI) is an error naming it.
func NewServer(cfg ServerConfig) (*Server, error) {
	if len(cfg.Enabled) == 0 {
		return nil, errors.New("sasl: no mechanisms enabled (sasl.enabled.mechanisms is empty)")
	}
	s := &Server{}
	for _, m := range cfg.Enabled {
		switch m {
		case Plain, ScramSHA256, ScramSHA512, OAuthBearer:
		case "GSSAPI":
			return nil, fmt.Errorf("sasl: mechanism %s is not supported (supported: %s)", m, supported)
		default:
			return nil, fmt.Errorf("sasl: unknown mechanism %q (supported: %s)", m, supported)
		}
		if !slices.Contains(s.enabled, m) {
			s.enabled = append(s.enabled, m)
		}
	}
	if slices.Contains(s.enabled, Plain) {
		if len(cfg.PlainUsers) == 0 {
			return nil, errors.New("sasl: PLAIN is enabled but no users are configured (no user_<name> options in the JAAS config)")
		}
		s.plain = make(map[string][sha256.Size]byte, len(cfg.PlainUsers))
		for user, password := range cfg.PlainUsers {
			s.plain[user] = sha256.Sum256([]byte(password))
		}
	}
	if slices.Contains(s.enabled, ScramSHA256) || slices.Contains(s.enabled, ScramSHA512) {
		if cfg.Scram == nil {
			return nil, errors.New("sasl: a SCRAM mechanism is enabled but no credential lookup is configured")
		}
		if len(cfg.Secret) < minSecretLen {
			return nil, fmt.Errorf("sasl: a SCRAM mechanism is enabled but the secret for unknown users has %d bytes, want at least %d", len(cfg.Secret), minSecretLen)
		}
		s.scram = cfg.Scram
		s.secret = slices.Clone(cfg.Secret)
	}
	if slices.Contains(s.enabled, OAuthBearer) {
		if cfg.OAuthBearer == nil {
			return nil, errors.New("sasl: OAUTHBEARER is enabled but no token validator is configured")
		}
		v := *cfg.OAuthBearer
		s.oauth = &v
		s.now = cfg.Now
		if s.now == nil {
			s.now = time.Now
		}
	}
	return s, nil
}

// supported lists the mechanisms NewServer takes, for its errors.
var supported = strings.Join([]string{Plain, ScramSHA256, ScramSHA512, OAuthBearer}, ", ")

// Enabled is the mechanisms the listener offers, for the SaslHandshake
// response.
func (s *Server) Enabled() []string { return slices.Clone(s.enabled) }

// Exchange is one authentication attempt. The connection code passes each
// SaslAuthenticate auth_bytes to Step and sends back out; after done it
// reads Principal. An Exchange is not safe for concurrent use.
type Exchange interface {
	// Step consumes the client's next message. A non-nil err ends the
	// exchange; it matches ErrAuthenticationFailed (an *AuthError) for
	// anything the client did wrong, ErrExchangeOver when called again
	// after the end.
	Step(in []byte) (out []byte, done bool, err error)
	// Principal is the authenticated user name once Step has reported
	// done, "" before.
	Principal() string
}

// Start begins an exchange for mechanism, as named in SaslHandshake.
func (s *Server) Start(mechanism string) (Exchange, error) {
	if !slices.Contains(s.enabled, mechanism) {
		// %q: the name comes from the client and goes to logs.
		return nil, fmt.Errorf("%w %q (enabled: %s)", ErrUnsupportedMechanism, mechanism, strings.Join(s.enabled, ", "))
	}
	switch mechanism {
	case Plain:
		return &plainExchange{users: s.plain}, nil
	case OAuthBearer:
		return &oauthExchange{validator: s.oauth, now: s.now}, nil
	default:
		h, _ := hashFor(mechanism)
		return &scramExchange{mechanism: mechanism, hash: h, lookup: s.scram, secret: s.secret}, nil
	}
}

// quote makes a client-supplied name safe for a log line: quoted, ASCII
// only, and cut short so a huge name cannot flood the log.
func quote(s string) string {
	const max = 128
	if len(s) > max {
		return strconv.QuoteToASCII(s[:max]) + "..."
	}
	return strconv.QuoteToASCII(s)
}
