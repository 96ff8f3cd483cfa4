package server

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/kbroker/kbroker/config"
)

// connQuotas is Kafka's ConnectionQuotas (SocketServer.scala) for
// max.connections, max.connections.per.ip and its overrides.
//
//   - max.connections: as Kafka, the accept loop waits, without accepting,
//     while the broker holds that many connections (the kernel's backlog
//     holds new clients meanwhile), except on the protected listener: the
//     inter-broker listener when there are several listeners, as Kafka's
//     protectedListener. With a single listener (kbroker's usual set-up)
//     nothing tells brokers from clients, so nothing is exempt. Kafka
//     also waits before accepting on a listener's own limit
//     (listener.name.<l>.max.connections) and closes its least recently
//     used connection to make room for an inter-broker one; kbroker has
//     neither.
//   - max.connections.per.ip: as Kafka, a connection from an address that
//     already holds its limit is accepted, counted, and closed at once.
//     Overrides name an address or a host name (resolved once, at start,
//     to all its addresses, where Kafka resolves each override to one).
type connQuotas struct {
	maxConns  int
	maxPerIP  int
	overrides map[netip.Addr]int
	protected string // the listener exempt from maxConns, or ""

	// mu guards total, perIP and freed.
	mu    sync.Mutex
	total int
	perIP map[netip.Addr]int
	// freed is closed and replaced when a connection is released.
	freed chan struct{}
}

func newConnQuotas(cfg config.Config, logger *slog.Logger) *connQuotas {
	q := &connQuotas{
		maxConns:  int(cfg.MaxConnections),
		maxPerIP:  int(cfg.MaxConnectionsPerIP),
		overrides: map[netip.Addr]int{},
		perIP:     map[netip.Addr]int{},
		freed:     make(chan struct{}),
	}
	if len(cfg.Listeners) > 1 {
		q.protected = cfg.InterBrokerListenerName
	}
	for host, n := range cfg.MaxConnectionsPerIPOverrides {
		if a, err := netip.ParseAddr(host); err == nil {
			q.overrides[a.Unmap()] = int(n)
			continue
		}
		ips, err := net.LookupIP(host)
		if err != nil {
			logger.Warn("max.connections.per.ip.overrides: cannot resolve host; ignoring it", "host", host, "err", err)
			continue
		}
		for _, ip := range ips {
			if a, ok := netip.AddrFromSlice(ip); ok {
				q.overrides[a.Unmap()] = int(n)
			}
		}
	}
	return q
}

// slotAvailable is Kafka's connectionSlotAvailable, without listener limits.
func slotAvailable(total, maxConns int, protected bool) bool {
	return protected || total < maxConns
}

// ipAllowed is Kafka's per-address check: count is how many the address
// held before this one.
func ipAllowed(count, limit int) bool { return count < limit }

// waitSlot blocks until a connection may be accepted on listener, or ctx
// ends (false).
func (q *connQuotas) waitSlot(ctx context.Context, listener string) bool {
	for {
		q.mu.Lock()
		ok, freed := slotAvailable(q.total, q.maxConns, listener == q.protected), q.freed
		q.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-freed:
		}
	}
}

// add counts a connection from addr and tells whether its address is
// within its limit. Either way, release must be called once it is closed.
func (q *connQuotas) add(addr netip.Addr) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	count := q.perIP[addr]
	q.perIP[addr] = count + 1
	q.total++
	limit, ok := q.overrides[addr]
	if !ok {
		limit = q.maxPerIP
	}
	return ipAllowed(count, limit)
}

// release uncounts a connection from addr.
func (q *connQuotas) release(addr netip.Addr) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.total--
	if q.perIP[addr]--; q.perIP[addr] <= 0 {
		delete(q.perIP, addr)
	}
	close(q.freed)
	q.freed = make(chan struct{})
}

// remoteAddr is c's peer address (IPv4 unmapped), or the zero Addr.
func remoteAddr(c net.Conn) netip.Addr {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(ta.IP); ok {
			return a.Unmap()
		}
	}
	return netip.Addr{}
}
