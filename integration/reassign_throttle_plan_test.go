package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kreassign --execute --throttle sets Kafka's replication throttles for
// the moves (throttled replicas on the topic, rates on the brokers the
// moves touch) through the dynamic configs, and --verify removes them once
// the reassignment is done; the data moves intact.
func TestReassignPlanThrottle(t *testing.T) {
	bin := buildKreassign(t)
	c := startCluster(t, clusterOpts{brokers: 3, replicated: true, lag: 10 * time.Second})
	const topic = "plan-throttled"
	c.createTopicOn(t, topic, [][]int32{{1, 2}}, map[string]string{"min.insync.replicas": "1"})
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	acked := map[string]ackPos{}
	for i := range 100 {
		v := fmt.Sprintf("thr-%03d", i)
		r, err := cl.ProduceSync(testContext(t, 30*time.Second), &kgo.Record{Topic: topic, Value: []byte(v)}).First()
		if err != nil {
			t.Fatal(err)
		}
		acked[v] = ackPos{r.Partition, r.Offset}
	}
	plan := filepath.Join(t.TempDir(), "move.json")
	if err := os.WriteFile(plan, []byte(`{"version":1,"partitions":[{"topic":"`+topic+`","partition":0,"replicas":[2,3]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := c.runKreassign(t, bin, time.Minute, 0, "--execute", "--reassignment-json-file", plan, "--throttle", "1048576")
	if !strings.Contains(out, "The inter-broker throttle limit was set to 1048576 B/s") {
		t.Errorf("no throttle line:\n%s", out)
	}
	// Set before the reassignment started: on the topic, the current
	// replicas as leaders and the added one as follower; on brokers 1-3
	// (every broker the move touches), both rates.
	topicConfigs := c.describeConfigs(t, kmsg.ConfigResourceTypeTopic, topic)
	if got := topicConfigs["leader.replication.throttled.replicas"]; got != "0:1,0:2" {
		t.Errorf("leader.replication.throttled.replicas = %q, want 0:1,0:2", got)
	}
	if got := topicConfigs["follower.replication.throttled.replicas"]; got != "0:3" {
		t.Errorf("follower.replication.throttled.replicas = %q, want 0:3", got)
	}
	for id := int32(1); id <= 3; id++ {
		cfg := c.describeConfigs(t, kmsg.ConfigResourceTypeBroker, fmt.Sprint(id))
		if cfg["leader.replication.throttled.rate"] != "1048576" || cfg["follower.replication.throttled.rate"] != "1048576" {
			t.Errorf("broker %d throttle rates %q / %q, want 1048576", id, cfg["leader.replication.throttled.rate"], cfg["follower.replication.throttled.rate"])
		}
	}
	out = c.runKreassign(t, bin, 2*time.Minute, 0, "--verify", "--reassignment-json-file", plan, "--wait", "--timeout", "90s")
	if !strings.Contains(out, "Clearing broker-level throttles on brokers 1,2,3") || !strings.Contains(out, "Clearing topic-level throttles on topic(s) "+topic) {
		t.Errorf("--verify did not clear the throttles:\n%s", out)
	}
	topicConfigs = c.describeConfigs(t, kmsg.ConfigResourceTypeTopic, topic)
	if v, ok := topicConfigs["leader.replication.throttled.replicas"]; ok && v != "" {
		t.Errorf("leader.replication.throttled.replicas still %q", v)
	}
	for id := int32(1); id <= 3; id++ {
		cfg := c.describeConfigs(t, kmsg.ConfigResourceTypeBroker, fmt.Sprint(id))
		if v := cfg["leader.replication.throttled.rate"]; v != "9223372036854775807" {
			t.Errorf("broker %d leader.replication.throttled.rate still %q", id, v)
		}
	}
	c.waitSettled(30*time.Second, topic, 1, 2)
	checkReadBack(t, c.readTopic(topic, 30*time.Second), acked)
}

// describeConfigs is what the broker the resource names (any broker for
// a topic) describes: config name to value.
func (c *testCluster) describeConfigs(t *testing.T, rtype kmsg.ConfigResourceType, name string) map[string]string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = rtype, name
	req.Resources = append(req.Resources, rr)
	via := c.running()[0]
	if rtype == kmsg.ConfigResourceTypeBroker {
		fmt.Sscan(name, &via)
	}
	kresp, err := c.request(via, 10*time.Second, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describing %v %s: %+v", rtype, name, resp.Resources)
	}
	out := map[string]string{}
	for _, cfg := range resp.Resources[0].Configs {
		if cfg.Value != nil {
			out[cfg.Name] = *cfg.Value
		}
	}
	return out
}
