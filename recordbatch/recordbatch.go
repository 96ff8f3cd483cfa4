// Package recordbatch reads and patches the fixed header of Kafka's v2
// record batch (magic 2), the unit in which kbroker stores and serves data.
//
// Layout (big endian), from Kafka's DefaultRecordBatch:
//
//	baseOffset           int64   0
//	batchLength          int32   8   bytes after this field
//	partitionLeaderEpoch int32  12
//	magic                int8   16
//	crc                  uint32 17   CRC-32C of attributes..end
//	attributes           int16  21
//	lastOffsetDelta      int32  23
//	baseTimestamp        int64  27
//	maxTimestamp         int64  35
//	producerId           int64  43
//	producerEpoch        int16  51
//	baseSequence         int32  53
//	recordCount          int32  57
//	records                     61
//
// Only baseOffset and partitionLeaderEpoch lie outside the CRC, so the broker
// may set them without recomputing it.
package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Byte positions of the header fields.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// HeaderSize is the size of the v2 batch header, records excluded.
	HeaderSize = 61
	// LogOverhead is the size of baseOffset and batchLength, the part of a
	// batch not counted by batchLength.
	LogOverhead = 12
)

// Attribute bits.
const (
	CompressionMask    = 0x07
	TimestampTypeBit   = 0x08
	TransactionalBit   = 0x10
	ControlBit         = 0x20
	DeleteHorizonBit   = 0x40
	compressionUnknown = 5
)

var (
	// ErrShort means the bytes end before the header or the batch does.
	ErrShort = errors.New("record batch truncated")
	// ErrMagic means the batch is not of the v2 format.
	ErrMagic = errors.New("record batch magic is not 2")
	// ErrCRC means the stored CRC-32C does not match the batch bytes.
	ErrCRC = errors.New("record batch CRC mismatch")
	// ErrCorrupt means a header field holds an impossible value.
	ErrCorrupt = errors.New("record batch corrupt")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded fixed header of one batch.
type Header struct {
	BaseOffset           int64
	Length               int32 // batchLength: bytes after the length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the whole batch size in bytes, header included.
func (h Header) Size() int { return int(h.Length) + LogOverhead }

// LastOffset is the offset of the batch's last record.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch's last record.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Compression is the codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func (h Header) Compression() int8 { return int8(h.Attributes & CompressionMask) }

// IsTransactional reports the transactional attribute bit.
func (h Header) IsTransactional() bool { return h.Attributes&TransactionalBit != 0 }

// IsControl reports the control attribute bit.
func (h Header) IsControl() bool { return h.Attributes&ControlBit != 0 }

// LastSequence is the sequence number of the batch's last record, or -1
// when the batch carries no sequence.
func (h Header) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return -1
	}
	// Sequences wrap at MaxInt32 as in Kafka.
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (1 << 31))
}

// ParseHeader decodes the header at the start of b. It checks only that the
// header is present and that the magic byte is 2 when the header is complete
// enough to hold it.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < offMagic+1 {
		return Header{}, ErrShort
	}
	var h Header
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
	h.Length = int32(binary.BigEndian.Uint32(b[offLength:]))
	h.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(b[offLeaderEpoch:]))
	h.Magic = int8(b[offMagic])
	if h.Magic != 2 {
		return h, fmt.Errorf("%w (magic %d)", ErrMagic, h.Magic)
	}
	if len(b) < HeaderSize {
		return h, ErrShort
	}
	h.CRC = binary.BigEndian.Uint32(b[offCRC:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[offAttributes:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[offBaseTimestamp:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[offMaxTimestamp:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[offProducerID:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[offProducerEpoch:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[offBaseSequence:]))
	h.RecordCount = int32(binary.BigEndian.Uint32(b[offRecordCount:]))
	if int(h.Length) < HeaderSize-LogOverhead || h.LastOffsetDelta < 0 || h.RecordCount < 0 {
		return h, fmt.Errorf("%w: length %d, lastOffsetDelta %d, records %d", ErrCorrupt, h.Length, h.LastOffsetDelta, h.RecordCount)
	}
	return h, nil
}

// Validate parses the batch at the start of b and checks that b holds all of
// it, that the header is sane and that the CRC matches. It returns the header
// and the batch's size.
func Validate(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	return h, ValidateParsed(b, h)
}

// ValidateParsed is Validate for a batch whose header h the caller has
// already parsed from b: the length, the codec and the CRC.
func ValidateParsed(b []byte, h Header) error {
	if len(b) < h.Size() {
		return ErrShort
	}
	if h.Compression() >= compressionUnknown {
		return fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, h.Compression())
	}
	if crc32.Checksum(b[offAttributes:h.Size()], castagnoli) != h.CRC {
		return ErrCRC
	}
	return nil
}

// ComputeCRC returns the CRC-32C over a batch's attributes..end.
func ComputeCRC(batch []byte) uint32 {
	return crc32.Checksum(batch[offAttributes:], castagnoli)
}

// SetCRC stores the CRC of batch, for callers that build batches.
func SetCRC(batch []byte) {
	binary.BigEndian.PutUint32(batch[offCRC:], ComputeCRC(batch))
}

// SetBaseOffset patches the base offset (outside the CRC).
func SetBaseOffset(batch []byte, offset int64) {
	binary.BigEndian.PutUint64(batch[offBaseOffset:], uint64(offset))
}

// SetPartitionLeaderEpoch patches the leader epoch (outside the CRC).
func SetPartitionLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[offLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime sets the max timestamp and the LogAppendTime bit and
// recomputes the CRC; used for topics with message.timestamp.type=LogAppendTime.
func SetLogAppendTime(batch []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(batch[offAttributes:]) | TimestampTypeBit
	binary.BigEndian.PutUint16(batch[offAttributes:], attrs)
	binary.BigEndian.PutUint64(batch[offMaxTimestamp:], uint64(ts))
	SetCRC(batch)
}

// Split cuts a concatenation of batches (a produce or fetch records field)
// into batches. Every batch is checked with Validate. A trailing partial
// batch is an error.
func Split(records []byte) ([][]byte, []Header, error) {
	var batches [][]byte
	var headers []Header
	for len(records) > 0 {
		h, err := Validate(records)
		if err != nil {
			return nil, nil, err
		}
		batches = append(batches, records[:h.Size()])
		headers = append(headers, h)
		records = records[h.Size():]
	}
	return batches, headers, nil
}
