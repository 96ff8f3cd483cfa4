package integration

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Dynamic broker configs and replication throttles on a real ZooKeeper
// cluster: a broker's own and the cluster-wide dynamic configs are stored
// as Kafka stores them and described with Kafka's sources; a reassignment
// under leader and follower throttles copies no faster than the bound,
// in-sync replicas of throttled topics are never held back, and the copy
// finishes once the throttle is removed.

// createTopicOn creates topic with an explicit assignment (partition i on
// replicas[i]) and configs, and waits until every partition has its full
// ISR.
func (c *testCluster) createTopicOn(t *testing.T, topic string, replicas [][]int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, rs := range replicas {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), rs
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t, 30*time.Second), c.client())
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("creating %s on %v: %v", topic, replicas, err)
	}
	c.waitSettled(30*time.Second, topic, int32(len(replicas)), len(replicas[0]))
}

// logBytes sums the .log files of broker id's replica of topic-p (0 when
// it has none yet).
func (c *testCluster) logBytes(id int32, topic string, p int32) int64 {
	entries, _ := os.ReadDir(c.broker(id).PartitionDir(topic, p))
	var n int64
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			if fi, err := os.Stat(filepath.Join(c.broker(id).PartitionDir(topic, p), e.Name())); err == nil {
				n += fi.Size()
			}
		}
	}
	return n
}

func TestDynamicBrokerConfigsAndReplicationThrottle(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second})
	adm := c.admin()
	ctrl := c.controller()
	others := otherThan(3, ctrl)
	src, dst := others[0], others[1] // neither is the controller: changes are forwarded
	const leaderRate, followerRate = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
	const bound = 512 << 10 // bytes per second

	// A broker's own dynamic config, sent to that broker (not the
	// controller): stored in /config/brokers/<id> as Kafka writes it.
	set := func(name, value string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: kadm.StringPtr(value)}
	}
	for _, id := range []int32{src, dst} {
		resp, err := adm.AlterBrokerConfigs(testContext(t, 30*time.Second), []kadm.AlterConfig{set(leaderRate, strconv.Itoa(bound)), set(followerRate, strconv.Itoa(bound))}, id)
		if err == nil {
			err = resp[0].Err
		}
		if err != nil {
			t.Fatalf("altering broker %d's dynamic configs: %v", id, err)
		}
		data, _, err := c.zkGet("/config/brokers/" + strconv.Itoa(int(id)))
		if err != nil {
			t.Fatal(err)
		}
		var znode struct {
			Version int               `json:"version"`
			Config  map[string]string `json:"config"`
		}
		if err := json.Unmarshal(data, &znode); err != nil || znode.Version != 1 || znode.Config[leaderRate] != strconv.Itoa(bound) {
			t.Fatalf("/config/brokers/%d = %s (%v)", id, data, err)
		}
	}
	// A cluster-wide default, and a name kbroker cannot change at run time.
	resp, err := adm.AlterBrokerConfigs(testContext(t, 30*time.Second), []kadm.AlterConfig{set(leaderRate, "1000000000")})
	if err == nil {
		err = resp[0].Err
	}
	if err != nil {
		t.Fatalf("cluster-wide default: %v", err)
	}
	resp, err = adm.AlterBrokerConfigs(testContext(t, 30*time.Second), []kadm.AlterConfig{set("num.io.threads", "16")}, src)
	if err == nil && len(resp) == 1 {
		err = resp[0].Err
	}
	if err == nil || !strings.Contains(err.Error(), kerr.InvalidRequest.Message) && !strings.Contains(err.Error(), "INVALID_REQUEST") {
		t.Fatalf("num.io.threads changed dynamically: %v", err)
	}
	// Every broker describes what it applies, with Kafka's sources.
	checkFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		rcs, err := c.broker(src).Admin(t).DescribeBrokerConfigs(testContext(t, 10*time.Second), src)
		if err != nil {
			return err
		}
		for _, rc := range rcs {
			for _, cfg := range rc.Configs {
				if cfg.Key == leaderRate && (cfg.Value == nil || *cfg.Value != strconv.Itoa(bound) || cfg.Source != kmsg.ConfigSourceDynamicBrokerConfig) {
					return fmt.Errorf("broker %d describes %s = %v (%v)", src, leaderRate, cfg.MaybeValue(), cfg.Source)
				}
			}
		}
		return nil
	})

	// A topic's configs changed through a broker that is not the
	// controller, as Kafka's ZooKeeper-mode brokers take them anywhere.
	c.createTopicOn(t, "any-broker", [][]int32{{ctrl}}, map[string]string{"min.insync.replicas": "1"})
	ireq := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ir := kmsg.NewIncrementalAlterConfigsRequestResource()
	ir.ResourceType, ir.ResourceName = kmsg.ConfigResourceTypeTopic, "any-broker"
	op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	op.Name, op.Op, op.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("3600000")
	ir.Configs = append(ir.Configs, op)
	ireq.Resources = append(ireq.Resources, ir)
	iresp, err := c.request(src, 10*time.Second, ireq)
	if err != nil {
		t.Fatal(err)
	}
	if code := iresp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; code != 0 {
		t.Fatalf("altering a topic's configs through broker %d (not the controller): %v", src, kerr.ErrorForCode(code))
	}
	if got := c.describeConfigs(t, kmsg.ConfigResourceTypeTopic, "any-broker")["retention.ms"]; got != "3600000" {
		t.Fatalf("retention.ms after altering it through broker %d: %q", src, got)
	}

	// A 16 MiB partition on src moves to dst under both throttles.
	const topic = "throttled"
	c.createTopicOn(t, topic, [][]int32{{src}}, map[string]string{
		"min.insync.replicas":                     "1",
		"leader.replication.throttled.replicas":   fmt.Sprintf("0:%d", src),
		"follower.replication.throttled.replicas": fmt.Sprintf("0:%d", dst),
	})
	cl := c.client(kgo.ProducerBatchMaxBytes(1<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	value := make([]byte, 64<<10)
	rand.Read(value) // incompressible: the log holds all 16 MiB
	acked := map[string]ackPos{}
	for i := range 256 {
		v := append([]byte(fmt.Sprintf("v%04d-", i)), value...)
		r, err := cl.ProduceSync(testContext(t, 30*time.Second), &kgo.Record{Topic: topic, Value: v}).First()
		if err != nil {
			t.Fatal(err)
		}
		acked[string(v)] = ackPos{r.Partition, r.Offset}
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, []int32{dst})
	c.alterAssignments(t, req)
	// Kafka's quota allows a burst of 10 windows' worth (5 MiB) before
	// it holds the copy back; then the copy runs at the bound. Measured
	// over 3 s after the burst: at most the bound's 1.5 MiB, plus one
	// replica fetch (1 MiB) that started before the rate crossed it.
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if n := c.logBytes(dst, topic, 0); n < 5<<20 {
			return fmt.Errorf("the new replica holds %d bytes, waiting for the 5 MiB burst", n)
		}
		return nil
	})
	start, from := time.Now(), c.logBytes(dst, topic, 0)
	var copied int64
	checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		copied = c.logBytes(dst, topic, 0) - from
		if elapsed := time.Since(start); elapsed < 3*time.Second {
			return fmt.Errorf("measuring: %d bytes in %v", copied, elapsed)
		}
		return nil
	})
	if limit := int64(3*bound + 1<<20); copied > limit {
		t.Fatalf("the throttled copy moved %d bytes in 3 s; the bound allows %d", copied, limit)
	}
	list, err := c.ongoingReassignments(topic, 1)
	if err != nil || len(list) != 1 {
		t.Fatalf("the throttled reassignment is no longer ongoing after 3 s (%+v, %v): nothing held it back", list, err)
	}
	t.Logf("under a %d B/s throttle the copy moved %d bytes in 3 s after the burst", bound, copied)

	// In-sync replicas of a throttled topic are never held back: acks=all
	// to an RF 2 topic led by src, listed as throttled everywhere, goes on
	// while src's leader rate is over its bound.
	c.createTopicOn(t, "in-sync", [][]int32{{src, ctrl}}, map[string]string{
		"min.insync.replicas":                     "2",
		"leader.replication.throttled.replicas":   "*",
		"follower.replication.throttled.replicas": "*",
	})
	acl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 50 {
		if err := acl.ProduceSync(testContext(t, 10*time.Second), &kgo.Record{Topic: "in-sync", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("acks=all to an in-sync throttled partition: %v", err)
		}
	}

	// Removing the throttle lets the copy finish.
	del := func(name string) kadm.AlterConfig { return kadm.AlterConfig{Op: kadm.DeleteConfig, Name: name} }
	for _, id := range []int32{src, dst} {
		if _, err := adm.AlterBrokerConfigs(testContext(t, 30*time.Second), []kadm.AlterConfig{del(leaderRate), del(followerRate)}, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := adm.AlterBrokerConfigs(testContext(t, 30*time.Second), []kadm.AlterConfig{del(leaderRate)}); err != nil {
		t.Fatal(err)
	}
	c.waitReassigned(t, topic, map[int32][]int32{0: {dst}})
	c.waitSettled(30*time.Second, topic, 1, 1)
	read := c.readTopic(topic, 60*time.Second)
	checkReadBack(t, read, acked)
}
