package replica

import (
	"errors"
	"testing"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
)

func hdr(pid int64, epoch int16, seq int32, n int32, base int64) recordbatch.Header {
	return recordbatch.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LastOffsetDelta: n - 1, RecordCount: n, BaseOffset: base}
}

func TestProducerStateSequences(t *testing.T) {
	s := newProducerStates()
	steps := []struct {
		name    string
		h       recordbatch.Header
		wantErr error
		dupAt   int64 // expected duplicate base offset, -1 for none
	}{
		{"first batch of new producer", hdr(7, 0, 0, 3, 0), nil, -1},
		{"next in sequence", hdr(7, 0, 3, 2, 3), nil, -1},
		{"retry of first batch", hdr(7, 0, 0, 3, 99), nil, 0},
		{"gap", hdr(7, 0, 9, 1, 99), kerr.OutOfOrderSequenceNumber, -1},
		{"old epoch", hdr(7, -1+0, 5, 1, 99), nil, -1},
		{"new producer any sequence", hdr(8, 0, 40, 1, 5), nil, -1},
	}
	// "old epoch" is set up below with a bumped epoch first.
	for _, st := range steps[:4] {
		c, err := s.check(st.h)
		if !errors.Is(err, st.wantErr) {
			t.Fatalf("%s: err = %v, want %v", st.name, err, st.wantErr)
		}
		if (c.duplicate != nil) != (st.dupAt >= 0) || (c.duplicate != nil && c.duplicate.baseOffset != st.dupAt) {
			t.Fatalf("%s: duplicate = %+v, want at %d", st.name, c.duplicate, st.dupAt)
		}
		if err == nil && c.duplicate == nil {
			s.update(st.h, -1)
		}
	}
	if _, err := s.check(hdr(7, 1, 5, 1, 5)); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("bumped epoch with non-zero sequence: %v", err)
	}
	s.update(hdr(7, 1, 0, 1, 5), -1)
	if _, err := s.check(hdr(7, 0, 5, 1, 6)); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("older epoch: %v", err)
	}
	if _, err := s.check(steps[5].h); err != nil {
		t.Fatalf("new producer: %v", err)
	}
}

func TestProducerStateKeepsFiveBatches(t *testing.T) {
	s := newProducerStates()
	for i := int32(0); i < 7; i++ {
		s.update(hdr(1, 0, i, 1, int64(i)), -1)
	}
	if c, _ := s.check(hdr(1, 0, 1, 1, 0)); c.duplicate != nil {
		t.Fatal("batch older than the last 5 still cached")
	}
	if c, _ := s.check(hdr(1, 0, 2, 1, 0)); c.duplicate == nil || c.duplicate.baseOffset != 2 {
		t.Fatalf("fifth newest batch not found as duplicate: %+v", c.duplicate)
	}
	s.truncateFrom(4)
	if c, err := s.check(hdr(1, 0, 4, 1, 0)); err != nil || c.duplicate != nil {
		t.Fatalf("after truncation seq 4 should be next: %v %+v", err, c.duplicate)
	}
}

func TestInSequenceWraps(t *testing.T) {
	if !inSequence(1<<31-1, 0) || inSequence(3, 5) || !inSequence(-1, 17) {
		t.Fatal("inSequence rules broken")
	}
}
