package server

import (
	"context"
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestAlterConfigs(t *testing.T) {
	b := newAdminTestBroker(t)
	mustCreateTopic(t, b, "t", 1, map[string]string{"segment.bytes": "1048576"})

	resource := func(rtype kmsg.ConfigResourceType, name string, kv ...string) kmsg.AlterConfigsRequestResource {
		r := kmsg.NewAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = rtype, name
		for i := 0; i+1 < len(kv); i += 2 {
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
			r.Configs = append(r.Configs, c)
		}
		return r
	}
	run := func(validateOnly bool, resources ...kmsg.AlterConfigsRequestResource) []kmsg.AlterConfigsResponseResource {
		t.Helper()
		req := kmsg.NewPtrAlterConfigsRequest()
		req.Version = 2
		req.ValidateOnly = validateOnly
		req.Resources = resources
		resp, err := handleAlterConfigs(context.Background(), b, &requestContext{version: 2}, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.AlterConfigsResponse).Resources
	}
	overrides := func() map[string]string { return b.controller.Metadata().Topics["t"].Configs }

	if got := run(true, resource(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", "5")); got[0].ErrorCode != 0 {
		t.Fatalf("validate only: %+v", got)
	}
	if want := map[string]string{"segment.bytes": "1048576"}; !maps.Equal(overrides(), want) {
		t.Fatalf("validate only changed overrides: %v", overrides())
	}

	got := run(false,
		resource(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", "5"),
		resource(kmsg.ConfigResourceTypeTopic, "missing", "retention.ms", "5"),
		resource(kmsg.ConfigResourceTypeBroker, "1", "log.retention.ms", "5"),
		resource(kmsg.ConfigResourceTypeBroker, ""),
	)
	for i, want := range []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidRequest.Code, 0} {
		if got[i].ErrorCode != want {
			t.Errorf("resource %d: error %d, want %d", i, got[i].ErrorCode, want)
		}
	}
	if want := map[string]string{"retention.ms": "5"}; !maps.Equal(overrides(), want) {
		t.Fatalf("overrides %v, want %v (replaced as a whole)", overrides(), want)
	}

	got = run(false, resource(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", "6", "max.message.bytes", "huge"))
	if got[0].ErrorCode != kerr.InvalidConfig.Code || got[0].ErrorMessage == nil {
		t.Fatalf("invalid value: %+v", got[0])
	}
	got = run(false, resource(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", "6"), resource(kmsg.ConfigResourceTypeTopic, "t"))
	if got[0].ErrorCode != kerr.InvalidRequest.Code || got[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("duplicate resource: %+v", got)
	}
	if want := map[string]string{"retention.ms": "5"}; !maps.Equal(overrides(), want) {
		t.Fatalf("failed requests changed overrides: %v", overrides())
	}
}
