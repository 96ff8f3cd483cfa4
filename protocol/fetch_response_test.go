package protocol

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The fast path must produce exactly kmsg's bytes at every Fetch version.
func TestFetchResponseBuffersMatchKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for v := int16(0); v <= 16; v++ {
		for trial := 0; trial < 30; trial++ {
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = v
			resp.ThrottleMillis = rng.Int32N(100)
			resp.SessionID = rng.Int32()
			resp.ErrorCode = int16(rng.IntN(3))
			for ti := 0; ti < rng.IntN(4); ti++ {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic = string(bytes.Repeat([]byte{'a' + byte(ti)}, 1+rng.IntN(300)))
				rt.TopicID[0] = byte(ti + 1)
				for pi := 0; pi < rng.IntN(5); pi++ {
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.Partition = int32(pi)
					rp.ErrorCode = int16(rng.IntN(2))
					rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = rng.Int64(), rng.Int64(), rng.Int64()
					if rng.IntN(2) == 0 {
						rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
					}
					switch rng.IntN(3) {
					case 0: // nil records
					case 1:
						rp.RecordBatches = []byte{}
					default:
						rp.RecordBatches = bytes.Repeat([]byte{byte(pi)}, 1+rng.IntN(200))
					}
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			want := AppendResponse(nil, 77, resp)
			var got bytes.Buffer
			bufs, _ := FetchResponseBuffers(nil, 77, resp)
			if _, err := bufs.WriteTo(&got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("v%d trial %d: fast path differs from kmsg (%d vs %d bytes)", v, trial, got.Len(), len(want))
			}
		}
	}
}

func TestFetchResponseBuffersFallsBack(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	rt := kmsg.NewFetchResponseTopic()
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.DivergingEpoch.Epoch = 3
	rp.DivergingEpoch.EndOffset = 10
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	bufs, _ := FetchResponseBuffers(nil, 1, resp)
	if len(bufs) != 1 || !bytes.Equal(bufs[0], AppendResponse(nil, 1, resp)) {
		t.Fatal("a response with tagged fields must use kmsg's encoding")
	}
}
