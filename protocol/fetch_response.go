package protocol

import (
	"encoding/binary"
	"fmt"

	"github.com/kbroker/kbroker/internal/sendfile"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FetchResponseChunks encodes a whole Fetch response frame as chunks to
// write in order (sendfile.WriteTo): the encoded fields in scratch, and
// each partition's records as given, not copied. records[t][p], when
// present, holds the records of resp.Topics[t].Partitions[p] (bytes or
// segment file ranges, sent with sendfile) in place of its RecordBatches.
// The bytes are exactly those of AppendResponse. Responses using fields
// this fast path does not encode (tagged fields other than empty ones,
// aborted transactions) fall back to AppendResponse in one buffer, reading
// file records into it. It also returns the grown scratch buffer, for reuse
// once the chunks are written.
func FetchResponseChunks(scratch []byte, correlationID int32, resp *kmsg.FetchResponse, records [][]sendfile.Chunks) (sendfile.Chunks, []byte, error) {
	recordsOf := func(t, p int) (sendfile.Chunks, bool) {
		if t < len(records) && p < len(records[t]) && records[t][p] != nil {
			return records[t][p], true
		}
		return nil, false
	}
	if !fetchFastPathOK(resp) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if cs, ok := recordsOf(i, j); ok {
					b, err := cs.AppendTo(nil)
					if err != nil {
						return nil, scratch, fmt.Errorf("fetch response records: %w", err)
					}
					resp.Topics[i].Partitions[j].RecordBatches = b
				}
			}
		}
		b := AppendResponse(scratch[:0], correlationID, resp)
		return sendfile.Chunks{{Data: b}}, b, nil
	}
	v := resp.Version
	flexible := v >= 12
	// Meta bytes (everything but records) go to scratch; bufs records
	// where each records slice is spliced in, as offsets into scratch so
	// scratch may grow.
	type piece struct {
		metaEnd int             // scratch[prevMetaEnd:metaEnd] precedes records
		records sendfile.Chunks // may be nil
	}
	nParts := 0
	for i := range resp.Topics {
		nParts += len(resp.Topics[i].Partitions)
	}
	pieces := make([]piece, 0, nParts) // made once, at its largest
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
			recs, ok := recordsOf(i, j)
			if !ok && p.RecordBatches != nil {
				recs = sendfile.Chunks{{Data: p.RecordBatches}}
			}
			size := recs.Size()
			switch {
			case !ok && p.RecordBatches == nil:
				b = appendNullLen(b, flexible)
			case flexible:
				b = binary.AppendUvarint(b, uint64(size)+1)
			default:
				b = binary.BigEndian.AppendUint32(b, uint32(size))
			}
			if size > 0 {
				pieces = append(pieces, piece{metaEnd: len(b), records: recs})
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
	nChunks := 1
	for _, pc := range pieces {
		total += pc.records.Size()
		nChunks += 1 + len(pc.records)
	}
	binary.BigEndian.PutUint32(b, uint32(total))

	out := make(sendfile.Chunks, 0, nChunks)
	prev := 0
	for _, pc := range pieces {
		out = append(out, sendfile.Chunk{Data: b[prev:pc.metaEnd]})
		out = append(out, pc.records...)
		prev = pc.metaEnd
	}
	return append(out, sendfile.Chunk{Data: b[prev:]}), b, nil
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
