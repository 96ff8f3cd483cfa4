package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/testpki"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Bad input on TLS and SASL listeners: failed and out-of-order SASL
// exchanges, foreign protocols and silent connections, a flood of failed
// logins, and no password in the broker's log afterwards. The exchanges
// are driven by hand over raw connections (kmsg requests, franz-go's
// client mechanisms stepped one token at a time) so that every answer,
// round trip and close can be seen.

const (
	// authBound is the broker's bound on a new connection's TLS handshake
	// and SASL exchange together (server.authTimeout); closeBound is what
	// the tests allow for it.
	authBound  = 10 * time.Second
	closeBound = 15 * time.Second
	// promptClose bounds a close that must follow a refused request at
	// once: half of authBound, so that a broker that ignored the request
	// and let the authentication timer close the connection fails.
	promptClose = authBound / 2
	// floodAttempts is how many failed logins the flood makes.
	floodAttempts = 10000
	floodWorkers  = 8
)

// secureBroker is one broker with a PLAINTEXT (probed, inter-broker),
// SSL, SASL_SSL and SASL_PLAINTEXT listener; the SASL listeners offer
// PLAIN (user alice, from the JAAS config) and SCRAM-SHA-256/512 (user
// bob, created through AlterUserScramCredentials).
type secureBroker struct {
	*Broker
	tls                      *tls.Config // trusts the test CA
	ssl, saslSSL, saslPlain  string      // listener addresses
	suffix                   string      // random, in every password
	alicePass                string      // PLAIN
	bob256, bob512           string      // SCRAM-SHA-256 and -512
	passwords                []string    // every password the test used
	scramSecrets             map[string][]byte
	enabledMechanisms        []string
	unknownUser, wrongPasswd string
}

// password makes a distinctive password the broker's log must never hold.
func (s *secureBroker) password(what string) string {
	p := "pw-MUST-NOT-LEAK-" + s.suffix + "-" + what
	s.passwords = append(s.passwords, p)
	return p
}

func startSecureBroker(t *testing.T) *secureBroker {
	t.Helper()
	var rnd [8]byte
	rand.Read(rnd[:])
	s := &secureBroker{suffix: hex.EncodeToString(rnd[:]), scramSecrets: map[string][]byte{},
		enabledMechanisms: []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}}
	s.alicePass = s.password("alice")
	s.bob256 = s.password("bob-sha256")
	s.bob512 = s.password("bob-sha512")
	s.wrongPasswd = s.password("wrong")
	s.unknownUser = "nobody-" + s.suffix

	dir := t.TempDir()
	ca, err := testpki.NewCA("kbroker badinput CA")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue("kbroker", testpki.ServerOnly())
	if err != nil {
		t.Fatal(err)
	}
	keystore, caFile := filepath.Join(dir, "broker.pem"), filepath.Join(dir, "ca.pem")
	if err := leaf.WriteKeystorePEM(keystore); err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteCAPEM(caFile); err != nil {
		t.Fatal(err)
	}
	s.tls = &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}

	ports := map[int]bool{}
	for len(ports) < 3 {
		ports[freePort(t)] = true
	}
	var p []int
	for port := range ports {
		p = append(p, port)
	}
	s.saslSSL = "127.0.0.1:" + strconv.Itoa(p[0])
	s.saslPlain = "127.0.0.1:" + strconv.Itoa(p[1])
	s.ssl = "127.0.0.1:" + strconv.Itoa(p[2])
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="` + s.alicePass + `";`
	s.Broker = StartBroker(t,
		"listeners=PLAINTEXT://{addr},SASL_SSL://"+s.saslSSL+",SASL_PLAINTEXT://"+s.saslPlain+",SSL://"+s.ssl,
		"inter.broker.listener.name=PLAINTEXT",
		"sasl.enabled.mechanisms="+strings.Join(s.enabledMechanisms, ","),
		"listener.name.sasl_plaintext.plain.sasl.jaas.config="+jaas,
		"listener.name.sasl_ssl.plain.sasl.jaas.config="+jaas,
		"ssl.keystore.type=PEM",
		"ssl.keystore.location="+keystore,
		"ssl.truststore.type=PEM",
		"ssl.truststore.location="+caFile,
	)

	// SCRAM users, through the PLAINTEXT listener.
	ctx := testContext(t, 30*time.Second)
	upserts := []kadm.UpsertSCRAM{
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: s.bob256},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: s.bob512},
	}
	altered, err := s.Admin(t).AlterUserSCRAMs(ctx, nil, upserts)
	if err == nil {
		err = altered.Error()
	}
	if err != nil {
		t.Fatalf("AlterUserSCRAMs: %v", err)
	}
	// kadm filled in each salt and salted password: what the broker
	// stores derives from them, and none of it may reach the log.
	for _, u := range upserts {
		for what, key := range scramKeys(u.Mechanism, u.SaltedPassword) {
			s.scramSecrets[u.Mechanism.String()+" "+what] = key
		}
	}
	for _, m := range []sasl.Mechanism{
		scram.Auth{User: "bob", Pass: s.bob256}.AsSha256Mechanism(),
		scram.Auth{User: "bob", Pass: s.bob512}.AsSha512Mechanism(),
	} {
		checkFor(t, 15*time.Second, 100*time.Millisecond, func() error {
			return s.login(s.saslPlain, nil, m)
		})
	}
	return s
}

// scramKeys are the secrets derived from a SCRAM salted password (RFC
// 5802): the salted password itself, ClientKey, StoredKey and ServerKey.
func scramKeys(m kadm.ScramMechanism, salted []byte) map[string][]byte {
	h := sha256.New
	if m == kadm.ScramSha512 {
		h = sha512.New
	}
	clientKey := hmacOf(h, salted, []byte("Client Key"))
	stored := h()
	stored.Write(clientKey)
	return map[string][]byte{
		"salted password": salted,
		"client key":      clientKey,
		"stored key":      stored.Sum(nil),
		"server key":      hmacOf(h, salted, []byte("Server Key")),
	}
}

func hmacOf(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// login authenticates a fresh connection to addr with m and asks for
// Metadata on it; nil when that all worked.
func (s *secureBroker) login(addr string, tlsCfg *tls.Config, m sasl.Mechanism) error {
	k, err := dialK(addr, tlsCfg)
	if err != nil {
		return err
	}
	defer k.Close()
	out, err := k.authenticateWith(m)
	if err != nil {
		return err
	}
	if out.code != 0 {
		return fmt.Errorf("%s on %s: %s: %s", m.Name(), addr, errName(out.code), out.message)
	}
	_, err = k.metadata()
	return err
}

// kconn is a hand-driven Kafka connection, plain or TLS. Its methods
// return errors instead of failing the test, so goroutines may use it.
type kconn struct {
	net.Conn
	corr int32
}

// dialK connects to addr, with a TLS handshake when tlsCfg is set.
func dialK(addr string, tlsCfg *tls.Config) (*kconn, error) {
	c, err := net.DialTimeout("tcp", addr, rawTimeout)
	if err != nil {
		return nil, err
	}
	k := &kconn{Conn: c}
	if tlsCfg != nil {
		cfg := tlsCfg.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
		tc := tls.Client(c, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), rawTimeout)
		defer cancel()
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		k.Conn = tc
	}
	return k, nil
}

// send writes req and returns its correlation id.
func (k *kconn) send(req kmsg.Request) (int32, error) {
	k.corr++
	k.SetWriteDeadline(time.Now().Add(rawTimeout))
	_, err := k.Write(frame(req.Key(), req.GetVersion(), k.corr, req.IsFlexible(), req.AppendTo(nil)))
	return k.corr, err
}

// read reads the response with correlation id corr into resp.
func (k *kconn) read(corr int32, resp kmsg.Response) error {
	k.SetReadDeadline(time.Now().Add(rawTimeout))
	var size [4]byte
	if _, err := io.ReadFull(k, size[:]); err != nil {
		return fmt.Errorf("reading %s response: %w", kmsg.NameForKey(resp.Key()), err)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 16<<20 {
		return fmt.Errorf("%s response frame size %d", kmsg.NameForKey(resp.Key()), n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(k, buf); err != nil {
		return fmt.Errorf("reading %s response: %w", kmsg.NameForKey(resp.Key()), err)
	}
	if got := int32(binary.BigEndian.Uint32(buf)); got != corr {
		return fmt.Errorf("%s response correlation id %d, want %d", kmsg.NameForKey(resp.Key()), got, corr)
	}
	body := buf[4:]
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		var err error
		if body, err = skipTags(body); err != nil {
			return err
		}
	}
	return resp.ReadFrom(body)
}

func (k *kconn) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	corr, err := k.send(req)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	return resp, k.read(corr, resp)
}

func apiVersionsReq() kmsg.Request {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName = "kbroker-badinput"
	req.ClientSoftwareVersion = "1"
	return req
}

func metadataReq() kmsg.Request {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	return req
}

func (k *kconn) apiVersions() error {
	resp, err := k.roundTrip(apiVersionsReq())
	if err != nil {
		return err
	}
	if code := resp.(*kmsg.ApiVersionsResponse).ErrorCode; code != 0 {
		return fmt.Errorf("ApiVersions: %s", errName(code))
	}
	return nil
}

// metadata asks for all topics and checks the answer names a broker.
func (k *kconn) metadata() (*kmsg.MetadataResponse, error) {
	resp, err := k.roundTrip(metadataReq())
	if err != nil {
		return nil, err
	}
	m := resp.(*kmsg.MetadataResponse)
	if len(m.Brokers) == 0 {
		return nil, errors.New("Metadata answered with no brokers")
	}
	return m, nil
}

func (k *kconn) handshake(mechanism string) (*kmsg.SASLHandshakeResponse, error) {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version = 1
	req.Mechanism = mechanism
	resp, err := k.roundTrip(req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.SASLHandshakeResponse), nil
}

func authenticateReq(token []byte) kmsg.Request {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version = 2
	req.SASLAuthBytes = token
	return req
}

func (k *kconn) authenticate(token []byte) (*kmsg.SASLAuthenticateResponse, error) {
	resp, err := k.roundTrip(authenticateReq(token))
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.SASLAuthenticateResponse), nil
}

// authOutcome is how an exchange ended: after rounds SaslAuthenticate
// round trips, each taking steps[i], with code and message from the last.
type authOutcome struct {
	rounds  int
	steps   []time.Duration
	code    int16
	message string
}

// authenticateWith runs SaslHandshake v1 for m, then m's exchange one
// SaslAuthenticate at a time, timing each round trip. An error means the
// exchange could not be carried out; a refusal is in the outcome.
func (k *kconn) authenticateWith(m sasl.Mechanism) (authOutcome, error) {
	var out authOutcome
	hs, err := k.handshake(m.Name())
	if err != nil {
		return out, err
	}
	if hs.ErrorCode != 0 {
		return out, fmt.Errorf("SaslHandshake %s: %s (enabled %v)", m.Name(), errName(hs.ErrorCode), hs.SupportedMechanisms)
	}
	host, _, _ := net.SplitHostPort(k.RemoteAddr().String())
	session, token, err := m.Authenticate(context.Background(), host)
	if err != nil {
		return out, err
	}
	for {
		start := time.Now()
		resp, err := k.authenticate(token)
		if err != nil {
			return out, err
		}
		out.steps = append(out.steps, time.Since(start))
		out.rounds++
		out.code = resp.ErrorCode
		if resp.ErrorMessage != nil {
			out.message = *resp.ErrorMessage
		}
		if resp.ErrorCode != 0 {
			return out, nil
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return out, fmt.Errorf("%s: the client refused the broker's answer: %w", m.Name(), err)
		}
		if done {
			return out, nil
		}
		token = next
	}
}

// waitClosed reads c until the peer closes it or within passes. It
// returns how many bytes arrived meanwhile; the error is nil when the
// peer closed the connection.
func waitClosed(c net.Conn, within time.Duration) (int, error) {
	c.SetReadDeadline(time.Now().Add(within))
	buf := make([]byte, 4096)
	received := 0
	for {
		n, err := c.Read(buf)
		received += n
		if err == nil {
			continue
		}
		var ne net.Error
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
			errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
			return received, nil
		case errors.As(err, &ne) && ne.Timeout():
			return received, fmt.Errorf("still open after %v (%d bytes received)", within, received)
		default:
			return received, fmt.Errorf("reading: %v (%d bytes received)", err, received)
		}
	}
}

// expectClosedNow asserts that the broker closes k at once, sending
// nothing more.
func expectClosedNow(t *testing.T, k *kconn, what string) {
	t.Helper()
	start := time.Now()
	n, err := waitClosed(k, promptClose)
	if err != nil {
		t.Errorf("%s: want the connection closed at once: %v", what, err)
		return
	}
	if n > 0 {
		t.Errorf("%s: broker sent %d bytes before closing; want no response", what, n)
	}
	t.Logf("%s: closed by the broker after %v", what, time.Since(start).Round(time.Microsecond))
}

func durQuantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}

// TestSecurityBadInput is the bad-input part of "Listeners, TLS and
// SASL", on one broker; the last check reads the broker's log for every
// password the others used.
func TestSecurityBadInput(t *testing.T) {
	s := startSecureBroker(t)
	t.Run("WrongPasswordAndUnknownUser", func(t *testing.T) { testWrongPasswordUnknownUser(t, s) })
	t.Run("RequestBeforeAuthentication", func(t *testing.T) { testRequestBeforeAuth(t, s) })
	t.Run("UnsupportedMechanism", func(t *testing.T) { testUnsupportedMechanism(t, s) })
	t.Run("AuthenticateWithoutHandshake", func(t *testing.T) { testAuthenticateWithoutHandshake(t, s) })
	t.Run("ForeignAndSilentConnections", func(t *testing.T) { testForeignAndSilent(t, s) })
	t.Run("FailedLoginFlood", func(t *testing.T) { testFailedLoginFlood(t, s) })
	t.Run("NoSecretInLog", func(t *testing.T) { testNoSecretInLog(t, s) })
}

// A wrong password and an unknown user fail alike: SASL_AUTHENTICATION_
// FAILED with the same message after the same number of round trips,
// the connection closed, and the failing round trip as long (medians of
// 50 interleaved attempts each within 2x; for SCRAM every round trip).
func testWrongPasswordUnknownUser(t *testing.T, s *secureBroker) {
	const attempts = 50
	cases := []struct {
		mechanism      string
		wrong, unknown func() sasl.Mechanism
	}{
		{"PLAIN",
			func() sasl.Mechanism { return plain.Auth{User: "alice", Pass: s.wrongPasswd}.AsMechanism() },
			func() sasl.Mechanism { return plain.Auth{User: s.unknownUser, Pass: s.wrongPasswd}.AsMechanism() }},
		{"SCRAM-SHA-256",
			func() sasl.Mechanism { return scram.Auth{User: "bob", Pass: s.wrongPasswd}.AsSha256Mechanism() },
			func() sasl.Mechanism { return scram.Auth{User: s.unknownUser, Pass: s.wrongPasswd}.AsSha256Mechanism() }},
		{"SCRAM-SHA-512",
			func() sasl.Mechanism { return scram.Auth{User: "bob", Pass: s.wrongPasswd}.AsSha512Mechanism() },
			func() sasl.Mechanism { return scram.Auth{User: s.unknownUser, Pass: s.wrongPasswd}.AsSha512Mechanism() }},
	}
	for _, tc := range cases {
		t.Run(tc.mechanism, func(t *testing.T) {
			attempt := func(kind string, m sasl.Mechanism) authOutcome {
				t.Helper()
				k, err := dialK(s.saslPlain, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer k.Close()
				out, err := k.authenticateWith(m)
				if err != nil {
					t.Fatalf("%s: %v", kind, err)
				}
				if out.code != kerr.SaslAuthenticationFailed.Code {
					t.Fatalf("%s: %s after %d round trips (%q), want SASL_AUTHENTICATION_FAILED", kind, errName(out.code), out.rounds, out.message)
				}
				if n, err := waitClosed(k, promptClose); err != nil || n > 0 {
					t.Fatalf("%s: after the failure the broker should close the connection at once: %d more bytes, %v", kind, n, err)
				}
				return out
			}
			// Warm up (connection setup paths, the broker's failure log
			// line), then interleave so drift hits both kinds alike.
			for range 5 {
				attempt("wrong password", tc.wrong())
				attempt("unknown user", tc.unknown())
			}
			var wrong, unknown []authOutcome
			for i := range attempts {
				if i%2 == 0 {
					wrong = append(wrong, attempt("wrong password", tc.wrong()))
					unknown = append(unknown, attempt("unknown user", tc.unknown()))
				} else {
					unknown = append(unknown, attempt("unknown user", tc.unknown()))
					wrong = append(wrong, attempt("wrong password", tc.wrong()))
				}
			}
			ref := wrong[0]
			for _, o := range append(slices.Clone(wrong), unknown...) {
				if o.rounds != ref.rounds || o.message != ref.message {
					t.Fatalf("failures differ: %d round trips with %q, and %d with %q", ref.rounds, ref.message, o.rounds, o.message)
				}
			}
			if ref.message == "" {
				t.Error("no error message")
			}
			for _, leak := range []string{"alice", "bob", s.unknownUser, s.wrongPasswd} {
				if strings.Contains(ref.message, leak) {
					t.Errorf("error message %q names %q", ref.message, leak)
				}
			}
			t.Logf("%s: wrong password and unknown user both: %s after %d SaslAuthenticate round trip(s), %q, connection closed",
				tc.mechanism, errName(kerr.SaslAuthenticationFailed.Code), ref.rounds, ref.message)
			for step := range ref.rounds {
				var w, u []time.Duration
				for i := range attempts {
					w = append(w, wrong[i].steps[step])
					u = append(u, unknown[i].steps[step])
				}
				mw, mu := durQuantile(w, 0.5), durQuantile(u, 0.5)
				ratio := float64(max(mw, mu)) / float64(min(mw, mu))
				what := "failing round trip"
				if step < ref.rounds-1 {
					what = fmt.Sprintf("round trip %d (answered)", step+1)
				}
				t.Logf("%s %s over %d attempts each: wrong password median %v (p10 %v, p90 %v), unknown user median %v (p10 %v, p90 %v); ratio %.2f",
					tc.mechanism, what, attempts,
					mw.Round(time.Microsecond), durQuantile(w, 0.1).Round(time.Microsecond), durQuantile(w, 0.9).Round(time.Microsecond),
					mu.Round(time.Microsecond), durQuantile(u, 0.1).Round(time.Microsecond), durQuantile(u, 0.9).Round(time.Microsecond), ratio)
				if ratio > 2 {
					t.Errorf("%s %s: medians %v (wrong password) and %v (unknown user) differ by more than 2x", tc.mechanism, what, mw, mu)
				}
			}
		})
	}
}

// A request other than ApiVersions and SaslHandshake before the exchange
// has succeeded closes the connection without an answer.
func testRequestBeforeAuth(t *testing.T, s *secureBroker) {
	produce := produceRequest(9, -1, "badinput-unauthenticated", rawBatch(1, 10))
	cases := []struct {
		name   string
		addr   string
		tls    *tls.Config
		before func(*kconn) error // what the client does first
		req    kmsg.Request
	}{
		{"Metadata first on SASL_PLAINTEXT", s.saslPlain, nil, nil, metadataReq()},
		{"Metadata first on SASL_SSL", s.saslSSL, s.tls, nil, metadataReq()},
		{"Metadata after ApiVersions", s.saslPlain, nil, (*kconn).apiVersions, metadataReq()},
		{"Produce after SaslHandshake PLAIN", s.saslPlain, nil, func(k *kconn) error {
			hs, err := k.handshake("PLAIN")
			if err == nil && hs.ErrorCode != 0 {
				err = fmt.Errorf("SaslHandshake PLAIN: %s", errName(hs.ErrorCode))
			}
			return err
		}, produce},
		{"Metadata between SCRAM round trips", s.saslSSL, s.tls, func(k *kconn) error {
			hs, err := k.handshake("SCRAM-SHA-256")
			if err != nil || hs.ErrorCode != 0 {
				return fmt.Errorf("SaslHandshake: %v %v", hs, err)
			}
			_, first, err := scram.Auth{User: "bob", Pass: s.bob256}.AsSha256Mechanism().Authenticate(context.Background(), "127.0.0.1")
			if err != nil {
				return err
			}
			resp, err := k.authenticate(first)
			if err == nil && resp.ErrorCode != 0 {
				err = fmt.Errorf("client-first: %s", errName(resp.ErrorCode))
			}
			return err
		}, metadataReq()},
	}
	for _, tc := range cases {
		k, err := dialK(tc.addr, tc.tls)
		if err != nil {
			t.Fatal(err)
		}
		if tc.before != nil {
			if err := tc.before(k); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		if _, err := k.send(tc.req); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		expectClosedNow(t, k, tc.name)
		k.Close()
	}
}

// An unsupported mechanism is answered UNSUPPORTED_SASL_MECHANISM with the
// enabled list, and the client may then pick another on the same
// connection and use it.
func testUnsupportedMechanism(t *testing.T, s *secureBroker) {
	for _, l := range []struct {
		addr string
		tls  *tls.Config
		mech sasl.Mechanism
	}{
		{s.saslPlain, nil, plain.Auth{User: "alice", Pass: s.alicePass}.AsMechanism()},
		{s.saslSSL, s.tls, scram.Auth{User: "bob", Pass: s.bob512}.AsSha512Mechanism()},
	} {
		k, err := dialK(l.addr, l.tls)
		if err != nil {
			t.Fatal(err)
		}
		if err := k.apiVersions(); err != nil {
			t.Fatal(err)
		}
		for _, m := range []string{"GSSAPI", "OAUTHBEARER", "NOT-A-MECHANISM", "plain"} {
			hs, err := k.handshake(m)
			if err != nil {
				t.Fatalf("%s: SaslHandshake %q: %v (the connection should stay open)", l.addr, m, err)
			}
			if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
				t.Errorf("%s: SaslHandshake %q: %s, want UNSUPPORTED_SASL_MECHANISM", l.addr, m, errName(hs.ErrorCode))
			}
			if !slices.Equal(hs.SupportedMechanisms, s.enabledMechanisms) {
				t.Errorf("%s: SaslHandshake %q lists %v, want %v", l.addr, m, hs.SupportedMechanisms, s.enabledMechanisms)
			}
		}
		out, err := k.authenticateWith(l.mech)
		if err != nil {
			t.Fatalf("%s: %s after refused mechanisms: %v", l.addr, l.mech.Name(), err)
		}
		if out.code != 0 {
			t.Fatalf("%s: %s after refused mechanisms: %s %q", l.addr, l.mech.Name(), errName(out.code), out.message)
		}
		if _, err := k.metadata(); err != nil {
			t.Fatalf("%s: Metadata after authenticating: %v", l.addr, err)
		}
		t.Logf("%s: 4 unsupported mechanisms refused with the enabled list %v, then %s authenticated and Metadata answered on the same connection",
			l.addr, s.enabledMechanisms, l.mech.Name())
		k.Close()
	}
}

// SaslAuthenticate with no SaslHandshake before it is answered
// ILLEGAL_SASL_STATE and the connection closes, even with a token that
// would authenticate.
func testAuthenticateWithoutHandshake(t *testing.T, s *secureBroker) {
	token := []byte("\x00alice\x00" + s.alicePass)
	for _, tc := range []struct {
		name        string
		addr        string
		tls         *tls.Config
		apiVersions bool
	}{
		{"SASL_PLAINTEXT, first request", s.saslPlain, nil, false},
		{"SASL_PLAINTEXT, after ApiVersions", s.saslPlain, nil, true},
		{"SASL_SSL, first request", s.saslSSL, s.tls, false},
	} {
		k, err := dialK(tc.addr, tc.tls)
		if err != nil {
			t.Fatal(err)
		}
		if tc.apiVersions {
			if err := k.apiVersions(); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := k.authenticate(token)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if resp.ErrorCode != kerr.IllegalSaslState.Code {
			t.Errorf("%s: SaslAuthenticate without handshake: %s, want ILLEGAL_SASL_STATE", tc.name, errName(resp.ErrorCode))
		}
		expectClosedNow(t, k, tc.name)
		k.Close()
	}
}

// ackLog records a producer's acknowledgements while it runs.
type ackTimes struct {
	mu    sync.Mutex
	acks  []time.Time
	worst time.Duration
	errs  []error
}

// produceUntil produces small records one at a time to topic until ctx
// ends, recording each acknowledgement.
func produceUntil(ctx context.Context, cl *kgo.Client, topic string, l *ackTimes) {
	for i := 0; ; i++ {
		start := time.Now()
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("r" + strconv.Itoa(i))}).FirstErr()
		if ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		if err != nil {
			l.errs = append(l.errs, err)
		} else {
			l.acks = append(l.acks, time.Now())
			l.worst = max(l.worst, time.Since(start))
		}
		l.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// badConn is one misbehaving connection: open sets it up and returns the
// TCP connection to watch for the broker's close.
type badConn struct {
	name string
	open func() (net.Conn, error)
	// held: the broker cannot tell anything is wrong until the
	// authentication bound passes.
	held bool
}

// A plaintext Kafka client on a TLS listener, a TLS client on a
// plaintext listener, garbage as a TLS ClientHello and connections that
// never finish (or never start) their TLS handshake or SASL exchange are
// all closed within the bound, while producers on the same listeners keep
// being acknowledged and new clients are served.
func testForeignAndSilent(t *testing.T, s *secureBroker) {
	ctx := testContext(t, 60*time.Second)
	topic := "badinput-secure"
	if _, err := s.Admin(t).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
	producers := []struct {
		listener string
		opts     []kgo.Opt
	}{
		{"SSL", []kgo.Opt{kgo.SeedBrokers(s.ssl), kgo.DialTLSConfig(s.tls)}},
		{"SASL_SSL", []kgo.Opt{kgo.SeedBrokers(s.saslSSL), kgo.DialTLSConfig(s.tls), kgo.SASL(scram.Auth{User: "bob", Pass: s.bob512}.AsSha512Mechanism())}},
		{"SASL_PLAINTEXT", []kgo.Opt{kgo.SeedBrokers(s.saslPlain), kgo.SASL(plain.Auth{User: "alice", Pass: s.alicePass}.AsMechanism())}},
	}
	pctx, stop := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	logs := make([]*ackTimes, len(producers))
	for i, p := range producers {
		cl, err := kgo.NewClient(append(p.opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.RetryTimeout(20*time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		logs[i] = &ackTimes{}
		pwg.Add(1)
		go func() { defer pwg.Done(); produceUntil(pctx, cl, topic, logs[i]) }()
	}
	defer func() { stop(); pwg.Wait() }()
	checkFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		for i, l := range logs {
			l.mu.Lock()
			n, errs := len(l.acks), l.errs
			l.mu.Unlock()
			if len(errs) > 0 {
				return fmt.Errorf("producer on %s: %v", producers[i].listener, errs[0])
			}
			if n == 0 {
				return fmt.Errorf("producer on %s: no record acknowledged yet", producers[i].listener)
			}
		}
		return nil
	})

	dial := func(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, rawTimeout) }
	write := func(addr string, b []byte) (net.Conn, error) {
		c, err := dial(addr)
		if err != nil {
			return nil, err
		}
		c.SetWriteDeadline(time.Now().Add(rawTimeout))
		_, err = c.Write(b)
		return c, err
	}
	apiVersions := func() []byte {
		req := apiVersionsReq()
		return frame(req.Key(), req.GetVersion(), 1, req.IsFlexible(), req.AppendTo(nil))
	}
	// tlsClient makes a TLS handshake against a plaintext listener: it
	// must fail without timing out (the broker closes), and the
	// connection stays watched for the close.
	tlsClient := func(addr string) (net.Conn, error) {
		c, err := dial(addr)
		if err != nil {
			return nil, err
		}
		cfg := s.tls.Clone()
		cfg.ServerName = "127.0.0.1"
		hctx, cancel := context.WithTimeout(context.Background(), closeBound)
		defer cancel()
		err = tls.Client(c, cfg).HandshakeContext(hctx)
		if err == nil {
			return c, errors.New("TLS handshake with a plaintext listener succeeded")
		}
		if hctx.Err() != nil {
			return c, fmt.Errorf("TLS handshake still waiting after %v: %w", closeBound, err)
		}
		return c, nil
	}
	garbageHello := func(claimed, sent int) []byte {
		b := []byte{0x16, 0x03, 0x01, byte(claimed >> 8), byte(claimed)} // handshake record
		body := make([]byte, sent)
		rand.Read(body)
		// A ClientHello whose length fits the record (so that a complete
		// record is refused at once) and whose content is random.
		body[0], body[1], body[2], body[3] = 0x01, 0, 0, byte(sent-4)
		return append(b, body...)
	}
	// tlsThenSilent completes the TLS handshake, then runs more (may be
	// nil) and goes silent.
	tlsThenSilent := func(addr string, more func(*kconn) error) (net.Conn, error) {
		k, err := dialK(addr, s.tls)
		if err != nil {
			return nil, err
		}
		if more != nil {
			if err := more(k); err != nil {
				return k, err
			}
		}
		return k, nil
	}
	bad := []badConn{
		{"plaintext ApiVersions on SSL", func() (net.Conn, error) { return write(s.ssl, apiVersions()) }, false},
		{"plaintext ApiVersions on SASL_SSL", func() (net.Conn, error) { return write(s.saslSSL, apiVersions()) }, false},
		{"TLS client on PLAINTEXT", func() (net.Conn, error) { return tlsClient(s.Addr()) }, false},
		{"TLS client on SASL_PLAINTEXT", func() (net.Conn, error) { return tlsClient(s.saslPlain) }, false},
		{"garbage ClientHello on SSL", func() (net.Conn, error) { return write(s.ssl, garbageHello(200, 200)) }, false},
		{"garbage ClientHello on SASL_SSL", func() (net.Conn, error) { return write(s.saslSSL, garbageHello(200, 200)) }, false},
		{"truncated garbage ClientHello on SSL", func() (net.Conn, error) { return write(s.ssl, garbageHello(16000, 100)) }, true},
		{"silent TCP on SSL", func() (net.Conn, error) { return dial(s.ssl) }, true},
		{"silent TCP on SASL_SSL", func() (net.Conn, error) { return dial(s.saslSSL) }, true},
		{"silent TCP on SASL_PLAINTEXT", func() (net.Conn, error) { return dial(s.saslPlain) }, true},
		{"silent after TLS handshake on SASL_SSL", func() (net.Conn, error) { return tlsThenSilent(s.saslSSL, nil) }, true},
		{"silent after ApiVersions and SaslHandshake on SASL_PLAINTEXT", func() (net.Conn, error) {
			k, err := dialK(s.saslPlain, nil)
			if err != nil {
				return nil, err
			}
			if err := k.apiVersions(); err != nil {
				return k, err
			}
			hs, err := k.handshake("PLAIN")
			if err == nil && hs.ErrorCode != 0 {
				err = fmt.Errorf("SaslHandshake: %s", errName(hs.ErrorCode))
			}
			return k, err
		}, true},
		{"silent between SCRAM round trips on SASL_SSL", func() (net.Conn, error) {
			return tlsThenSilent(s.saslSSL, func(k *kconn) error {
				hs, err := k.handshake("SCRAM-SHA-512")
				if err != nil || hs.ErrorCode != 0 {
					return fmt.Errorf("SaslHandshake: %v %v", hs, err)
				}
				_, first, err := scram.Auth{User: "bob", Pass: s.bob512}.AsSha512Mechanism().Authenticate(context.Background(), "127.0.0.1")
				if err != nil {
					return err
				}
				resp, err := k.authenticate(first)
				if err == nil && resp.ErrorCode != 0 {
					err = fmt.Errorf("client-first: %s", errName(resp.ErrorCode))
				}
				return err
			})
		}, true},
	}
	type result struct {
		closedAfter time.Duration
		received    int
		err         error
	}
	results := make([]result, len(bad))
	var opened, closed sync.WaitGroup
	start := time.Now()
	for i, bc := range bad {
		opened.Add(1)
		closed.Add(1)
		go func() {
			defer closed.Done()
			c, err := bc.open()
			opened.Done()
			if c != nil {
				defer c.Close()
			}
			if err != nil {
				results[i].err = err
				return
			}
			n, err := waitClosed(c, closeBound-time.Since(start))
			results[i] = result{closedAfter: time.Since(start), received: n, err: err}
		}()
	}
	opened.Wait()
	// Every bad connection is open, the held ones not yet closed: new
	// clients are served meanwhile.
	fresh := []struct {
		addr string
		tls  *tls.Config
		mech sasl.Mechanism
	}{
		{s.ssl, s.tls, nil},
		{s.saslSSL, s.tls, scram.Auth{User: "bob", Pass: s.bob256}.AsSha256Mechanism()},
		{s.saslPlain, nil, plain.Auth{User: "alice", Pass: s.alicePass}.AsMechanism()},
	}
	for _, f := range fresh {
		var err error
		if f.mech == nil {
			var k *kconn
			if k, err = dialK(f.addr, f.tls); err == nil {
				_, err = k.metadata()
				k.Close()
			}
		} else {
			err = s.login(f.addr, f.tls, f.mech)
		}
		if err != nil {
			t.Errorf("a new client on %s while the bad connections are open: %v", f.addr, err)
		}
	}
	freshDone := time.Since(start)
	closed.Wait()
	end := time.Since(start)
	stop()
	pwg.Wait()

	var firstHeldClose time.Duration = closeBound
	for i, bc := range bad {
		r := results[i]
		if r.err != nil {
			t.Errorf("%s: %v", bc.name, r.err)
			continue
		}
		t.Logf("%s: closed by the broker %v after the test began (%d bytes received before the close)", bc.name, r.closedAfter.Round(time.Millisecond), r.received)
		if bc.held {
			firstHeldClose = min(firstHeldClose, r.closedAfter)
		}
	}
	t.Logf("new clients on SSL, SASL_SSL and SASL_PLAINTEXT authenticated and answered %v after the test began; the first stalled connection was closed at %v",
		freshDone.Round(time.Millisecond), firstHeldClose.Round(time.Millisecond))
	if freshDone > promptClose {
		t.Errorf("new clients were served only %v after the bad connections opened", freshDone)
	}
	// The producers were acknowledged all along: no gap of half the
	// authentication bound, so none waited for a stalled connection.
	winStart, winEnd := start, start.Add(end)
	for i, l := range logs {
		l.mu.Lock()
		if len(l.errs) > 0 {
			t.Errorf("producer on %s: %v", producers[i].listener, l.errs[0])
		}
		last, gap, n := winStart, time.Duration(0), 0
		for _, a := range l.acks {
			if a.Before(winStart) || a.After(winEnd) {
				continue
			}
			gap = max(gap, a.Sub(last))
			last = a
			n++
		}
		gap = max(gap, winEnd.Sub(last))
		t.Logf("producer on %s: %d records acknowledged while the bad connections were open (%v), longest gap %v, slowest produce %v",
			producers[i].listener, n, end.Round(time.Millisecond), gap.Round(time.Millisecond), l.worst.Round(time.Millisecond))
		if n == 0 || gap > promptClose {
			t.Errorf("producer on %s stalled: %d acknowledgements, longest gap %v", producers[i].listener, n, gap)
		}
		l.mu.Unlock()
	}
}

// floodSpec is what the flood helper process is told (as JSON in
// $KBROKER_SASL_FLOOD); floodResult what it prints back.
type floodSpec struct {
	Addr, User, Password, Mechanism string
	Attempts, Workers               int
}

type floodResult struct {
	Attempts  int    // exchanges made
	Refused   int    // ended in SASL_AUTHENTICATION_FAILED
	Closed    int    // of those, closed by the broker at once
	Errors    int    // anything else
	FirstErr  string // the first of those
	Message   string // the broker's error message
	StartNano int64  // when the first attempt began (Unix ns)
	EndNano   int64  // when the last ended
}

const floodResultPrefix = "KBROKER-FLOOD-RESULT "

// TestSecurityFloodHelperProcess is not a test: testFailedLoginFlood runs
// the test binary again to make the failed logins from another process,
// at the lowest CPU priority.
func TestSecurityFloodHelperProcess(t *testing.T) {
	specJSON := os.Getenv("KBROKER_SASL_FLOOD")
	if specJSON == "" {
		t.Skip("helper process of TestSecurityBadInput/FailedLoginFlood")
	}
	var spec floodSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		t.Fatal(err)
	}
	res := runFlood(spec)
	out, _ := json.Marshal(res)
	fmt.Println(floodResultPrefix + string(out))
}

// runFlood makes spec.Attempts SCRAM logins with a wrong password from
// spec.Workers goroutines, each on a new connection. The SCRAM client is
// written out here so that the salted password (the client's costly
// PBKDF2) is computed once per salt, not per attempt: the broker's work
// per attempt is the same.
func runFlood(spec floodSpec) floodResult {
	h := sha256.New
	if spec.Mechanism == "SCRAM-SHA-512" {
		h = sha512.New
	}
	var salted sync.Map // salt+iterations -> salted password
	var mu sync.Mutex
	res := floodResult{StartNano: time.Now().UnixNano()}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range spec.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(spec.Attempts) {
				code, msg, closed, err := floodOnce(spec, h, &salted)
				mu.Lock()
				res.Attempts++
				switch {
				case err != nil:
					res.Errors++
					if res.FirstErr == "" {
						res.FirstErr = err.Error()
					}
				case code != kerr.SaslAuthenticationFailed.Code:
					res.Errors++
					if res.FirstErr == "" {
						res.FirstErr = "final round trip answered " + errName(code)
					}
				default:
					res.Refused++
					res.Message = msg
					if closed {
						res.Closed++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.EndNano = time.Now().UnixNano()
	return res
}

func floodOnce(spec floodSpec, h func() hash.Hash, salted *sync.Map) (int16, string, bool, error) {
	k, err := dialK(spec.Addr, nil)
	if err != nil {
		return 0, "", false, err
	}
	defer k.Close()
	hs, err := k.handshake(spec.Mechanism)
	if err != nil {
		return 0, "", false, err
	}
	if hs.ErrorCode != 0 {
		return 0, "", false, fmt.Errorf("SaslHandshake: %s", errName(hs.ErrorCode))
	}
	var nb [18]byte
	rand.Read(nb[:])
	nonce := base64.RawStdEncoding.EncodeToString(nb[:])
	firstBare := "n=" + spec.User + ",r=" + nonce
	resp, err := k.authenticate([]byte("n,," + firstBare))
	if err != nil {
		return 0, "", false, err
	}
	if resp.ErrorCode != 0 {
		return 0, "", false, fmt.Errorf("client-first answered %s", errName(resp.ErrorCode))
	}
	serverFirst := string(resp.SASLAuthBytes)
	var fullNonce, salt64, iters string
	for _, f := range strings.Split(serverFirst, ",") {
		switch {
		case strings.HasPrefix(f, "r="):
			fullNonce = f[2:]
		case strings.HasPrefix(f, "s="):
			salt64 = f[2:]
		case strings.HasPrefix(f, "i="):
			iters = f[2:]
		}
	}
	if !strings.HasPrefix(fullNonce, nonce) || salt64 == "" || iters == "" {
		return 0, "", false, fmt.Errorf("server-first %q", serverFirst)
	}
	key := salt64 + "/" + iters
	sp, ok := salted.Load(key)
	if !ok {
		salt, err := base64.StdEncoding.DecodeString(salt64)
		if err != nil {
			return 0, "", false, fmt.Errorf("server-first salt: %v", err)
		}
		n, err := strconv.Atoi(iters)
		if err != nil {
			return 0, "", false, fmt.Errorf("server-first iterations: %v", err)
		}
		p, err := pbkdf2.Key(h, spec.Password, salt, n, h().Size())
		if err != nil {
			return 0, "", false, err
		}
		sp, _ = salted.LoadOrStore(key, p)
	}
	finalBare := "c=biws,r=" + fullNonce
	authMessage := firstBare + "," + serverFirst + "," + finalBare
	clientKey := hmacOf(h, sp.([]byte), []byte("Client Key"))
	sh := h()
	sh.Write(clientKey)
	proof := hmacOf(h, sh.Sum(nil), []byte(authMessage))
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	resp, err = k.authenticate([]byte(finalBare + ",p=" + base64.StdEncoding.EncodeToString(proof)))
	if err != nil {
		return 0, "", false, err
	}
	msg := ""
	if resp.ErrorMessage != nil {
		msg = *resp.ErrorMessage
	}
	n, err := waitClosed(k, promptClose)
	return resp.ErrorCode, msg, err == nil && n == 0, nil
}

// 10,000 failed SCRAM logins in a row (8 connections at a time, wrong
// password for a real user) do not slow an authenticated producer on the
// same listener: its median produce latency (acks=all, one small record
// at a time) during the flood is at most twice what it is without.
//
// On a machine with few cores the flood's client would compete with the
// broker for CPU, which an attacker on another machine does not: the
// flood runs in a separate process (this test binary again) with
// GOMAXPROCS=1 at nice 19, so it gets only the CPU the broker and the
// producer leave. The broker's own work for each failed login competes
// as it would in production.
func testFailedLoginFlood(t *testing.T, s *secureBroker) {
	ctx := testContext(t, 120*time.Second)
	topic := "badinput-flood"
	if _, err := s.Admin(t).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.saslPlain),
		kgo.SASL(scram.Auth{User: "bob", Pass: s.bob256}.AsSha256Mechanism()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	type sample struct {
		start, end time.Time
	}
	value := []byte("sixteen-byte-val")
	// The producer sends one record per pacing tick rather than back to
	// back: a closed loop would keep a core busy by itself and starve
	// the flood of CPU. A tick missed while a produce is slow is dropped.
	pace := time.NewTicker(time.Millisecond)
	defer pace.Stop()
	produce := func() sample {
		t.Helper()
		<-pace.C
		st := time.Now()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		return sample{st, time.Now()}
	}
	durations := func(ss []sample) []time.Duration {
		out := make([]time.Duration, len(ss))
		for i, x := range ss {
			out[i] = x.end.Sub(x.start)
		}
		return out
	}
	const quiet = 1000
	for range 200 {
		produce() // warm up
	}
	var before []sample
	for range quiet {
		before = append(before, produce())
	}

	spec, _ := json.Marshal(floodSpec{Addr: s.saslPlain, User: "bob", Password: s.password("flood"),
		Mechanism: "SCRAM-SHA-256", Attempts: floodAttempts, Workers: floodWorkers})
	args := []string{"-test.run=^TestSecurityFloodHelperProcess$", "-test.count=1", "-test.timeout=5m"}
	name := os.Args[0]
	niced := false
	if nice, err := exec.LookPath("nice"); err == nil {
		name, args, niced = nice, append([]string{"-n", "19", os.Args[0]}, args...), true
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KBROKER_SASL_FLOOD="+string(spec), "KBROKER_BIN="+brokerBin, "GOMAXPROCS=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var during []sample
	var waitErr error
loop:
	for {
		select {
		case waitErr = <-exited:
			break loop
		default:
		}
		during = append(during, produce())
	}
	if waitErr != nil {
		t.Fatalf("flood process: %v\nstdout:\n%s\nstderr:\n%s", waitErr, stdout.String(), stderr.String())
	}
	var after []sample
	for range quiet {
		after = append(after, produce())
	}

	var res floodResult
	found := false
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), floodResultPrefix); ok {
			found = json.Unmarshal([]byte(line), &res) == nil
		}
	}
	if !found {
		t.Fatalf("flood process printed no result:\n%s\n%s", stdout.String(), stderr.String())
	}
	floodStart, floodEnd := time.Unix(0, res.StartNano), time.Unix(0, res.EndNano)
	elapsed := floodEnd.Sub(floodStart)
	t.Logf("flood: %d failed SCRAM-SHA-256 logins (wrong password, %d connections at a time, flood process nice 19: %v) in %v, %.0f/s; %d refused with %q, %d of them closed at once; %d other outcomes %s",
		res.Attempts, floodWorkers, niced, elapsed.Round(time.Millisecond), float64(res.Attempts)/elapsed.Seconds(),
		res.Refused, res.Message, res.Closed, res.Errors, res.FirstErr)
	if res.Attempts != floodAttempts || res.Refused != floodAttempts || res.Closed != floodAttempts {
		t.Errorf("flood: %d attempts, %d refused, %d closed; want all %d refused and closed (first other outcome: %s)",
			res.Attempts, res.Refused, res.Closed, floodAttempts, res.FirstErr)
	}

	var inFlood []sample
	for _, x := range during {
		if !x.start.Before(floodStart) && !x.end.After(floodEnd) {
			inFlood = append(inFlood, x)
		}
	}
	quietDur := durations(append(slices.Clone(before), after...))
	floodDur := durations(inFlood)
	if len(floodDur) < 200 {
		t.Fatalf("only %d produce latencies measured during the %v flood; too few for a median", len(floodDur), elapsed)
	}
	pq, pf := durQuantile(quietDur, 0.5), durQuantile(floodDur, 0.5)
	ratio := float64(pf) / float64(pq)
	t.Logf("producer p50 alone %v (before %v, after %v; p90 %v, %d samples); during the flood %v (p90 %v, p99 %v, %d samples); ratio %.2f",
		pq.Round(time.Microsecond), durQuantile(durations(before), 0.5).Round(time.Microsecond), durQuantile(durations(after), 0.5).Round(time.Microsecond),
		durQuantile(quietDur, 0.9).Round(time.Microsecond), len(quietDur),
		pf.Round(time.Microsecond), durQuantile(floodDur, 0.9).Round(time.Microsecond), durQuantile(floodDur, 0.99).Round(time.Microsecond), len(floodDur), ratio)
	if ratio > 2 {
		t.Errorf("the flood of failed logins slowed the authenticated producer's median latency %.2fx (%v -> %v), want at most 2x", ratio, pq, pf)
	}
	// The broker still serves new logins after the flood.
	if err := s.login(s.saslPlain, nil, scram.Auth{User: "bob", Pass: s.bob256}.AsSha256Mechanism()); err != nil {
		t.Errorf("bob after the flood: %v", err)
	}
}

// After everything above, no password (right or wrong, in any exchange
// or in the JAAS config on the command line) and no SCRAM key is in the
// broker's log.
func testNoSecretInLog(t *testing.T, s *secureBroker) {
	data, err := os.ReadFile(s.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		t.Fatal("the broker's log is empty; nothing to check")
	}
	// The harness writes each run's command line (with the JAAS config
	// and its password) at the head of the log: that line is the test's,
	// not the broker's.
	var brokerOut []byte
	headers := 0
	for line := range bytes.Lines(data) {
		if bytes.HasPrefix(line, []byte("=== ")) && bytes.Contains(line, []byte(" "+brokerBin+" ")) {
			headers++
			continue
		}
		brokerOut = append(brokerOut, line...)
	}
	if headers == 0 {
		t.Errorf("no command-line header of the harness found in %s", s.LogPath())
	}
	data = brokerOut
	for _, p := range s.passwords {
		if bytes.Contains(data, []byte(p)) {
			t.Errorf("the broker's log holds the password %q", p)
		}
	}
	// The shared prefix catches a password cut short or one this list
	// missed.
	if bytes.Contains(data, []byte("pw-MUST-NOT-LEAK-"+s.suffix)) {
		t.Errorf("the broker's log holds a password of this test (prefix pw-MUST-NOT-LEAK-%s)", s.suffix)
	}
	for what, key := range s.scramSecrets {
		for _, enc := range []string{
			base64.RawStdEncoding.EncodeToString(key),
			base64.RawURLEncoding.EncodeToString(key),
			hex.EncodeToString(key),
			strings.ToUpper(hex.EncodeToString(key)),
		} {
			if bytes.Contains(data, []byte(enc)) {
				t.Errorf("the broker's log holds the %s (%s)", what, enc)
			}
		}
	}
	t.Logf("%d passwords and %d SCRAM keys checked against %d bytes of broker log (%d lines)",
		len(s.passwords), len(s.scramSecrets), len(data), bytes.Count(data, []byte("\n")))
}
