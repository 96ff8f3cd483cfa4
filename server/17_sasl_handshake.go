package server

import (
	"context"
	"errors"

	"github.com/kbroker/kbroker/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake: v0-1
//
// Behaviour:
// * On a SASL listener, picks the mechanism for the exchange that
//   follows; the response always lists the listener's enabled mechanisms
//   (sasl.enabled.mechanisms). A mechanism not enabled:
//   UNSUPPORTED_SASL_MECHANISM, and the connection stays open so the
//   client can pick another, as Kafka.
// * On a listener without SASL, or in the middle of an exchange:
//   ILLEGAL_SASL_STATE.
// * A handshake after authentication starts re-authentication (KIP-368),
//   with the same mechanism.
//
// Version notes:
// * v0: the SASL tokens follow as bare frames, not SaslAuthenticate
// * v1: the tokens follow in SaslAuthenticate requests

func init() { registerAPI(kmsg.SASLHandshake.Int16(), 0, 1, handleSASLHandshake) }

func handleSASLHandshake(_ context.Context, _ *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	a := rc.auth
	if a == nil || a.listener.sasl == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	resp.SupportedMechanisms = a.listener.sasl.Enabled()
	err := a.handshake(req.Mechanism, req.Version)
	switch {
	case err == nil:
	case errors.Is(err, sasl.ErrUnsupportedMechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	default:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		rc.closeAfter = true
	}
	return resp, nil
}
