package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kbroker/kbroker/internal/share"
	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/segment"
)

// shareBatches: what a share fetch read from an offset gives Acquire.
func TestShareBatches(t *testing.T) {
	data := func(base int64, n int32) recordbatch.Header {
		return recordbatch.Header{BaseOffset: base, LastOffsetDelta: n - 1}
	}
	txn := func(base int64, n int32, pid int64) recordbatch.Header {
		return recordbatch.Header{BaseOffset: base, LastOffsetDelta: n - 1, Attributes: recordbatch.TransactionalBit, ProducerID: pid}
	}
	marker := func(base int64, pid int64) recordbatch.Header {
		return recordbatch.Header{BaseOffset: base, Attributes: recordbatch.TransactionalBit | recordbatch.ControlBit, ProducerID: pid}
	}
	render := func(bs []share.Batch) string {
		var parts []string
		for _, b := range bs {
			s := fmt.Sprintf("%d-%d", b.First, b.Last)
			if b.Skip {
				s += " skip"
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ", ")
	}
	// Producer 7 aborted its transaction of offsets 4-6 (marker at 7);
	// producer 8 committed 8-9 (marker at 10).
	abort7 := segment.NewAbortedRanges([]segment.AbortedTxn{{ProducerID: 7, FirstOffset: 4, LastOffset: 7}})
	for _, tc := range []struct {
		name    string
		from    int64
		headers []recordbatch.Header
		aborted segment.AbortedRanges
		want    string
	}{
		{"plain batches", 0, []recordbatch.Header{data(0, 2), data(2, 2)}, nil, "0-1, 2-3"},
		{"a batch straddling from", 1, []recordbatch.Header{data(0, 2), data(2, 2)}, nil, "0-1, 2-3"},
		{"nothing read", 5, nil, nil, ""},
		{"read_uncommitted: aborted delivered, markers skipped", 4,
			[]recordbatch.Header{txn(4, 3, 7), marker(7, 7), txn(8, 2, 8), marker(10, 8)}, nil,
			"4-6, 7-7 skip, 8-9, 10-10 skip"},
		{"read_committed: aborted skipped", 4,
			[]recordbatch.Header{txn(4, 3, 7), marker(7, 7), txn(8, 2, 8), marker(10, 8)}, abort7,
			"4-6 skip, 7-7 skip, 8-9, 10-10 skip"},
		{"records compacted away before the first batch", 3, []recordbatch.Header{data(9, 1)}, nil, "3-8 skip, 9-9"},
	} {
		if got := render(shareBatches(tc.from, tc.headers, tc.aborted)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
