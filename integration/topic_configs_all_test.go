package integration

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic configs kbroker accepts but that were refused before Kafka 3.9's
// whole list was taken in, through kadm against a broker process: created
// with a topic, described with their source, altered incrementally and
// deleted back to the default; bad values get INVALID_CONFIG with Kafka's
// message, and tiered storage is refused.
func TestAdminKafkaTopicConfigList(t *testing.T) {
	b := StartBroker(t, "log.segment.bytes=2097152")
	adm := b.Admin(t)
	ctx := testContext(t, 60*time.Second)
	const topic = "all-configs"

	created := map[string]*string{
		"delete.retention.ms":             kadm.StringPtr("3600000"),
		"min.cleanable.dirty.ratio":       kadm.StringPtr("0.25"),
		"preallocate":                     kadm.StringPtr("true"),
		"message.timestamp.before.max.ms": kadm.StringPtr("60000"),
		"compression.zstd.level":          kadm.StringPtr("7"),
		"remote.storage.enable":           kadm.StringPtr("false"),
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, created, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	for name, v := range created {
		if got, src := adminConfig(t, ctx, adm, topic, name); got != *v || src != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("%s after create: %s (%v), want %s", name, got, src, *v)
		}
	}
	// A broker property is the static default of its topic config.
	if got, src := adminConfig(t, ctx, adm, topic, "segment.bytes"); got != "2097152" || src != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("segment.bytes: %s (%v)", got, src)
	}
	if got, src := adminConfig(t, ctx, adm, topic, "file.delete.delay.ms"); got != "60000" || src != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("file.delete.delay.ms: %s (%v)", got, src)
	}

	res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "preallocate", Value: kadm.StringPtr("false")},
		{Op: kadm.DeleteConfig, Name: "delete.retention.ms"},
		{Op: kadm.SetConfig, Name: "leader.replication.throttled.replicas", Value: kadm.StringPtr("0:1")},
	}, topic)
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	if got, src := adminConfig(t, ctx, adm, topic, "delete.retention.ms"); got != "86400000" || src != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("delete.retention.ms after delete: %s (%v)", got, src)
	}
	if got, _ := adminConfig(t, ctx, adm, topic, "leader.replication.throttled.replicas"); got != "0:1" {
		t.Errorf("leader.replication.throttled.replicas: %s", got)
	}

	for _, bad := range []struct{ name, value, msg string }{
		{"min.cleanable.dirty.ratio", "2", // Kafka prints the parsed Double
			"Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"},
		{"compression.type", "brotli", "Invalid value brotli for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"},
		{"segment.jitter.ms", "soon", "Invalid value soon for configuration segment.jitter.ms: Not a number of type LONG"},
		{"remote.storage.enable", "true", "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage. (kbroker has no tiered storage: remote.storage.enable must be false)"},
	} {
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: bad.name, Value: kadm.StringPtr(bad.value)}}, topic)
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err != kerr.InvalidConfig || res[0].ErrMessage != bad.msg {
			t.Errorf("%s=%s: %v %q, want INVALID_CONFIG %q", bad.name, bad.value, res[0].Err, res[0].ErrMessage, bad.msg)
		}
		ct, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{bad.name: kadm.StringPtr(bad.value)}, "bad-config")
		if !errorsIs(err, ct.Err, kerr.InvalidConfig) {
			t.Errorf("create with %s=%s: %v %v", bad.name, bad.value, err, ct.Err)
		}
	}
}

func errorsIs(err, topicErr error, want *kerr.Error) bool {
	return err == want || topicErr == want
}
