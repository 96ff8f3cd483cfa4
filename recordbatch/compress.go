package recordbatch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// xerialBlock is the uncompressed size of each chunk of xerial-framed
// snappy, as snappy-java's SnappyOutputStream (32 KiB).
const xerialBlock = 32 << 10

// compress encodes a batch's records with codec as Kafka's producer and
// broker write them: gzip; snappy in the xerial framing of the Java
// client (magic, version 1, compatible version 1, length-prefixed
// blocks); LZ4 frames; zstd frames. decompress reads all of them.
func compress(codec int8, data []byte) ([]byte, error) {
	switch codec {
	case CompressionNone:
		return data, nil
	case CompressionGzip:
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(data); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return buf.Bytes(), nil
	case CompressionSnappy:
		out := append([]byte(nil), xerialHeader...)
		out = binary.BigEndian.AppendUint32(out, 1) // version
		out = binary.BigEndian.AppendUint32(out, 1) // compatible version
		for len(data) > 0 {
			n := min(len(data), xerialBlock)
			block := snappy.Encode(nil, data[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
			out = append(out, block...)
			data = data[n:]
		}
		return out, nil
	case CompressionLZ4:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		if _, err := w.Write(data); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		return buf.Bytes(), nil
	case CompressionZstd:
		enc, err := zstdEncoder()
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return enc.EncodeAll(data, nil), nil
	}
	return nil, fmt.Errorf("%w: unknown codec %d", ErrCodec, codec)
}

// zstdEncoder is one encoder for every batch (EncodeAll is safe for
// concurrent use).
var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
})
