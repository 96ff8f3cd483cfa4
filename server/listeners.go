package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/atomicfile"
	"github.com/kbroker/kbroker/internal/ratelog"
	"github.com/kbroker/kbroker/internal/sasl"
	"github.com/kbroker/kbroker/internal/tlsconf"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listener is one configured listener: its name and security protocol,
// and what its connections need to secure and authenticate themselves.
type listener struct {
	name     string // upper case, as in listeners
	protocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	// sasl runs the exchanges on a SASL_* listener (nil otherwise);
	// reauth is connections.max.reauth.ms (0: sessions never expire);
	// saslMaxReceive is sasl.server.max.receive.size, the largest frame
	// taken while a connection authenticates.
	sasl           *sasl.Server
	reauth         time.Duration
	saslMaxReceive int32
	// tls secures an SSL or SASL_SSL listener (nil otherwise); it maps
	// a client certificate to the principal (ssl.principal.mapping.rules).
	tls       *tlsconf.Server
	tlsFailed atomic.Int64
	// requests counts the requests that arrived, by API key; Fetch
	// requests of follower replicas are counted apart (fetchFollower), as
	// Kafka's RequestMetrics tell FetchFollower from FetchConsumer.
	requests      [kmsg.MaxKey + 1]atomic.Int64
	fetchFollower atomic.Int64
	// authOK and authFailed count SASL exchanges (Kafka's
	// successful-authentication-total, failed-authentication-total).
	authOK, authFailed atomic.Int64
	failLog            *ratelog.Limiter
}

// saslSecretFile holds the key of the fake SCRAM credentials served for
// unknown users (see sasl.ServerConfig.Secret), kept across restarts.
const saslSecretFile = "kbroker-sasl-secret"

// newListeners builds every listener of cfg by name, checking its TLS and
// SASL settings now so that a bad keystore or JAAS line stops the broker
// at start rather than failing each client. scram is the broker's view
// of the SCRAM credentials; dataDir keeps the unknown-user secret.
func newListeners(cfg config.Config, scram sasl.Lookup, dataDir string, logger *slog.Logger) (map[string]*listener, error) {
	out := make(map[string]*listener, len(cfg.Listeners))
	var secret []byte
	for _, l := range cfg.Listeners {
		name, _, _, err := config.ParseListener(l)
		if err != nil {
			return nil, fmt.Errorf("listeners: %w", err)
		}
		ln := &listener{name: name, protocol: cfg.ListenerProtocol(name), failLog: ratelog.New(10 * time.Second)}
		settings := cfg.ListenerSettings(name)
		if strings.HasSuffix(ln.protocol, "SSL") {
			if ln.tls, err = tlsconf.NewServer(tlsconf.Settings(settings), logger.With("listener", name)); err != nil {
				return nil, fmt.Errorf("listener %s (%s): %w", name, ln.protocol, err)
			}
		}
		if strings.HasPrefix(ln.protocol, "SASL_") {
			mechs := config.SplitList(settings["sasl.enabled.mechanisms"])
			if len(mechs) == 0 {
				return nil, fmt.Errorf("listener %s (%s): sasl.enabled.mechanisms is not set (Kafka's default, GSSAPI, is not supported: use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)", name, ln.protocol)
			}
			sc := sasl.ServerConfig{Enabled: mechs, Scram: scram}
			for _, m := range mechs {
				switch m {
				case sasl.Plain:
					jaas, err := listenerJAAS(settings, m)
					if err != nil {
						return nil, fmt.Errorf("listener %s: %w", name, err)
					}
					sc.PlainUsers = jaas.PlainUsers()
				case sasl.OAuthBearer:
					v, err := listenerOAuthBearer(settings)
					if err != nil {
						return nil, fmt.Errorf("listener %s: %w", name, err)
					}
					sc.OAuthBearer = &v
				case sasl.ScramSHA256, sasl.ScramSHA512:
					if secret == nil {
						if secret, err = loadSASLSecret(dataDir); err != nil {
							return nil, err
						}
					}
					sc.Secret = secret
				}
			}
			if ln.sasl, err = sasl.NewServer(sc); err != nil {
				return nil, fmt.Errorf("listener %s: %w", name, err)
			}
			ln.reauth = cfg.ConnectionsMaxReauth
			if ln.saslMaxReceive, err = saslMaxReceiveSize(settings); err != nil {
				return nil, fmt.Errorf("listener %s: %w", name, err)
			}
		}
		out[name] = ln
	}
	return out, nil
}

// listenerJAAS parses the JAAS entry for mechanism on a listener:
// listener.name.<l>.<mechanism>.sasl.jaas.config, as Kafka brokers read
// it, or the plain sasl.jaas.config.
func listenerJAAS(settings map[string]string, mechanism string) (sasl.JAAS, error) {
	key, v, ok := mechanismSetting(settings, mechanism, "sasl.jaas.config")
	if !ok {
		return sasl.JAAS{}, fmt.Errorf("%s is enabled but listener.name.<listener>.%s.sasl.jaas.config is not set", mechanism, strings.ToLower(mechanism))
	}
	j, err := sasl.ParseJAAS(v)
	if err != nil {
		return sasl.JAAS{}, fmt.Errorf("%s: %w", key, err)
	}
	return j, nil
}

// mechanismSetting looks a SASL setting up in a listener's settings the
// way Kafka prefixes it per mechanism: <mechanism>.<name> (from
// listener.name.<l>.<mechanism>.<name>), else <name>. It returns the key
// found, for error messages.
func mechanismSetting(settings map[string]string, mechanism, name string) (key, value string, ok bool) {
	key = strings.ToLower(mechanism) + "." + name
	if value, ok = settings[key]; ok {
		return key, value, true
	}
	value, ok = settings[name]
	return name, value, ok
}

// defaultSASLMaxReceive is Kafka's default sasl.server.max.receive.size.
const defaultSASLMaxReceive = 512 << 10

// saslMaxReceiveSize is sasl.server.max.receive.size: as in Kafka, a frame
// larger than it before a client has authenticated (or while it
// re-authenticates) closes the connection, so an unauthenticated client
// cannot make the broker read and parse socket.request.max.bytes.
func saslMaxReceiveSize(settings map[string]string) (int32, error) {
	v, ok := settings["sasl.server.max.receive.size"]
	if !ok {
		return defaultSASLMaxReceive, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("sasl.server.max.receive.size: %q is not a number of bytes > 0", v)
	}
	return int32(n), nil
}

// listenerOAuthBearer is a listener's OAUTHBEARER validator: Kafka's
// unsecured one (the only server callback handler kbroker has), with the
// unsecuredValidator* options of the listener's OAuthBearerLoginModule
// entry, which Kafka requires as for any mechanism.
func listenerOAuthBearer(settings map[string]string) (sasl.UnsecuredValidator, error) {
	_, class, _ := mechanismSetting(settings, sasl.OAuthBearer, "sasl.server.callback.handler.class")
	if err := sasl.CheckOAuthBearerCallbackHandler(strings.TrimSpace(class)); err != nil {
		return sasl.UnsecuredValidator{}, err
	}
	jaas, err := listenerJAAS(settings, sasl.OAuthBearer)
	if err != nil {
		return sasl.UnsecuredValidator{}, err
	}
	v, err := jaas.UnsecuredValidator()
	if err != nil {
		return v, fmt.Errorf("oauthbearer.sasl.jaas.config: %w", err)
	}
	return v, nil
}

// loadSASLSecret reads the unknown-user secret from dataDir, creating it
// on first use.
func loadSASLSecret(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, saslSecretFile)
	data, err := os.ReadFile(path)
	if err == nil {
		if secret, err := hex.DecodeString(strings.TrimSpace(string(data))); err == nil && len(secret) >= 16 {
			return secret, nil
		}
		return nil, fmt.Errorf("%s: not a hex secret of at least 16 bytes; delete it to have a new one made", path)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("making the SASL secret: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dataDir, err)
	}
	if err := atomicfile.WritePrivate(path, []byte(hex.EncodeToString(secret)+"\n")); err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	return secret, nil
}

// authFailed counts and logs (at most every 10 s per listener) a failed
// SASL exchange. The reason may name the user, never the password.
func (b *Broker) authFailed(rc *requestContext, err *sasl.AuthError) {
	l := b.listeners[rc.listener]
	if l == nil {
		return
	}
	l.authFailed.Add(1)
	if ok, suppressed := l.failLog.Allow(time.Now()); ok {
		b.logger.Info("authentication failed; closing connection", "listener", l.name, "remote", rc.remote,
			"mechanism", err.Mechanism, "reason", err.Reason, "failures_not_logged", suppressed)
	}
}

// countRequest counts one request that arrived on the listener.
func (l *listener) countRequest(req kmsg.Request) {
	if f, ok := req.(*kmsg.FetchRequest); ok && f.ReplicaID >= 0 {
		l.fetchFollower.Add(1)
		return
	}
	if k := req.Key(); k >= 0 && int(k) < len(l.requests) {
		l.requests[k].Add(1)
	}
}

// requestCounts returns the non-zero request counts by Kafka's
// RequestMetrics name (FetchConsumer and FetchFollower for Fetch).
func (l *listener) requestCounts() map[string]int64 {
	out := map[string]int64{}
	for k := range l.requests {
		if n := l.requests[k].Load(); n > 0 {
			name := kmsg.NameForKey(int16(k))
			if int16(k) == kmsg.Fetch.Int16() {
				name = "FetchConsumer"
			}
			out[name] = n
		}
	}
	if n := l.fetchFollower.Load(); n > 0 {
		out["FetchFollower"] = n
	}
	return out
}

// endpointFor returns broker br's endpoint on the listener the request
// arrived on: as Kafka, a client is told only addresses of its own
// listener, and a broker without that listener is not named to it.
func (b *Broker) endpointFor(rc *requestContext, br controller.BrokerInfo) (controller.Endpoint, bool) {
	name := rc.listener
	if name == "" {
		name = b.self.Endpoints[0].Listener
	}
	return br.Endpoint(name)
}
