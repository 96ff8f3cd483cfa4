package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// --idle-conns: before the workload, kbench opens that many connections to
// the kbroker it started, each sends one ApiVersions request (as every
// client's first) and then stays idle, held open through the workload. The
// broker's resident set is read before and after they are opened: the
// difference over their number is the memory an idle connection costs.
// Comparing a run with them against one without (--vs-variant
// "--idle-conns 0") shows what holding them does to the producer's
// latency.

// idleDialers is how many connections are opened at once: enough to open
// 10,000 in seconds, few enough not to overflow the listen backlog.
const idleDialers = 32

// idleRequestTimeout bounds each idle connection's dial and ApiVersions
// exchange.
const idleRequestTimeout = 30 * time.Second

// idleConns are connections opened and left idle.
type idleConns struct {
	conns []net.Conn
}

// openIdleConns opens n connections to addr, each answered one ApiVersions
// request. On error the ones opened are closed.
func openIdleConns(ctx context.Context, addr string, n int) (*idleConns, error) {
	conns := make([]net.Conn, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(idleDialers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				conns[i], errs[i] = openIdleConn(ctx, addr)
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	ic := &idleConns{}
	for _, c := range conns {
		if c != nil {
			ic.conns = append(ic.conns, c)
		}
	}
	err := errors.Join(errs...)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		ic.close()
		return nil, fmt.Errorf("opening %d idle connections to %s: %w", n, addr, err)
	}
	return ic, nil
}

// openIdleConn dials addr and exchanges one ApiVersions request.
func openIdleConn(ctx context.Context, addr string) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, idleRequestTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if err := apiVersionsExchange(c, 1, time.Now().Add(idleRequestTimeout)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// apiVersionsExchange sends an ApiVersions v0 request with correlation id
// corr on c and reads its answer, by deadline.
func apiVersionsExchange(c net.Conn, corr int32, deadline time.Time) error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("kbench-idle")).AppendRequest(nil, req, corr)
	c.SetDeadline(deadline)
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(frame); err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return fmt.Errorf("ApiVersions response: %w", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return fmt.Errorf("ApiVersions response: %w", err)
	}
	if len(body) < 4 || int32(binary.BigEndian.Uint32(body)) != corr {
		return errors.New("ApiVersions response with the wrong correlation id")
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body[4:]); err != nil {
		return fmt.Errorf("ApiVersions response: %w", err)
	}
	if resp.ErrorCode != 0 {
		return fmt.Errorf("ApiVersions answered error %d", resp.ErrorCode)
	}
	return nil
}

// check sends a second ApiVersions request on every stride-th connection:
// the broker still holds them, and answers.
func (ic *idleConns) check(stride int) error {
	for i := 0; i < len(ic.conns); i += max(stride, 1) {
		if err := apiVersionsExchange(ic.conns[i], 2, time.Now().Add(idleRequestTimeout)); err != nil {
			return fmt.Errorf("idle connection %d after the workload: %w", i, err)
		}
	}
	return nil
}

func (ic *idleConns) close() {
	for _, c := range ic.conns {
		c.Close()
	}
}
