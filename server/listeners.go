package server

import (
	"fmt"
	"sync/atomic"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/controller"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listener is one configured listener: its name and security protocol,
// and what its connections need to secure and authenticate themselves.
type listener struct {
	name     string // upper case, as in listeners
	protocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	// requests counts the requests that arrived, by API key; Fetch
	// requests of follower replicas are counted apart (fetchFollower), as
	// Kafka's RequestMetrics tell FetchFollower from FetchConsumer.
	requests      [kmsg.MaxKey + 1]atomic.Int64
	fetchFollower atomic.Int64
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

// newListeners builds every listener of cfg by name, checking its TLS and
// SASL settings now so that a bad keystore or JAAS line stops the broker
// at start rather than failing each client.
func newListeners(cfg config.Config) (map[string]*listener, error) {
	out := make(map[string]*listener, len(cfg.Listeners))
	for _, l := range cfg.Listeners {
		name, _, _, err := config.ParseListener(l)
		if err != nil {
			return nil, fmt.Errorf("listeners: %w", err)
		}
		out[name] = &listener{name: name, protocol: cfg.ListenerProtocol(name)}
	}
	return out, nil
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
