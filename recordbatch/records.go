package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
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

// DecodedRecord is one record read back from a batch. Key and Value are nil
// for null; they alias the batch (or its decompressed records).
type DecodedRecord struct {
	OffsetDelta    int32
	TimestampDelta int64
	Key, Value     []byte
	Headers        []RecordHeader
}

// ForEachRecord decodes the records of a validated v2 batch, decompressing
// them if needed, and calls fn for each in order until fn returns an error.
func ForEachRecord(batch []byte, fn func(DecodedRecord) error) error {
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

func decodeRecord(b []byte) (DecodedRecord, []byte, error) {
	var r DecodedRecord
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || int64(len(b)-n) < length {
		return r, nil, fmt.Errorf("%w: bad record length", ErrCorrupt)
	}
	rec, rest := b[n:n+int(length)], b[n+int(length):]
	if len(rec) < 1 {
		return r, nil, fmt.Errorf("%w: empty record", ErrCorrupt)
	}
	rec = rec[1:] // attributes, unused in v2
	var ok bool
	if r.TimestampDelta, rec, ok = varint(rec); !ok {
		return r, nil, fmt.Errorf("%w: bad timestamp delta", ErrCorrupt)
	}
	var delta int64
	if delta, rec, ok = varint(rec); !ok {
		return r, nil, fmt.Errorf("%w: bad offset delta", ErrCorrupt)
	}
	r.OffsetDelta = int32(delta)
	if r.Key, rec, ok = varBytes(rec); !ok {
		return r, nil, fmt.Errorf("%w: bad key", ErrCorrupt)
	}
	if r.Value, rec, ok = varBytes(rec); !ok {
		return r, nil, fmt.Errorf("%w: bad value", ErrCorrupt)
	}
	var nh int64
	if nh, rec, ok = varint(rec); !ok || nh < 0 || nh > int64(len(rec)) {
		return r, nil, fmt.Errorf("%w: bad header count", ErrCorrupt)
	}
	for range nh {
		var k, v []byte
		if k, rec, ok = varBytes(rec); !ok || k == nil {
			return r, nil, fmt.Errorf("%w: bad header key", ErrCorrupt)
		}
		if v, rec, ok = varBytes(rec); !ok {
			return r, nil, fmt.Errorf("%w: bad header value", ErrCorrupt)
		}
		r.Headers = append(r.Headers, RecordHeader{Key: string(k), Value: v})
	}
	if len(rec) != 0 {
		return r, nil, fmt.Errorf("%w: %d bytes left in a record", ErrCorrupt, len(rec))
	}
	return r, rest, nil
}

func varint(b []byte) (int64, []byte, bool) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, false
	}
	return v, b[n:], true
}

// varBytes reads a varint-length byte string; length -1 is null (nil).
func varBytes(b []byte) ([]byte, []byte, bool) {
	l, b, ok := varint(b)
	switch {
	case !ok || l < -1 || l > int64(len(b)):
		return nil, nil, false
	case l == -1:
		return nil, b, true
	}
	return b[:l:l], b[l:], true
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
		zr, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderMaxMemory(maxDecompressed), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", ErrCodec, err)
		}
		defer zr.Close()
		return readLimited(zr, "zstd")
	}
	return nil, fmt.Errorf("%w: unknown codec %d", ErrCodec, codec)
}

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
