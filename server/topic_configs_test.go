package server

import (
	"errors"
	"maps"
	"testing"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/controller"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func op(name string, o kmsg.IncrementalAlterConfigOp, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name = name
	c.Op = o
	c.Value = value
	return c
}

func TestApplyConfigOps(t *testing.T) {
	effective := map[string]string{"cleanup.policy": "delete", "retention.ms": "604800000"}
	set, del := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete
	app, sub := kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract
	s := kmsg.StringPtr
	for _, c := range []struct {
		name    string
		current map[string]string
		ops     []kmsg.IncrementalAlterConfigsRequestResourceConfig
		want    map[string]string
		wantErr *kerr.Error
	}{
		{"set new", map[string]string{}, []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", set, s("1000"))},
			map[string]string{"retention.ms": "1000"}, nil},
		{"set replaces, keeps others", map[string]string{"retention.ms": "5", "segment.bytes": "1024"},
			[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", set, s("6"))},
			map[string]string{"retention.ms": "6", "segment.bytes": "1024"}, nil},
		{"delete", map[string]string{"retention.ms": "5", "segment.bytes": "1024"},
			[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", del, nil)},
			map[string]string{"segment.bytes": "1024"}, nil},
		{"delete unset is fine", map[string]string{},
			[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", del, nil)},
			map[string]string{}, nil},
		{"append to default", map[string]string{},
			[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("cleanup.policy", app, s("compact"))},
			map[string]string{"cleanup.policy": "delete,compact"}, nil},
		{"append present value is a no-op", map[string]string{"cleanup.policy": "compact"},
			[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("cleanup.policy", app, s("compact"))},
			map[string]string{"cleanup.policy": "compact"}, nil},
		{"subtract from override", map[string]string{"cleanup.policy": "compact, delete"},
			[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("cleanup.policy", sub, s("compact"))},
			map[string]string{"cleanup.policy": "delete"}, nil},
		{"subtract absent value", map[string]string{},
			[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("cleanup.policy", sub, s("compact"))},
			map[string]string{"cleanup.policy": "delete"}, nil},
		{"append to non-list", map[string]string{},
			[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", app, s("1"))}, nil, kerr.InvalidRequest},
		{"subtract from non-list", map[string]string{},
			[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", sub, s("1"))}, nil, kerr.InvalidRequest},
		{"append to unknown", map[string]string{},
			[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("no.such", app, s("1"))}, nil, kerr.InvalidConfig},
		{"duplicate key", map[string]string{},
			[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", set, s("1")), op("retention.ms", del, nil)}, nil, kerr.InvalidRequest},
		{"set null", map[string]string{},
			[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", set, nil)}, nil, kerr.InvalidRequest},
		{"unknown op", map[string]string{},
			[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", 9, s("1"))}, nil, kerr.InvalidRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := applyConfigOps(maps.Clone(c.current), effective, c.ops)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("got %v, want %v", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestReplaceConfigs(t *testing.T) {
	entry := func(name string, value *string) kmsg.AlterConfigsRequestResourceConfig {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = name, value
		return c
	}
	got, err := replaceConfigs([]kmsg.AlterConfigsRequestResourceConfig{
		entry("retention.ms", kmsg.StringPtr("1")), entry("segment.bytes", nil),
	})(map[string]string{"cleanup.policy": "compact"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"retention.ms": "1"}; !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v (old overrides dropped, null skipped)", got, want)
	}
	_, err = replaceConfigs([]kmsg.AlterConfigsRequestResourceConfig{
		entry("retention.ms", kmsg.StringPtr("1")), entry("retention.ms", kmsg.StringPtr("2")),
	})(nil, nil)
	if !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("duplicate key: got %v, want INVALID_REQUEST", err)
	}
}

func TestValidateTopicOverrides(t *testing.T) {
	for _, c := range []struct {
		overrides map[string]string
		ok        bool
	}{
		{map[string]string{}, true},
		{map[string]string{"retention.ms": "-1", "cleanup.policy": "compact,delete"}, true},
		{map[string]string{"retention.ms": "soon"}, false},
		{map[string]string{"min.insync.replicas": "0"}, false},
		{map[string]string{"cleanup.policy": ","}, false},
		{map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, false},
		{map[string]string{"no.such.config": "1"}, false},
	} {
		_, err := newAdminTestBroker(t).normalizeTopicOverrides(c.overrides)
		if c.ok && err != nil {
			t.Errorf("%v: unexpected %v", c.overrides, err)
		}
		if !c.ok && !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("%v: got %v, want INVALID_CONFIG", c.overrides, err)
		}
	}
}

func TestTopicConfigInfosCoverTopicConfigs(t *testing.T) {
	for _, d := range config.TopicConfigs() {
		info := topicConfigInfoFor(d.Name)
		if info.typ == kmsg.ConfigTypeUnknown || info.doc == "" {
			t.Errorf("topic config %s has no type or documentation", d.Name)
		}
	}
}

func TestCheckBrokerResource(t *testing.T) {
	b := &Broker{self: controller.BrokerInfo{ID: 3}}
	for name, ok := range map[string]bool{"": true, "3": true, "4": false, "x": false, "-1": false} {
		err := b.checkBrokerResource(name)
		if ok != (err == nil) || (!ok && !errors.Is(err, kerr.InvalidRequest)) {
			t.Errorf("%q: got %v", name, err)
		}
	}
}

// TestAlterTopicConfigsThroughController covers the shared path of
// AlterConfigs and IncrementalAlterConfigs against a real controller: a
// change reaches the controller's metadata and the partition; an invalid
// or validate-only change leaves everything as it was.
func TestAlterTopicConfigsThroughController(t *testing.T) {
	b := newAdminTestBroker(t)
	mustCreateTopic(t, b, "t", 1, map[string]string{"segment.bytes": "1048576"})
	overrides := func() map[string]string { return b.controller.Metadata().Topics["t"].Configs }

	set := incrementalConfigs([]kmsg.IncrementalAlterConfigsRequestResourceConfig{
		op("retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("1000")),
	})
	if err := b.changeTopicConfigs("t", set, true); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"segment.bytes": "1048576"}; !maps.Equal(overrides(), want) {
		t.Fatalf("validate-only changed the overrides: %v", overrides())
	}
	if err := b.changeTopicConfigs("t", set, false); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"segment.bytes": "1048576", "retention.ms": "1000"}; !maps.Equal(overrides(), want) {
		t.Fatalf("got overrides %v, want %v", overrides(), want)
	}

	bad := incrementalConfigs([]kmsg.IncrementalAlterConfigsRequestResourceConfig{
		op("retention.ms", kmsg.IncrementalAlterConfigOpDelete, nil),
		op("segment.bytes", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("big")),
	})
	if err := b.changeTopicConfigs("t", bad, false); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("invalid value: got %v, want INVALID_CONFIG", err)
	}
	if want := map[string]string{"segment.bytes": "1048576", "retention.ms": "1000"}; !maps.Equal(overrides(), want) {
		t.Fatalf("a failed change altered the overrides: %v", overrides())
	}

	if err := b.changeTopicConfigs("missing", set, false); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: got %v", err)
	}
}
