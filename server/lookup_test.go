package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/coordinator"
	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/replica"
	"github.com/twmb/franz-go/pkg/kerr"
)

// adminTestConfig is the default broker config, as broker 1 storing in dir.
func adminTestConfig(dir string) config.Config {
	cfg := config.Default()
	cfg.BrokerID = 1
	cfg.LogDirs = []string{dir}
	cfg.OffsetsTopicNumPartitions = 1
	return cfg
}

// newAdminTestBroker assembles a broker's controller, replicas and group
// coordinator in a temporary directory, without listeners, so handlers can
// be called directly.
func newAdminTestBroker(t testing.TB, mutate ...func(*config.Config)) *Broker {
	t.Helper()
	dir := t.TempDir()
	cfg := adminTestConfig(dir)
	for _, m := range mutate {
		m(&cfg)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := NewBroker(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if b.replicas, err = replica.Open(replica.Config{LogDir: dir, RetentionCheck: time.Hour, BrokerID: cfg.BrokerID}, logger); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.replicas.Close() })
	ctrl, err := controller.NewEmbedded(dir, controller.ClusterConfig{Self: b.self, HoldsDeleted: b.holdsDeleted}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctrl.Close)
	b.controller = ctrl
	b.groups = coordinator.New(coordinator.Config{
		NumPartitions:         cfg.OffsetsTopicNumPartitions,
		OffsetsRetention:      cfg.OffsetsRetention,
		InitialRebalanceDelay: cfg.GroupInitialRebalanceDelay,
		MinSessionTimeout:     cfg.GroupMinSessionTimeout,
		MaxSessionTimeout:     cfg.GroupMaxSessionTimeout,
		MaxRecordBytes:        cfg.MessageMaxBytes,
	}, &internalLog{b: b, topic: offsetsTopic}, logger)
	t.Cleanup(b.groups.Close)
	b.txns = b.newTxnCoordinator()
	t.Cleanup(b.closeTxnCoordinator)
	b.controller.Subscribe(b.applyMetadata)
	return b
}

// mustCreateTopic creates a topic through the controller.
func mustCreateTopic(t testing.TB, b *Broker, name string, partitions int32, configs map[string]string) *controller.Topic {
	t.Helper()
	topic, err := b.controller.CreateTopic(controller.CreateTopicRequest{
		Name: name, NumPartitions: partitions, ReplicationFactor: 1, Configs: configs,
	}, false)
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	return topic
}

// adminTestBatch builds a record batch of n records (magic 2, no producer
// id, empty keys and small values) with a valid CRC.
func adminTestBatch(n int) []byte {
	var records []byte
	for i := 0; i < n; i++ {
		var body []byte
		body = append(body, 0)                     // attributes
		body = binary.AppendVarint(body, 0)        // timestamp delta
		body = binary.AppendVarint(body, int64(i)) // offset delta
		body = binary.AppendVarint(body, -1)       // null key
		body = binary.AppendVarint(body, 1)        // value length
		body = append(body, 'v')                   // value
		body = binary.AppendVarint(body, 0)        // no headers
		records = binary.AppendVarint(records, int64(len(body)))
		records = append(records, body...)
	}
	now := time.Now().UnixMilli()
	b := make([]byte, 0, 61+len(records))
	b = binary.BigEndian.AppendUint64(b, 0)                       // base offset
	b = binary.BigEndian.AppendUint32(b, uint32(49+len(records))) // batch length
	b = binary.BigEndian.AppendUint32(b, 0)                       // partition leader epoch
	b = append(b, 2)                                              // magic
	b = binary.BigEndian.AppendUint32(b, 0)                       // crc, set below
	b = binary.BigEndian.AppendUint16(b, 0)                       // attributes
	b = binary.BigEndian.AppendUint32(b, uint32(n-1))             // last offset delta
	b = binary.BigEndian.AppendUint64(b, uint64(now))             // base timestamp
	b = binary.BigEndian.AppendUint64(b, uint64(now))             // max timestamp
	b = binary.BigEndian.AppendUint64(b, ^uint64(0))              // producer id -1
	b = binary.BigEndian.AppendUint16(b, ^uint16(0))              // producer epoch -1
	b = binary.BigEndian.AppendUint32(b, ^uint32(0))              // base sequence -1
	b = binary.BigEndian.AppendUint32(b, uint32(n))               // record count
	b = append(b, records...)
	recordbatch.SetCRC(b)
	return b
}

// mustAppend appends n records to a partition this broker leads.
func mustAppend(t *testing.T, b *Broker, topic string, partition int32, n int) {
	t.Helper()
	p, err := b.localPartition(topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	batch := adminTestBatch(n)
	h, err := recordbatch.Validate(batch)
	if err != nil {
		t.Fatalf("test batch: %v", err)
	}
	res, err := p.AppendAsLeader([][]byte{batch}, []recordbatch.Header{h}, -1, time.Now())
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.WaitForHighWatermark(ctx, res); err != nil {
		t.Fatalf("wait for high watermark: %v", err)
	}
}

func TestLocalPartition(t *testing.T) {
	b := newAdminTestBroker(t)
	mustCreateTopic(t, b, "t", 2, nil)

	for _, p := range []int32{0, 1} {
		got, err := b.localPartition("t", p)
		if err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
		if tp := got.TopicPartition(); tp.Topic != "t" || tp.Partition != p {
			t.Fatalf("got partition %v, want t-%d", tp, p)
		}
	}
	for _, c := range []struct {
		topic     string
		partition int32
	}{{"missing", 0}, {"t", 2}, {"t", -1}} {
		_, err := b.localPartition(c.topic, c.partition)
		if !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Errorf("%s-%d: got %v, want UNKNOWN_TOPIC_OR_PARTITION", c.topic, c.partition, err)
		}
	}

	// In the metadata but not hosted here: not the leader.
	if err := b.replicas.Remove(replica.TopicPartition{Topic: "t", Partition: 1}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.localPartition("t", 1); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("unhosted partition: got %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
}
