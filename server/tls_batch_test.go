package server

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/testpki"
)

// countingConn counts the writes that reach the socket.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// tlsPair is a TLS connection over loopback TCP: the server side's socket
// is a recordBatcher over a countingConn.
func tlsPair(t *testing.T) (server *batchedTLSConn, counted *countingConn, client *tls.Conn) {
	t.Helper()
	ca, err := testpki.NewCA("batch-ca")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue("localhost", testpki.WithHosts("127.0.0.1"), testpki.ServerOnly())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	raw, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sc, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	counted = &countingConn{Conn: sc}
	pool := &sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
	batcher := newRecordBatcher(counted, pool)
	stc := tls.Server(batcher, &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}})
	client = tls.Client(raw, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
	t.Cleanup(func() { client.Close(); stc.Close() })
	for _, c := range []net.Conn{raw, sc} {
		if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 1)
	go func() { errs <- client.Handshake() }()
	if err := stc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	return &batchedTLSConn{Conn: stc, batcher: batcher}, counted, client
}

// TestRecordBatcherOneWritePerBatch: a 256 KiB write through the batcher
// reaches the socket as one write instead of one per TLS record, and the
// client reads exactly what was written; writes outside a batch (here the
// server's answer to the client, then a second batch) keep their order.
func TestRecordBatcherOneWritePerBatch(t *testing.T) {
	server, counted, client := tlsPair(t)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 256<<10/16)
	read := make(chan []byte, 1)
	go func() {
		got, err := io.ReadAll(io.LimitReader(client, int64(3*len(payload))))
		if err != nil {
			t.Error(err)
		}
		read <- got
	}()

	before := counted.writes.Load()
	if n, err := (*batchedWriter)(server).Write(payload); err != nil || n != len(payload) {
		t.Fatalf("batched write: %d, %v", n, err)
	}
	if w := counted.writes.Load() - before; w != 1 {
		t.Fatalf("a 256 KiB batch took %d socket writes, want 1", w)
	}
	before = counted.writes.Load()
	if _, err := server.Write(payload); err != nil { // unbatched: one write per record
		t.Fatal(err)
	}
	if w := counted.writes.Load() - before; w < 16 {
		t.Fatalf("an unbatched 256 KiB write took %d socket writes, want one per 16 KiB record", w)
	}
	if _, err := (*batchedWriter)(server).Write(payload); err != nil {
		t.Fatal(err)
	}
	got := <-read
	if want := bytes.Repeat(payload, 3); !bytes.Equal(got, want) {
		t.Fatalf("client read %d bytes, not the %d written", len(got), len(want))
	}
}

// TestRecordBatcherConcurrentWrites: writes of the TLS connection from
// another goroutine while batches are gathered (as crypto/tls answers from
// its reading side) never tear a batch: the client decrypts every byte.
func TestRecordBatcherConcurrentWrites(t *testing.T) {
	server, _, client := tlsPair(t)
	payload := bytes.Repeat([]byte{'b'}, 100<<10)
	small := []byte("s")
	const batches, smalls = 20, 200
	total := batches*len(payload) + smalls*len(small)
	read := make(chan int, 1)
	go func() {
		n, err := io.Copy(io.Discard, io.LimitReader(client, int64(total)))
		if err != nil {
			t.Error(err)
		}
		read <- int(n)
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range smalls {
			if _, err := server.Write(small); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range batches {
		if _, err := (*batchedWriter)(server).Write(payload); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if n := <-read; n != total {
		t.Fatalf("client read %d bytes, want %d", n, total)
	}
}
