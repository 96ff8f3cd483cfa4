package integration

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Connection limits per listener and connection creation rates (issue 20),
// as Kafka's ConnectionQuotas: a broker with an inter-broker listener
// (PLAINTEXT) and a client listener (CLIENT).

// twoListenerBroker starts a broker with PLAINTEXT (inter-broker, Addr())
// and CLIENT listeners and a metrics address; it returns the CLIENT and
// metrics addresses.
func twoListenerBroker(t *testing.T, overrides ...string) (b *Broker, client, metrics string) {
	t.Helper()
	client = "127.0.0.1:" + strconv.Itoa(freePort(t))
	metrics = "127.0.0.1:" + strconv.Itoa(freePort(t))
	b = StartBroker(t, append([]string{
		"listeners=PLAINTEXT://{addr},CLIENT://" + client,
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"kbroker.metrics.address=" + metrics,
	}, overrides...)...)
	// The readiness probe's connections close on their own: wait until
	// the broker has let them go.
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		m, err := scrapeMetrics(metrics)
		if err != nil {
			return err
		}
		if n := m["kbroker_listener_connections{listener=PLAINTEXT}"]; n != 0 {
			return fmt.Errorf("%v probe connections still open", n)
		}
		return nil
	})
	return b, client, metrics
}

// dialAnswered opens n connections to addr at once, then sends each an
// ApiVersions request and returns them with how long after the first dial
// each was answered. Any connection closed or not answered within timeout
// fails the test.
func dialAnswered(t *testing.T, addr string, n int, timeout time.Duration) ([]*overloadConn, []time.Duration) {
	t.Helper()
	start := time.Now()
	conns := make([]*overloadConn, n)
	for i := range conns {
		c, err := dialOverload(addr)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	answered := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = c.apiVersions(timeout); errs[i] == nil {
				answered[i] = time.Since(start)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("%d connections to %s: %v", n, addr, err)
	}
	return conns, answered
}

// With max.connection.creation.rate=10 over one-second windows, 30
// connections opened at once on the client listener are all served, none
// closed: about 10 at once, the rest delayed ~100 ms each (Kafka throttles
// its acceptor). The inter-broker listener, with a rate of its own set
// high, is exempt from the broker-wide rate: 30 connections there are not
// delayed.
func TestMaxConnectionCreationRate(t *testing.T) {
	b, client, metrics := twoListenerBroker(t,
		"max.connection.creation.rate=10",
		"listener.name.plaintext.max.connection.creation.rate=100000",
		"quota.window.num=2", "quota.window.size.seconds=1")

	_, answered := dialAnswered(t, client, 30, 20*time.Second)
	last := answered[0]
	within := 0
	for _, d := range answered {
		last = max(last, d)
		if d < 300*time.Millisecond {
			within++
		}
	}
	t.Logf("CLIENT: 30 connections at 10/s: %d answered within 300 ms, the last after %v", within, last.Round(time.Millisecond))
	if last < 1500*time.Millisecond {
		t.Errorf("30 connections at 10/s all answered within %v, want the last >= 1.5 s (about 2 s)", last)
	}
	if within < 8 {
		t.Errorf("only %d of 30 answered within 300 ms; the first 10 fit the rate", within)
	}

	_, answered = dialAnswered(t, b.Addr(), 30, 20*time.Second)
	last = answered[0]
	for _, d := range answered {
		last = max(last, d)
	}
	t.Logf("PLAINTEXT (inter-broker): 30 connections answered, the last after %v", last.Round(time.Millisecond))

	m, err := scrapeMetrics(metrics)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("throttled: CLIENT %v (%.2f s in all), PLAINTEXT %v", m["kbroker_connections_throttled_total{listener=CLIENT}"],
		m["kbroker_connection_accept_throttle_seconds_total{listener=CLIENT}"], m["kbroker_connections_throttled_total{listener=PLAINTEXT}"])
	if n := m["kbroker_connections_throttled_total{listener=CLIENT}"]; n < 15 {
		t.Errorf("CLIENT: %v connections throttled, want >= 15", n)
	}
	if n := m["kbroker_connections_throttled_total{listener=PLAINTEXT}"]; n != 0 {
		t.Errorf("inter-broker listener: %v connections throttled by the broker-wide rate, want 0", n)
	}
	if c, p := m["kbroker_listener_connections{listener=CLIENT}"], m["kbroker_listener_connections{listener=PLAINTEXT}"]; c != 30 || p != 30 {
		t.Errorf("connections open: CLIENT %v, PLAINTEXT %v; want 30 each", c, p)
	}
}

// listener.name.client.max.connections=5: a 6th client connection waits,
// unserved but open, until one of the five closes. max.connections=8: the
// inter-broker listener may go past it, and then the least recently active
// client connection is closed, as Kafka does.
func TestListenerMaxConnections(t *testing.T) {
	b, client, metrics := twoListenerBroker(t, "listener.name.client.max.connections=5", "max.connections=8")
	conns, _ := dialAnswered(t, client, 5, 10*time.Second)

	sixth, err := dialOverload(client)
	if err != nil {
		t.Fatal(err)
	}
	defer sixth.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	if err := sixth.send(req); err != nil {
		t.Fatal(err)
	}
	sixth.SetReadDeadline(time.Now().Add(time.Second))
	var ne net.Error
	if err := sixth.recv(req, kmsg.NewPtrApiVersionsResponse()); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("6th client connection at listener.name.client.max.connections=5: %v; want no answer (waiting)", err)
	}
	conns[0].Close()
	sixth.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := sixth.recv(req, kmsg.NewPtrApiVersionsResponse()); err != nil {
		t.Fatalf("6th client connection once one closed: %v", err)
	}
	sixth.SetReadDeadline(time.Time{})
	clients := append(conns[1:], sixth)
	// Activity in order: clients[0] is the least recently active.
	for i, c := range clients {
		if err := c.apiVersions(5 * time.Second); err != nil {
			t.Fatalf("client connection %d: %v", i, err)
		}
	}
	// 5 client + 4 inter-broker connections: one past max.connections=8.
	peers, _ := dialAnswered(t, b.Addr(), 4, 10*time.Second)
	if err := clients[0].waitClosed(5 * time.Second); err != nil {
		t.Fatalf("least recently active client connection: %v", err)
	}
	for i, c := range clients[1:] {
		if err := c.apiVersions(5 * time.Second); err != nil {
			t.Fatalf("client connection %d after the inter-broker listener went past max.connections: %v", i+1, err)
		}
	}
	for i, c := range peers {
		if err := c.apiVersions(5 * time.Second); err != nil {
			t.Fatalf("inter-broker connection %d: %v", i, err)
		}
	}
	m, err := scrapeMetrics(metrics)
	if err != nil {
		t.Fatal(err)
	}
	if c, p := m["kbroker_listener_connections{listener=CLIENT}"], m["kbroker_listener_connections{listener=PLAINTEXT}"]; c != 4 || p != 4 {
		t.Errorf("connections: CLIENT %v, PLAINTEXT %v; want 4 and 4", c, p)
	}
}
