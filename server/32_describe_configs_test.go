package server

import (
	"context"
	"testing"
	"time"

	"github.com/kbroker/kbroker/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeConfigs(t *testing.T, b *Broker, version int16, synonyms bool, resources ...kmsg.DescribeConfigsRequestResource) []kmsg.DescribeConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = version
	req.IncludeSynonyms = synonyms
	req.IncludeDocumentation = version >= 3
	req.Resources = resources
	resp, err := handleDescribeConfigs(context.Background(), b, &requestContext{version: version}, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.DescribeConfigsResponse).Resources
}

func configResource(rtype kmsg.ConfigResourceType, name string, names ...string) kmsg.DescribeConfigsRequestResource {
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = rtype, name, names
	return r
}

func configsByName(configs []kmsg.DescribeConfigsResponseResourceConfig) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	out := make(map[string]kmsg.DescribeConfigsResponseResourceConfig, len(configs))
	for _, c := range configs {
		out[c.Name] = c
	}
	return out
}

func TestDescribeTopicConfigs(t *testing.T) {
	b := newAdminTestBroker(t)
	mustCreateTopic(t, b, "t", 1, map[string]string{"retention.ms": "1000"})

	res := describeConfigs(t, b, 4, true,
		configResource(kmsg.ConfigResourceTypeTopic, "t"),
		configResource(kmsg.ConfigResourceTypeTopic, "missing"),
		configResource(kmsg.ConfigResourceTypeTopic, "bad/name"),
		configResource(kmsg.ConfigResourceTypeBrokerLogger, "1"),
	)
	for i, want := range []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidTopicException.Code, kerr.InvalidRequest.Code} {
		if res[i].ErrorCode != want {
			t.Errorf("resource %d (%s): error %d, want %d", i, res[i].ResourceName, res[i].ErrorCode, want)
		}
	}
	configs := configsByName(res[0].Configs)
	if len(configs) != len(config.TopicConfigs()) {
		t.Errorf("got %d configs, want %d", len(configs), len(config.TopicConfigs()))
	}
	ret := configs["retention.ms"]
	if ret.Value == nil || *ret.Value != "1000" || ret.Source != kmsg.ConfigSourceDynamicTopicConfig || ret.IsDefault {
		t.Errorf("retention.ms: %+v", ret)
	}
	if len(ret.ConfigSynonyms) != 2 || ret.ConfigSynonyms[0].Source != kmsg.ConfigSourceDynamicTopicConfig ||
		ret.ConfigSynonyms[1].Name != "log.retention.ms" {
		t.Errorf("retention.ms synonyms: %+v", ret.ConfigSynonyms)
	}
	if ret.ConfigType != kmsg.ConfigTypeLong || ret.Documentation == nil {
		t.Errorf("retention.ms type %v, doc %v", ret.ConfigType, ret.Documentation)
	}
	seg := configs["segment.bytes"]
	if seg.Value == nil || *seg.Value != "1073741824" || seg.Source == kmsg.ConfigSourceDynamicTopicConfig || !seg.IsDefault {
		t.Errorf("segment.bytes: %+v", seg)
	}

	// ConfigNames filters; no synonyms unless asked.
	res = describeConfigs(t, b, 1, false, configResource(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", "no.such"))
	if len(res[0].Configs) != 1 || res[0].Configs[0].Name != "retention.ms" || res[0].Configs[0].ConfigSynonyms != nil {
		t.Errorf("filtered: %+v", res[0].Configs)
	}
}

func TestDescribeBrokerConfigs(t *testing.T) {
	b := newAdminTestBroker(t)
	res := describeConfigs(t, b, 4, false,
		configResource(kmsg.ConfigResourceTypeBroker, "1"),
		configResource(kmsg.ConfigResourceTypeBroker, ""),
		configResource(kmsg.ConfigResourceTypeBroker, "2"),
		configResource(kmsg.ConfigResourceTypeBroker, "one"),
	)
	for i, want := range []int16{0, 0, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code} {
		if res[i].ErrorCode != want {
			t.Errorf("resource %q: error %d, want %d", res[i].ResourceName, res[i].ErrorCode, want)
		}
	}
	props := b.cfg.Properties()
	dynamic := config.DynamicBrokerConfigs()
	if len(res[0].Configs) != len(props)+len(dynamic) || len(props) == 0 {
		t.Fatalf("broker 1: %d configs, want %d", len(res[0].Configs), len(props)+len(dynamic))
	}
	for _, c := range res[0].Configs {
		if d, ok := config.DynamicBrokerConfigDefFor(c.Name); ok {
			if c.Value == nil || *c.Value != d.Default || c.ReadOnly || c.Source != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("dynamic %s: %+v, want the default %s, not read-only", c.Name, c, d.Default)
			}
			continue
		}
		want := props[c.Name]
		if (c.Value == nil) != (want == "") || (c.Value != nil && *c.Value != want) || !c.ReadOnly {
			t.Errorf("%s: %+v, want value %q (empty: null) read-only", c.Name, c, want)
		}
	}
	if len(res[1].Configs) != 0 {
		t.Errorf("cluster-wide dynamic defaults: got %d configs, want none", len(res[1].Configs))
	}
}

func TestDescribeConfigsStaticBrokerSource(t *testing.T) {
	b := newAdminTestBroker(t, func(c *config.Config) { c.LogRetentionMs = time.Hour })
	mustCreateTopic(t, b, "t", 1, nil)

	res := describeConfigs(t, b, 4, true, configResource(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", "segment.bytes"))
	configs := configsByName(res[0].Configs)
	ret := configs["retention.ms"]
	if ret.Value == nil || *ret.Value != "3600000" || ret.Source != kmsg.ConfigSourceStaticBrokerConfig ||
		len(ret.ConfigSynonyms) != 2 || ret.ConfigSynonyms[0].Name != "log.retention.ms" ||
		ret.ConfigSynonyms[1].Source != kmsg.ConfigSourceDefaultConfig || *ret.ConfigSynonyms[1].Value != "604800000" {
		t.Errorf("retention.ms from the broker file: %+v", ret)
	}
	if seg := configs["segment.bytes"]; seg.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("segment.bytes: %+v", seg)
	}

	res = describeConfigs(t, b, 4, false, configResource(kmsg.ConfigResourceTypeBroker, "1", "log.retention.ms", "num.partitions"))
	brokerConfigs := configsByName(res[0].Configs)
	if c := brokerConfigs["log.retention.ms"]; c.Source != kmsg.ConfigSourceStaticBrokerConfig || c.Value == nil || *c.Value != "3600000" {
		t.Errorf("log.retention.ms: %+v", c)
	}
	if c := brokerConfigs["num.partitions"]; c.Source != kmsg.ConfigSourceDefaultConfig || c.Value == nil || *c.Value != "1" {
		t.Errorf("num.partitions: %+v", c)
	}
}
