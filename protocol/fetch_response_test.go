package protocol

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kbroker/kbroker/internal/sendfile"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The fast path must produce exactly kmsg's bytes at every Fetch version.
func TestFetchResponseChunksMatchKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// Records given as chunks (bytes and ranges of this file) must encode
	// as if they were RecordBatches.
	file, err := os.Create(filepath.Join(t.TempDir(), "records"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	fileData := make([]byte, 4096)
	for i := range fileData {
		fileData[i] = byte(rng.IntN(256))
	}
	if _, err := file.Write(fileData); err != nil {
		t.Fatal(err)
	}
	for v := int16(0); v <= 16; v++ {
		for trial := 0; trial < 30; trial++ {
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = v
			resp.ThrottleMillis = rng.Int32N(100)
			resp.SessionID = rng.Int32()
			resp.ErrorCode = int16(rng.IntN(3))
			var records [][]sendfile.Chunks
			for ti := 0; ti < rng.IntN(4); ti++ {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic = string(bytes.Repeat([]byte{'a' + byte(ti)}, 1+rng.IntN(300)))
				rt.TopicID[0] = byte(ti + 1)
				records = append(records, nil)
				for pi := 0; pi < rng.IntN(5); pi++ {
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.Partition = int32(pi)
					rp.ErrorCode = int16(rng.IntN(2))
					rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = rng.Int64(), rng.Int64(), rng.Int64()
					if rng.IntN(2) == 0 {
						rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
					}
					var chunks sendfile.Chunks
					switch rng.IntN(4) {
					case 0: // nil records
					case 1:
						rp.RecordBatches = []byte{}
					case 2:
						rp.RecordBatches = bytes.Repeat([]byte{byte(pi)}, 1+rng.IntN(200))
					default:
						pos, n := rng.IntN(2048), 1+rng.IntN(2048)
						mem := bytes.Repeat([]byte{byte(pi)}, rng.IntN(20))
						chunks = sendfile.Chunks{{Data: mem}, {File: file, Pos: int64(pos), Len: n}}
						rp.RecordBatches = append(slices.Clone(mem), fileData[pos:pos+n]...)
					}
					records[ti] = append(records[ti], chunks)
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			want := AppendResponse(nil, 77, resp)
			for i := range records {
				for j := range records[i] {
					if records[i][j] != nil {
						resp.Topics[i].Partitions[j].RecordBatches = []byte("must not be sent")
					}
				}
			}
			var got bytes.Buffer
			chunks, _, err := FetchResponseChunks(nil, 77, resp, records)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sendfile.WriteTo(&got, chunks); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("v%d trial %d: fast path differs from kmsg (%d vs %d bytes)", v, trial, got.Len(), len(want))
			}
		}
	}
}

func TestFetchResponseChunksFallsBack(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	rt := kmsg.NewFetchResponseTopic()
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.DivergingEpoch.Epoch = 3
	rp.DivergingEpoch.EndOffset = 10
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	chunks, _, err := FetchResponseChunks(nil, 1, resp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 1 || !bytes.Equal(chunks[0].Data, AppendResponse(nil, 1, resp)) {
		t.Fatal("a response with tagged fields must use kmsg's encoding")
	}
}
