package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// frameChunk is the most ReadFrame allocates for a frame before its bytes
// have arrived. A client may announce a frame up to maxSize (100 MiB by
// default) and then send nothing; growing the buffer with the data that
// actually arrives keeps such a client from pinning maxSize bytes per
// connection.
const frameChunk = 1 << 20

// apiVersionsKey is ApiVersions' API key, whose response header is always
// v0 (KIP-511: a client must be able to read it before it knows which
// versions the broker speaks).
const apiVersionsKey = 18

// ReadFrame reads one 4-byte-size-prefixed request frame from r and returns
// its bytes, size prefix excluded. A size above maxSize or below zero
// returns an error wrapping ErrFrameTooLarge before anything is allocated or
// read past the prefix. If buf has the capacity, the frame is read into it
// and a slice of buf is returned.
//
// A clean end of stream before the first byte returns io.EOF; an end inside
// the frame returns io.ErrUnexpectedEOF. Other reader errors are returned as
// they are.
func ReadFrame(r io.Reader, maxSize int32, buf []byte) ([]byte, error) {
	var sizeBuf [4]byte
	if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 0 || size > maxSize {
		return nil, fmt.Errorf("%w: size %d, max %d", ErrFrameTooLarge, size, maxSize)
	}
	n := int(size)
	if cap(buf) >= n {
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, midFrame(err)
		}
		return buf, nil
	}
	out := make([]byte, 0, min(n, frameChunk))
	for len(out) < n {
		if len(out) == cap(out) {
			// Double, but never beyond the announced size.
			out = slices.Grow(out, min(n-len(out), cap(out)))
		}
		m, err := io.ReadFull(r, out[len(out):min(n, cap(out))])
		out = out[:len(out)+m]
		if err != nil {
			return nil, midFrame(err)
		}
	}
	return out, nil
}

// midFrame turns io.EOF inside a frame into io.ErrUnexpectedEOF, so callers
// can tell a clean close (between frames) from a cut one.
func midFrame(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ResponseHeaderVersion is the response header version Kafka uses for resp
// at its version (ApiMessageType.responseHeaderVersion): 1 (tagged fields)
// for flexible versions, else 0, and always 0 for ApiVersions.
func ResponseHeaderVersion(resp kmsg.Response) int16 {
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		return 1
	}
	return 0
}

// AppendResponse appends a whole response frame to dst: the 4-byte size,
// the correlation id, the response header's (empty) tagged fields when the
// header is v1, then the body encoded by resp at resp.GetVersion().
func AppendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0) // size, patched below
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if ResponseHeaderVersion(resp) >= 1 {
		dst = append(dst, 0) // no tagged fields
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
