package server

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDeleteRecords(t *testing.T) {
	b := newAdminTestBroker(t)
	mustCreateTopic(t, b, "t", 2, nil)
	mustCreateTopic(t, b, "compacted", 1, map[string]string{"cleanup.policy": "compact"})
	mustCreateTopic(t, b, offsetsTopic, 1, nil)
	mustAppend(t, b, "t", 0, 5)
	mustAppend(t, b, "t", 0, 5)
	mustAppend(t, b, "t", 1, 2)

	type part struct {
		partition int32
		offset    int64
	}
	run := func(topic string, parts ...part) []kmsg.DeleteRecordsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.Version = 2
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		for _, p := range parts {
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = p.partition, p.offset
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := handleDeleteRecords(context.Background(), b, &requestContext{version: 2}, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions
	}

	got := run("t", part{0, 7}, part{1, 3}, part{2, 0})
	want := []struct {
		code int16
		low  int64
	}{{0, 7}, {kerr.OffsetOutOfRange.Code, -1}, {kerr.UnknownTopicOrPartition.Code, -1}}
	for i, w := range want {
		if got[i].ErrorCode != w.code || got[i].LowWatermark != w.low {
			t.Errorf("case %d: got %+v, want %+v", i, got[i], w)
		}
	}
	p, _ := b.localPartition("t", 0)
	if st := p.State(); st.LogStartOffset != 7 {
		t.Fatalf("log start offset %d, want 7", st.LogStartOffset)
	}
	// Lower than the start: nothing changes; -1: up to the high watermark.
	if got := run("t", part{0, 2}); got[0].ErrorCode != 0 || got[0].LowWatermark != 7 {
		t.Errorf("lower offset: %+v", got[0])
	}
	if got := run("t", part{1, -1}); got[0].ErrorCode != 0 || got[0].LowWatermark != 2 {
		t.Errorf("offset -1: %+v", got[0])
	}
	if got := run("compacted", part{0, 0}); got[0].ErrorCode != kerr.PolicyViolation.Code {
		t.Errorf("compacted topic: %+v", got[0])
	}
	if got := run(offsetsTopic, part{0, 0}); got[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Errorf("internal topic: %+v", got[0])
	}
	if got := run("missing", part{0, 0}); got[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: %+v", got[0])
	}
}
