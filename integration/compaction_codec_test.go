package integration

import (
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/segment"
)

// TestCompactionKeepsCodec: compacted topics written by franz-go with
// each of Kafka's four codecs. The cleaner rewrites their batches with
// the batch's own codec, as Kafka does (not uncompressed, which would make
// a cleaned compressed topic larger than before): after cleaning,
// franz-go and kcat read every key's latest value once, and, the broker
// stopped, every batch holding records on disk carries its topic's codec,
// rewritten ones (fewer records than offsets) included (the workload's;
// franz-go sends the lone filler records uncompressed).
func TestCompactionKeepsCodec(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed")
	}
	b := StartBroker(t, "log.cleaner.backoff.ms=100")
	ctx := testContext(t, 180*time.Second)
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
		id    int8
	}{
		{"gzip", kgo.GzipCompression(), recordbatch.CompressionGzip},
		{"snappy", kgo.SnappyCompression(), recordbatch.CompressionSnappy},
		{"lz4", kgo.Lz4Compression(), recordbatch.CompressionLZ4},
		{"zstd", kgo.ZstdCompression(), recordbatch.CompressionZstd},
	}
	dataEnds := map[string]int64{}
	for _, c := range codecs {
		topic := "codec-" + c.name
		if _, err := b.Admin(t).CreateTopic(ctx, 1, 1, compactionTopicConfigs(), topic); err != nil {
			t.Fatal(err)
		}
		m := &compactionModel{latest: map[string]string{}, deleted: map[string]bool{}}
		cl := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(c.codec))
		var batch []*kgo.Record
		for i := 0; i < 20000; i++ {
			key := fmt.Sprintf("key-%03d", i%200)
			value := []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", 40)))
			if i%53 == 0 {
				value = nil
			}
			m.put(key, value)
			batch = append(batch, &kgo.Record{Key: []byte(key), Value: value})
			if len(batch) == 1000 {
				if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
					t.Fatal(err)
				}
				batch = nil
			}
		}
		dataEnd := listEnd(t, ctx, b.Addr(), topic)
		dataEnds[c.name] = dataEnd
		filler := 0
		checkFor(t, 60*time.Second, 1100*time.Millisecond, func() error {
			filler++
			value := []byte(strconv.Itoa(filler))
			m.put("filler", value)
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("filler"), Value: value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if ck := cleanerCheckpoint(t, b.DataDir(), topic, 0); ck < dataEnd {
				return fmt.Errorf("cleaner checkpoint %d, data up to %d", ck, dataEnd)
			}
			return nil
		})
		recs := readAll(t, ctx, b.Addr(), topic)
		if err := checkCompacted(recs, m, "key-", true, false); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		kcatRecs := kcatOffsets(t, b.Addr(), topic)
		for _, r := range recs {
			if r.value != nil && strings.HasPrefix(r.key, "key-") && !kcatRecs[fmt.Sprintf("%d %s %d", r.offset, r.key, len(r.value))] {
				t.Fatalf("%s: kcat misses offset %d (key %s)", c.name, r.offset, r.key)
			}
		}
		t.Logf("%s: %d records written, %d read after cleaning by franz-go and kcat", c.name, dataEnd, len(recs))
	}

	b.Stop()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range codecs {
		topic := "codec-" + c.name
		l, err := segment.Open(b.PartitionDir(topic, 0), segment.Config{RetentionTime: -1, RetentionBytes: -1}, true, logger)
		if err != nil {
			t.Fatal(err)
		}
		data, err := l.Read(l.StartOffset(), 1<<30, l.EndOffset(), true)
		l.Close()
		if err != nil {
			t.Fatal(err)
		}
		_, headers, err := recordbatch.Split(data)
		if err != nil {
			t.Fatal(err)
		}
		rewritten := 0
		for _, h := range headers {
			if h.RecordCount == 0 || h.IsControl() || h.BaseOffset >= dataEnds[c.name] {
				continue // the fillers: franz-go sends a lone small record uncompressed
			}
			if h.Compression() != c.id {
				t.Fatalf("%s: batch at offset %d (%d records) has codec %d", c.name, h.BaseOffset, h.RecordCount, h.Compression())
			}
			if int64(h.RecordCount) < int64(h.LastOffsetDelta)+1 {
				rewritten++
			}
		}
		if rewritten == 0 {
			t.Fatalf("%s: no rewritten batch on disk", c.name)
		}
		t.Logf("%s: %d batches on disk, %d rewritten by the cleaner, all with the topic's codec", c.name, len(headers), rewritten)
	}
}
