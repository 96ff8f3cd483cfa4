// Package kafkaconn is a minimal Kafka protocol client for broker-to-broker
// traffic (controller requests, follower fetches): one TCP connection, one
// request at a time, every call bounded by its context.
package kafkaconn

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// maxResponseBytes bounds a response frame; follower fetches are bounded
// by replica.fetch.response.max.bytes well below this.
const maxResponseBytes = 512 << 20

// Conn is a connection to one broker. It is safe for concurrent use;
// requests are serialised.
type Conn struct {
	addr      string
	formatter *kmsg.RequestFormatter

	// mu guards every field below and serialises requests.
	mu   sync.Mutex
	nc   net.Conn
	r    *bufio.Reader
	corr int32
	buf  []byte
	// reuse keeps one response buffer for every response (see
	// ReuseResponseBuffer); respBuf is it.
	reuse   bool
	respBuf []byte
	// security is how connections are secured and authenticated;
	// expires is when the current SASL session ends (zero: never).
	security Security
	expires  time.Time
}

// Security says how a connection secures and authenticates itself: TLS
// (nil: plaintext) and a SASL mechanism (franz-go's client side; nil:
// none), as the broker's inter-broker listener requires.
type Security struct {
	TLS  *tls.Config
	SASL sasl.Mechanism
}

// WithSecurity makes the connection use s from its next dial on.
func (c *Conn) WithSecurity(s Security) *Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.security = s
	return c
}

// New returns a connection to addr that dials lazily on first use and
// redials after any error.
func New(addr, clientID string) *Conn {
	return &Conn{addr: addr, formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
}

// ReuseResponseBuffer makes the connection read every response into the
// same buffer instead of a new one: byte fields of a response (a Fetch
// response's records) are then valid only until the next request. For a
// follower's fetcher, which is done with a response before it sends the
// next request, this spares allocating and clearing megabytes per fetch.
func (c *Conn) ReuseResponseBuffer() *Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reuse = true
	return c
}

// Addr is the broker address.
func (c *Conn) Addr() string { return c.addr }

// Request sends req (its version must be set) and returns the response.
// On any error the connection is closed, so the next call starts afresh.
func (c *Conn) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp, err := c.requestLocked(ctx, req)
	if err != nil {
		c.closeLocked()
		return nil, fmt.Errorf("%s to %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	return resp, nil
}

func (c *Conn) requestLocked(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if c.nc != nil && !c.expires.IsZero() && time.Now().After(c.expires) {
		// The SASL session is about to end: a new connection
		// authenticates afresh (simpler than KIP-368 re-authentication,
		// and as good for a broker's own few connections).
		c.closeLocked()
	}
	if c.nc == nil {
		if err := c.connectLocked(ctx); err != nil {
			c.closeLocked()
			return nil, err
		}
	}
	return c.roundTripLocked(ctx, req)
}

// connectLocked dials, then secures (TLS) and authenticates (SASL) the
// connection as c.security says.
func (c *Conn) connectLocked(ctx context.Context) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return err
	}
	if c.security.TLS != nil {
		cfg := c.security.TLS.Clone()
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(c.addr)
			cfg.ServerName = host
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return fmt.Errorf("TLS handshake: %w", err)
		}
		nc = tc
	}
	c.nc, c.r = nc, bufio.NewReaderSize(nc, 64<<10)
	c.expires = time.Time{}
	if c.security.SASL != nil {
		if err := c.authenticateLocked(ctx); err != nil {
			return fmt.Errorf("SASL %s: %w", c.security.SASL.Name(), err)
		}
	}
	return nil
}

// authenticateLocked runs SaslHandshake v1 and the SaslAuthenticate
// exchange of c.security.SASL (franz-go's client mechanisms).
func (c *Conn) authenticateLocked(ctx context.Context) error {
	mech := c.security.SASL
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = mech.Name()
	resp, err := c.roundTripLocked(ctx, hs)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return fmt.Errorf("handshake (broker offers %v): %w", resp.(*kmsg.SASLHandshakeResponse).SupportedMechanisms, err)
	}
	host, _, _ := net.SplitHostPort(c.addr)
	session, token, err := mech.Authenticate(ctx, host)
	if err != nil {
		return err
	}
	for {
		ar := kmsg.NewPtrSASLAuthenticateRequest()
		ar.Version = 1
		ar.SASLAuthBytes = token
		resp, err := c.roundTripLocked(ctx, ar)
		if err != nil {
			return err
		}
		r := resp.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			return fmt.Errorf("%w: %s", err, msg)
		}
		done, next, err := session.Challenge(r.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			if r.SessionLifetimeMillis > 0 {
				// Reconnect a little before the broker would close us.
				c.expires = time.Now().Add(time.Duration(r.SessionLifetimeMillis) * time.Millisecond * 9 / 10)
			}
			return nil
		}
		token = next
	}
}

// roundTripLocked sends req on the open connection and reads its answer.
func (c *Conn) roundTripLocked(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		return nil, err
	}
	// Closing the connection when ctx ends unblocks a pending read or
	// write before the deadline.
	nc := c.nc // closeLocked may clear c.nc before the callback runs
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		nc.SetDeadline(time.Unix(1, 0))
		close(fired)
	})
	defer func() {
		// A callback already started must finish before the next request
		// sets its own deadline, or it would expire that one.
		if !stop() {
			<-fired
		}
	}()

	c.corr++
	c.buf = c.formatter.AppendRequest(c.buf[:0], req, c.corr)
	if _, err := c.nc.Write(c.buf); err != nil {
		return nil, err
	}
	var sizeBuf [4]byte
	if _, err := io.ReadFull(c.r, sizeBuf[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 4 || size > maxResponseBytes {
		return nil, fmt.Errorf("bad response size %d", size)
	}
	var frame []byte
	if c.reuse {
		if cap(c.respBuf) < int(size) {
			c.respBuf = make([]byte, size)
		}
		frame = c.respBuf[:size]
	} else {
		frame = make([]byte, size)
	}
	if _, err := io.ReadFull(c.r, frame); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != c.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, c.corr)
	}
	body := frame[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		// Response header v1: skip its tagged fields.
		skipped, err := skipTags(body)
		if err != nil {
			return nil, err
		}
		body = body[skipped:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	return resp, nil
}

// skipTags returns the size of the tagged-field section at the start of b.
func skipTags(b []byte) (int, error) {
	n, used := binary.Uvarint(b)
	if used <= 0 {
		return 0, errors.New("bad tagged fields")
	}
	pos := used
	for i := uint64(0); i < n; i++ {
		_, u1 := binary.Uvarint(b[pos:])
		if u1 <= 0 {
			return 0, errors.New("bad tag")
		}
		pos += u1
		size, u2 := binary.Uvarint(b[pos:])
		if u2 <= 0 || uint64(len(b)-pos-u2) < size {
			return 0, errors.New("bad tag size")
		}
		pos += u2 + int(size)
	}
	return pos, nil
}

// Close closes the connection; a later Request dials again.
func (c *Conn) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
}

func (c *Conn) closeLocked() {
	if c.nc != nil {
		c.nc.Close()
		c.nc, c.r = nil, nil
	}
}
