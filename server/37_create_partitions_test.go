package server

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestCreatePartitions(t *testing.T) {
	b := newAdminTestBroker(t)
	mustCreateTopic(t, b, "t", 1, nil)
	mustCreateTopic(t, b, "u", 1, nil)

	topic := func(name string, count int32, assignment ...[]int32) kmsg.CreatePartitionsRequestTopic {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, count
		for _, a := range assignment {
			ra := kmsg.NewCreatePartitionsRequestTopicAssignment()
			ra.Replicas = a
			rt.Assignment = append(rt.Assignment, ra)
		}
		return rt
	}
	run := func(validateOnly bool, topics ...kmsg.CreatePartitionsRequestTopic) []kmsg.CreatePartitionsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Version = 3
		req.ValidateOnly = validateOnly
		req.Topics = topics
		resp, err := handleCreatePartitions(context.Background(), b, &requestContext{version: 3}, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.CreatePartitionsResponse).Topics
	}
	partitions := func(name string) int { return len(b.controller.Metadata().Topics[name].Partitions) }

	got := run(true, topic("t", 3))
	if got[0].ErrorCode != 0 || partitions("t") != 1 {
		t.Fatalf("validate only: %+v, %d partitions", got, partitions("t"))
	}
	got = run(false, topic("t", 3), topic("missing", 2), topic("u", 1), topic("u", 2, []int32{7}))
	want := []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code}
	for i := range want {
		if got[i].ErrorCode != want[i] {
			t.Errorf("topic %d (%s): error %d, want %d (%v)", i, got[i].Topic, got[i].ErrorCode, want[i], got[i].ErrorMessage)
		}
	}
	if partitions("t") != 3 {
		t.Fatalf("t has %d partitions, want 3", partitions("t"))
	}
	if _, err := b.localPartition("t", 2); err != nil {
		t.Fatalf("new partition not led here: %v", err)
	}

	for _, c := range []struct {
		rt   kmsg.CreatePartitionsRequestTopic
		want *kerr.Error
	}{
		{topic("u", 1), kerr.InvalidPartitions},
		{topic("u", 2, []int32{7}), kerr.InvalidReplicaAssignment},
		{topic("u", 2, []int32{1, 1}), kerr.InvalidReplicaAssignment},
		{topic("u", 3, []int32{1}), kerr.InvalidReplicaAssignment},
	} {
		if got := run(false, c.rt)[0]; got.ErrorCode != c.want.Code {
			t.Errorf("%+v: error %d, want %s", c.rt, got.ErrorCode, c.want.Message)
		}
	}
	if got := run(false, topic("u", 2, []int32{1}))[0]; got.ErrorCode != 0 || partitions("u") != 2 {
		t.Fatalf("explicit assignment: %+v, %d partitions", got, partitions("u"))
	}
}
