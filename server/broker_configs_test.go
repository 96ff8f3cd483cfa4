package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Dynamic broker configs through AlterConfigs and IncrementalAlterConfigs
// on the embedded controller: stored per broker and cluster-wide,
// described with Kafka's sources and synonyms, refused for names kbroker
// does not change at run time and for bad values, nothing changed then.
func TestDynamicBrokerConfigs(t *testing.T) {
	b := newAdminTestBroker(t)
	incremental := func(name string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) int16 {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeBroker, name, ops
		req.Resources = append(req.Resources, rr)
		resp, err := handleIncrementalAlterConfigs(t.Context(), b, &requestContext{}, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	}
	set := func(k, v string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v)
		return c
	}
	del := func(k string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = k, kmsg.IncrementalAlterConfigOpDelete
		return c
	}
	const leader, follower = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
	if code := incremental("", set(leader, "1000"), set(follower, "2000")); code != 0 {
		t.Fatalf("cluster-wide: %v", kerr.ErrorForCode(code))
	}
	if code := incremental("1", set(leader, "500")); code != 0 {
		t.Fatalf("broker 1: %v", kerr.ErrorForCode(code))
	}
	for _, bad := range []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(leader, "-1"), set(follower, "fast"), set("num.io.threads", "4"), set("log.dirs", "/tmp")} {
		if code := incremental("1", bad); code != kerr.InvalidRequest.Code {
			t.Fatalf("%s=%s: %v, want INVALID_REQUEST", bad.Name, *bad.Value, kerr.ErrorForCode(code))
		}
	}
	md := b.controller.Metadata()
	if v, _ := md.DynamicBrokerConfig(1, leader); v != "500" {
		t.Fatalf("broker 1's %s = %q, want its own 500", leader, v)
	}
	if v, _ := md.DynamicBrokerConfig(1, follower); v != "2000" {
		t.Fatalf("broker 1's %s = %q, want the cluster-wide 2000", follower, v)
	}
	res := describeConfigs(t, b, 4, true, configResource(kmsg.ConfigResourceTypeBroker, "1", leader, follower))
	got := configsByName(res[0].Configs)
	if c := got[leader]; c.Source != kmsg.ConfigSourceDynamicBrokerConfig || *c.Value != "500" || len(c.ConfigSynonyms) != 3 ||
		c.ConfigSynonyms[1].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || *c.ConfigSynonyms[1].Value != "1000" {
		t.Errorf("%s: %+v", leader, c)
	}
	if c := got[follower]; c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || *c.Value != "2000" || c.ReadOnly {
		t.Errorf("%s: %+v", follower, c)
	}
	res = describeConfigs(t, b, 4, false, configResource(kmsg.ConfigResourceTypeBroker, ""))
	if len(res[0].Configs) != 2 || res[0].Configs[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("cluster-wide: %+v", res[0].Configs)
	}
	// Deleting the broker's own value falls back to the cluster-wide one.
	if code := incremental("1", del(leader)); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if v, _ := b.controller.Metadata().DynamicBrokerConfig(1, leader); v != "1000" {
		t.Fatalf("after deleting broker 1's own: %q", v)
	}
}
