package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ParseListener splits a Kafka listener, NAME://host:port, into its name
// (upper-cased, as Kafka normalises listener names), host and port. The
// host may be empty (all interfaces, "PLAINTEXT://:9092") or a bracketed
// IPv6 address. Port 0 asks the OS for a free port.
func ParseListener(listener string) (name, host string, port int32, err error) {
	name, hostPort, ok := strings.Cut(strings.TrimSpace(listener), "://")
	if !ok || name == "" {
		return "", "", 0, fmt.Errorf("listener %q: want NAME://host:port", listener)
	}
	for _, c := range name {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return "", "", 0, fmt.Errorf("listener %q: name %q: want letters, digits, '_' or '-'", listener, name)
		}
	}
	host, portStr, err := net.SplitHostPort(hostPort)
	if err != nil {
		return "", "", 0, fmt.Errorf("listener %q: %v", listener, err)
	}
	p, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return "", "", 0, fmt.Errorf("listener %q: port %q: want 0..65535", listener, portStr)
	}
	return strings.ToUpper(name), host, int32(p), nil
}

// ListenerHostPort returns the host and port of a listener NAME://host:port.
// See ParseListener.
func ListenerHostPort(listener string) (host string, port int32, err error) {
	_, host, port, err = ParseListener(listener)
	return host, port, err
}

// Endpoint is one advertised listener, as the broker registers it.
type Endpoint struct {
	Listener         string // upper case, as in listeners
	SecurityProtocol string
	Host             string
	Port             int32
}

// AdvertisedEndpoints returns the endpoints the broker registers: each
// advertised listener (listeners when advertised.listeners is unset) with
// its security protocol, the inter-broker listener first (other brokers
// dial the first). A listener bound to every interface (empty host,
// 0.0.0.0, ::) is advertised as 127.0.0.1; set advertised.listeners for
// anything else.
func (c Config) AdvertisedEndpoints() ([]Endpoint, error) {
	var out []Endpoint
	inter := strings.ToUpper(c.InterBrokerListenerName)
	for _, l := range c.EffectiveAdvertisedListeners() {
		name, host, port, err := ParseListener(l)
		if err != nil {
			return nil, fmt.Errorf("advertised.listeners: %w", err)
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		e := Endpoint{Listener: name, SecurityProtocol: c.ListenerProtocol(name), Host: host, Port: port}
		if name == inter {
			out = append([]Endpoint{e}, out...)
		} else {
			out = append(out, e)
		}
	}
	if len(out) == 0 || out[0].Listener != inter {
		return nil, fmt.Errorf("advertised.listeners: the inter-broker listener %s is not advertised; other brokers could not reach this one", inter)
	}
	return out, nil
}
