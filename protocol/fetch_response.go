package protocol

import (
	"encoding/binary"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FetchResponseBuffers encodes a whole Fetch response frame as a list of
// buffers in which every partition's RecordBatches is the caller's own
// slice, not a copy: written with writev (net.Buffers.WriteTo), the records
// go from the read buffer to the socket without another pass through
// memory. The bytes are exactly those of AppendResponse. Responses using
// fields this fast path does not encode (tagged fields other than empty
// ones, aborted transactions) fall back to AppendResponse in one buffer.
// It also returns the grown scratch buffer, for reuse once the buffers are
// written.
func FetchResponseBuffers(scratch []byte, correlationID int32, resp *kmsg.FetchResponse) (net.Buffers, []byte) {
	if !fetchFastPathOK(resp) {
		b := AppendResponse(scratch[:0], correlationID, resp)
		return net.Buffers{b}, b
	}
	v := resp.Version
	flexible := v >= 12
	// Meta bytes (everything but records) go to scratch; bufs records
	// where each records slice is spliced in, as offsets into scratch so
	// scratch may grow.
	type piece struct {
		metaEnd int    // scratch[prevMetaEnd:metaEnd] precedes records
		records []byte // may be nil
	}
	var pieces []piece
	b := scratch[:0]
	b = append(b, 0, 0, 0, 0) // frame size, patched below
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	if flexible {
		b = append(b, 0) // response header tagged fields
	}
	if v >= 1 {
		b = binary.BigEndian.AppendUint32(b, uint32(resp.ThrottleMillis))
	}
	if v >= 7 {
		b = binary.BigEndian.AppendUint16(b, uint16(resp.ErrorCode))
		b = binary.BigEndian.AppendUint32(b, uint32(resp.SessionID))
	}
	b = appendArrayLen(b, len(resp.Topics), flexible)
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if v <= 12 {
			b = appendString(b, t.Topic, flexible)
		} else {
			b = append(b, t.TopicID[:]...)
		}
		b = appendArrayLen(b, len(t.Partitions), flexible)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
			b = binary.BigEndian.AppendUint16(b, uint16(p.ErrorCode))
			b = binary.BigEndian.AppendUint64(b, uint64(p.HighWatermark))
			if v >= 4 {
				b = binary.BigEndian.AppendUint64(b, uint64(p.LastStableOffset))
			}
			if v >= 5 {
				b = binary.BigEndian.AppendUint64(b, uint64(p.LogStartOffset))
			}
			if v >= 4 {
				// Only nil or empty aborted transactions reach here.
				if p.AbortedTransactions == nil {
					b = appendNullLen(b, flexible)
				} else {
					b = appendArrayLen(b, 0, flexible)
				}
			}
			if v >= 11 {
				b = binary.BigEndian.AppendUint32(b, uint32(p.PreferredReadReplica))
			}
			switch {
			case p.RecordBatches == nil:
				b = appendNullLen(b, flexible)
			case flexible:
				b = binary.AppendUvarint(b, uint64(len(p.RecordBatches))+1)
			default:
				b = binary.BigEndian.AppendUint32(b, uint32(len(p.RecordBatches)))
			}
			if len(p.RecordBatches) > 0 {
				pieces = append(pieces, piece{metaEnd: len(b), records: p.RecordBatches})
			}
			if flexible {
				b = append(b, 0) // partition tagged fields
			}
		}
		if flexible {
			b = append(b, 0) // topic tagged fields
		}
	}
	if flexible {
		b = append(b, 0) // response tagged fields
	}
	total := len(b) - 4
	for _, pc := range pieces {
		total += len(pc.records)
	}
	binary.BigEndian.PutUint32(b, uint32(total))

	out := make(net.Buffers, 0, 2*len(pieces)+1)
	prev := 0
	for _, pc := range pieces {
		out = append(out, b[prev:pc.metaEnd], pc.records)
		prev = pc.metaEnd
	}
	return append(out, b[prev:]), b
}

// fetchFastPathOK reports whether FetchResponseBuffers can encode resp
// itself: no tagged fields with content and no aborted transactions.
func fetchFastPathOK(resp *kmsg.FetchResponse) bool {
	if resp.UnknownTags.Len() > 0 || len(resp.Brokers) > 0 {
		return false
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.UnknownTags.Len() > 0 {
			return false
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if len(p.AbortedTransactions) > 0 || p.UnknownTags.Len() > 0 ||
				p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1 || p.DivergingEpoch.UnknownTags.Len() > 0 ||
				p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1 || p.CurrentLeader.UnknownTags.Len() > 0 ||
				p.SnapshotID.EndOffset != -1 || p.SnapshotID.Epoch != -1 || p.SnapshotID.UnknownTags.Len() > 0 {
				return false
			}
		}
	}
	return true
}

func appendArrayLen(b []byte, n int, flexible bool) []byte {
	if flexible {
		return binary.AppendUvarint(b, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

func appendNullLen(b []byte, flexible bool) []byte {
	if flexible {
		return append(b, 0)
	}
	return binary.BigEndian.AppendUint32(b, 0xffffffff)
}

func appendString(b []byte, s string, flexible bool) []byte {
	if flexible {
		b = binary.AppendUvarint(b, uint64(len(s))+1)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	}
	return append(b, s...)
}
