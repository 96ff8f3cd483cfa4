package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"

	"github.com/kbroker/kbroker/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// serveConn reads requests from one connection and answers them in order.
// It reads the next request only after answering the previous one, as
// Kafka mutes a channel while a request is in flight.
func (b *Broker) serveConn(ctx context.Context, c net.Conn) {
	logger := b.logger.With("remote", c.RemoteAddr().String())
	r := bufio.NewReaderSize(c, 64<<10)
	var frameBuf, out []byte
	for {
		frame, err := protocol.ReadFrame(r, b.cfg.SocketRequestMaxBytes, frameBuf)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				logger.Warn("closing connection: bad frame", "err", err)
			}
			return
		}
		hdr, req, err := protocol.ParseRequest(frame, versionRange)
		if err != nil {
			if errors.Is(err, protocol.ErrUnsupportedVersion) && hdr.APIKey == kmsg.ApiVersions.Int16() {
				out = protocol.AppendResponse(out[:0], hdr.CorrelationID, unsupportedAPIVersions())
				if _, err := c.Write(out); err != nil {
					return
				}
				continue
			}
			logger.Warn("closing connection: bad request", "api_key", hdr.APIKey, "api_version", hdr.APIVersion, "client_id", hdr.ClientID, "err", err)
			return
		}
		rc := &requestContext{clientID: hdr.ClientID, correlationID: hdr.CorrelationID, version: hdr.APIVersion}
		resp, err := b.handle(ctx, rc, req)
		if err != nil {
			logger.Warn("closing connection: request failed", "api", kmsg.NameForKey(hdr.APIKey), "api_version", hdr.APIVersion, "client_id", hdr.ClientID, "err", err)
			return
		}
		// Produce and Fetch bodies are consumed before the handler returns,
		// so their frame buffer can be reused; other requests (group
		// metadata) may keep slices of it.
		if hdr.APIKey == kmsg.Produce.Int16() || hdr.APIKey == kmsg.Fetch.Int16() {
			frameBuf = frame[:0]
		} else {
			frameBuf = nil
		}
		if resp == nil {
			continue // acks=0 produce: no response
		}
		if fr, ok := resp.(*kmsg.FetchResponse); ok {
			// Records go from the read buffers to the socket with writev,
			// without being copied into out.
			var bufs net.Buffers
			bufs, out = protocol.FetchResponseBuffers(out[:0], hdr.CorrelationID, fr)
			if _, err := bufs.WriteTo(c); err != nil {
				return
			}
		} else {
			out = protocol.AppendResponse(out[:0], hdr.CorrelationID, resp)
			if _, err := c.Write(out); err != nil {
				return
			}
		}
		if cap(out) > 4<<20 {
			out = nil // do not pin large fetch responses between requests
		}
	}
}

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
