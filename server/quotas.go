package server

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/internal/quota"
)

// connQuotas is Kafka's ConnectionQuotas (ConnectionQuotas.scala) for
// max.connections, max.connection.creation.rate (broker-wide and per
// listener, listener.name.<l>.), max.connections.per.ip and its
// overrides.
//
//   - max.connections: as Kafka, accepting waits while the listener holds
//     its own limit or the broker holds max.connections, except that the
//     protected listener (the inter-broker listener when there are
//     several, Kafka's protectedListener) is held only to its own limit.
//     When its connections take the broker past max.connections, the
//     least recently active connection of another listener is closed
//     (Kafka's processors close their LRU channel). kbroker waits before
//     taking a connection from the kernel's backlog, so a broker at its
//     limit holds no descriptor for it; Kafka accepts, then waits.
//   - max.connection.creation.rate: each accepted connection is recorded
//     in the listener's rate and, off the protected listener, the
//     broker's (Kafka's Rate over quota.window.num windows of
//     quota.window.size.seconds); over either, the listener's accept loop
//     waits the throttle time, at most one window, before serving it and
//     accepting the next. Connections are delayed, never closed.
//   - max.connections.per.ip: as Kafka, a connection from an address that
//     already holds its limit is accepted, counted, and closed at once.
//     Overrides name an address or a host name (resolved once, at start,
//     to all its addresses, where Kafka resolves each override to one).
//
// Each listener's limits are the broker's unless the listener sets its
// own (config.ListenerConnectionLimits), as Kafka's ListenerConnectionQuota.
type connQuotas struct {
	rates       quota.Config  // quota.window.num and quota.window.size.seconds
	maxThrottle time.Duration // one window: Kafka's bound on a connection's delay
	brokerMax   int
	brokerRate  float64
	maxPerIP    int
	overrides   map[netip.Addr]int
	protected   string // the listener exempt from the broker-wide limits, or ""
	now         func() time.Time

	// mu guards total, perIP, listeners' counts and rates, brokerRates
	// and freed.
	mu          sync.Mutex
	total       int
	perIP       map[netip.Addr]int
	listeners   map[string]*listenerQuota
	brokerRates quota.Rate
	// freed is closed and replaced when a connection is released.
	freed chan struct{}
}

// listenerQuota is one listener's limits, count and accept rate.
type listenerQuota struct {
	maxConns int
	maxRate  float64
	count    int
	rate     quota.Rate
	// throttled counts connections delayed by a creation rate and
	// throttleTime sums their delays (Kafka's
	// connection-accept-throttle-time).
	throttled    int64
	throttleTime time.Duration
}

func newConnQuotas(cfg config.Config, logger *slog.Logger) *connQuotas {
	q := &connQuotas{
		rates:       quota.Config{Samples: int(cfg.QuotaWindowNum), Window: cfg.QuotaWindowSize},
		maxThrottle: cfg.QuotaWindowSize,
		brokerMax:   int(cfg.MaxConnections),
		brokerRate:  float64(cfg.MaxConnectionCreationRate),
		maxPerIP:    int(cfg.MaxConnectionsPerIP),
		overrides:   map[netip.Addr]int{},
		perIP:       map[netip.Addr]int{},
		listeners:   map[string]*listenerQuota{},
		now:         time.Now,
		freed:       make(chan struct{}),
	}
	for _, l := range cfg.Listeners {
		name, _, _, err := config.ParseListener(l)
		if err != nil {
			continue // refused by config.Validate
		}
		lim := cfg.ListenerConnectionLimits(name)
		q.listeners[name] = &listenerQuota{maxConns: int(lim.MaxConnections), maxRate: float64(lim.MaxConnectionCreationRate)}
	}
	if protectedListener(strings.ToUpper(cfg.InterBrokerListenerName), len(q.listeners)) {
		q.protected = strings.ToUpper(cfg.InterBrokerListenerName)
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

// protectedListener is Kafka's rule for the listener exempt from the
// broker-wide limits: the inter-broker listener, when there are several.
// With a single listener nothing tells brokers from clients.
func protectedListener(interBroker string, listeners int) bool {
	return interBroker != "" && listeners > 1
}

// slotAvailable is Kafka's connectionSlotAvailable: the listener is under
// its own limit and, unless it is the protected listener, the broker
// under max.connections.
func slotAvailable(listenerCount, listenerMax, total, brokerMax int, protected bool) bool {
	if listenerCount >= listenerMax {
		return false
	}
	return protected || total < brokerMax
}

// brokerOverLimit is Kafka's maxConnectionsExceeded: the protected
// listener took the broker past max.connections, and a connection of
// another listener must close.
func brokerOverLimit(total, brokerMax int) bool { return total > brokerMax }

// ipAllowed is Kafka's per-address check: count is how many the address
// held before this one.
func ipAllowed(count, limit int) bool { return count < limit }

// connectionThrottle is Kafka's recordConnectionAndGetThrottleTimeMs: the
// throttle a connection earns from the broker's rate (recorded only off
// the protected listener) and the listener's, the longer of the two, each
// at most maxThrottle. Both rates record the connection either way.
func connectionThrottle(cfg quota.Config, broker *quota.Rate, brokerBound float64, listener *quota.Rate, listenerBound float64,
	protected bool, nowMs int64, maxThrottle time.Duration) time.Duration {
	var brokerMs int64
	if !protected {
		brokerMs = broker.RecordAndThrottle(cfg, 1, brokerBound, nowMs)
	}
	listenerMs := listener.RecordAndThrottle(cfg, 1, listenerBound, nowMs)
	return min(time.Duration(max(brokerMs, listenerMs))*time.Millisecond, maxThrottle)
}

// listener returns the quota of the named listener, made with the
// broker's limits for a name the configuration did not list (handler
// tests). q.mu must be held.
func (q *connQuotas) listener(name string) *listenerQuota {
	l, ok := q.listeners[name]
	if !ok {
		l = &listenerQuota{maxConns: q.brokerMax, maxRate: q.brokerRate}
		q.listeners[name] = l
	}
	return l
}

// waitSlot blocks, before accepting, until the listener may take a
// connection, or ctx ends (false).
func (q *connQuotas) waitSlot(ctx context.Context, listener string) bool {
	for {
		q.mu.Lock()
		l := q.listener(listener)
		ok, freed := slotAvailable(l.count, l.maxConns, q.total, q.brokerMax, listener == q.protected), q.freed
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

// admit is Kafka's ConnectionQuotas.inc for a connection just accepted on
// listener from addr: it records the connection in the creation rates,
// waits out the throttle they impose and, should the slot have gone
// meanwhile, for a slot; then counts the connection and tells whether its
// address is within its limit. ok is false when ctx ended first (nothing
// counted). After ok, release must be called once the connection closes,
// whether or not its address was within its limit.
func (q *connQuotas) admit(ctx context.Context, listener string, addr netip.Addr) (withinIP, ok bool) {
	q.mu.Lock()
	l := q.listener(listener)
	protected := listener == q.protected
	start := q.now()
	throttle := connectionThrottle(q.rates, &q.brokerRates, q.brokerRate, &l.rate, l.maxRate, protected, start.UnixMilli(), q.maxThrottle)
	if throttle > 0 {
		l.throttled++
		l.throttleTime += throttle
	}
	end := start.Add(throttle)
	for {
		wait := end.Sub(q.now())
		if wait <= 0 && slotAvailable(l.count, l.maxConns, q.total, q.brokerMax, protected) {
			break
		}
		freed := q.freed
		q.mu.Unlock()
		if !waitFor(ctx, freed, wait) {
			return false, false
		}
		q.mu.Lock()
	}
	count := q.perIP[addr]
	q.perIP[addr] = count + 1
	q.total++
	l.count++
	limit, found := q.overrides[addr]
	if !found {
		limit = q.maxPerIP
	}
	q.mu.Unlock()
	return ipAllowed(count, limit), true
}

// waitFor waits until freed is closed, d has passed (d > 0) or ctx ends
// (false).
func waitFor(ctx context.Context, freed <-chan struct{}, d time.Duration) bool {
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-freed:
	case <-timeout:
	}
	return true
}

// release uncounts a connection admitted on listener from addr.
func (q *connQuotas) release(listener string, addr netip.Addr) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.total--
	q.listener(listener).count--
	if q.perIP[addr]--; q.perIP[addr] <= 0 {
		delete(q.perIP, addr)
	}
	close(q.freed)
	q.freed = make(chan struct{})
}

// overLimit tells whether the broker holds more than max.connections (the
// protected listener's doing), so that a connection of another listener
// must close.
func (q *connQuotas) overLimit() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return brokerOverLimit(q.total, q.brokerMax)
}

// listenerConnStats is what the metrics show of one listener.
type listenerConnStats struct {
	connections  int
	acceptRate   float64 // connections per second, as the quota measures it
	throttled    int64
	throttleTime time.Duration
}

// stats returns each listener's figures and the broker-wide accept rate.
func (q *connQuotas) stats() (map[string]listenerConnStats, float64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	nowMs := q.now().UnixMilli()
	out := make(map[string]listenerConnStats, len(q.listeners))
	for name, l := range q.listeners {
		out[name] = listenerConnStats{connections: l.count, acceptRate: l.rate.Measure(q.rates, nowMs), throttled: l.throttled, throttleTime: l.throttleTime}
	}
	return out, q.brokerRates.Measure(q.rates, nowMs)
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
