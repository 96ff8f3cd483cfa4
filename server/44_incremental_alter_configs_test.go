package server

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestIncrementalAlterConfigs(t *testing.T) {
	b := newAdminTestBroker(t)
	mustCreateTopic(t, b, "t", 1, map[string]string{"segment.bytes": "1048576"})

	run := func(validateOnly bool, resources ...kmsg.IncrementalAlterConfigsRequestResource) []kmsg.IncrementalAlterConfigsResponseResource {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.Version = 1
		req.ValidateOnly = validateOnly
		req.Resources = resources
		resp, err := handleIncrementalAlterConfigs(context.Background(), b, &requestContext{version: 1}, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.IncrementalAlterConfigsResponse).Resources
	}
	resource := func(rtype kmsg.ConfigResourceType, name string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsRequestResource {
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.Configs = rtype, name, ops
		return r
	}
	overrides := func() map[string]string { return b.controller.Metadata().Topics["t"].Configs }
	s := kmsg.StringPtr

	got := run(false, resource(kmsg.ConfigResourceTypeTopic, "t",
		op("min.insync.replicas", kmsg.IncrementalAlterConfigOpSet, s("2")),
		op("segment.bytes", kmsg.IncrementalAlterConfigOpDelete, nil),
		op("cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, s("compact")),
	))
	if got[0].ErrorCode != 0 {
		t.Fatalf("%+v", got[0])
	}
	want := map[string]string{"min.insync.replicas": "2", "cleanup.policy": "delete,compact"}
	if !maps.Equal(overrides(), want) {
		t.Fatalf("overrides %v, want %v", overrides(), want)
	}
	// The partition acts on the new setting: acks=all now needs 2 in-sync
	// replicas, and this single broker has 1.
	p, _ := b.replicas.Get(replica.TopicPartition{Topic: "t", Partition: 0})
	batch := adminTestBatch(1)
	h, err := recordbatch.Validate(batch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendAsLeader([][]byte{batch}, []recordbatch.Header{h}, -1, time.Now()); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("append with min.insync.replicas=2: got %v, want NOT_ENOUGH_REPLICAS", err)
	}

	got = run(false,
		resource(kmsg.ConfigResourceTypeTopic, "t", op("retention.ms", kmsg.IncrementalAlterConfigOpAppend, s("1"))),
		resource(kmsg.ConfigResourceTypeTopic, "missing", op("retention.ms", kmsg.IncrementalAlterConfigOpSet, s("1"))),
		resource(kmsg.ConfigResourceTypeBroker, "", op("log.retention.ms", kmsg.IncrementalAlterConfigOpSet, s("1"))),
	)
	for i, want := range []int16{kerr.InvalidRequest.Code, kerr.UnknownTopicOrPartition.Code, kerr.InvalidRequest.Code} {
		if got[i].ErrorCode != want {
			t.Errorf("resource %d: error %d, want %d", i, got[i].ErrorCode, want)
		}
	}
	got = run(true, resource(kmsg.ConfigResourceTypeTopic, "t", op("min.insync.replicas", kmsg.IncrementalAlterConfigOpDelete, nil)))
	if got[0].ErrorCode != 0 || !maps.Equal(overrides(), want) {
		t.Fatalf("validate only: %+v, overrides %v", got[0], overrides())
	}
	got = run(false, resource(kmsg.ConfigResourceTypeTopic, "t", op("min.insync.replicas", kmsg.IncrementalAlterConfigOpSet, s("0"))))
	if got[0].ErrorCode != kerr.InvalidConfig.Code || !maps.Equal(overrides(), want) {
		t.Fatalf("invalid value: %+v, overrides %v", got[0], overrides())
	}
}
