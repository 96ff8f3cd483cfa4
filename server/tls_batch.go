package server

import (
	"crypto/tls"
	"net"
	"sync"
)

// recordBatcher sits between a TLS connection and its socket and, around
// one large write (writeBatched), gathers the records crypto/tls produces
// into a single write to the socket. crypto/tls writes every record (16
// KiB at most) with a write system call of its own: 17 for each 256 KiB
// of a Fetch response, where one does.
//
// Every other write of the TLS connection (handshake, alerts, a KeyUpdate
// answer from the reading side) goes through at once, in order: mu
// serializes them with a batch being gathered and written, so no record
// can overtake the batch on the wire.
type recordBatcher struct {
	net.Conn
	bufs *sync.Pool // of *[]byte, for the batch (held only while writing one)

	mu       sync.Mutex
	batching *[]byte // the batch being gathered; nil when not batching
}

func newRecordBatcher(c net.Conn, bufs *sync.Pool) *recordBatcher {
	return &recordBatcher{Conn: c, bufs: bufs}
}

// Write is how crypto/tls writes to the socket.
func (r *recordBatcher) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.batching != nil {
		*r.batching = append(*r.batching, p...)
		return len(p), nil
	}
	return r.Conn.Write(p)
}

// writeBatched writes p through tc, whose socket is r, with the records of
// p written to the socket at once. Only one goroutine writes responses on a
// connection, so batches never nest.
func (r *recordBatcher) writeBatched(tc *tls.Conn, p []byte) (int, error) {
	buf := r.bufs.Get().(*[]byte)
	r.mu.Lock()
	r.batching = buf
	r.mu.Unlock()
	n, err := tc.Write(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batching = nil
	if len(*buf) > 0 {
		// Written under mu: a record tc writes next (from another
		// goroutine) must follow the batch.
		if _, werr := r.Conn.Write(*buf); werr != nil && err == nil {
			err = werr
		}
	}
	*buf = (*buf)[:0]
	r.bufs.Put(buf)
	return n, err
}

// batchedTLSConn is a server-side TLS connection whose socket is a
// recordBatcher.
type batchedTLSConn struct {
	*tls.Conn
	batcher *recordBatcher
}

// batchedWriter writes through the connection with writeBatched, for the
// buffer a Fetch response over TLS is gathered in.
type batchedWriter batchedTLSConn

func (w *batchedWriter) Write(p []byte) (int, error) {
	return w.batcher.writeBatched(w.Conn, p)
}
