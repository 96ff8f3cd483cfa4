package server

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kbroker/kbroker/internal/sasl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// connAuth is one connection's authentication, as Kafka's
// SaslServerAuthenticator: on a SASL listener a client may send only
// ApiVersions and SaslHandshake, then SaslAuthenticate (or, after a v0
// handshake, bare tokens) until the exchange succeeds; anything else
// closes the connection. With connections.max.reauth.ms, a session
// expires and the client must re-authenticate (KIP-368) before any other
// request. It is used by the connection's reading goroutine only.
type connAuth struct {
	listener *listener
	// principal is the authenticated "User:<name>"; on a listener without
	// SASL it is set when the connection opens (ANONYMOUS, or the TLS
	// client certificate's mapped name).
	principal string
	// user is the SASL user name once authenticated.
	user string
	// mechanism and exchange are the handshake's choice and the exchange
	// in progress (nil between exchanges).
	mechanism string
	exchange  sasl.Exchange
	// rawTokens: a v0 handshake was answered, so the next frames are
	// bare SASL tokens rather than SaslAuthenticate requests.
	rawTokens bool
	// authenticated is set once an exchange succeeded; expires is when
	// the session ends (zero: never).
	authenticated bool
	expires       time.Time
	// reauthenticating: a handshake after the first authentication.
	reauthenticating bool
	// done is set once the first exchange succeeded (read by the
	// connection's authentication timer).
	done *atomic.Bool
}

// errAuthClose is a request that, as in Kafka, closes the connection.
var errAuthClose = errors.New("request not allowed before SASL authentication")

// newConnAuth starts the authentication state of a connection on l whose
// principal, when l has no SASL, is principal.
func newConnAuth(l *listener, principal string, done *atomic.Bool) *connAuth {
	a := &connAuth{listener: l, principal: principal, done: done}
	if l.sasl == nil {
		a.authenticated = true
	}
	return a
}

// admit decides whether a request with key may be handled now. It
// returns an error (the connection closes) for a request Kafka refuses in
// the current state.
func (a *connAuth) admit(key int16, now time.Time) error {
	if a.listener.sasl == nil {
		return nil
	}
	switch key {
	case kmsg.ApiVersions.Int16(), kmsg.SASLHandshake.Int16(), kmsg.SASLAuthenticate.Int16():
		return nil
	}
	if !a.authenticated || a.exchange != nil {
		return fmt.Errorf("%w: %s", errAuthClose, kmsg.NameForKey(key))
	}
	if !a.expires.IsZero() && now.After(a.expires) {
		return fmt.Errorf("SASL session expired (connections.max.reauth.ms) and %s arrived before re-authentication", kmsg.NameForKey(key))
	}
	return nil
}

// handshake starts an exchange for mechanism. v0 means bare tokens
// follow.
func (a *connAuth) handshake(mechanism string, version int16) error {
	if a.exchange != nil {
		return fmt.Errorf("%w: handshake during an exchange", errIllegalSASLState)
	}
	if a.authenticated && a.user != "" {
		if version == 0 {
			return fmt.Errorf("%w: re-authentication needs SaslHandshake v1", errIllegalSASLState)
		}
		if mechanism != a.mechanism {
			return fmt.Errorf("%w: re-authentication must keep mechanism %s", errIllegalSASLState, a.mechanism)
		}
		a.reauthenticating = true
	}
	ex, err := a.listener.sasl.Start(mechanism)
	if err != nil {
		return err
	}
	a.mechanism, a.exchange, a.rawTokens = mechanism, ex, version == 0
	return nil
}

// frameLimit is the largest request frame the connection may send now:
// limit (socket.request.max.bytes), or less while it authenticates
// (sasl.server.max.receive.size, as Kafka's SaslServerAuthenticator).
func (a *connAuth) frameLimit(limit int32) int32 {
	if a.authenticating() {
		return min(limit, a.listener.saslMaxReceive)
	}
	return limit
}

// authenticating reports whether the connection has not authenticated yet
// or is in a re-authentication exchange.
func (a *connAuth) authenticating() bool {
	return a.listener.sasl != nil && (!a.authenticated || a.exchange != nil)
}

// errIllegalSASLState is a SASL request out of order (ILLEGAL_SASL_STATE).
var errIllegalSASLState = errors.New("illegal SASL state")

// step feeds one client token to the exchange. When the exchange ends
// well, the connection is authenticated until now + the session lifetime
// (connections.max.reauth.ms, 0 for no limit).
func (a *connAuth) step(token []byte, now time.Time) (out []byte, err error) {
	if a.exchange == nil {
		return nil, fmt.Errorf("%w: SaslAuthenticate without a handshake", errIllegalSASLState)
	}
	out, done, err := a.exchange.Step(token)
	if err != nil {
		a.exchange = nil
		return nil, err
	}
	if !done {
		return out, nil
	}
	ex := a.exchange
	user := ex.Principal()
	a.exchange, a.rawTokens = nil, false
	a.listener.authOK.Add(1)
	if a.reauthenticating && user != a.user {
		return nil, &sasl.AuthError{Mechanism: a.mechanism, Message: "Cannot change principals during re-authentication from User:" + a.user + ": User:" + user,
			Reason: "re-authentication as another user"}
	}
	a.user, a.principal, a.authenticated, a.reauthenticating = user, "User:"+user, true, false
	a.done.Store(true)
	var credential time.Time
	if ex, ok := ex.(sasl.Expiring); ok {
		credential = ex.CredentialExpiry()
	}
	a.expires = sessionExpiry(now, a.listener.reauth, credential)
	return out, nil
}

// sessionExpiry is when a session authenticated at now ends, as Kafka's
// SaslServerAuthenticator decides it: at the credential's expiry (an
// OAUTHBEARER token's exp; zero for none) or after reauth
// (connections.max.reauth.ms; 0 for no limit), whichever comes first, never
// before now; zero when neither limits it.
func sessionExpiry(now time.Time, reauth time.Duration, credential time.Time) time.Time {
	var end time.Time
	if reauth > 0 {
		end = now.Add(reauth)
	}
	if !credential.IsZero() && (end.IsZero() || credential.Before(end)) {
		end = credential
	}
	if !end.IsZero() && end.Before(now) {
		end = now
	}
	return end
}

// sessionLifetime is what SaslAuthenticate v1+ tells the client: how long
// the session lasts from now, 0 for no limit; 0 too, as in Kafka, while an
// exchange is still running and for a session that ends at once (a token
// past its exp within the allowed clock skew).
func (a *connAuth) sessionLifetime(now time.Time) int64 {
	if a.expires.IsZero() || a.exchange != nil || !a.expires.After(now) {
		return 0
	}
	return max(a.expires.Sub(now).Milliseconds(), 1)
}
