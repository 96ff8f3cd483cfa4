package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Admin APIs through kadm against a real broker: topic configs (describe,
// AlterConfigs, IncrementalAlterConfigs), CreatePartitions, DeleteRecords,
// DeleteTopics, DescribeCluster and OffsetForLeaderEpoch, each read back
// through another API.

// adminConfig returns a topic config's value and source from
// DescribeConfigs.
func adminConfig(t *testing.T, ctx context.Context, adm *kadm.Client, topic, name string) (string, kmsg.ConfigSource) {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("describe configs of %s: %v", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs of %s: %v / %v %s", topic, err, rc.Err, rc.ErrMessage)
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			if c.Value == nil {
				return "<null>", c.Source
			}
			return *c.Value, c.Source
		}
	}
	t.Fatalf("config %s of %s not described", name, topic)
	return "", 0
}

func TestAdminTopicConfigs(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin(t)
	ctx := testContext(t, 60*time.Second)
	const topic = "admin-configs"

	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")}, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if v, src := adminConfig(t, ctx, adm, topic, "retention.ms"); v != "3600000" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms after create: %s (%v)", v, src)
	}
	if v, src := adminConfig(t, ctx, adm, topic, "segment.bytes"); v != "1073741824" || src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.bytes default: %s (%v)", v, src)
	}

	// IncrementalAlterConfigs: set, append to a list, and a validate-only
	// change that must not stick.
	alter := func(validate bool, cs ...kadm.AlterConfig) error {
		t.Helper()
		f := adm.AlterTopicConfigs
		if validate {
			f = adm.ValidateAlterTopicConfigs
		}
		rs, err := f(ctx, cs, topic)
		if err != nil {
			return err
		}
		r, err := rs.On(topic, nil)
		if err != nil {
			return err
		}
		if r.Err != nil {
			return fmt.Errorf("%w (%s)", r.Err, r.ErrMessage)
		}
		return nil
	}
	if err := alter(false,
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("2000000")},
		kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"},
	); err != nil {
		t.Fatalf("incremental alter: %v", err)
	}
	if err := alter(true, kadm.AlterConfig{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("3")}); err != nil {
		t.Fatalf("validate-only alter: %v", err)
	}
	for name, want := range map[string]string{"max.message.bytes": "2000000", "cleanup.policy": "delete,compact", "retention.ms": "604800000"} {
		if v, _ := adminConfig(t, ctx, adm, topic, name); v != want {
			t.Errorf("%s = %s, want %s", name, v, want)
		}
	}
	if err := alter(false, kadm.AlterConfig{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("zero")}); !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("invalid value: got %v, want INVALID_CONFIG", err)
	}
	if err := alter(false, kadm.AlterConfig{Op: kadm.AppendConfig, Name: "retention.ms", Value: kadm.StringPtr("1")}); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("append to a non-list config: got %v, want INVALID_REQUEST", err)
	}

	// AlterConfigs replaces every override.
	rs, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.bytes", Value: kadm.StringPtr("1048576")}}, topic)
	if err != nil {
		t.Fatalf("alter configs: %v", err)
	}
	if r, _ := rs.On(topic, nil); r.Err != nil {
		t.Fatalf("alter configs: %v (%s)", r.Err, r.ErrMessage)
	}
	if v, src := adminConfig(t, ctx, adm, topic, "retention.bytes"); v != "1048576" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("retention.bytes: %s (%v)", v, src)
	}
	if v, src := adminConfig(t, ctx, adm, topic, "max.message.bytes"); v != "1048588" || src != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("max.message.bytes after AlterConfigs: %s (%v), want the default back", v, src)
	}

	// Unknown topic.
	rcs, err := adm.DescribeTopicConfigs(ctx, "admin-no-such-topic")
	if err == nil {
		if rc, _ := rcs.On("admin-no-such-topic", nil); !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
			t.Errorf("describe unknown topic: %v", rc.Err)
		}
	}

	// Broker configs: this broker's properties, read-only.
	bcs, err := adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil {
		t.Fatalf("describe broker configs: %v", err)
	}
	found := false
	for _, rc := range bcs {
		if rc.Err != nil {
			t.Fatalf("describe broker configs: %v (%s)", rc.Err, rc.ErrMessage)
		}
		for _, c := range rc.Configs {
			if c.Key == "num.partitions" && c.Value != nil && *c.Value == "1" {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("broker configs lack num.partitions=1: %+v", bcs)
	}
}

func TestAdminPartitionsRecordsAndDelete(t *testing.T) {
	b := StartBroker(t)
	cl := b.Client(t, kgo.DefaultProduceTopic("admin-records"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(100*time.Millisecond))
	adm := kadm.NewClient(cl)
	ctx := testContext(t, 60*time.Second)
	const topic = "admin-records"

	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}

	// CreatePartitions to 3, then produce to the new partition.
	rs, err := adm.UpdatePartitions(ctx, 3, topic)
	if err != nil {
		t.Fatalf("create partitions: %v", err)
	}
	if r, _ := rs.On(topic, nil); r.Err != nil {
		t.Fatalf("create partitions: %v (%s)", r.Err, r.ErrMessage)
	}
	rs, err = adm.UpdatePartitions(ctx, 2, topic)
	if err != nil {
		t.Fatalf("shrink partitions: %v", err)
	}
	if r, _ := rs.On(topic, nil); !errors.Is(r.Err, kerr.InvalidPartitions) {
		t.Errorf("shrinking to 2 partitions: got %v, want INVALID_PARTITIONS", r.Err)
	}
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(md.Topics[topic].Partitions); n != 3 {
		t.Fatalf("topic has %d partitions, want 3", n)
	}
	var records []*kgo.Record
	for i := 0; i < 10; i++ {
		records = append(records, &kgo.Record{Partition: 2, Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce to the new partition: %v", err)
	}

	// DeleteRecords moves the start offset.
	var offs kadm.Offsets
	offs.AddOffset(topic, 2, 4, -1)
	drs, err := adm.DeleteRecords(ctx, offs)
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
	if r, _ := drs.On(topic, 2, nil); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete records: %+v", r)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := starts.Lookup(topic, 2); s.Offset != 4 {
		t.Fatalf("start offset %d after deleting records, want 4", s.Offset)
	}
	offs = nil
	offs.AddOffset(topic, 2, 11, -1)
	drs, err = adm.DeleteRecords(ctx, offs)
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
	if r, _ := drs.On(topic, 2, nil); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Errorf("delete past the high watermark: got %v, want OFFSET_OUT_OF_RANGE", r.Err)
	}

	// OffsetForLeaderEpoch through a raw request: the current epoch ends
	// at the log end.
	md, err = adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	epoch := md.Topics[topic].Partitions[2].LeaderEpoch
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition = 2
	rp.CurrentLeaderEpoch = epoch
	rp.LeaderEpoch = epoch
	rt.Partitions = append(rt.Partitions, rp)
	rp.Partition, rp.CurrentLeaderEpoch = 0, epoch+1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("OffsetForLeaderEpoch: %v", err)
	}
	got := resp.Topics[0].Partitions
	if got[0].ErrorCode != 0 || got[0].LeaderEpoch != epoch || got[0].EndOffset != 10 {
		t.Errorf("OffsetForLeaderEpoch of the current epoch: %+v", got[0])
	}
	if got[1].ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Errorf("OffsetForLeaderEpoch with a future current epoch: %+v", got[1])
	}

	// DeleteTopics: gone from the metadata and its directories removed.
	drsp, err := adm.DeleteTopics(ctx, topic)
	if err != nil {
		t.Fatalf("delete topic: %v", err)
	}
	if r, _ := drsp.On(topic, nil); r.Err != nil {
		t.Fatalf("delete topic: %v (%s)", r.Err, r.ErrMessage)
	}
	checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		if td := md.Topics[topic]; !errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("topic still described: %+v", td)
		}
		return nil
	})
	drsp, err = adm.DeleteTopics(ctx, topic)
	if err != nil {
		t.Fatalf("delete topic again: %v", err)
	}
	if r, _ := drsp.On(topic, nil); !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("deleting a deleted topic: got %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
	}
}

func TestAdminDescribeCluster(t *testing.T) {
	b := StartBroker(t, "broker.id=7")
	cl := b.Client(t)
	ctx := testContext(t, 30*time.Second)

	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeClusterAuthorizedOperations = true
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("DescribeCluster: %v", err)
	}
	if resp.ErrorCode != 0 || resp.ClusterID == "" || resp.ControllerID != 7 || len(resp.Brokers) != 1 {
		t.Fatalf("DescribeCluster: %+v", resp)
	}
	if br := resp.Brokers[0]; br.NodeID != 7 || br.Host != "127.0.0.1" || fmt.Sprintf("%s:%d", br.Host, br.Port) != b.Addr() {
		t.Errorf("broker %+v, want 7 at %s", br, b.Addr())
	}
	if resp.ClusterAuthorizedOperations <= 0 {
		t.Errorf("authorized operations %d", resp.ClusterAuthorizedOperations)
	}

	// The same through Metadata, as kadm sees it.
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md.Cluster != resp.ClusterID || md.Controller != 7 {
		t.Errorf("metadata cluster %q controller %d, DescribeCluster %q 7", md.Cluster, md.Controller, resp.ClusterID)
	}
}
