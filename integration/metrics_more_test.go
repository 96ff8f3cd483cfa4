package integration

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOperatorMetricsReplicationRejectsExpiries scrapes the metrics
// docs/metrics.md lists beside TestOperatorMetrics' against known events
// on a 3-broker cluster with one RF 3 topic and nothing else replicated:
//   - kbroker_replication_bytes_in_total: each follower fetched exactly
//     the leader's log, and the followers together exactly what the
//     leader's kbroker_replication_bytes_out_total sent; the leader 0;
//   - kbroker_topic_bytes_rejected_total: a batch over max.message.bytes
//     refused with MESSAGE_TOO_LARGE counts its produce data's bytes, on
//     the leader only; an accepted one does not;
//   - kbroker_zookeeper_expires_total: 1 on a broker frozen (SIGSTOP) past
//     its session and resumed, 0 on the others.
func TestOperatorMetricsReplicationRejectsExpiries(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second})
	const topic = "metrics-more"
	maxBytes := "4000"
	c.createTopic(topic, 1, map[string]*string{"max.message.bytes": &maxBytes})
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testContext(t, time.Minute)
	const records = 300
	for i := range records {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(strings.Repeat("x", 100) + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.mustPartState(topic, 0).Leader
	followers := otherThan(3, leader)
	logSize := c.mustMetric(leader, "kbroker_partition_log_size_bytes", "partition", "0", "topic", topic)
	if logSize <= 0 {
		t.Fatalf("leader %d log size %v", leader, logSize)
	}
	// Every follower caught up (fetches after acks=all may still be in
	// flight for the high watermark, not for records).
	checkFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		for _, f := range followers {
			in, err := c.metric(f, "kbroker_replication_bytes_in_total")
			if err != nil {
				return err
			}
			if in != logSize {
				return fmt.Errorf("follower %d fetched %v bytes, the leader's log holds %v", f, in, logSize)
			}
		}
		return nil
	})
	out := c.mustMetric(leader, "kbroker_replication_bytes_out_total")
	if out != 2*logSize {
		t.Errorf("leader %d sent followers %v bytes, want exactly 2 x %v", leader, out, logSize)
	}
	if in := c.mustMetric(leader, "kbroker_replication_bytes_in_total"); in != 0 {
		t.Errorf("leader %d (leading the only partition) fetched %v bytes", leader, in)
	}
	t.Logf("log %v bytes; followers fetched %v each; leader sent %v", logSize, logSize, out)

	// A batch over max.message.bytes, then one under it, to the leader.
	big, small := rawBatch(1, 5000), rawBatch(1, 100)
	for _, batch := range [][]byte{big, small} {
		resp, err := c.request(leader, 10*time.Second, produceRequest(9, -1, topic, batch))
		if err != nil {
			t.Fatal(err)
		}
		code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
		want := int16(0)
		if len(batch) == len(big) {
			want = kerr.MessageTooLarge.Code
		}
		if code != want {
			t.Fatalf("produce of a %d-byte batch: error %d, want %d", len(batch), code, want)
		}
	}
	if got := c.mustMetric(leader, "kbroker_topic_bytes_rejected_total", "topic", topic); got != float64(len(big)) {
		t.Errorf("bytes rejected on the leader = %v, want the refused batch's %d", got, len(big))
	}
	for _, f := range followers {
		if m, err := c.scrape(f); err != nil {
			t.Fatal(err)
		} else if v, ok := m[metricKey("kbroker_topic_bytes_rejected_total", "topic", topic)]; ok && v != 0 {
			t.Errorf("follower %d counts %v bytes rejected", f, v)
		}
	}

	// Freeze a follower past its session; it finds the session expired
	// when it resumes.
	victim := followers[0]
	for id := int32(1); id <= 3; id++ {
		if v := c.mustMetric(id, "kbroker_zookeeper_expires_total"); v != 0 {
			t.Fatalf("broker %d counts %v expiries before any", id, v)
		}
	}
	b := c.broker(victim)
	b.Signal(syscall.SIGSTOP)
	resumed := false
	defer func() {
		if !resumed {
			b.Signal(syscall.SIGCONT)
		}
	}()
	idPath := "/brokers/ids/" + strconv.Itoa(int(victim))
	checkFor(t, c.opts.session+clusterSessionSlack+5*time.Second, 20*time.Millisecond, func() error {
		if ok, err := c.zkExists(idPath); err != nil || ok {
			return fmt.Errorf("%s still exists (%v)", idPath, err)
		}
		return nil
	})
	b.Signal(syscall.SIGCONT)
	resumed = true
	checkFor(t, c.opts.session+clusterSessionSlack+10*time.Second, 20*time.Millisecond, func() error {
		if ok, err := c.zkExists(idPath); err != nil || !ok {
			return fmt.Errorf("%s not back (%v)", idPath, err)
		}
		v, err := c.metric(victim, "kbroker_zookeeper_expires_total")
		if err != nil {
			return err
		}
		if v != 1 {
			return fmt.Errorf("broker %d counts %v expiries, want 1", victim, v)
		}
		return nil
	})
	for _, id := range otherThan(3, victim) {
		if v := c.mustMetric(id, "kbroker_zookeeper_expires_total"); v != 0 {
			t.Errorf("broker %d (never frozen) counts %v expiries", id, v)
		}
	}
}
