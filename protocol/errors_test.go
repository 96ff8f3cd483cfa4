package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestErrorCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int16
	}{
		{"nil", nil, 0},
		{"kerr", kerr.NotLeaderForPartition, 6},
		{"wrapped kerr", fmt.Errorf("partition 3: %w", kerr.NotEnoughReplicas), 19},
		{"kerr wins over recordbatch", fmt.Errorf("%w: %w", kerr.InvalidRecord, recordbatch.ErrCRC), 87},
		{"crc", recordbatch.ErrCRC, 2},
		{"wrapped crc", fmt.Errorf("append: %w", recordbatch.ErrCRC), 2},
		{"short", recordbatch.ErrShort, 2},
		{"corrupt", recordbatch.ErrCorrupt, 2},
		{"magic", fmt.Errorf("%w (magic 1)", recordbatch.ErrMagic), 87},
		{"deadline", context.DeadlineExceeded, 7},
		{"wrapped deadline", fmt.Errorf("waiting for acks: %w", context.DeadlineExceeded), 7},
		{"unsupported version", fmt.Errorf("%w: x", ErrUnsupportedVersion), 35},
		{"malformed", fmt.Errorf("%w: x", ErrMalformed), 42},
		{"unknown api", ErrUnknownAPI, 42},
		{"plain", errors.New("disk on fire"), -1},
		{"io", io.ErrUnexpectedEOF, -1},
		{"canceled", context.Canceled, -1},
	} {
		if got := ErrorCode(tc.err); got != tc.want {
			t.Errorf("%s: ErrorCode(%v) = %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
}
