package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterFullRestart: the whole cluster stops (SIGTERM to every
// broker, each exits 0), ZooKeeper restarts on its data dir, and every
// broker restarts on its own data dir and port. Topics (with their topic
// ids), per-topic configs set at creation and with AlterTopicConfigs, and
// every record are all there, and every broker reports the configs.
func TestClusterFullRestart(t *testing.T) {
	const partitions = 6
	c := startCluster(t, clusterOpts{brokers: 3, chroot: "/kbroker/restart"})
	c.createTopicVia(t, 2, "kept", partitions, nil)
	segBytes := "1048576"
	c.createTopicVia(t, 3, "kept-created-with-config", 3, map[string]*string{"segment.bytes": &segBytes})

	adm := adminAt(t, c.broker(1).Addr())
	ctx := testContext(t, 60*time.Second)
	alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("123456789")},
		{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("2000000")},
	}, "kept")
	if err == nil {
		for _, r := range alter {
			if r.Err != nil {
				err = fmt.Errorf("%s: %w (%s)", r.Name, r.Err, r.ErrMessage)
			}
		}
	}
	if err != nil {
		t.Fatalf("AlterTopicConfigs: %v", err)
	}
	wantConfigs := map[string]map[string]string{
		"kept":                     {"retention.ms": "123456789", "max.message.bytes": "2000000"},
		"kept-created-with-config": {"segment.bytes": segBytes},
	}
	c.waitAgreed(t, clusterSettle, func(v clusterView) error {
		if err := allLed("kept", partitions)(v); err != nil {
			return err
		}
		return allLed("kept-created-with-config", 3)(v)
	})
	c.checkTopicConfigs(t, wantConfigs)
	ids := c.topicIDs(t)
	produced := produceToPartitions(t, "kept", seq(partitions), 100, "kept", c.broker(1).Addr(), c.broker(2).Addr())
	produced2 := produceToPartitions(t, "kept-created-with-config", seq(3), 100, "kept2", c.broker(3).Addr())
	epoch := c.controllerEpoch()

	// Everything down: brokers first (a clean shutdown each), then
	// ZooKeeper; then everything up again on the same data.
	for _, b := range c.brokers {
		b.Stop()
	}
	c.zk.Restart()
	restarted := time.Now()
	for _, b := range c.brokers {
		b.Restart()
	}
	c.waitAgreed(t, clusterSettle, func(v clusterView) error {
		if len(v.brokers) != 3 {
			return fmt.Errorf("%d brokers listed, want 3", len(v.brokers))
		}
		if err := allLed("kept", partitions)(v); err != nil {
			return err
		}
		return allLed("kept-created-with-config", 3)(v)
	})
	t.Logf("cluster serves again %v after ZooKeeper came back", time.Since(restarted).Round(time.Millisecond))
	if got := c.controllerEpoch(); got <= epoch {
		t.Errorf("/controller_epoch is %d after the restart, want more than %d", got, epoch)
	}
	c.checkTopicConfigs(t, wantConfigs)
	if after := c.topicIDs(t); fmt.Sprint(after) != fmt.Sprint(ids) {
		t.Errorf("topic ids changed across the restart: %v, were %v", after, ids)
	}
	consumeAndCompare(t, c.broker(1).Addr(), "kept", produced)
	consumeAndCompare(t, c.broker(2).Addr(), "kept-created-with-config", produced2)
}

// checkTopicConfigs asks every broker itself (DescribeConfigs) for the
// topics' configs and compares the given ones, which must be dynamic
// topic configs.
func (c *testCluster) checkTopicConfigs(t *testing.T, want map[string]map[string]string) {
	t.Helper()
	for id := int32(1); id <= int32(len(c.brokers)); id++ {
		cl, err := c.probe(c.broker(id).Addr())
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrDescribeConfigsRequest()
		for topic := range want {
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
			req.Resources = append(req.Resources, r)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		kresp, err := cl.SeedBrokers()[0].Request(ctx, req)
		cancel()
		if err != nil {
			t.Fatalf("DescribeConfigs from broker %d: %v", id, err)
		}
		for _, r := range kresp.(*kmsg.DescribeConfigsResponse).Resources {
			if r.ErrorCode != 0 {
				t.Errorf("broker %d: DescribeConfigs %s: error %d", id, r.ResourceName, r.ErrorCode)
				continue
			}
			got := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
			for _, cfg := range r.Configs {
				got[cfg.Name] = cfg
			}
			for name, value := range want[r.ResourceName] {
				cfg, ok := got[name]
				switch {
				case !ok || cfg.Value == nil:
					t.Errorf("broker %d: topic %s has no %s", id, r.ResourceName, name)
				case *cfg.Value != value:
					t.Errorf("broker %d: topic %s has %s=%s, want %s", id, r.ResourceName, name, *cfg.Value, value)
				case cfg.Source != kmsg.ConfigSourceDynamicTopicConfig:
					t.Errorf("broker %d: topic %s %s has source %v, want DYNAMIC_TOPIC_CONFIG", id, r.ResourceName, name, cfg.Source)
				}
			}
		}
	}
}

// topicIDs returns every topic's id as broker 1's Metadata reports it.
func (c *testCluster) topicIDs(t *testing.T) map[string]string {
	t.Helper()
	m, err := c.metadataFrom(1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tp := range m.Topics {
		if tp.Topic != nil {
			out[*tp.Topic] = fmt.Sprintf("%x", tp.TopicID)
		}
	}
	return out
}
