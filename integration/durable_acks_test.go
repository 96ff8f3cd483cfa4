package integration

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Durable acknowledgements (kbroker.acks.fsync) as a topic config on a
// 3-broker cluster: acks=all records keep flowing through a leader's kill
// -9 and return, every acknowledged record is read back where it was
// acknowledged, and the topic reports the setting. (That the records were
// on stable storage when acknowledged is the power-loss test's to show.)
func TestDurableAcksCluster(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second})
	const topic = "durable-acks"
	on := "true"
	states := c.createTopic(topic, 3, map[string]*string{"kbroker.acks.fsync": &on})
	if got := c.describeConfigs(t, kmsg.ConfigResourceTypeTopic, topic)["kbroker.acks.fsync"]; got != "true" {
		t.Fatalf("topic %s: kbroker.acks.fsync = %q, want true", topic, got)
	}

	load := startKgoLoad(c.client(kgo.RequiredAcks(kgo.AllISRAcks())), topic, "durable", -1, 2*time.Millisecond)
	load.waitAcked(t, 300, 30*time.Second)
	victim := states[0].Leader
	c.broker(victim).Kill()
	load.waitAcked(t, 300, 60*time.Second)
	c.broker(victim).Restart()
	c.waitSettled(60*time.Second, topic, 3, 3)
	load.waitAcked(t, 300, 60*time.Second)
	load.stop(t)

	acked, failed := load.log.snapshot()
	read := c.readTopic(topic, 30*time.Second)
	checkReadBack(t, read, acked)
	t.Logf("%d records acknowledged (%d failed) through the kill -9 of leader %d; all read back", len(acked), len(failed), victim)
}

// The broker property makes every topic's writes durable by default, acks=1
// included; a topic can turn it off.
func TestDurableAcksBrokerDefault(t *testing.T) {
	b := StartBroker(t, "kbroker.acks.fsync=true")
	adm := b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	off := "false"
	for topic, cfg := range map[string]map[string]*string{"fsync-default": nil, "fsync-off": {"kbroker.acks.fsync": &off}} {
		if _, err := adm.CreateTopic(ctx, 2, 1, cfg, topic); err != nil {
			t.Fatal(err)
		}
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "fsync-default", "fsync-off")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"fsync-default": "true", "fsync-off": "false"}
	for _, r := range rc {
		for _, kv := range r.Configs {
			if kv.Key == "kbroker.acks.fsync" && (kv.Value == nil || *kv.Value != want[r.Name]) {
				t.Errorf("%s: kbroker.acks.fsync = %v (source %v), want %s", r.Name, kv.MaybeValue(), kv.Source, want[r.Name])
			}
		}
	}
	for _, all := range []bool{false, true} {
		opts := []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}
		if !all {
			opts = []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}
		}
		cl := b.Client(t, opts...)
		for _, topic := range []string{"fsync-default", "fsync-off"} {
			var recs []*kgo.Record
			for i := range 500 {
				recs = append(recs, &kgo.Record{Topic: topic, Value: []byte{byte(i)}})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("acks=all %v to %s: %v", all, topic, err)
			}
		}
		cl.Close()
	}
	offs, err := adm.ListEndOffsets(ctx, "fsync-default", "fsync-off")
	if err != nil {
		t.Fatal(err)
	}
	ends := map[string]int64{}
	offs.Each(func(o kadm.ListedOffset) { ends[o.Topic] += o.Offset })
	for topic, n := range ends {
		if n != 1000 {
			t.Errorf("%s holds %d records, want the 1000 acknowledged", topic, n)
		}
	}
}
