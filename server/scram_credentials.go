package server

import (
	"crypto/sha256"
	"log/slog"
	"sync"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/sasl"
)

// This file holds what the SCRAM credential APIs (50, 51) and SASL
// authentication share: the mechanism ids of the wire and the broker's
// credential lookup over its cluster view, where the controller publishes
// /config/users.

// scramMechanisms are Kafka's SCRAM mechanism ids (ScramMechanism.type) as
// DescribeUserScramCredentials and AlterUserScramCredentials carry them,
// in Kafka's order; 0 is UNKNOWN.
var scramMechanisms = [...]struct {
	id   int8
	name string
}{{1, sasl.ScramSHA256}, {2, sasl.ScramSHA512}}

// scramMechanismName is the mechanism with wire id id; "" for an unknown
// id, which the controller refuses with UNSUPPORTED_SASL_MECHANISM.
func scramMechanismName(id int8) string {
	for _, m := range scramMechanisms {
		if m.id == id {
			return m.name
		}
	}
	return ""
}

// maxLoggedBadCredentials bounds the memory of which malformed stored
// credentials were already logged; past it the memory starts over (a
// value may then be logged once more).
const maxLoggedBadCredentials = 1024

// scramCredentials is the broker's sasl.Lookup: the SCRAM credentials in
// its current cluster view, parsed on each lookup (once per SCRAM
// exchange), so a change reaches the next login without a restart. A
// stored value that does not parse is treated as absent (the login then
// fails like a wrong password) and logged once per value, without it.
type scramCredentials struct {
	view   func() *controller.Metadata
	logger *slog.Logger

	// mu guards logged: digests of the malformed values logged so far
	// (a digest, so the set keeps no key material).
	mu     sync.Mutex
	logged map[[sha256.Size]byte]bool
}

// scramCredentials returns the SCRAM credential lookup for the SASL
// listeners. Build it once per broker and share it: it remembers which
// malformed values it has logged.
func (b *Broker) scramCredentials() sasl.Lookup {
	// b.controller is read at each lookup, not now: the lookup may be
	// built before the control plane.
	return newScramCredentials(func() *controller.Metadata { return b.controller.Metadata() }, b.logger)
}

func newScramCredentials(view func() *controller.Metadata, logger *slog.Logger) *scramCredentials {
	return &scramCredentials{view: view, logger: logger, logged: map[[sha256.Size]byte]bool{}}
}

// ScramCredential implements sasl.Lookup.
func (s *scramCredentials) ScramCredential(user, mechanism string) (sasl.Credential, bool) {
	if mechanism != sasl.ScramSHA256 && mechanism != sasl.ScramSHA512 {
		return sasl.Credential{}, false
	}
	md := s.view()
	if md == nil {
		return sasl.Credential{}, false
	}
	stored, ok := md.UserConfigs[user][mechanism]
	if !ok {
		return sasl.Credential{}, false
	}
	cred, err := sasl.ParseCredential(mechanism, stored)
	if err != nil {
		s.logBad(user, mechanism, stored, err)
		return sasl.Credential{}, false
	}
	return cred, true
}

// logBad logs a malformed stored credential the first time it is seen.
// err names the field at fault, never a value.
func (s *scramCredentials) logBad(user, mechanism, stored string, err error) {
	h := sha256.New()
	h.Write([]byte(user))
	h.Write([]byte{0})
	h.Write([]byte(mechanism))
	h.Write([]byte{0})
	h.Write([]byte(stored))
	var key [sha256.Size]byte
	h.Sum(key[:0])
	s.mu.Lock()
	seen := s.logged[key]
	if !seen {
		if len(s.logged) >= maxLoggedBadCredentials {
			clear(s.logged)
		}
		s.logged[key] = true
	}
	s.mu.Unlock()
	if !seen {
		s.logger.Error("stored SCRAM credential is malformed: the user cannot authenticate with this mechanism until it is altered again",
			"user", user, "mechanism", mechanism, "err", err)
	}
}
