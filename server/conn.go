package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kbroker/kbroker/internal/sasl"
	"github.com/kbroker/kbroker/internal/sendfile"
	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authTimeout bounds a new connection's TLS handshake and SASL exchange
// together: Kafka leaves it to connections.max.idle.ms (10 minutes by
// default), which lets stalled or foreign clients hold connections far
// longer than any real client needs.
const authTimeout = 10 * time.Second

// connReadBuffer is each connection's read buffer. It batches the reads
// of small requests; a request body larger than it is read straight into
// the request's own buffer (bufio reads directly into a large enough
// slice), so a larger one would only add to every connection's memory:
// 200 clients sending large requests at once touched 12.5 MiB of 64 KiB
// buffers, on top of queued.max.request.bytes.
const connReadBuffer = 8 << 10

// maxPipelinedProduces bounds how many produce requests of one connection
// may wait for replication at once (the clients' default of at most five
// requests in flight).
const maxPipelinedProduces = 5

// queuedResponse is a response waiting its turn to be written.
type queuedResponse struct {
	correlationID int32
	resp          kmsg.Response // nil when raw is the encoded response
	raw           []byte
	rawTail       []byte         // written after raw (a bare SASL token)
	timing        *requestTiming // nil for raw answers (not counted)
}

// serveConn reads requests from one connection and answers them in order.
// As Kafka, it handles one request at a time: the next request is read and
// handled only once the previous one is answered, with one exception.
// A produce request's wait for replication (acks=all) does not hold up the
// next produce request on the connection: that one is appended at once,
// and the two wait together, so that a producer with several requests in
// flight is not limited to one replication round trip per request.
// Appends still happen one request at a time in arrival order and the
// answers go out in order; any other request waits until every earlier
// one is answered.
//
// st records when the connection was last active and how many requests
// are in flight, for connections.max.idle.ms.
func (b *Broker) serveConn(ctx context.Context, c net.Conn, st *connState, l *listener) {
	// The peer's address, formatted once: every request's context carries
	// it (formatting it per request cost two allocations each).
	remote := c.RemoteAddr().String()
	logger := b.logger.With("remote", remote)
	principal := "User:ANONYMOUS"
	var authDone atomic.Bool
	if l.tls != nil || l.sasl != nil {
		// A client must finish the TLS handshake and SASL exchange
		// within authTimeout; one that stalls, or speaks another
		// protocol, is closed without holding anything for long.
		raw := c // c becomes the TLS connection below; close what was accepted
		timer := time.AfterFunc(authTimeout, func() {
			if !authDone.Load() {
				logger.Info("closing connection: authentication not finished in time", "listener", l.name, "timeout", authTimeout)
				raw.Close()
			}
		})
		defer timer.Stop()
	}
	if l.tls != nil {
		batcher := newRecordBatcher(c, &b.tlsBatches)
		tc := tls.Server(batcher, l.tls.Config())
		hctx, cancel := context.WithTimeout(ctx, authTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			l.tlsFailed.Add(1)
			if ok, suppressed := l.failLog.Allow(time.Now()); ok {
				logger.Info("closing connection: TLS handshake failed", "listener", l.name, "err", err, "failures_not_logged", suppressed)
			}
			return
		}
		name, err := l.tls.Principal(tc.ConnectionState())
		if err != nil {
			// As Kafka: no ssl.principal.mapping.rules rule applies.
			logger.Info("closing connection: no principal for the client certificate", "listener", l.name, "err", err)
			return
		}
		principal = "User:" + name
		c = &batchedTLSConn{Conn: tc, batcher: batcher}
	}
	if l.sasl == nil {
		authDone.Store(true)
	}
	queue := make(chan queuedResponse, maxPipelinedProduces-1)
	var unanswered sync.WaitGroup
	var broken atomic.Bool // the writer failed: handle nothing more
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		b.writeResponses(c, logger, queue, &unanswered, &broken, st)
	}()
	defer func() {
		close(queue)
		<-writerDone
	}()

	auth := newConnAuth(l, principal, &authDone)
	r := bufio.NewReaderSize(c, connReadBuffer)
	var frameBuf []byte
	var out []byte // encoding buffer of the responses written from here
	// held is what the request being handled took from the
	// queued.max.request.bytes pool.
	var held poolBuf
	defer func() { b.requests.release(held) }()
	// muted is when a throttled client may send again: until then the
	// connection reads nothing (Kafka mutes the channel, KIP-219), and
	// not before the throttled answer is written.
	var muted time.Time
	for {
		if !muted.IsZero() {
			unanswered.Wait()
			if !waitMuted(ctx, muted) {
				return
			}
			muted = time.Time{}
		}
		// Wait for the pool before reading the body (Kafka mutes the
		// channel): the size comes first. A size out of range is left
		// to ReadFrame to refuse.
		var size int32 = -1
		if sizeBuf, err := r.Peek(4); err == nil {
			size = int32(binary.BigEndian.Uint32(sizeBuf))
		}
		maxFrame := auth.frameLimit(b.cfg.SocketRequestMaxBytes)
		if size > maxFrame && auth.authenticating() {
			logger.Info("closing connection: frame larger than sasl.server.max.receive.size before authentication", "listener", l.name, "bytes", size, "limit", maxFrame)
			return
		}
		if size >= 0 && size <= maxFrame {
			st.requestRead(time.Now())
			// A produce request's buffer is reusable once its handler
			// returns: the pool gives it one of its arena (see
			// requestPool). The API key follows the size.
			produce := false
			if b.requests.bounded() && size >= 2 {
				if head, err := r.Peek(6); err == nil {
					produce = int16(binary.BigEndian.Uint16(head[4:])) == kmsg.Produce.Int16()
				}
			}
			var ok bool
			if held, ok = b.requests.acquire(ctx, int64(size), produce); !ok {
				return
			}
			if b.requests.bounded() {
				// The pool accounts for the whole frame: the body is
				// read into the buffer it gave, of the frame's size
				// (growing one would make garbage outside the bound).
				frameBuf = held.buf
			}
		}
		frame, err := protocol.ReadFrame(r, maxFrame, frameBuf)
		received := time.Now()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				logger.Warn("closing connection: bad frame", "err", err)
			}
			return
		}
		if auth.rawTokens {
			// After a v0 SaslHandshake the tokens come bare.
			unanswered.Wait()
			out, err := auth.step(frame, time.Now())
			b.requests.release(held)
			held = poolBuf{}
			if err != nil {
				var authErr *sasl.AuthError
				if errors.As(err, &authErr) {
					b.authFailed(&requestContext{listener: l.name, remote: remote}, authErr)
				} else {
					logger.Info("closing connection: SASL exchange failed", "listener", l.name, "err", err)
				}
				return // Kafka closes v0 exchanges without an answer
			}
			unanswered.Add(1)
			queue <- queuedResponse{raw: binary.BigEndian.AppendUint32(nil, uint32(len(out))), rawTail: out}
			continue
		}
		hdr, req, err := protocol.ParseRequest(frame, versionRange)
		if err != nil {
			if errors.Is(err, protocol.ErrUnsupportedVersion) && hdr.APIKey == kmsg.ApiVersions.Int16() {
				b.requests.release(held)
				held = poolBuf{}
				unanswered.Wait()
				unanswered.Add(1)
				queue <- queuedResponse{raw: protocol.AppendResponse(nil, hdr.CorrelationID, unsupportedAPIVersions())}
				continue
			}
			logger.Warn("closing connection: bad request", "api_key", hdr.APIKey, "api_version", hdr.APIVersion, "client_id", hdr.ClientID, "err", err)
			return
		}
		l.countRequest(req)
		if err := auth.admit(hdr.APIKey, time.Now()); err != nil {
			logger.Info("closing connection", "listener", l.name, "api", kmsg.NameForKey(hdr.APIKey), "client_id", hdr.ClientID, "reason", err)
			return
		}
		isProduce := hdr.APIKey == kmsg.Produce.Int16()
		if !isProduce {
			unanswered.Wait()
		}
		if broken.Load() {
			return // requests already buffered must not be appended
		}
		// The request's context and timing in one allocation.
		inFlight := &struct {
			rc     requestContext
			timing requestTiming
		}{
			rc: requestContext{clientID: hdr.ClientID, correlationID: hdr.CorrelationID, version: hdr.APIVersion, listener: l.name,
				auth: auth, principal: auth.principal, remote: remote, conn: st.id},
			timing: requestTiming{name: requestMetricsName(req), received: received, dequeued: time.Now()},
		}
		rc, timing := &inFlight.rc, &inFlight.timing
		resp, mutedUntil, err := b.handleWithQuotas(withRequestTiming(ctx, timing), rc, req, len(frame))
		timing.handled = time.Now()
		muted = mutedUntil
		b.requests.release(held)
		held = poolBuf{}
		if err != nil {
			logger.Warn("closing connection: request failed", "api", kmsg.NameForKey(hdr.APIKey), "api_version", hdr.APIVersion, "client_id", hdr.ClientID, "err", err)
			return
		}
		// Produce and Fetch bodies are consumed before the handler returns,
		// so their frame buffer can be reused; other requests (group
		// metadata) may keep slices of it.
		// With a request memory bound, no buffer outlives its request:
		// the pool then bounds them all.
		if (isProduce || hdr.APIKey == kmsg.Fetch.Int16()) && !b.requests.bounded() {
			frameBuf = frame[:0]
		} else {
			frameBuf = nil
		}
		if resp == nil {
			st.requestDone(timing.handled)
			b.ops.finish(timing, timing.handled, timing.handled, timing.handled)
			continue // acks=0 produce: no response
		}
		if !isProduce {
			// Every earlier response is written (unanswered.Wait
			// above) and nothing else is queued, so the writer is idle:
			// this answer goes out from here, without a hand-off to the
			// writer goroutine and back (a consumer fetching often and
			// small pays two goroutine switches a request otherwise).
			if !b.sendResponse(c, logger, queuedResponse{correlationID: hdr.CorrelationID, resp: resp, timing: timing}, &out, &broken, st) {
				return
			}
			if rc.closeAfter {
				return
			}
			continue
		}
		unanswered.Add(1)
		queue <- queuedResponse{correlationID: hdr.CorrelationID, resp: resp, timing: timing}
		if rc.closeAfter {
			// A failed authentication: the answer goes out, then the
			// connection closes, as Kafka.
			unanswered.Wait()
			return
		}
	}
}

// writeResponses writes the queued responses in order, each once it is
// complete (a produce's replication wait). After a failed write it sets
// broken and closes the connection, which ends the reader, and drops the
// rest without waiting for them.
func (b *Broker) writeResponses(c net.Conn, logger *slog.Logger, queue <-chan queuedResponse, unanswered *sync.WaitGroup, broken *atomic.Bool, st *connState) {
	var out []byte
	for q := range queue {
		b.sendResponse(c, logger, q, &out, broken, st)
		unanswered.Done()
	}
}

// sendResponse completes a response (a produce's replication wait) and
// writes it, keeping out as the grown encoding buffer. After a failed
// write it sets broken, closes the connection and returns false; once
// broken, it writes nothing.
func (b *Broker) sendResponse(c net.Conn, logger *slog.Logger, q queuedResponse, out *[]byte, broken *atomic.Bool, st *connState) bool {
	var err error
	awaitStart := time.Now()
	if pr, ok := q.resp.(*produceResponse); ok && !broken.Load() {
		err = b.awaitProduce(pr)
	}
	awaitEnd := time.Now()
	switch {
	case broken.Load() || err != nil:
	case q.resp == nil:
		_, err = c.Write(append(q.raw, q.rawTail...))
	default:
		err = b.writeResponse(c, q.correlationID, q.resp, out)
	}
	if fr, ok := q.resp.(*fetchResponse); ok {
		fr.Close()
	}
	if err != nil && !broken.Load() {
		broken.Store(true)
		// A peer going away is not worth a line; records that could
		// not be delivered as promised are.
		if !errors.Is(err, net.ErrClosed) && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
			logger.Warn("closing connection: writing response", "err", err)
		}
		c.Close()
	}
	if cap(*out) > 4<<20 {
		*out = nil // do not pin large fetch responses between requests
	}
	written := time.Now()
	ok := err == nil && !broken.Load()
	if ok {
		b.ops.finish(q.timing, awaitStart, awaitEnd, written)
	}
	st.requestDone(written)
	return ok
}

// awaitProduce runs a produce response's replication wait, turning a
// panic into an error (a closed connection and a log line) rather than a
// dead broker, as handle does for handlers.
func (b *Broker) awaitProduce(pr *produceResponse) (err error) {
	defer func() {
		if p := recover(); p != nil {
			b.logger.Error("produce wait panicked", "panic", p, "stack", string(debug.Stack()))
			err = errors.New("internal error waiting for replication")
		}
	}()
	pr.await()
	return nil
}

// writeResponse encodes and writes one response, keeping out as the grown
// encoding buffer. Fetch records go from the segment files to the socket
// with sendfile (small ones from memory with writev), without being copied
// into out.
func (b *Broker) writeResponse(c net.Conn, correlationID int32, resp kmsg.Response, out *[]byte) error {
	if fr, ok := resp.(*fetchResponse); ok {
		return b.writeFetchResponse(c, correlationID, fr, out)
	}
	*out = protocol.AppendResponse((*out)[:0], correlationID, resp)
	_, err := c.Write(*out)
	return err
}

// writeFetchResponse encodes and writes a Fetch response, keeping out as
// the grown encoding buffer.
func (b *Broker) writeFetchResponse(c net.Conn, correlationID int32, fr *fetchResponse, out *[]byte) error {
	chunks, grown, err := protocol.FetchResponseChunks((*out)[:0], correlationID, fr.FetchResponse, fr.records)
	*out = grown
	if err != nil {
		return err
	}
	if tc, ok := c.(*batchedTLSConn); ok {
		// No sendfile through TLS: each chunk written on its own would
		// be its own TLS record (a small one for every partition
		// header). Gathered into a large buffer, the response goes out
		// in full-size records with few encryptions, and each buffer's
		// records with one write (recordBatcher).
		bw := b.tlsWriters.Get().(*bufio.Writer)
		bw.Reset((*batchedWriter)(tc))
		if _, err = sendfile.WriteTo(bw, chunks); err == nil {
			err = bw.Flush()
		}
		bw.Reset(nil)
		b.tlsWriters.Put(bw)
		return err
	}
	_, err = sendfile.WriteTo(c, chunks)
	return err
}

// tlsWriteBuffer is the size of the buffer a Fetch response over TLS is
// gathered in: 16 TLS records of the maximum size.
const tlsWriteBuffer = 256 << 10

// handle runs the request's handler, turning a panic into a closed
// connection and a log line rather than a dead broker.
func (b *Broker) handle(ctx context.Context, rc *requestContext, req kmsg.Request) (resp kmsg.Response, err error) {
	a, ok := apis[req.Key()]
	if !ok {
		return nil, fmt.Errorf("API %d: %w", req.Key(), protocol.ErrUnknownAPI)
	}
	defer func() {
		if p := recover(); p != nil {
			b.logger.Error("handler panicked", "api", kmsg.NameForKey(req.Key()), "panic", p, "stack", string(debug.Stack()))
			resp, err = nil, fmt.Errorf("internal error in %s handler", kmsg.NameForKey(req.Key()))
		}
	}()
	return a.handle(ctx, b, rc, req)
}

// unsupportedAPIVersions is the v0 ApiVersions answer to a version the broker
// does not know: UNSUPPORTED_VERSION plus the supported ranges, so the
// client can downgrade.
func unsupportedAPIVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apiVersionKeys()
	return resp
}
