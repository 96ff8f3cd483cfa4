package config

import (
	"math"
	"sort"
	"strings"
)

// listenerConnectionKeys are the connection settings Kafka lets a listener
// override with the listener.name.<listener>. prefix
// (SocketServer.ListenerReconfigurableConfigs).
var listenerConnectionKeys = [...]string{"max.connections", "max.connection.creation.rate"}

// ListenerConnectionLimits is one listener's connection limits, Kafka's
// ListenerConnectionQuota.
type ListenerConnectionLimits struct {
	// MaxConnections is listener.name.<l>.max.connections: connections
	// the listener holds at once.
	MaxConnections int32
	// MaxConnectionCreationRate is
	// listener.name.<l>.max.connection.creation.rate: new connections per
	// second the listener accepts.
	MaxConnectionCreationRate int32
}

// ListenerConnectionLimits returns the connection limits of the named
// listener. As Kafka configures each listener's quota from the broker's
// values with the listener's prefix overriding them
// (valuesWithPrefixOverride), a listener without its own setting has the
// broker-wide one: on the inter-broker listener, which the broker-wide
// limits exempt, that still bounds the listener on its own.
func (c Config) ListenerConnectionLimits(listener string) ListenerConnectionLimits {
	out := ListenerConnectionLimits{MaxConnections: c.MaxConnections, MaxConnectionCreationRate: c.MaxConnectionCreationRate}
	prefix := "listener.name." + strings.ToLower(listener) + "."
	for _, k := range listenerConnectionKeys {
		v, ok := c.Security[prefix+k]
		if !ok {
			continue
		}
		// Checked by Validate; an unchecked Config keeps the broker value.
		n, err := parseInt(v, 0, math.MaxInt32)
		if err != nil {
			continue
		}
		switch k {
		case "max.connections":
			out.MaxConnections = int32(n)
		case "max.connection.creation.rate":
			out.MaxConnectionCreationRate = int32(n)
		}
	}
	return out
}

// validateListenerConnectionLimits checks every listener.name.<l>.
// connection setting as Kafka parses the plain key: an int of at least 0.
func (c Config) validateListenerConnectionLimits() error {
	keys := make([]string, 0, len(c.Security))
	for k := range c.Security {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, "listener.name.")
		if !ok {
			continue
		}
		for _, name := range listenerConnectionKeys {
			listener, ok := strings.CutSuffix(rest, "."+name)
			if !ok || listener == "" || strings.Contains(listener, ".") {
				continue
			}
			if _, err := parseInt(c.Security[k], 0, math.MaxInt32); err != nil {
				return &ValueError{Key: k, Value: c.Security[k], Reason: err.Error()}
			}
		}
	}
	return nil
}
