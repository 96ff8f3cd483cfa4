package server

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kbroker/kbroker/controller"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A peer gets peerConnsPerBroker connections, used in turn.
func TestPeerConnsTakeTurns(t *testing.T) {
	b := newAdminTestBroker(t)
	pc := newPeerConns(b, "test")
	defer pc.Close()
	seen := map[any]int{}
	var first any
	for i := 0; i < 2*peerConnsPerBroker; i++ {
		c, err := pc.get(b.self.ID)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = c
		}
		if i == peerConnsPerBroker && any(c) != first {
			t.Fatalf("call %d did not come back to the first connection", i)
		}
		seen[c]++
	}
	if len(seen) != peerConnsPerBroker {
		t.Fatalf("%d connections, want %d", len(seen), peerConnsPerBroker)
	}
	pc.Close()
	if _, err := pc.get(b.self.ID); err == nil {
		t.Fatal("get after Close: no error")
	}
}

// A peer that restarted: the connection made before answers nothing (it
// is closed at the first request), the request goes once more on a fresh
// one, and the other stale connections are dropped with it.
func TestPeerConnsRetryOnAFreshConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := accepted.Add(1)
			go servePeerTest(c, n == 1)
		}
	}()
	b := newAdminTestBroker(t)
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	md := b.controller.Metadata()
	md.Brokers = append(md.Brokers, controller.BrokerInfo{ID: 77, Host: host, Port: int32(p)})
	pc := newPeerConns(b, "test")
	pc.metadata = func() *controller.Metadata { return md }
	defer pc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	if _, err := pc.request(ctx, 77, req, true); err != nil {
		t.Fatalf("request with retry: %v", err)
	}
	if got := accepted.Load(); got != 2 {
		t.Fatalf("%d connections, want 2 (the stale one, then a fresh one)", got)
	}
	if _, err := pc.request(ctx, 77, req, false); err != nil {
		t.Fatalf("next request: %v", err)
	}
}

// servePeerTest answers ApiVersions v0 requests on c, or closes c at the
// first request when stale.
func servePeerTest(c net.Conn, stale bool) {
	defer c.Close()
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, body); err != nil || stale {
			return
		}
		resp := kmsg.NewApiVersionsResponse()
		out := binary.BigEndian.AppendUint32(nil, binary.BigEndian.Uint32(body[4:8])) // correlation id
		out = resp.AppendTo(out)
		if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(out))), out...)); err != nil {
			return
		}
	}
}
