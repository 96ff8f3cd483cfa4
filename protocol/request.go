package protocol

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// controlledShutdownKey is ControlledShutdown's API key; its v0 request has
// a v0 header (no client id), a quirk Kafka keeps for compatibility.
const controlledShutdownKey = 7

// RequestHeader is a decoded request header.
//
// v0: api key, api version, correlation id.
// v1: v0 + client id (nullable string, int16 length).
// v2: v1 + tagged fields. The client id stays a non-compact string even in
// flexible versions, so that a broker can read it before it knows whether
// the client speaks flexible versions.
type RequestHeader struct {
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
	ClientID      string // "" when null or absent
	HeaderVersion int16
}

// RequestHeaderVersion is the request header version Kafka expects for req at
// its version (ApiMessageType.requestHeaderVersion): 2 for flexible versions,
// else 1, except ControlledShutdown v0, which uses v0.
func RequestHeaderVersion(req kmsg.Request) int16 {
	switch {
	case req.Key() == controlledShutdownKey && req.GetVersion() == 0:
		return 0
	case req.IsFlexible():
		return 2
	default:
		return 1
	}
}

// ParseRequest decodes a request frame (size prefix excluded): the header,
// then the body into the kmsg request for its key, with its version set.
//
// supported reports the version range the broker advertises for a key.
// Errors wrap one of:
//   - ErrMalformed: the frame is cut short or holds impossible values;
//   - ErrUnknownAPI: supported does not know the key (or kmsg does not);
//   - ErrUnsupportedVersion: the version is outside the advertised range.
//
// With ErrUnknownAPI and ErrUnsupportedVersion the returned header holds at
// least the key, version and correlation id (and the client id when it
// could be read), so the server can answer ApiVersions at v0 with
// UNSUPPORTED_VERSION, as KIP-511 clients expect, and log the others.
//
// The request may alias frame: kmsg's ReadFrom copies strings but slices
// byte fields (produce records, member metadata) out of the input. The
// caller must not reuse frame's memory while the request is in use.
//
// Bytes after the body are ignored, as kmsg does.
func ParseRequest(frame []byte, supported func(key int16) (minV, maxV int16, ok bool)) (hdr RequestHeader, req kmsg.Request, err error) {
	defer func() {
		// Last resort, not the defence: every read below and in kmsg is
		// bounds-checked and reports short input as an error. This only
		// keeps an unforeseen decoder bug from taking the broker down with
		// a client's bytes; errDecodePanic lets the fuzz target see it.
		if p := recover(); p != nil {
			req = nil
			err = fmt.Errorf("%w: %w: %v", ErrMalformed, errDecodePanic, p)
		}
	}()

	const fixed = 8 // api key, api version, correlation id
	if len(frame) < fixed {
		return hdr, nil, fmt.Errorf("%w: %d-byte frame is shorter than a request header", ErrMalformed, len(frame))
	}
	hdr.APIKey = int16(binary.BigEndian.Uint16(frame[0:]))
	hdr.APIVersion = int16(binary.BigEndian.Uint16(frame[2:]))
	hdr.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	rest := frame[fixed:]

	minV, maxV, ok := supported(hdr.APIKey)
	if ok {
		req = kmsg.RequestForKey(hdr.APIKey)
	}
	if req == nil {
		// Every header but ControlledShutdown v0's carries a client id
		// right here; read it for the log line if it is there.
		hdr.HeaderVersion = 1
		hdr.ClientID, _, _ = readClientID(rest)
		return hdr, nil, fmt.Errorf("%w: key %d", ErrUnknownAPI, hdr.APIKey)
	}
	req.SetVersion(hdr.APIVersion)
	hdr.HeaderVersion = RequestHeaderVersion(req)
	if hdr.APIVersion < 0 || hdr.APIVersion < minV || hdr.APIVersion > maxV || hdr.APIVersion > req.MaxVersion() {
		if hdr.HeaderVersion >= 1 {
			hdr.ClientID, _, _ = readClientID(rest)
		}
		return hdr, nil, fmt.Errorf("%w: %s v%d, supported v%d..v%d",
			ErrUnsupportedVersion, kmsg.NameForKey(hdr.APIKey), hdr.APIVersion, minV, min(maxV, req.MaxVersion()))
	}

	if hdr.HeaderVersion >= 1 {
		id, n, err := readClientID(rest)
		if err != nil {
			return hdr, nil, err
		}
		hdr.ClientID = id
		rest = rest[n:]
	}
	if hdr.HeaderVersion >= 2 {
		n, err := skipTaggedFields(rest)
		if err != nil {
			return hdr, nil, err
		}
		rest = rest[n:]
	}
	if err := req.ReadFrom(rest); err != nil {
		return hdr, nil, fmt.Errorf("%w: %s v%d body: %v", ErrMalformed, kmsg.NameForKey(hdr.APIKey), hdr.APIVersion, err)
	}
	return hdr, req, nil
}

// readClientID reads the header's nullable string client id and returns it
// with the number of bytes it took. Null reads as "".
func readClientID(b []byte) (string, int, error) {
	if len(b) < 2 {
		return "", 0, fmt.Errorf("%w: header ends before the client id", ErrMalformed)
	}
	l := int(int16(binary.BigEndian.Uint16(b)))
	switch {
	case l == -1:
		return "", 2, nil
	case l < 0:
		return "", 0, fmt.Errorf("%w: client id length %d", ErrMalformed, l)
	case len(b)-2 < l:
		return "", 0, fmt.Errorf("%w: client id length %d, %d bytes left", ErrMalformed, l, len(b)-2)
	}
	return string(b[2 : 2+l]), 2 + l, nil
}

// skipTaggedFields skips a tagged-field section (KIP-482): a uvarint count,
// then per field a uvarint tag, a uvarint size and that many bytes. No
// request header tag is defined, so all are skipped. It returns the number
// of bytes the section took.
func skipTaggedFields(b []byte) (int, error) {
	pos := 0
	count, err := readUvarint(b, &pos)
	if err != nil {
		return 0, err
	}
	// Each field takes at least two bytes (tag and size), so a count above
	// the bytes left is a lie; checking it first bounds the loop.
	if int64(count) > int64(len(b)-pos) {
		return 0, fmt.Errorf("%w: %d tagged fields in %d bytes", ErrMalformed, count, len(b)-pos)
	}
	for range count {
		if _, err := readUvarint(b, &pos); err != nil { // tag
			return 0, err
		}
		size, err := readUvarint(b, &pos)
		if err != nil {
			return 0, err
		}
		if int64(size) > int64(len(b)-pos) {
			return 0, fmt.Errorf("%w: tagged field of %d bytes, %d left", ErrMalformed, size, len(b)-pos)
		}
		pos += int(size)
	}
	return pos, nil
}

// readUvarint reads a Kafka unsigned varint (at most 5 bytes, 32 bits) at
// b[*pos] and advances *pos.
func readUvarint(b []byte, pos *int) (uint32, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		if *pos >= len(b) {
			return 0, fmt.Errorf("%w: header ends inside a varint", ErrMalformed)
		}
		c := b[*pos]
		*pos++
		if i == 4 && c > 0x0f {
			return 0, fmt.Errorf("%w: varint overflows 32 bits", ErrMalformed)
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: varint longer than 5 bytes", ErrMalformed)
}
