package kafkaconn_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/internal/kafkaconn"
	"github.com/kbroker/kbroker/server"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func startBroker(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := config.Default()
	cfg.Listeners = []string{"PLAINTEXT://127.0.0.1:" + strconv.Itoa(port)}
	cfg.LogDirs = []string{t.TempDir()}
	b, err := server.NewBroker(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("broker: %v", err)
		}
	})
	return "127.0.0.1:" + strconv.Itoa(port)
}

func TestRequestsFlexibleAndNot(t *testing.T) {
	addr := startBroker(t)
	t.Run("new buffer per response", func(t *testing.T) { requestsFlexibleAndNot(t, kafkaconn.New(addr, "test")) })
	t.Run("one reused buffer", func(t *testing.T) { requestsFlexibleAndNot(t, kafkaconn.New(addr, "test").ReuseResponseBuffer()) })
}

func requestsFlexibleAndNot(t *testing.T, c *kafkaconn.Conn) {
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var resp kmsg.Response
	var err error
	for { // the broker may still be starting
		av := kmsg.NewPtrApiVersionsRequest()
		av.Version = 3
		av.ClientSoftwareName, av.ClientSoftwareVersion = "kbroker", "test"
		if resp, err = c.Request(ctx, av); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("broker never answered: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if len(resp.(*kmsg.ApiVersionsResponse).ApiKeys) == 0 {
		t.Fatal("no API keys")
	}
	for _, v := range []int16{1, 12} { // non-flexible and flexible headers
		md := kmsg.NewPtrMetadataRequest()
		md.Version = v
		resp, err := c.Request(ctx, md)
		if err != nil {
			t.Fatalf("metadata v%d: %v", v, err)
		}
		if n := len(resp.(*kmsg.MetadataResponse).Brokers); n != 1 {
			t.Fatalf("metadata v%d: %d brokers", v, n)
		}
	}
}

func TestRequestBoundedByContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accept and never answer
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	c := kafkaconn.New(ln.Addr().String(), "test")
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Request(ctx, kmsg.NewPtrApiVersionsRequest()); err == nil {
		t.Fatal("a silent broker must give an error")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("request not bounded by its context")
	}
}
