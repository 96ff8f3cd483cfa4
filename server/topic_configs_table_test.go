package server

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kbroker/kbroker/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicConfigCase is what the table test does with one topic config: two
// valid values other than the default, and a bad value with Kafka's
// message.
type topicConfigCase struct {
	v1, v2, bad, badMsg string
}

// topicConfigCaseFor derives the test values of a config from its entry
// in config.TopicConfigs: its type, range and valid strings.
func topicConfigCaseFor(d config.TopicConfigDef) topicConfigCase {
	invalid := func(v, reason string) string {
		return fmt.Sprintf("Invalid value %s for configuration %s: %s", v, d.Name, reason)
	}
	switch d.Special {
	case "gzip-level":
		return topicConfigCase{"1", "9", "10", invalid("10", "Value must be between 1 and 9 or equal to -1")}
	case "throttled-replicas":
		return topicConfigCase{"0:1,1:1", "*", "bogus", invalid("[bogus]", d.Name+" must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")}
	case "message-format-version":
		return topicConfigCase{"2.8", "3.0-IV1", "bogus", invalid("bogus", "Version `bogus` is not a valid version")}
	case "no-tiered-storage":
		return topicConfigCase{"false", "false", "true", "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage. (kbroker has no tiered storage: remote.storage.enable must be false)"}
	}
	switch d.Type {
	case "BOOLEAN":
		other := strconv.FormatBool(d.KafkaDefault != "true")
		return topicConfigCase{other, d.KafkaDefault, "maybe", invalid("maybe", "Expected value to be either true or false")}
	case "DOUBLE":
		return topicConfigCase{"0.25", "0.75", "1.5", invalid("1.5", "Value must be no more than "+d.Max)}
	case "INT", "LONG":
		lo := int64(0)
		if d.Min != "" {
			lo, _ = strconv.ParseInt(d.Min, 10, 64)
		}
		v1 := lo + 1000
		if d.Max != "" {
			v1 = lo + 1
		}
		if strconv.FormatInt(v1, 10) == d.KafkaDefault {
			v1++
		}
		c := topicConfigCase{v1: strconv.FormatInt(v1, 10), v2: strconv.FormatInt(v1+1, 10)}
		if d.Min != "" {
			below := strconv.FormatInt(lo-1, 10)
			c.bad, c.badMsg = below, invalid(below, "Value must be at least "+d.Min)
		} else {
			c.bad, c.badMsg = "ten", invalid("ten", "Not a number of type "+d.Type)
		}
		return c
	case "STRING", "LIST":
		var others []string
		for _, v := range d.OneOf {
			if v != d.KafkaDefault {
				others = append(others, v)
			}
		}
		v2 := others[len(others)-1]
		if d.Type == "LIST" {
			v2 = strings.Join(d.OneOf, ",")
		}
		return topicConfigCase{others[0], v2, "bogus", invalid("bogus", "String must be one of: "+strings.Join(d.OneOf, ", "))}
	}
	panic("no test values for " + d.Name)
}

// Every config of Kafka 3.9's topic config list round-trips: created with
// a topic, described as a topic override, set to another value and deleted
// back to its default with IncrementalAlterConfigs; a bad value is
// INVALID_CONFIG with Kafka's message, at creation and alteration.
func TestEveryTopicConfigRoundTrips(t *testing.T) {
	b := newAdminTestBroker(t)
	ctx := context.Background()
	defs := config.TopicConfigs()
	// Kafka 3.9's 36, and kbroker.acks.fsync.
	if len(defs) != 37 {
		t.Errorf("%d topic configs, want Kafka 3.9's 36 and kbroker.acks.fsync", len(defs))
	}

	create := func(topic, name, value string) kmsg.CreateTopicsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 5
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = name, kmsg.StringPtr(value)
		rt.Configs = append(rt.Configs, c)
		req.Topics = append(req.Topics, rt)
		resp, err := handleCreateTopics(ctx, b, &requestContext{version: 5}, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.CreateTopicsResponse).Topics[0]
	}
	alter := func(topic, name string, op kmsg.IncrementalAlterConfigOp, value *string) kmsg.IncrementalAlterConfigsResponseResource {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.Version = 1
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = name, op, value
		r.Configs = append(r.Configs, c)
		req.Resources = append(req.Resources, r)
		resp, err := handleIncrementalAlterConfigs(ctx, b, &requestContext{version: 1}, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
	}
	describe := func(topic, name string) kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		res := describeConfigs(t, b, 4, true, configResource(kmsg.ConfigResourceTypeTopic, topic, name))
		if res[0].ErrorCode != 0 || len(res[0].Configs) != 1 {
			t.Fatalf("describe %s: %+v", name, res[0])
		}
		return res[0].Configs[0]
	}
	checkOverride := func(d config.TopicConfigDef, c kmsg.DescribeConfigsResponseResourceConfig, want string) {
		t.Helper()
		if c.Value == nil || *c.Value != want || c.Source != kmsg.ConfigSourceDynamicTopicConfig || c.IsDefault || c.ReadOnly || c.IsSensitive {
			t.Errorf("%s: got %+v, want %q from DYNAMIC_TOPIC_CONFIG", d.Name, c, want)
		}
		if c.ConfigType != configTypes[d.Type] || c.Documentation == nil {
			t.Errorf("%s: type %v, doc %v", d.Name, c.ConfigType, c.Documentation)
		}
		wantSyn := 1
		if d.BrokerSource != "" {
			wantSyn = 2
		}
		if len(c.ConfigSynonyms) != wantSyn || c.ConfigSynonyms[0].Name != d.Name || *c.ConfigSynonyms[0].Value != want ||
			(wantSyn == 2 && (c.ConfigSynonyms[1].Name != d.BrokerSource || c.ConfigSynonyms[1].Source != kmsg.ConfigSourceDefaultConfig)) {
			t.Errorf("%s: synonyms %+v", d.Name, c.ConfigSynonyms)
		}
	}

	for i, d := range defs {
		tc := topicConfigCaseFor(d)
		topic := fmt.Sprintf("t%d", i)
		if r := create(topic, d.Name, tc.v1); r.ErrorCode != 0 {
			t.Errorf("%s=%s: create: %d %v", d.Name, tc.v1, r.ErrorCode, r.ErrorMessage)
			continue
		}
		checkOverride(d, describe(topic, d.Name), tc.v1)

		if r := alter(topic, d.Name, kmsg.IncrementalAlterConfigOpSet, &tc.v2); r.ErrorCode != 0 {
			t.Errorf("%s=%s: set: %d %v", d.Name, tc.v2, r.ErrorCode, r.ErrorMessage)
		}
		checkOverride(d, describe(topic, d.Name), tc.v2)

		if r := alter(topic, d.Name, kmsg.IncrementalAlterConfigOpDelete, nil); r.ErrorCode != 0 {
			t.Errorf("%s: delete: %d %v", d.Name, r.ErrorCode, r.ErrorMessage)
		}
		c := describe(topic, d.Name)
		if c.Value == nil || *c.Value != d.Default(b.cfg) || c.Source != kmsg.ConfigSourceDefaultConfig || !c.IsDefault {
			t.Errorf("%s after delete: %+v, want default %q", d.Name, c, d.Default(b.cfg))
		}
		if d.Default(b.cfg) != d.KafkaDefault && !slices.Contains([]string{"flush.ms"}, d.Name) {
			t.Errorf("%s: default %q, Kafka's %q", d.Name, d.Default(b.cfg), d.KafkaDefault)
		}

		r := alter(topic, d.Name, kmsg.IncrementalAlterConfigOpSet, &tc.bad)
		if r.ErrorCode != kerr.InvalidConfig.Code || r.ErrorMessage == nil || *r.ErrorMessage != tc.badMsg {
			t.Errorf("%s=%s: set: %d %v, want INVALID_CONFIG %q", d.Name, tc.bad, r.ErrorCode, r.ErrorMessage, tc.badMsg)
		}
		ct := create(topic+"bad", d.Name, tc.bad)
		if ct.ErrorCode != kerr.InvalidConfig.Code || ct.ErrorMessage == nil || *ct.ErrorMessage != tc.badMsg {
			t.Errorf("%s=%s: create: %d %v, want INVALID_CONFIG %q", d.Name, tc.bad, ct.ErrorCode, ct.ErrorMessage, tc.badMsg)
		}
	}

	// Unknown names and the check across configs, with Kafka's messages.
	if r := create("unknown", "no.such.config", "1"); r.ErrorCode != kerr.InvalidConfig.Code || *r.ErrorMessage != "Unknown topic config name: no.such.config" {
		t.Errorf("unknown config: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	r := alter("t0", "max.compaction.lag.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("0"))
	if r.ErrorCode != kerr.InvalidConfig.Code {
		t.Errorf("max.compaction.lag.ms=0: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	mustCreateTopic(t, b, "lag", 1, map[string]string{"min.compaction.lag.ms": "100"})
	r = alter("lag", "max.compaction.lag.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("10"))
	if want := "conflict topic config setting min.compaction.lag.ms (100) > max.compaction.lag.ms (10)"; r.ErrorCode != kerr.InvalidConfig.Code || *r.ErrorMessage != want {
		t.Errorf("lag conflict: %d %v, want %q", r.ErrorCode, r.ErrorMessage, want)
	}
	// Values are stored as Kafka normalises them.
	if r := alter("lag", "preallocate", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(" TRUE ")); r.ErrorCode != 0 {
		t.Fatalf("preallocate: %+v", r)
	}
	if c := describe("lag", "preallocate"); *c.Value != "true" {
		t.Errorf("preallocate stored as %q, want true", *c.Value)
	}
}
