package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Client round trips: every client produces keyed records with headers
// under every codec to a fresh 3-partition topic, then reads them back
// from the beginning without a consumer group; per partition the consumed
// sequence must equal the produced one.

const (
	roundTripRecords    = 10000
	roundTripPartitions = 3
	roundTripTimeout    = 90 * time.Second
)

type codec struct {
	name string
	id   int // record batch attributes & 7
}

var codecs = []codec{{"none", 0}, {"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}}

// roundTripClient produces records (returning them with the partitions
// the client reported or, for kcat, the partitions its partitioner picks)
// and consumes [0, ends) of every partition.
type roundTripClient struct {
	name    string
	produce func(t *testing.T, b *Broker, topic string, c codec, rs []rec) []rec
	consume func(t *testing.T, b *Broker, topic string, ends map[int32]int64) []rec
}

func TestClients(t *testing.T) {
	clients := []roundTripClient{
		{"franz-go", produceFranz, consumeFranz},
		{"sarama", produceSarama, consumeSarama},
		{"kafka-go", produceKafkaGo, consumeKafkaGo},
		{"kcat", produceKcat, consumeKcat},
	}
	b := StartBroker(t, "num.partitions=1")
	adm := b.Admin(t)
	raw := rawClient(t, b.Addr())
	for _, cl := range clients {
		cl := cl
		t.Run(cl.name, func(t *testing.T) {
			if cl.name == "kcat" {
				if _, err := exec.LookPath("kcat"); err != nil {
					t.Skip("kcat not installed (scripts/test.sh installs it)")
				}
			}
			for _, c := range codecs {
				c := c
				t.Run(c.name, func(t *testing.T) {
					start := time.Now()
					topic := fmt.Sprintf("rt-%s-%s", cl.name, c.name)
					createTopic(t, adm, topic, roundTripPartitions, nil)
					rs := makeRecords(topic, roundTripRecords)
					if cl.name == "kcat" {
						rs = kcatRecords(rs, c)
					}
					produced := cl.produce(t, b, topic, c, rs)
					if t.Failed() {
						return
					}
					tProduce := time.Since(start)
					ends := checkEndOffsets(t, adm, topic, produced, roundTripPartitions)
					consumed := cl.consume(t, b, topic, ends)
					compareRecords(t, produced, consumed, compareOpts{checkProducedOffsets: cl.name != "kcat"})
					checkStoredCodec(t, raw, topic, c, cl.name == "kcat" || cl.name == "franz-go")
					t.Logf("%d records: produce %v, total %v", len(rs), tProduce.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
				})
			}
		})
	}
}

// checkStoredCodec asserts that the client really compressed: the first
// batches of partition 0 as the broker stores them carry the codec. With
// someUncompressed, batches without compression may be among them, as long
// as one carries the codec: librdkafka and franz-go (sink.go: "len(compressed)
// < len(toCompress)") send a batch uncompressed when compressing would not
// make it smaller (a batch of one short record, as their lingers cut them on
// a busy machine; franz-go's snappy batch 3 of 10,000 records was one in a CI
// rehearsal).
func checkStoredCodec(t *testing.T, cl *kgo.Client, topic string, c codec, someUncompressed bool) {
	t.Helper()
	ctx := testContext(t, 15*time.Second)
	p, err := rawFetch(ctx, cl, topic, 0, 0, 8<<20) // several batches: librdkafka may send a first small one uncompressed
	if err != nil {
		t.Errorf("raw fetch of %s: %v", topic, err)
		return
	}
	codecs := batchCodecs(p.RecordBatches)
	if len(codecs) == 0 {
		t.Errorf("raw fetch of %s partition 0 returned no complete batch (error code %d)", topic, p.ErrorCode)
		return
	}
	compressed := false
	for i, got := range codecs {
		if got == c.id {
			compressed = true
			continue
		}
		if !(someUncompressed && got == 0) {
			t.Errorf("stored batch %d of %s partition 0 has codec %d, want %d (%s)", i, topic, got, c.id, c.name)
			return
		}
	}
	if !compressed {
		t.Errorf("no stored batch of %s partition 0 (of %d) has codec %d (%s)", topic, len(codecs), c.id, c.name)
	}
}

// ---- franz-go ----

func franzCodec(c codec) kgo.CompressionCodec {
	switch c.name {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

func produceFranz(t *testing.T, b *Broker, topic string, c codec, rs []rec) []rec {
	cl := b.Client(t, kgo.ProducerBatchCompression(franzCodec(c)), kgo.RequiredAcks(kgo.AllISRAcks()))
	return produceKgo(t, cl, topic, rs, roundTripTimeout)
}

func consumeFranz(t *testing.T, b *Broker, topic string, ends map[int32]int64) []rec {
	return consumeKgo(t, b.Addr(), topic, nil, ends, roundTripTimeout)
}

// ---- IBM/sarama ----

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	cfg.ClientID = "kbroker-integration"
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Net.ReadTimeout = 30 * time.Second
	cfg.Net.WriteTimeout = 30 * time.Second
	cfg.Metadata.Retry.Max = 5
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Idempotent = false
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	cfg.Producer.Flush.Bytes = 256 << 10
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	return cfg
}

// bounded runs fn in a goroutine and gives up after timeout, for client
// calls that take no context.
func bounded(timeout time.Duration, what string, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("%s did not finish within %v", what, timeout)
	}
}

func produceSarama(t *testing.T, b *Broker, topic string, c codec, rs []rec) []rec {
	cfg := saramaConfig()
	cfg.Producer.Compression = map[string]sarama.CompressionCodec{
		"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy,
		"lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
	}[c.name]
	p, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewSyncProducer: %v", err)
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, len(rs))
	for i, r := range rs {
		m := &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(r.Key), Value: sarama.ByteEncoder(r.Value)}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
		msgs[i] = m
	}
	if err := bounded(roundTripTimeout, "sarama SendMessages", func() error { return p.SendMessages(msgs) }); err != nil {
		t.Fatalf("sarama SendMessages: %v", firstSaramaError(err))
	}
	out := make([]rec, len(rs))
	copy(out, rs)
	for i, m := range msgs {
		out[i].Partition, out[i].Offset = m.Partition, m.Offset
	}
	return out
}

func firstSaramaError(err error) error {
	if pe, ok := err.(sarama.ProducerErrors); ok && len(pe) > 0 {
		return fmt.Errorf("%d messages failed, first: %w", len(pe), pe[0].Err)
	}
	return err
}

func consumeSarama(t *testing.T, b *Broker, topic string, ends map[int32]int64) []rec {
	c, err := sarama.NewConsumer([]string{b.Addr()}, saramaConfig())
	if err != nil {
		t.Fatalf("sarama.NewConsumer: %v", err)
	}
	defer func() { _ = bounded(10*time.Second, "sarama consumer close", c.Close) }()
	ctx := testContext(t, roundTripTimeout)
	var out []rec
	for p := int32(0); p < int32(len(ends)); p++ {
		if ends[p] == 0 {
			continue
		}
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("sarama ConsumePartition %d: %v", p, err)
		}
		for n := int64(0); n < ends[p]; {
			select {
			case m := <-pc.Messages():
				r := rec{Key: m.Key, Value: m.Value, Partition: m.Partition, Offset: m.Offset}
				for _, h := range m.Headers {
					r.Headers = append(r.Headers, hdr{string(h.Key), h.Value})
				}
				out = append(out, r)
				n++
			case err := <-pc.Errors():
				t.Fatalf("sarama consuming partition %d: %v", p, err)
			case <-ctx.Done():
				t.Fatalf("sarama consumed %d of %d records of partition %d within %v", n, ends[p], p, roundTripTimeout)
			}
		}
		pc.AsyncClose()
	}
	return out
}

// ---- segmentio/kafka-go ----

func produceKafkaGo(t *testing.T, b *Broker, topic string, c codec, rs []rec) []rec {
	var (
		mu    sync.Mutex
		acked = make(map[string]kafka.Message, len(rs))
		werr  error
	)
	// A Transport of its own: the shared default one caches metadata, and
	// would not know a topic created a moment ago.
	tr := &kafka.Transport{DialTimeout: 5 * time.Second}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{
		Addr:         kafka.TCP(b.Addr()),
		Transport:    tr,
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		BatchSize:    500,
		BatchBytes:   1 << 20,
		BatchTimeout: 5 * time.Millisecond,
		RequiredAcks: kafka.RequireAll,
		Compression: map[string]compress.Compression{
			"none": 0, "gzip": kafka.Gzip, "snappy": kafka.Snappy, "lz4": kafka.Lz4, "zstd": kafka.Zstd,
		}[c.name],
		WriteTimeout: 30 * time.Second,
		Completion: func(msgs []kafka.Message, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && werr == nil {
				werr = err
			}
			for _, m := range msgs {
				acked[string(m.Key)] = m
			}
		},
	}
	msgs := make([]kafka.Message, len(rs))
	for i, r := range rs {
		msgs[i] = kafka.Message{Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
	}
	ctx := testContext(t, roundTripTimeout)
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		w.Close()
		t.Fatalf("kafka-go WriteMessages: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("kafka-go Writer.Close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if werr != nil {
		t.Fatalf("kafka-go write completion: %v", werr)
	}
	out := make([]rec, len(rs))
	copy(out, rs)
	for i := range out {
		m, ok := acked[string(out[i].Key)]
		if !ok {
			t.Fatalf("kafka-go reported no completion for key %q", out[i].Key)
		}
		out[i].Partition, out[i].Offset = int32(m.Partition), m.Offset
	}
	return out
}

func consumeKafkaGo(t *testing.T, b *Broker, topic string, ends map[int32]int64) []rec {
	ctx := testContext(t, roundTripTimeout)
	var out []rec
	for p := int32(0); p < int32(len(ends)); p++ {
		if ends[p] == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   []string{b.Addr()},
			Topic:     topic,
			Partition: int(p),
			MinBytes:  1,
			MaxBytes:  10 << 20,
			MaxWait:   250 * time.Millisecond,
		})
		if err := r.SetOffset(kafka.FirstOffset); err != nil {
			t.Fatalf("kafka-go SetOffset: %v", err)
		}
		for n := int64(0); n < ends[p]; n++ {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				t.Fatalf("kafka-go reading partition %d after %d of %d records: %v", p, n, ends[p], err)
			}
			rc := rec{Key: m.Key, Value: m.Value, Partition: int32(m.Partition), Offset: m.Offset}
			for _, h := range m.Headers {
				rc.Headers = append(rc.Headers, hdr{h.Key, h.Value})
			}
			out = append(out, rc)
		}
		if err := r.Close(); err != nil {
			t.Errorf("kafka-go Reader.Close: %v", err)
		}
	}
	return out
}

// ---- kcat (librdkafka) ----

// kcatRecords adapts records to what kcat's producer can send: the same
// -H headers on every record. Partitions are what librdkafka's
// "consistent" partitioner picks: CRC-32 of the key modulo the count.
func kcatRecords(rs []rec, c codec) []rec {
	out := make([]rec, len(rs))
	for i, r := range rs {
		r.Headers = []hdr{{"src", []byte("kcat")}, {"codec", []byte(c.name)}}
		r.Partition = int32(crc32.ChecksumIEEE(r.Key) % roundTripPartitions)
		out[i] = r
	}
	return out
}

func produceKcat(t *testing.T, b *Broker, topic string, c codec, rs []rec) []rec {
	var in bytes.Buffer
	for _, r := range rs {
		in.Write(r.Key)
		in.WriteByte(':')
		in.Write(r.Value)
		in.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), "records.txt")
	if err := os.WriteFile(path, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), roundTripTimeout)
	defer cancel()
	stderr := &kcatStderr{cancel: cancel}
	cmd := exec.CommandContext(ctx, "kcat", "-P", "-b", b.Addr(), "-t", topic, "-K:",
		"-H", "src=kcat", "-H", "codec="+c.name, "-z", c.name,
		"-X", "partitioner=consistent", "-X", "acks=all", "-X", "linger.ms=5",
		"-X", "message.timeout.ms=60000")
	cmd.Stdin = f
	cmd.Stderr = stderr
	cmd.Stdout = stderr
	err = cmd.Run()
	if err != nil || stderr.failed() {
		t.Fatalf("kcat -P: %v\n%s", err, stderr.tail())
	}
	return rs
}

func consumeKcat(t *testing.T, b *Broker, topic string, ends map[int32]int64) []rec {
	ctx, cancel := context.WithTimeout(context.Background(), roundTripTimeout)
	defer cancel()
	// Tab separated; keys, values and headers hold no tabs, and the
	// lengths %K and %S are checked against what was parsed.
	cmd := exec.CommandContext(ctx, "kcat", "-C", "-b", b.Addr(), "-t", topic, "-o", "beginning", "-e",
		"-f", `%p\t%o\t%K\t%k\t%S\t%s\t%h\n`)
	var stdout bytes.Buffer
	stderr := &kcatStderr{cancel: cancel}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	err := cmd.Run()
	if err != nil || stderr.failed() {
		t.Fatalf("kcat -C: %v (%d bytes of records read)\n%s", err, stdout.Len(), stderr.tail())
	}
	var out []rec
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 7 {
			t.Fatalf("kcat output line %d has %d fields, want 7: %q", line, len(f), sc.Text())
		}
		p, err1 := strconv.Atoi(f[0])
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		kl, err3 := strconv.Atoi(f[2])
		vl, err4 := strconv.Atoi(f[4])
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || kl != len(f[3]) || vl != len(f[5]) {
			t.Fatalf("kcat output line %d is malformed: %q", line, sc.Text())
		}
		r := rec{Key: []byte(f[3]), Value: []byte(f[5]), Partition: int32(p), Offset: o}
		if f[6] != "" {
			for _, kv := range strings.Split(f[6], ",") {
				k, v, _ := strings.Cut(kv, "=")
				r.Headers = append(r.Headers, hdr{k, []byte(v)})
			}
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading kcat output: %v", err)
	}
	return out
}

// kcatStderr collects kcat's stderr and stops kcat at the first error
// librdkafka or kcat reports, instead of letting it retry until the
// deadline.
type kcatStderr struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	cancel func()
	hit    string
}

var kcatErrorMarks = []string{"|PROTOERR|", "|ERROR|", "% ERROR", "|FAIL|", "Delivery failed"}

func (w *kcatStderr) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.hit == "" {
		for _, m := range kcatErrorMarks {
			if bytes.Contains(w.buf.Bytes(), []byte(m)) {
				w.hit = m
				w.cancel()
				break
			}
		}
	}
	return len(p), nil
}

func (w *kcatStderr) failed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hit != ""
}

// tail returns what kcat reported and the end of its stderr.
func (w *kcatStderr) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.buf.String()
	if len(out) > 4000 {
		out = "..." + out[len(out)-4000:]
	}
	if w.hit == "" {
		return "kcat stderr:\n" + out
	}
	return fmt.Sprintf("kcat reported %q; stderr:\n%s", w.hit, out)
}
