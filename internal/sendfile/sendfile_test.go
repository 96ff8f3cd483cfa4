package sendfile

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func tempFile(t *testing.T, data []byte) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	return f
}

// tcpPair is a connected pair of loopback TCP connections.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case server = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("accept timed out")
	}
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// Chunks of bytes and file ranges arrive in order and byte for byte, over
// TCP (sendfile, several MiB so the socket buffer fills and the writer
// waits) and over a plain writer (pread and write).
func TestWriteToSendsEveryChunkInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	f := tempFile(t, data)
	cs := Chunks{
		{Data: []byte("head")},
		{File: f, Pos: 10, Len: 3 << 20},
		{Data: []byte("mid")},
		{Data: []byte{}},
		{File: f, Pos: 5 << 20, Len: 3 << 20},
		{File: f, Pos: 0, Len: 1},
		{Data: []byte("tail")},
	}
	var want []byte
	want = append(want, "head"...)
	want = append(want, data[10:10+3<<20]...)
	want = append(want, "mid"...)
	want = append(want, data[5<<20:8<<20]...)
	want = append(want, data[0])
	want = append(want, "tail"...)
	if cs.Size() != len(want) {
		t.Fatalf("Size %d, want %d", cs.Size(), len(want))
	}
	if got, err := cs.AppendTo(nil); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("AppendTo: %d bytes: %v", len(got), err)
	}

	var buf bytes.Buffer
	if n, err := WriteTo(&buf, cs); err != nil || n != int64(len(want)) || !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("to a buffer: %d bytes: %v", n, err)
	}

	client, server := tcpPair(t)
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(want))
		_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, _ := io.ReadFull(client, b)
		got <- b[:n]
	}()
	if n, err := WriteTo(server, cs); err != nil || n != int64(len(want)) {
		t.Fatalf("to TCP: %d bytes: %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("TCP peer read %d bytes, differing from the %d sent", len(b), len(want))
	}
}

// A file cut short after its chunk was taken cannot deliver the promised
// bytes: WriteTo says so rather than sending a short frame silently.
func TestWriteToReportsShortFile(t *testing.T) {
	f := tempFile(t, make([]byte, 1000))
	cs := Chunks{{File: f, Pos: 0, Len: 1000}}
	if err := f.Truncate(400); err != nil {
		t.Fatal(err)
	}
	client, server := tcpPair(t)
	go io.Copy(io.Discard, client)
	if n, err := WriteTo(server, cs); !errors.Is(err, ErrShortFile) || n != 400 {
		t.Fatalf("TCP: %d bytes, %v; want 400 and ErrShortFile", n, err)
	}
	if n, err := WriteTo(io.Discard, cs); !errors.Is(err, ErrShortFile) || n != 400 {
		t.Fatalf("plain writer: %d bytes, %v; want 400 and ErrShortFile", n, err)
	}
}
