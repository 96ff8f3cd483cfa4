package recordbatch

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBuildRetainedKeepsCodec: a cleaned batch of a compressed batch is
// compressed with the same codec (Kafka's filterTo), so cleaning a
// compressed topic does not inflate it; its records read back the same,
// through this package and through franz-go's own decompressor (as a
// consumer reads them).
func TestBuildRetainedKeepsCodec(t *testing.T) {
	var records []kmsg.Record
	for i := 0; i < 200; i++ {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(2 * i) // every other record kept
		r.TimestampDelta64 = int64(i)
		r.Key = []byte(fmt.Sprintf("key-%03d", i))
		r.Value = bytes.Repeat([]byte(fmt.Sprintf("value %d ", i)), 20)
		if i%10 == 0 {
			r.Value = nil // tombstones
		}
		r.Headers = []kmsg.Header{{Key: "h", Value: []byte("v")}}
		records = append(records, r)
	}
	plain := BuildRetained(Header{BaseOffset: 100, LastOffsetDelta: 399, BaseTimestamp: 1000, MaxTimestamp: 1400,
		ProducerID: 7, ProducerEpoch: 1, BaseSequence: 0, PartitionLeaderEpoch: 3}, records, 5000)
	for _, codec := range []int8{CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		t.Run(fmt.Sprintf("codec %d", codec), func(t *testing.T) {
			orig := Header{BaseOffset: 100, LastOffsetDelta: 399, BaseTimestamp: 1000, MaxTimestamp: 1400,
				ProducerID: 7, ProducerEpoch: 1, BaseSequence: 0, PartitionLeaderEpoch: 3, Attributes: int16(codec)}
			b := BuildRetained(orig, records, 5000)
			h, err := Validate(b)
			if err != nil {
				t.Fatalf("validate: %v", err)
			}
			if h.Compression() != codec || h.DeleteHorizon() != 5000 || h.BaseOffset != 100 || h.LastOffsetDelta != 399 ||
				h.ProducerID != 7 || h.RecordCount != int32(len(records)) {
				t.Fatalf("header %+v", h)
			}
			if len(b) >= len(plain)/2 {
				t.Errorf("%d bytes compressed, %d uncompressed", len(b), len(plain))
			}
			i := 0
			err = ForEachRecord(b, func(r kmsg.Record) error {
				want := records[i]
				if r.OffsetDelta != want.OffsetDelta || !bytes.Equal(r.Key, want.Key) || !bytes.Equal(r.Value, want.Value) ||
					(r.Value == nil) != (want.Value == nil) || len(r.Headers) != 1 {
					return fmt.Errorf("record %d: %+v", i, r)
				}
				i++
				return nil
			})
			if err != nil || i != len(records) {
				t.Fatalf("read %d records: %v", i, err)
			}
			body, err := kgo.DefaultDecompressor().Decompress(b[HeaderSize:], kgo.CompressionCodecType(codec))
			if err != nil {
				t.Fatalf("franz-go decompress: %v", err)
			}
			if !bytes.Equal(body, plain[HeaderSize:]) {
				t.Fatalf("franz-go decompresses %d bytes, want the %d of the uncompressed batch", len(body), len(plain)-HeaderSize)
			}
		})
	}
}
