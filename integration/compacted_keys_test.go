package integration

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompactedTopicNeedsKeys: real clients, every codec. On a topic with
// cleanup.policy=compact a keyless record is refused with INVALID_RECORD
// (Kafka's LogValidator rule) and nothing is stored; keyed records and
// tombstones are stored. The broker decompresses each batch to check.
func TestCompactedTopicNeedsKeys(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin(t)
	ctx := testContext(t, 60*time.Second)
	compact := "compact"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, "keys"); err != nil {
		t.Fatal(err)
	}
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	stored := 0
	for name, codec := range codecs {
		cl := b.Client(t, kgo.ProducerBatchCompression(codec), kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
		res := cl.ProduceSync(ctx,
			&kgo.Record{Topic: "keys", Key: []byte("k-" + name), Value: []byte("v")},
			&kgo.Record{Topic: "keys", Value: []byte(strings.Repeat("keyless ", 40))})
		for _, r := range res {
			if !errors.Is(r.Err, kerr.InvalidRecord) {
				t.Errorf("%s: a batch with a keyless record: %v, want INVALID_RECORD", name, r.Err)
			}
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "keys", Key: []byte("k-" + name), Value: []byte(strings.Repeat("v", 300))},
			&kgo.Record{Topic: "keys", Key: []byte("gone-" + name)}).FirstErr(); err != nil {
			t.Errorf("%s: keyed records and a tombstone: %v", name, err)
		}
		stored += 2
	}
	// librdkafka (kcat), snappy: the keyless record is refused.
	cmd := exec.Command("kcat", "-P", "-b", b.Addr(), "-t", "keys", "-z", "snappy", "-X", "message.send.max.retries=0")
	cmd.Stdin = strings.NewReader("no key here\n")
	out, err := cmd.CombinedOutput()
	// librdkafka's text for INVALID_RECORD (87).
	if err == nil || !strings.Contains(string(out), "Broker failed to validate record") {
		t.Errorf("kcat keyless produce: exit %v, output %q: want a delivery failure for INVALID_RECORD", err, out)
	}
	offsets, err := adm.ListEndOffsets(ctx, "keys")
	if err != nil {
		t.Fatal(err)
	}
	if end, _ := offsets.Lookup("keys", 0); end.Offset != int64(stored) {
		t.Fatalf("log end %d, want %d: only the keyed batches are stored", end.Offset, stored)
	}
}
