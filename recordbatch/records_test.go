package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// compressBatch re-encodes an uncompressed batch with codec (xerial: snappy
// in the Java client's framing), fixing length, attributes and CRC.
func compressBatch(t *testing.T, batch []byte, codec int8, xerial bool) []byte {
	t.Helper()
	body := batch[HeaderSize:]
	var buf bytes.Buffer
	switch codec {
	case CompressionGzip:
		w := gzip.NewWriter(&buf)
		w.Write(body)
		w.Close()
	case CompressionSnappy:
		if !xerial {
			buf.Write(snappy.Encode(nil, body))
			break
		}
		buf.Write(xerialHeader)
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
		for len(body) > 0 { // two chunks, to cover the chunk loop
			n := min(len(body), 40)
			chunk := snappy.Encode(nil, body[:n])
			buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(chunk))))
			buf.Write(chunk)
			body = body[n:]
		}
	case CompressionLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(body)
		w.Close()
	case CompressionZstd:
		w, _ := zstd.NewWriter(&buf)
		w.Write(body)
		w.Close()
	}
	out := append(slices.Clone(batch[:HeaderSize]), buf.Bytes()...)
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-LogOverhead))
	binary.BigEndian.PutUint16(out[offAttributes:], uint16(codec))
	SetCRC(out)
	if _, err := Validate(out); err != nil {
		t.Fatalf("compressed batch does not validate: %v", err)
	}
	return out
}

func sampleRecords() []Record {
	return []Record{
		{Key: []byte("k1"), Value: []byte("v1"), TimestampDelta: 0, Headers: []RecordHeader{{Key: "h", Value: []byte("x")}}},
		{Key: nil, Value: []byte("keyless"), TimestampDelta: 5},
		{Key: []byte("k3"), Value: nil, TimestampDelta: 9}, // a tombstone
		{Key: []byte{}, Value: bytes.Repeat([]byte("z"), 300), TimestampDelta: 12},
	}
}

func TestForEachRecordEveryCodec(t *testing.T) {
	plain := Build(NoProducer(), sampleRecords())
	for _, c := range []struct {
		name   string
		codec  int8
		xerial bool
	}{{"none", CompressionNone, false}, {"gzip", CompressionGzip, false}, {"snappy", CompressionSnappy, false},
		{"snappy-xerial", CompressionSnappy, true}, {"lz4", CompressionLZ4, false}, {"zstd", CompressionZstd, false}} {
		t.Run(c.name, func(t *testing.T) {
			batch := plain
			if c.codec != CompressionNone {
				batch = compressBatch(t, plain, c.codec, c.xerial)
			}
			var got []kmsg.Record
			if err := ForEachRecord(batch, func(r kmsg.Record) error { got = append(got, r); return nil }); err != nil {
				t.Fatal(err)
			}
			want := sampleRecords()
			if len(got) != len(want) {
				t.Fatalf("%d records, want %d", len(got), len(want))
			}
			for i, r := range got {
				w := want[i]
				if r.OffsetDelta != int32(i) || r.TimestampDelta64 != w.TimestampDelta || !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) ||
					!bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil) || len(r.Headers) != len(w.Headers) {
					t.Fatalf("record %d = %+v, want %+v", i, r, w)
				}
			}
		})
	}
}

// Damaged input is an error, never a panic or a huge allocation.
func TestForEachRecordDamaged(t *testing.T) {
	plain := Build(NoProducer(), sampleRecords())
	for _, codec := range []int8{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		batch := plain
		if codec != CompressionNone {
			batch = compressBatch(t, plain, codec, false)
		}
		for cut := HeaderSize; cut < len(batch); cut += max(1, (len(batch)-HeaderSize)/37) {
			short := slices.Clone(batch[:cut])
			binary.BigEndian.PutUint32(short[offLength:], uint32(len(short)-LogOverhead))
			err := ForEachRecord(short, func(kmsg.Record) error { return nil })
			if err == nil {
				t.Errorf("codec %d cut at %d of %d: no error", codec, cut, len(batch))
			}
		}
	}
	stop := errors.New("stop")
	if err := ForEachRecord(plain, func(kmsg.Record) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("fn's error not returned: %v", err)
	}
}

func TestTxnMarkerRoundTrip(t *testing.T) {
	for _, commit := range []bool{false, true} {
		batch := BuildTxnMarker(42, 7, commit, 3, 1000)
		h, err := Validate(batch)
		if err != nil {
			t.Fatal(err)
		}
		if !h.IsControl() || !h.IsTransactional() || h.ProducerID != 42 || h.ProducerEpoch != 7 || h.BaseSequence != -1 {
			t.Fatalf("header %+v", h)
		}
		c, err := ParseControl(batch)
		want := Control{Type: ControlAbort, CoordinatorEpoch: 3}
		if commit {
			want.Type = ControlCommit
		}
		if err != nil || c != want {
			t.Fatalf("ParseControl = %+v, %v; want %+v", c, err, want)
		}
		// kmsg reads the value as Kafka's EndTxnMarker.
		if err := ForEachRecord(batch, func(r kmsg.Record) error {
			var v kmsg.EndTxnMarker
			if err := v.ReadFrom(r.Value); err != nil {
				return err
			}
			if v.CoordinatorEpoch != 3 {
				t.Errorf("coordinator epoch %d", v.CoordinatorEpoch)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ParseControl(Build(NoProducer(), []Record{{Value: []byte("x")}})); err == nil {
		t.Fatal("ParseControl of a data batch: no error")
	}
}

func TestRecordAtTimestamp(t *testing.T) {
	recs := []Record{
		{Value: []byte("a"), TimestampDelta: 0},  // offset 100, ts 1000
		{Value: []byte("b"), TimestampDelta: 50}, // 101, 1050
		{Value: []byte("c"), TimestampDelta: 20}, // 102, 1020 (out of order, as clients may write)
		{Value: []byte("d"), TimestampDelta: 90}, // 103, 1090
	}
	batch := Build(BatchSpec{BaseOffset: 100, FirstTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	for _, c := range []struct {
		ts, minOffset     int64
		wantOff, wantTime int64
		ok                bool
	}{
		{0, 0, 100, 1000, true},
		{1001, 0, 101, 1050, true},
		{1020, 0, 101, 1050, true}, // the first record at or after, in offset order
		{1051, 0, 103, 1090, true},
		{1000, 102, 102, 1020, true}, // below the log start: skipped
		{1091, 0, 0, 0, false},
	} {
		off, ts, ok, err := RecordAtTimestamp(batch, c.ts, c.minOffset)
		if err != nil || ok != c.ok || (ok && (off != c.wantOff || ts != c.wantTime)) {
			t.Errorf("RecordAtTimestamp(%d, min %d) = %d, %d, %v, %v; want %d, %d, %v", c.ts, c.minOffset, off, ts, ok, err, c.wantOff, c.wantTime, c.ok)
		}
	}
	// LogAppendTime: every record carries the batch's max timestamp.
	SetLogAppendTime(batch, 5000)
	if off, ts, ok, _ := RecordAtTimestamp(batch, 4000, 0); !ok || off != 100 || ts != 5000 {
		t.Errorf("LogAppendTime batch: %d, %d, %v; want 100, 5000", off, ts, ok)
	}
}
