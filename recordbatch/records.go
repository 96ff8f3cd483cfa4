package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Compression codecs, the low bits of a batch's attributes.
const (
	CompressionNone   = 0
	CompressionGzip   = 1
	CompressionSnappy = 2
	CompressionLZ4    = 3
	CompressionZstd   = 4
)

// ErrCodec means a batch's records could not be decompressed.
var ErrCodec = errors.New("record batch cannot be decompressed")

// maxDecompressed bounds what one batch may decompress to, so a small
// malicious batch cannot make the broker allocate without limit.
const maxDecompressed = 256 << 20

// ForEachRecord decodes the records of a validated v2 batch, decompressing
// them if needed, and calls fn for each in order until fn returns an error.
// A record's Key and Value are nil for null; they alias the batch (or its
// decompressed records).
func ForEachRecord(batch []byte, fn func(kmsg.Record) error) error {
	h, err := ParseHeader(batch)
	if err != nil {
		return err
	}
	if len(batch) < HeaderSize || h.Size() > len(batch) {
		return ErrShort
	}
	body, err := decompress(h.Compression(), batch[HeaderSize:h.Size()])
	if err != nil {
		return err
	}
	count := int(binary.BigEndian.Uint32(batch[offRecordCount:]))
	for i := 0; i < count; i++ {
		r, rest, err := decodeRecord(body)
		if err != nil {
			return fmt.Errorf("record %d of %d: %w", i, count, err)
		}
		body = rest
		if err := fn(r); err != nil {
			return err
		}
	}
	if len(body) != 0 {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrCorrupt, len(body), count)
	}
	return nil
}

// decodeRecord splits the first record off b (its varint length frame
// checked here, so a bad length never reads past b) and decodes it with
// kmsg.
func decodeRecord(b []byte) (kmsg.Record, []byte, error) {
	var r kmsg.Record
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || int64(len(b)-n) < length {
		return r, nil, fmt.Errorf("%w: bad record length", ErrCorrupt)
	}
	end := n + int(length)
	if err := r.ReadFrom(b[:end]); err != nil {
		return r, nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return r, b[end:], nil
}

// xerialHeader starts snappy data in the xerial framing the Java client
// writes (librdkafka and franz-go read it, and may write raw snappy).
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

func decompress(codec int8, data []byte) ([]byte, error) {
	switch codec {
	case CompressionNone:
		return data, nil
	case CompressionGzip:
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrCodec, err)
		}
		return readLimited(zr, "gzip")
	case CompressionSnappy:
		if bytes.HasPrefix(data, xerialHeader) {
			return unxerial(data)
		}
		return snappyBlock(data)
	case CompressionLZ4:
		return readLimited(lz4.NewReader(bytes.NewReader(data)), "lz4")
	case CompressionZstd:
		dec, err := zstdDecoder()
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", ErrCodec, err)
		}
		out, err := dec.DecodeAll(data, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", ErrCodec, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: unknown codec %d", ErrCodec, codec)
}

// zstdDecoder is one decoder for every batch (DecodeAll is safe for
// concurrent use): a new zstd decoder per produce request costs far more
// than the decoding. It holds no state between calls.
var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxDecompressed), zstd.WithDecoderConcurrency(0))
})

func readLimited(r io.Reader, codec string) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressed+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCodec, codec, err)
	}
	if len(out) > maxDecompressed {
		return nil, fmt.Errorf("%w: %s: more than %d bytes", ErrCodec, codec, maxDecompressed)
	}
	return out, nil
}

func snappyBlock(data []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(data)
	if err != nil || n > maxDecompressed {
		return nil, fmt.Errorf("%w: snappy: length %d: %v", ErrCodec, n, err)
	}
	out, err := snappy.Decode(nil, data)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrCodec, err)
	}
	return out, nil
}

// unxerial decodes xerial-framed snappy: an 8-byte magic, two 4-byte
// versions, then chunks of a 4-byte big-endian length and a snappy block.
func unxerial(data []byte) ([]byte, error) {
	if len(data) < 16 {
		return nil, fmt.Errorf("%w: snappy: short xerial header", ErrCodec)
	}
	data = data[16:]
	var out []byte
	for len(data) > 0 {
		if len(data) < 4 {
			return nil, fmt.Errorf("%w: snappy: short xerial chunk length", ErrCodec)
		}
		n := binary.BigEndian.Uint32(data)
		data = data[4:]
		if uint64(n) > uint64(len(data)) {
			return nil, fmt.Errorf("%w: snappy: xerial chunk of %d bytes, %d left", ErrCodec, n, len(data))
		}
		chunk, err := snappyBlock(data[:n])
		if err != nil {
			return nil, err
		}
		if len(out)+len(chunk) > maxDecompressed {
			return nil, fmt.Errorf("%w: snappy: more than %d bytes", ErrCodec, maxDecompressed)
		}
		out = append(out, chunk...)
		data = data[n:]
	}
	return out, nil
}

// RecordAtTimestamp finds, in one batch, the first record at or after
// minOffset whose timestamp is at least ts (Kafka's
// LogSegment.findOffsetByTimestamp, record by record): its offset and
// timestamp. A LogAppendTime batch stamps every record with its max
// timestamp. ok is false when no record qualifies.
func RecordAtTimestamp(batch []byte, ts, minOffset int64) (offset, timestamp int64, ok bool, err error) {
	h, err := ParseHeader(batch)
	if err != nil {
		return 0, 0, false, err
	}
	logAppend := h.Attributes&TimestampTypeBit != 0
	stop := errors.New("found")
	err = ForEachRecord(batch, func(r kmsg.Record) error {
		off := h.BaseOffset + int64(r.OffsetDelta)
		rts := h.BaseTimestamp + r.TimestampDelta64
		if logAppend {
			rts = h.MaxTimestamp
		}
		if off >= minOffset && rts >= ts {
			offset, timestamp, ok = off, rts, true
			return stop
		}
		return nil
	})
	if errors.Is(err, stop) {
		err = nil
	}
	return offset, timestamp, ok, err
}
