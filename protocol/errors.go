// Package protocol is kbroker's wire edge where kmsg stops: request frames,
// request and response headers, record-batch validation for produce, topic
// name rules, and the mapping from Go errors to Kafka error codes.
//
// The package is pure: no goroutines, no state, no I/O beyond the io.Reader
// handed to ReadFrame.
package protocol

import (
	"context"
	"errors"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Sentinel errors of the wire edge. They are wrapped with details; test them
// with errors.Is.
var (
	// ErrFrameTooLarge means a frame's size prefix is negative or above the
	// configured maximum (socket.request.max.bytes). The connection must be
	// closed: the stream cannot be resynchronised.
	ErrFrameTooLarge = errors.New("request frame size out of range")
	// ErrMalformed means the request header or body could not be decoded.
	ErrMalformed = errors.New("malformed request")
	// ErrUnknownAPI means the request's API key is not served here. Kafka
	// closes the connection on such a request rather than answering.
	ErrUnknownAPI = errors.New("unknown API key")
	// ErrUnsupportedVersion means the API is served, but not at the
	// requested version.
	ErrUnsupportedVersion = errors.New("unsupported API version")

	// errDecodePanic marks a panic caught while decoding. It wraps
	// ErrMalformed for callers; the fuzz target looks for it so that
	// decoder panics are still found rather than hidden by the guard.
	errDecodePanic = errors.New("panic while decoding request")
)

// ErrorCode maps a Go error to the Kafka error code to put in a response.
// An explicit *kerr.Error anywhere in the chain wins over everything else,
// so callers that know the precise Kafka error can wrap it.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	switch {
	case errors.Is(err, recordbatch.ErrCRC),
		errors.Is(err, recordbatch.ErrShort),
		errors.Is(err, recordbatch.ErrCorrupt):
		return kerr.CorruptMessage.Code
	case errors.Is(err, recordbatch.ErrMagic):
		// Kafka (ProduceRequest.validateRecords, produce v3+) answers
		// INVALID_RECORD to batches that are not magic 2; it never
		// stores another format, and neither does kbroker.
		return kerr.InvalidRecord.Code
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, ErrUnsupportedVersion):
		return kerr.UnsupportedVersion.Code
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrUnknownAPI):
		return kerr.InvalidRequest.Code
	}
	return kerr.UnknownServerError.Code
}
