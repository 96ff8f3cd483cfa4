package integration

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestOperatorMetrics scrapes the metrics operators expect from Kafka on a
// 3-broker cluster after known traffic: records and bytes in and out per
// topic (exact, against the logs' sizes), request time histograms per API
// (populated, counts equal to the request counters), partitions and
// leaders per broker (against Metadata), under-min-ISR partitions, log size
// per partition, consumer group lag (exact, against committed offsets),
// the controller's view queue and the ZooKeeper client's latency and
// session state.
func TestOperatorMetrics(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second})
	const topic, starved = "ops-metrics", "ops-under-min-isr"
	c.createTopic(topic, 2, nil)
	// min.insync.replicas above the replication factor: under min ISR
	// from the start, whoever leads it.
	c.createTopic(starved, 1, map[string]*string{"min.insync.replicas": kadm.StringPtr("4")})

	const perPartition = 50
	produced := produceToPartitions(t, topic, []int32{0, 1}, perPartition, "ops", c.addrs()...)
	consumeAndCompare(t, c.broker(1).Addr(), topic, produced)

	// Commit known offsets for a group: lag = high watermark - committed.
	committed := map[int32]int64{0: 30, 1: 40}
	adm := c.admin()
	ctx := testContext(t, time.Minute)
	offs := kadm.Offsets{}
	for p, o := range committed {
		offs.AddOffset(topic, p, o, -1)
	}
	resp, err := adm.CommitOffsets(ctx, "ops-group", offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit offsets: %v", err)
	}

	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	replicasOn := map[int32]int{}
	leadersOn := map[int32]int{}
	totalPartitions := 0
	for _, td := range md.Topics {
		for _, p := range td.Partitions {
			totalPartitions++
			leadersOn[p.Leader]++
			for _, r := range p.Replicas {
				replicasOn[r]++
			}
		}
	}

	sum := func(name string, kv ...string) float64 {
		var s float64
		for id := int32(1); id <= 3; id++ {
			m, err := c.scrape(id)
			if err != nil {
				t.Fatal(err)
			}
			s += m[metricKey(name, kv...)]
		}
		return s
	}
	// The leaders' log sizes are exactly the bytes appended from
	// producers, and what a consumer reading each record once was sent.
	var logBytes float64
	for p := int32(0); p < 2; p++ {
		st := c.mustPartState(topic, p)
		logBytes += c.mustMetric(st.Leader, "kbroker_partition_log_size_bytes", "partition", strconv.Itoa(int(p)), "topic", topic)
	}
	if logBytes <= 0 {
		t.Fatalf("log size of %s = %v", topic, logBytes)
	}
	if got := sum("kbroker_topic_messages_in_total", "topic", topic); got != 2*perPartition {
		t.Errorf("messages in for %s = %v, want %d", topic, got, 2*perPartition)
	}
	if got := sum("kbroker_topic_bytes_in_total", "topic", topic); got != logBytes {
		t.Errorf("bytes in for %s = %v, want the leaders' log sizes %v", topic, got, logBytes)
	}
	if got := sum("kbroker_topic_bytes_out_total", "topic", topic); got != logBytes {
		t.Errorf("bytes out for %s = %v, want %v (every record consumed once)", topic, got, logBytes)
	}
	if got := sum("kbroker_replication_bytes_out_total"); got < 2*logBytes {
		t.Errorf("replication bytes out = %v, want at least two followers' copies of %v", got, logBytes)
	}

	checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		for id := int32(1); id <= 3; id++ {
			m, err := c.scrape(id)
			if err != nil {
				return err
			}
			// Request times: every request counted is timed, in every
			// stage; purgatory (remote) time shows on acks=all produces
			// and long-polling fetches.
			for _, req := range []string{"Produce", "FetchConsumer", "FetchFollower", "Metadata"} {
				n := m[metricKey("kbroker_requests_total", "listener", "PLAINTEXT", "request", req)]
				for _, h := range []string{"kbroker_request_total_time_ms", "kbroker_request_queue_time_ms", "kbroker_request_local_time_ms", "kbroker_request_remote_time_ms", "kbroker_response_queue_time_ms", "kbroker_response_send_time_ms"} {
					got := m[metricKey(h+"_count", "request", req)]
					// The scrape is not atomic: a request counted may be
					// still in flight (a follower's long poll).
					if got > n || got < n-3 {
						return fmt.Errorf("broker %d: %s_count{%s} = %v, %v requests counted", id, h, req, got, n)
					}
				}
				if req == "Metadata" || n == 0 {
					continue
				}
				if inf, le1000 := m[metricKey("kbroker_request_total_time_ms_bucket", "request", req, "le", "+Inf")], m[metricKey("kbroker_request_total_time_ms_bucket", "request", req, "le", "1000")]; inf == 0 || le1000 == 0 {
					return fmt.Errorf("broker %d: %s total time histogram empty (+Inf %v, le=1000 %v)", id, req, inf, le1000)
				}
			}
			if got, want := m["kbroker_partitions"], float64(replicasOn[id]); got != want {
				return fmt.Errorf("broker %d: kbroker_partitions = %v, Metadata gives it %v replicas", id, got, want)
			}
			if got, want := m["kbroker_leader_partitions"], float64(leadersOn[id]); got != want {
				return fmt.Errorf("broker %d: kbroker_leader_partitions = %v, Metadata says it leads %v", id, got, want)
			}
			if m["kbroker_zookeeper_request_latency_ms_count"] == 0 || m[metricKey("kbroker_zookeeper_request_latency_ms_bucket", "le", "+Inf")] == 0 {
				return fmt.Errorf("broker %d: ZooKeeper latency histogram empty", id)
			}
			if m[metricKey("kbroker_zookeeper_session_state", "state", "CONNECTED")] != 1 || m["kbroker_zookeeper_connected"] != 1 {
				return fmt.Errorf("broker %d: ZooKeeper session not CONNECTED", id)
			}
		}
		return nil
	})
	if got := sum("kbroker_request_remote_time_ms_sum", "request", "Produce"); got <= 0 {
		t.Errorf("acks=all produces spent %v ms in purgatory, want > 0", got)
	}
	if got := sum("kbroker_request_remote_time_ms_sum", "request", "FetchFollower"); got <= 0 {
		t.Errorf("follower fetches long-polled %v ms, want > 0", got)
	}
	var leaders float64
	for id := int32(1); id <= 3; id++ {
		leaders += c.mustMetric(id, "kbroker_leader_partitions")
	}
	if leaders != float64(totalPartitions) {
		t.Errorf("leaders summed over brokers = %v, Metadata has %d partitions", leaders, totalPartitions)
	}
	if got := sum("kbroker_under_min_isr_partitions"); got != 1 {
		t.Errorf("under-min-ISR partitions = %v, want 1 (%s, min.insync.replicas 4 > RF 3)", got, starved)
	}

	// Lag, on the group's coordinator only.
	coord := adm.FindGroupCoordinators(ctx, "ops-group")["ops-group"]
	if coord.Err != nil {
		t.Fatal(coord.Err)
	}
	cid := coord.NodeID
	var lagSum int64
	for p, o := range committed {
		want := perPartition - o
		lagSum += want
		ps := strconv.Itoa(int(p))
		if got := c.mustMetric(cid, "kbroker_consumer_group_lag", "group", "ops-group", "partition", ps, "topic", topic); got != float64(want) {
			t.Errorf("lag of ops-group on %s-%d = %v, want %d", topic, p, got, want)
		}
		if got := c.mustMetric(cid, "kbroker_consumer_group_committed_offset", "group", "ops-group", "partition", ps, "topic", topic); got != float64(o) {
			t.Errorf("committed offset of ops-group on %s-%d = %v, want %d", topic, p, got, o)
		}
	}
	if got := c.mustMetric(cid, "kbroker_consumer_group_lag_sum", "group", "ops-group"); got != float64(lagSum) {
		t.Errorf("lag sum of ops-group = %v, want %d", got, lagSum)
	}
	for id := int32(1); id <= 3; id++ {
		if id == cid {
			continue
		}
		if _, err := c.metric(id, "kbroker_consumer_group_lag_sum", "group", "ops-group"); err == nil {
			t.Errorf("broker %d, not the coordinator, reports ops-group's lag", id)
		}
	}

	// The controller's per-broker view queue: every other broker listed
	// (the controller applies its views itself), all delivered once the
	// cluster is quiet.
	ctrl := c.controller()
	checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		for _, id := range otherThan(3, ctrl) {
			v, err := c.metric(ctrl, "kbroker_controller_pending_views", "broker", strconv.Itoa(int(id)))
			if err != nil {
				return err
			}
			if v != 0 {
				return fmt.Errorf("controller %d: %v views pending for broker %d", ctrl, v, id)
			}
		}
		return nil
	})
}
