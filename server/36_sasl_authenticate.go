package server

import (
	"context"
	"errors"
	"time"

	"github.com/kbroker/kbroker/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate: v0-2
//
// Behaviour:
// * Carries one SASL token of the exchange SaslHandshake v1 started. A
//   failed exchange: SASL_AUTHENTICATION_FAILED with Kafka's message (the
//   same for an unknown user and a wrong password), then the connection
//   closes, as Kafka.
// * Without a handshake first, or on a listener without SASL:
//   ILLEGAL_SASL_STATE and the connection closes.
//
// Version notes:
// * v1: SessionLifetimeMillis, connections.max.reauth.ms (KIP-368)
// * v2: flexible versions

func init() { registerAPI(kmsg.SASLAuthenticate.Int16(), 0, 2, handleSASLAuthenticate) }

func handleSASLAuthenticate(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	a := rc.auth
	if a == nil || a.listener.sasl == nil || a.rawTokens {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		rc.closeAfter = true
		return resp, nil
	}
	now := time.Now()
	out, err := a.step(req.SASLAuthBytes, now)
	if err != nil {
		rc.closeAfter = true
		var authErr *sasl.AuthError
		if errors.As(err, &authErr) {
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := authErr.Message
			resp.ErrorMessage = &msg
			b.authFailed(rc, authErr)
			return resp, nil
		}
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	resp.SASLAuthBytes = out
	if req.Version >= 1 {
		resp.SessionLifetimeMillis = a.sessionLifetime(now)
	}
	return resp, nil
}
