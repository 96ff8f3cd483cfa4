package sasl

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
)

// plainExchange is RFC 4616 as Kafka's PlainSaslServer does it: one
// client message, an empty answer.
type plainExchange struct {
	users     map[string][sha256.Size]byte
	over      bool
	principal string
}

// noUser is compared against when the user is unknown, so that path does
// the same hashing and comparison as a wrong password.
var noUser [sha256.Size]byte

func (e *plainExchange) Step(in []byte) ([]byte, bool, error) {
	if e.over {
		return nil, false, ErrExchangeOver
	}
	e.over = true
	// message = [authzid] NUL authcid NUL passwd. Kafka tolerates a third
	// NUL (it drops what follows); this refuses it, as the RFC does.
	parts := bytes.Split(in, []byte{0})
	if len(parts) != 3 {
		return nil, false, genericFailure(Plain, "malformed PLAIN message: want 3 NUL-separated fields")
	}
	authzid, user, password := string(parts[0]), string(parts[1]), parts[2]
	// Kafka reports these two as a SaslException, hence the generic text.
	if user == "" {
		return nil, false, genericFailure(Plain, "empty user name")
	}
	if len(password) == 0 {
		return nil, false, genericFailure(Plain, "empty password")
	}
	want, known := e.users[user]
	if !known {
		want = noUser
	}
	got := sha256.Sum256(password)
	// Both operands are always computed and compared in full; known is
	// consulted only afterwards, so an unknown user costs the same.
	match := subtle.ConstantTimeCompare(got[:], want[:]) == 1
	if !match || !known {
		reason := "wrong password for user " + quote(user)
		if !known {
			reason = "unknown user " + quote(user)
		}
		return nil, false, &AuthError{Mechanism: Plain, Message: msgPlainInvalid, Reason: reason}
	}
	// Checked after the password, as Kafka does, so the answer to a wrong
	// password never depends on the authzid.
	if authzid != "" && authzid != user {
		return nil, false, &AuthError{Mechanism: Plain, Message: msgAuthzMismatch, Reason: "user " + quote(user) + " asked for another authorization id"}
	}
	e.principal = user
	return []byte{}, true, nil
}

func (e *plainExchange) Principal() string { return e.principal }
