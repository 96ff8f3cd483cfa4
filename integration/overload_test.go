package integration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Overload protection (issue 20): idle connections are closed after
// connections.max.idle.ms, connections over max.connections.per.ip are
// closed at once, and a broker out of file descriptors keeps serving.

// overloadConn is a plain TCP connection speaking just enough Kafka to send
// ApiVersions and notice when the broker closes it.
type overloadConn struct {
	net.Conn
	corr int32
}

func dialOverload(addr string) (*overloadConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &overloadConn{Conn: c}, nil
}

// request sends req (its version set) and reads its response into resp,
// the whole exchange bounded by timeout.
func (c *overloadConn) request(req kmsg.Request, resp kmsg.Response, timeout time.Duration) error {
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	if err := c.send(req); err != nil {
		return err
	}
	return c.recv(req, resp)
}

// send writes req with the next correlation id.
func (c *overloadConn) send(req kmsg.Request) error {
	c.corr++
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("overload-test")).AppendRequest(nil, req, c.corr)
	if _, err := c.Write(frame); err != nil {
		return fmt.Errorf("write %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	return nil
}

// recv reads the response to the request send wrote last into resp, within
// the connection's deadline.
func (c *overloadConn) recv(req kmsg.Request, resp kmsg.Response) error {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return fmt.Errorf("read %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return fmt.Errorf("read %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	if len(body) < 4 || int32(binary.BigEndian.Uint32(body)) != c.corr {
		return fmt.Errorf("%s response with the wrong correlation id", kmsg.NameForKey(req.Key()))
	}
	body = body[4:]
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:] // no tagged fields in the response header here
	}
	return resp.ReadFrom(body)
}

// apiVersions sends an ApiVersions v0 request and checks its answer.
func (c *overloadConn) apiVersions(timeout time.Duration) error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	resp := kmsg.NewPtrApiVersionsResponse()
	if err := c.request(req, resp, timeout); err != nil {
		return err
	}
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		return fmt.Errorf("ApiVersions answered error %d with %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
	return nil
}

// waitClosed reads until the broker closes the connection (EOF or reset)
// and fails if that does not happen within timeout.
func (c *overloadConn) waitClosed(timeout time.Duration) error {
	c.SetReadDeadline(time.Now().Add(timeout))
	var buf [64]byte
	for {
		_, err := c.Read(buf[:])
		var ne net.Error
		switch {
		case err == nil:
			continue
		case errors.As(err, &ne) && ne.Timeout():
			return fmt.Errorf("still open after %v", timeout)
		default:
			return nil // EOF or reset: closed by the broker
		}
	}
}

// With connections.max.idle.ms=2000 an idle connection is closed 2-3 s
// after its last response, while one sending a request every 500 ms stays
// open.
func TestIdleConnectionsClosed(t *testing.T) {
	metrics := "127.0.0.1:" + strconv.Itoa(freePort(t))
	b := StartBroker(t, "connections.max.idle.ms=2000", "kbroker.metrics.address="+metrics)
	idle, err := dialOverload(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	active, err := dialOverload(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer active.Close()

	var wg sync.WaitGroup
	activeErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 12; i++ { // 6 s, well past the idle time
			if err := active.apiVersions(2 * time.Second); err != nil {
				activeErr <- fmt.Errorf("active connection, request %d: %w", i, err)
				return
			}
			<-tick.C
		}
	}()

	if err := idle.apiVersions(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	last := time.Now()
	if err := idle.waitClosed(5 * time.Second); err != nil {
		t.Fatalf("idle connection: %v", err)
	}
	closedAfter := time.Since(last)
	t.Logf("idle connection closed %v after its last response", closedAfter.Round(time.Millisecond))
	if closedAfter < 1900*time.Millisecond || closedAfter > 3*time.Second {
		t.Errorf("idle connection closed after %v, want 2-3 s", closedAfter)
	}
	wg.Wait()
	select {
	case err := <-activeErr:
		t.Fatal(err)
	default:
	}
	m, err := scrapeMetrics(metrics)
	if err != nil {
		t.Fatal(err)
	}
	if m["kbroker_connections_closed_idle_total"] < 1 || m["kbroker_connections"] < 1 {
		t.Fatalf("metrics: closed idle %v, open %v; want at least 1 each", m["kbroker_connections_closed_idle_total"], m["kbroker_connections"])
	}
}

// With max.connections.per.ip=50, 50 connections from 127.0.0.1 work, the
// 51st is closed at once, and once one of the 50 closes a new one works.
func TestMaxConnectionsPerIP(t *testing.T) {
	metrics := "127.0.0.1:" + strconv.Itoa(freePort(t))
	b := StartBroker(t, "max.connections.per.ip=50", "kbroker.metrics.address="+metrics)
	var conns []*overloadConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// dialWorking opens a connection that answers ApiVersions; the
	// readiness probe's connections may still be counted for a moment.
	dialWorking := func() *overloadConn {
		var got *overloadConn
		checkFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			c, err := dialOverload(b.Addr())
			if err != nil {
				return err
			}
			if err := c.apiVersions(5 * time.Second); err != nil {
				c.Close()
				return err
			}
			got = c
			return nil
		})
		return got
	}
	for range 50 {
		conns = append(conns, dialWorking())
	}
	extra, err := dialOverload(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	start := time.Now()
	if err := extra.waitClosed(5 * time.Second); err != nil {
		t.Fatalf("51st connection: %v", err)
	}
	t.Logf("51st connection closed after %v", time.Since(start).Round(time.Millisecond))
	for i, c := range conns {
		if err := c.apiVersions(5 * time.Second); err != nil {
			t.Fatalf("connection %d of the first 50 after the 51st: %v", i+1, err)
		}
	}
	if m, err := scrapeMetrics(metrics); err != nil || m["kbroker_connections_refused_total"] < 1 || m["kbroker_connections"] < 50 {
		t.Fatalf("metrics: refused %v, open %v (%v); want >= 1 and >= 50", m["kbroker_connections_refused_total"], m["kbroker_connections"], err)
	}
	conns[0].Close()
	conns[0] = dialWorking()
	if !b.Running() {
		t.Fatalf("broker exited: %s", b.exitState())
	}
}
