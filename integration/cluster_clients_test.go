package integration

import (
	"fmt"
	"hash/crc32"
	"os/exec"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterClients: in a 3-broker cluster a 12-partition topic with
// replication factor 1 gets 4 leaders on each broker (Kafka's rack-unaware
// assignment), and franz-go, sarama, kafka-go and kcat each produce 2,000
// records to a topic of their own and read them back, per partition in
// order, through ONE bootstrap broker (a different one per client), so
// every client follows the metadata to the other brokers. franz-go's topic
// is auto-created through a broker that is not the controller (forwarded
// creation).
func TestClusterClients(t *testing.T) {
	const (
		partitions = 12
		records    = 2000
	)
	c := startCluster(t, clusterOpts{brokers: 3, extra: []string{"num.partitions=12", "default.replication.factor=1"}})
	ctrl := c.waitAgreed(t, clusterSettle, nil).controller
	first := ctrl%3 + 1 // a broker that is not the controller

	type client struct {
		name    string
		codec   codec
		produce func(t *testing.T, b *Broker, topic string, cd codec, rs []rec) []rec
		consume func(t *testing.T, b *Broker, topic string, ends map[int32]int64) []rec
	}
	clients := []client{
		{"franz-go", codec{"zstd", 4}, produceFranzAutoCreate, consumeFranz},
		{"sarama", codec{"snappy", 2}, produceSarama, consumeSarama},
		{"kafka-go", codec{"lz4", 3}, produceKafkaGo, consumeKafkaGo},
		{"kcat", codec{"gzip", 1}, produceKcat, consumeKcat},
	}
	for i, cl := range clients {
		via := (first-1+int32(i))%3 + 1
		t.Run(cl.name, func(t *testing.T) {
			if cl.name == "kcat" {
				if _, err := exec.LookPath("kcat"); err != nil {
					t.Skip("kcat not installed (scripts/test.sh installs it)")
				}
			}
			start := time.Now()
			b := c.broker(via)
			topic := "cluster-" + cl.name
			if cl.name != "franz-go" {
				c.createTopicVia(t, via, topic, partitions, nil)
			}
			rs := makeRecords(topic, records)
			if cl.name == "kcat" {
				rs = kcatRecords(rs, cl.codec)
				for i := range rs {
					rs[i].Partition = int32(crc32.ChecksumIEEE(rs[i].Key) % partitions)
				}
			}
			produced := cl.produce(t, b, topic, cl.codec, rs)
			if t.Failed() {
				return
			}
			v := c.waitAgreed(t, clusterSettle, allLed(topic, partitions))
			counts := v.leadCounts(topic)
			for id := int32(1); id <= 3; id++ {
				if counts[id] != partitions/3 {
					t.Errorf("broker %d leads %d partitions of %s, want %d (leaders %v)", id, counts[id], topic, partitions/3, v.leaders[topic])
				}
			}
			// Every broker must hold some of the records.
			perLeader := map[int32]int{}
			for _, r := range produced {
				perLeader[v.leaders[topic][r.Partition]]++
			}
			for id := int32(1); id <= 3; id++ {
				if perLeader[id] == 0 {
					t.Errorf("no record went to a partition led by broker %d (per leader: %v)", id, perLeader)
				}
			}
			ends := checkEndOffsets(t, b.Admin(t), topic, produced, partitions)
			consumed := cl.consume(t, b, topic, ends)
			compareRecords(t, produced, consumed, compareOpts{checkProducedOffsets: cl.name != "kcat"})
			t.Logf("%s through broker %d (controller %d): %d records over %d partitions, per leader %v, in %v",
				cl.name, via, ctrl, len(produced), partitions, perLeader, time.Since(start).Round(time.Millisecond))
		})
	}
}

// produceFranzAutoCreate produces with franz-go, letting the broker create
// the topic (num.partitions) on the first Metadata request.
func produceFranzAutoCreate(t *testing.T, b *Broker, topic string, cd codec, rs []rec) []rec {
	cl := b.Client(t, kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(franzCodec(cd)),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	out := produceKgo(t, cl, topic, rs, roundTripTimeout)
	for _, r := range out {
		if r.Partition < 0 {
			t.Fatalf("record %s was not acknowledged", fmt.Sprint(r.Key))
		}
	}
	return out
}
