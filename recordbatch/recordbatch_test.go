package recordbatch

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestBuildRoundTripsThroughKmsg(t *testing.T) {
	spec := BatchSpec{BaseOffset: 42, LeaderEpoch: 3, FirstTimestamp: 1000, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 5}
	recs := []Record{
		{Key: []byte("k0"), Value: []byte("v0"), Headers: []RecordHeader{{Key: "h", Value: []byte("x")}}},
		{Key: nil, Value: []byte("v1"), TimestampDelta: 9},
	}
	b := Build(spec, recs)
	h, err := Validate(b)
	if err != nil {
		t.Fatalf("built batch invalid: %v", err)
	}
	if h.BaseOffset != 42 || h.LastOffset() != 43 || h.MaxTimestamp != 1009 || h.ProducerID != 7 || h.LastSequence() != 6 || h.PartitionLeaderEpoch != 3 {
		t.Fatalf("header = %+v", h)
	}
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(b); err != nil {
		t.Fatalf("kmsg cannot read the batch: %v", err)
	}
	if kb.NumRecords != 2 || kb.CRC != int32(h.CRC) {
		t.Fatalf("kmsg sees %d records, crc %x", kb.NumRecords, kb.CRC)
	}
}

func TestValidateRejects(t *testing.T) {
	good := Build(NoProducer(), []Record{{Value: []byte("v")}})
	cases := map[string]struct {
		mutate func([]byte) []byte
		want   error
	}{
		"short header": {func(b []byte) []byte { return b[:20] }, ErrShort},
		"short body":   {func(b []byte) []byte { return b[:len(b)-1] }, ErrShort},
		"magic 1":      {func(b []byte) []byte { b[16] = 1; return b }, ErrMagic},
		"crc":          {func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }, ErrCRC},
		"codec 7":      {func(b []byte) []byte { b[22] |= 7; return b }, ErrCorrupt},
	}
	for name, c := range cases {
		b := c.mutate(append([]byte(nil), good...))
		if _, err := Validate(b); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
}

func TestPatchesKeepCRC(t *testing.T) {
	b := Build(NoProducer(), []Record{{Value: []byte("v")}})
	SetBaseOffset(b, 99)
	SetPartitionLeaderEpoch(b, 4)
	if _, err := Validate(b); err != nil {
		t.Fatalf("offset and epoch patches must not break the CRC: %v", err)
	}
	SetLogAppendTime(b, 12345)
	h, err := Validate(b)
	if err != nil || h.MaxTimestamp != 12345 || h.Attributes&TimestampTypeBit == 0 {
		t.Fatalf("log append time: %+v %v", h, err)
	}
}

func TestSplit(t *testing.T) {
	a := Build(NoProducer(), []Record{{Value: []byte("a")}})
	b := Build(BatchSpec{BaseOffset: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []Record{{Value: []byte("b")}, {Value: []byte("c")}})
	batches, headers, err := Split(append(append([]byte(nil), a...), b...))
	if err != nil || len(batches) != 2 || headers[1].NextOffset() != 3 {
		t.Fatalf("split: %d batches, %v", len(batches), err)
	}
}
