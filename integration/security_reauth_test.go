package integration

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/sasl"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestSASLReauthentication checks connections.max.reauth.ms (KIP-368): a
// session's lifetime is announced in SaslAuthenticate; after it, any
// request but re-authentication closes the connection; re-authenticating
// on the connection extends it, but not as another user; and franz-go,
// which re-authenticates by itself, produces across several lifetimes.
func TestSASLReauthentication(t *testing.T) {
	const lifetime = 1500 * time.Millisecond
	saslAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	StartBroker(t,
		"listeners=PLAINTEXT://{addr},SASL_PLAINTEXT://"+saslAddr,
		"sasl.enabled.mechanisms=PLAIN",
		`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";`,
		"connections.max.reauth.ms="+strconv.Itoa(int(lifetime/time.Millisecond)))
	login := func(k *kconn, user, pass string) (int64, int16) {
		t.Helper()
		hs, err := k.handshake("PLAIN")
		if err != nil || hs.ErrorCode != 0 {
			t.Fatalf("handshake: %v %+v", err, hs)
		}
		resp, err := k.authenticate([]byte("\x00" + user + "\x00" + pass))
		if err != nil {
			t.Fatalf("authenticate: %v", err)
		}
		return resp.SessionLifetimeMillis, resp.ErrorCode
	}

	// A session that is not renewed ends the connection at its next
	// request after the lifetime.
	k, err := dialK(saslAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	authed := time.Now()
	life, code := login(k, "alice", "alice-secret")
	if code != 0 || life <= 0 || life > lifetime.Milliseconds() {
		t.Fatalf("login: code %d, session lifetime %d ms; want 0 and (0, %d]", code, life, lifetime.Milliseconds())
	}
	if _, err := k.metadata(); err != nil {
		t.Fatalf("metadata within the session: %v", err)
	}
	time.Sleep(time.Until(authed.Add(lifetime + 200*time.Millisecond))) // the lifetime itself is what is tested
	if _, err := k.send(metadataReq()); err != nil {
		t.Fatalf("sending metadata after expiry: %v", err)
	}
	expectClosedNow(t, k, "metadata after the session expired")

	// Re-authentication on the connection renews the session.
	k2, err := dialK(saslAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close()
	first := time.Now()
	login(k2, "alice", "alice-secret")
	time.Sleep(time.Until(first.Add(lifetime / 2)))
	if life, code := login(k2, "alice", "alice-secret"); code != 0 || life <= 0 {
		t.Fatalf("re-authentication: code %d, lifetime %d", code, life)
	}
	time.Sleep(time.Until(first.Add(lifetime + 200*time.Millisecond)))
	if _, err := k2.metadata(); err != nil {
		t.Fatalf("metadata after the first lifetime, renewed: %v", err)
	}
	// Re-authenticating as someone else fails and closes.
	if _, code := login(k2, "bob", "bob-secret"); code != 58 {
		t.Fatalf("re-authentication as another user: code %d, want SASL_AUTHENTICATION_FAILED (58)", code)
	}
	expectClosedNow(t, k2, "after re-authenticating as another user")

	// franz-go re-authenticates by itself: records keep being acknowledged
	// for three lifetimes.
	cl, err := kgo.NewClient(kgo.SeedBrokers(saslAddr), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		kgo.AllowAutoTopicCreation(), kgo.RecordRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := produceFor(t, cl, "reauth", 3*lifetime)
	t.Logf("franz-go produced %d records over %v with a %v session lifetime", n, 3*lifetime, lifetime)
}

// produceFor produces to topic, one record at a time, for span, failing
// the test at the first record not acknowledged; it returns the count.
func produceFor(t *testing.T, cl *kgo.Client, topic string, span time.Duration) int {
	t.Helper()
	ctx := testContext(t, span+25*time.Second)
	n := 0
	for end := time.Now().Add(span); time.Now().Before(end); n++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce %d, %v after the start: %v", n, time.Since(end.Add(-span)), err)
		}
	}
	return n
}

// TestOAuthBearerTokenLifetime: an OAUTHBEARER session lasts as long as its
// token, with connections.max.reauth.ms unset (Kafka's
// SaslServerAuthenticator): SaslAuthenticate announces the time left to
// the token's exp, a request after it closes the connection, and
// franz-go, which re-authenticates with a fresh token from its provider,
// produces across several token lifetimes.
func TestOAuthBearerTokenLifetime(t *testing.T) {
	saslAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	StartBroker(t,
		"listeners=PLAINTEXT://{addr},SASL_PLAINTEXT://"+saslAddr,
		"sasl.enabled.mechanisms=OAUTHBEARER",
		`listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;`)
	token := func(exp time.Time) (string, error) {
		return sasl.EncodeUnsecuredJWT(map[string]any{"sub": "alice", "exp": float64(exp.UnixMilli()) / 1000})
	}

	const rawLifetime = 3 * time.Second
	k, err := dialK(saslAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if hs, err := k.handshake("OAUTHBEARER"); err != nil || hs.ErrorCode != 0 {
		t.Fatalf("handshake: %v %+v", err, hs)
	}
	exp := time.Now().Add(rawLifetime)
	tok, err := token(exp)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := k.authenticate([]byte("n,,\x01auth=Bearer " + tok + "\x01\x01"))
	if err != nil || resp.ErrorCode != 0 || len(resp.SASLAuthBytes) != 0 {
		t.Fatalf("authenticate: %v, code %d, challenge %q; want authenticated", err, resp.ErrorCode, resp.SASLAuthBytes)
	}
	if life := resp.SessionLifetimeMillis; life <= 0 || life > rawLifetime.Milliseconds() {
		t.Fatalf("session lifetime %d ms, want (0, %d] (the token's)", life, rawLifetime.Milliseconds())
	}
	if _, err := k.metadata(); err != nil {
		t.Fatalf("metadata within the token's lifetime: %v", err)
	}
	time.Sleep(time.Until(exp.Add(200 * time.Millisecond))) // the lifetime itself is what is tested
	if _, err := k.send(metadataReq()); err != nil {
		t.Fatalf("sending metadata after the token expired: %v", err)
	}
	expectClosedNow(t, k, "metadata after the token expired")

	// franz-go logs in once per connection, then again on the same
	// connection before each session ends: more tokens than connections.
	const lifetime = 1500 * time.Millisecond
	var tokens, connects atomic.Int32
	cl, err := kgo.NewClient(kgo.SeedBrokers(saslAddr), kgo.AllowAutoTopicCreation(), kgo.RecordRetries(0),
		kgo.WithHooks(connectCounter{&connects}),
		kgo.SASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tokens.Add(1) // the provider runs for each login, on franz-go's goroutines
			tok, err := token(time.Now().Add(lifetime))
			return oauth.Auth{Token: tok}, err
		})))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := produceFor(t, cl, "oauth-reauth", 3*lifetime)
	cl.Close()
	if reauths := tokens.Load() - connects.Load(); reauths < 2 {
		t.Fatalf("franz-go logged in %d times on %d connections over %v with %v tokens, want >= 2 re-authentications",
			tokens.Load(), connects.Load(), 3*lifetime, lifetime)
	}
	t.Logf("franz-go produced %d records over %v: %d connections, %d tokens of %v", n, 3*lifetime, connects.Load(), tokens.Load(), lifetime)
}

// connectCounter counts a client's successful connections.
type connectCounter struct{ n *atomic.Int32 }

func (c connectCounter) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		c.n.Add(1)
	}
}

// TestSASLFrameLimit: until a client has authenticated, a frame larger than
// sasl.server.max.receive.size closes its connection (Kafka's
// SaslServerAuthenticator), whatever the mechanism, so an unauthenticated
// client cannot make the broker read and parse socket.request.max.bytes;
// once authenticated, the usual limit applies.
func TestSASLFrameLimit(t *testing.T) {
	const limit = 64 << 10
	saslAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	StartBroker(t,
		"listeners=PLAINTEXT://{addr},SASL_PLAINTEXT://"+saslAddr,
		"sasl.enabled.mechanisms=PLAIN,OAUTHBEARER",
		`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`,
		`listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;`,
		"sasl.server.max.receive.size="+strconv.Itoa(limit))

	// A frame header announcing more than the limit, before anything else.
	k, err := dialK(saslAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if _, err := k.Write([]byte{0, 1, 0, 1}); err != nil { // 65,537 bytes to come
		t.Fatal(err)
	}
	expectClosedNow(t, k, "a frame of limit+1 bytes before authenticating")

	// An OAUTHBEARER token past the limit, after the handshake.
	k2, err := dialK(saslAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close()
	if hs, err := k2.handshake("OAUTHBEARER"); err != nil || hs.ErrorCode != 0 {
		t.Fatalf("handshake: %v %+v", err, hs)
	}
	big := strings.Repeat("a", limit)
	if _, err := k2.send(&kmsg.SASLAuthenticateRequest{SASLAuthBytes: []byte("n,,\x01auth=Bearer " + big + "\x01\x01")}); err != nil {
		t.Fatalf("sending the large token: %v", err)
	}
	expectClosedNow(t, k2, "a SaslAuthenticate frame over the limit")

	// Authenticated, a produce request of four times the limit is taken.
	cl, err := kgo.NewClient(kgo.SeedBrokers(saslAddr), kgo.AllowAutoTopicCreation(),
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testContext(t, 20*time.Second)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "large", Value: []byte(strings.Repeat("v", 4*limit))}).FirstErr(); err != nil {
		t.Fatalf("a %d-byte record after authenticating: %v", 4*limit, err)
	}
}
