package zk

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"time"
)

// A new controller reads every partition's state znode: 10,000 partitions
// are 10,000 getData requests, and a ZooKeeper server spends most of its
// time per request, not per byte (standalone, about 15,000 such reads a
// second on a core, however many are in flight). ZooKeeper 3.6 answers up
// to thousands of reads in one request (multiRead, opcode 22), but
// go-zookeeper, which the Store's session uses, cannot send it. So bulk
// reads open a second, short-lived session of their own (bulkReader: the
// connect handshake, sync, multiRead and closeSession of ZooKeeper's
// protocol, nothing else: no watches, no pings, no reconnection) and the
// callers fall back to one getData per znode on the Store's session when it
// fails for any reason (a server before 3.6, a lost connection).

// readsPerMultiRead is how many reads one multiRead request carries: 1,000
// partition states are about 250 KB of answer, well below jute.maxbuffer.
const readsPerMultiRead = 1000

// multiReadsInFlight bounds the multiRead requests sent and not answered.
const multiReadsInFlight = 4

// maxReadFrame bounds one answer frame a bulkReader accepts (the Store's
// session accepts 4 MB).
const maxReadFrame = 16 << 20

// ZooKeeper protocol constants (org.apache.zookeeper.ZooDefs.OpCode and
// KeeperException.Code).
const (
	opGetDataCode      = 4
	opGetChildrenCode  = 8
	opSyncCode         = 9
	opMultiReadCode    = 22
	opCloseSessionCode = -11
	opErrorCode        = -1
	zkErrNoNode        = -101
)

// readOp is one read of a multiRead: a znode's data (with its version) or
// its children.
type readOp struct {
	path     string // server path (chroot included)
	children bool
}

// znodeRead is one read's answer.
type znodeRead struct {
	data     []byte
	version  int32
	children []string
	// err is ErrNoNode, or a *ServerError for another of ZooKeeper's
	// per-read errors.
	err error
}

// ServerError is a ZooKeeper error code a bulk read answered.
type ServerError struct{ Code int32 }

func (e *ServerError) Error() string { return fmt.Sprintf("zookeeper error code %d", e.Code) }

// bulkReader is a second ZooKeeper session that only reads, in multiRead
// requests. It lives for one bulk read; ctx's deadline bounds every step.
type bulkReader struct {
	conn net.Conn
	r    *bufio.Reader
	xid  int32
}

// dialBulkReader opens a session on server (host:port) with the given
// timeout and syncs it with the ensemble's leader, so its reads see every
// write committed before (a follower may lag behind the server the
// Store's own session uses).
func dialBulkReader(ctx context.Context, server string, sessionTimeout time.Duration, syncPath string) (*bulkReader, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", server)
	if err != nil {
		return nil, err
	}
	b := &bulkReader{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	if err := b.handshake(sessionTimeout); err != nil {
		conn.Close()
		return nil, fmt.Errorf("bulk read session: %w", err)
	}
	if err := b.sync(syncPath); err != nil {
		b.close()
		return nil, fmt.Errorf("bulk read session: %w", err)
	}
	return b, nil
}

// handshake sends a ConnectRequest for a new session and checks the
// ConnectResponse grants one.
func (b *bulkReader) handshake(sessionTimeout time.Duration) error {
	var e juteEncoder
	e.int32(0)                                                        // protocolVersion
	e.int64(0)                                                        // lastZxidSeen
	e.int32(int32(min(sessionTimeout.Milliseconds(), math.MaxInt32))) // timeOut
	e.int64(0)                                                        // sessionId: a new one
	e.buffer(make([]byte, 16))                                        // passwd
	e.bool(false)                                                     // readOnly
	if _, err := b.conn.Write(e.frame()); err != nil {
		return err
	}
	frame, err := b.readFrame()
	if err != nil {
		return err
	}
	d := juteDecoder{buf: frame}
	d.int32() // protocolVersion
	timeout := d.int32()
	d.int64() // sessionId
	d.buffer()
	if d.err != nil {
		return d.err
	}
	if timeout <= 0 {
		return errors.New("ZooKeeper refused the session")
	}
	return nil
}

// sync makes the server catch up with the leader (ZooKeeper's sync).
func (b *bulkReader) sync(path string) error {
	var e juteEncoder
	xid := b.header(&e, opSyncCode)
	e.string(path)
	if _, err := b.conn.Write(e.frame()); err != nil {
		return err
	}
	_, err := b.readReply(xid)
	return err
}

// close ends the session at once (its znodes: none) and the connection.
func (b *bulkReader) close() {
	var e juteEncoder
	b.header(&e, opCloseSessionCode)
	b.conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := b.conn.Write(e.frame()); err == nil {
		b.readFrame() // the close's answer: the server has ended the session
	}
	b.conn.Close()
}

func (b *bulkReader) header(e *juteEncoder, opcode int32) int32 {
	b.xid++
	e.int32(b.xid)
	e.int32(opcode)
	return b.xid
}

// readFrame reads one length-prefixed frame.
func (b *bulkReader) readFrame() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(b.r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxReadFrame {
		return nil, fmt.Errorf("answer of %d bytes, more than %d", n, maxReadFrame)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(b.r, frame); err != nil {
		return nil, err
	}
	return frame, nil
}

// readReply reads the answer to request xid and returns its body; a
// request-level error code is a *ServerError.
func (b *bulkReader) readReply(xid int32) ([]byte, error) {
	frame, err := b.readFrame()
	if err != nil {
		return nil, err
	}
	d := juteDecoder{buf: frame}
	got := d.int32()
	d.int64() // zxid
	code := d.int32()
	if d.err != nil {
		return nil, d.err
	}
	if got != xid {
		return nil, fmt.Errorf("answer to request %d, expected %d", got, xid)
	}
	if code != 0 {
		return nil, &ServerError{Code: code}
	}
	return d.buf, nil
}

// read answers ops, in order, in multiRead requests of up to
// readsPerMultiRead reads, up to multiReadsInFlight of them outstanding.
func (b *bulkReader) read(ctx context.Context, ops []readOp) ([]znodeRead, error) {
	stop := context.AfterFunc(ctx, func() { b.conn.SetDeadline(time.Now()) })
	defer stop()
	type sent struct {
		xid   int32
		first int
		n     int
	}
	var batches []sent
	var frames [][]byte
	for first := 0; first < len(ops); first += readsPerMultiRead {
		batch := ops[first:min(first+readsPerMultiRead, len(ops))]
		var e juteEncoder
		xid := b.header(&e, opMultiReadCode)
		for _, op := range batch {
			code := int32(opGetDataCode)
			if op.children {
				code = opGetChildrenCode
			}
			e.int32(code) // MultiHeader: type, done, err
			e.bool(false)
			e.int32(-1)
			e.string(op.path) // GetDataRequest/GetChildrenRequest: path, watch
			e.bool(false)
		}
		e.int32(-1)
		e.bool(true)
		e.int32(-1)
		batches = append(batches, sent{xid, first, len(batch)})
		frames = append(frames, e.frame())
	}
	// A writer goroutine keeps multiReadsInFlight requests outstanding
	// while this one reads the answers, so neither side's socket buffer
	// can fill up with both waiting.
	window := make(chan struct{}, multiReadsInFlight)
	quit := make(chan struct{})
	writeErr := make(chan error, 1)
	go func() {
		for _, f := range frames {
			select {
			case window <- struct{}{}:
			case <-quit:
				writeErr <- nil
				return
			}
			if _, err := b.conn.Write(f); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	}()
	out := make([]znodeRead, len(ops))
	var err error
	for _, s := range batches {
		var body []byte
		if body, err = b.readReply(s.xid); err != nil {
			break
		}
		<-window
		if err = decodeMultiRead(body, ops[s.first:s.first+s.n], out[s.first:s.first+s.n]); err != nil {
			break
		}
	}
	if err != nil {
		close(quit)
		b.conn.SetDeadline(time.Now()) // unblocks a write under way
		<-writeErr
		return nil, err
	}
	if err := <-writeErr; err != nil {
		return nil, err
	}
	return out, nil
}

// decodeMultiRead fills out from a multiRead answer to ops
// (org.apache.zookeeper.MultiResponse).
func decodeMultiRead(body []byte, ops []readOp, out []znodeRead) error {
	d := juteDecoder{buf: body}
	for i := 0; ; i++ {
		typ := d.int32()
		done := d.bool()
		code := d.int32()
		if d.err != nil {
			return d.err
		}
		if done {
			if i != len(ops) {
				return fmt.Errorf("multiRead answered %d of %d reads", i, len(ops))
			}
			return nil
		}
		if i >= len(ops) {
			return fmt.Errorf("multiRead answered more than the %d reads asked", len(ops))
		}
		switch {
		case typ == opErrorCode:
			code = d.int32() // ErrorResponse
			if code == zkErrNoNode {
				out[i].err = ErrNoNode
			} else {
				out[i].err = &ServerError{Code: code}
			}
		case typ == opGetDataCode && !ops[i].children:
			out[i].data = d.buffer()
			out[i].version = d.stat()
		case typ == opGetChildrenCode && ops[i].children:
			n := d.int32()
			if n < 0 || int(n) > len(d.buf) {
				return fmt.Errorf("multiRead answer: %d children", n)
			}
			out[i].children = make([]string, 0, n)
			for range n {
				out[i].children = append(out[i].children, d.string())
			}
		default:
			return fmt.Errorf("multiRead answered type %d (error %d) to read %d of %s", typ, code, i, ops[i].path)
		}
		if d.err != nil {
			return d.err
		}
	}
}

// juteEncoder writes ZooKeeper's jute encoding (big-endian, strings and
// buffers with an int32 length) after a frame's length prefix.
type juteEncoder struct{ buf []byte }

func (e *juteEncoder) int32(v int32) {
	if e.buf == nil {
		e.buf = make([]byte, 4, 256) // the frame length, set by frame
	}
	e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(v))
}

func (e *juteEncoder) int64(v int64) {
	e.int32(int32(uint64(v) >> 32))
	e.int32(int32(uint32(v)))
}

func (e *juteEncoder) bool(v bool) {
	if e.buf == nil {
		e.buf = make([]byte, 4, 256)
	}
	if v {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}

func (e *juteEncoder) buffer(v []byte) {
	e.int32(int32(len(v)))
	e.buf = append(e.buf, v...)
}

func (e *juteEncoder) string(v string) {
	e.int32(int32(len(v)))
	e.buf = append(e.buf, v...)
}

// frame is the encoded request with its length prefix.
func (e *juteEncoder) frame() []byte {
	binary.BigEndian.PutUint32(e.buf[:4], uint32(len(e.buf)-4))
	return e.buf
}

// juteDecoder reads jute; the first error sticks and later reads are zero.
type juteDecoder struct {
	buf []byte
	err error
}

func (d *juteDecoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.buf) {
		d.err = fmt.Errorf("short ZooKeeper answer: %d bytes wanted, %d left", n, len(d.buf))
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}

func (d *juteDecoder) int32() int32 {
	b := d.take(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (d *juteDecoder) int64() int64 {
	b := d.take(8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

func (d *juteDecoder) bool() bool {
	b := d.take(1)
	return b != nil && b[0] != 0
}

// buffer reads a length-prefixed byte string (-1: null).
func (d *juteDecoder) buffer() []byte {
	n := d.int32()
	if n == -1 {
		return nil
	}
	return d.take(int(n))
}

func (d *juteDecoder) string() string { return string(d.buffer()) }

// stat reads a Stat and returns its data version (the field a partition
// state's conditional write names).
func (d *juteDecoder) stat() int32 {
	d.take(4 * 8) // czxid, mzxid, ctime, mtime
	version := d.int32()
	d.take(4 + 4 + 8 + 4 + 4 + 8) // cversion, aversion, ephemeralOwner, dataLength, numChildren, pzxid
	return version
}
