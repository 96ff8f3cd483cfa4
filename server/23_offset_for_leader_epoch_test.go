package server

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestOffsetForLeaderEpoch(t *testing.T) {
	b := newAdminTestBroker(t)
	mustCreateTopic(t, b, "t", 1, nil)
	mustAppend(t, b, "t", 0, 3)
	epoch := b.controller.Metadata().Topics["t"].Partitions[0].LeaderEpoch

	type part struct {
		partition, current, epoch int32
	}
	run := func(version int16, topic string, parts ...part) []kmsg.OffsetForLeaderEpochResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.Version = version
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		for _, p := range parts {
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p.partition, p.current, p.epoch
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := handleOffsetForLeaderEpoch(context.Background(), b, &requestContext{version: version}, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions
	}

	got := run(4, "t",
		part{0, epoch, epoch},     // current epoch: the log end
		part{0, -1, epoch},        // no fencing
		part{0, epoch + 1, epoch}, // client ahead of this leader
		part{1, -1, epoch},        // no such partition
	)
	want := []struct {
		code  int16
		epoch int32
		end   int64
	}{
		{0, epoch, 3},
		{0, epoch, 3},
		{kerr.UnknownLeaderEpoch.Code, -1, -1},
		{kerr.UnknownTopicOrPartition.Code, -1, -1},
	}
	for i, w := range want {
		if got[i].ErrorCode != w.code || got[i].LeaderEpoch != w.epoch || got[i].EndOffset != w.end {
			t.Errorf("case %d: got %+v, want %+v", i, got[i], w)
		}
	}
	// Before v2 there is no current epoch to fence with.
	if got := run(1, "t", part{0, epoch + 5, epoch}); got[0].ErrorCode != 0 || got[0].EndOffset != 3 {
		t.Errorf("v1: %+v", got[0])
	}
	if got := run(4, "missing", part{0, -1, 0}); got[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: %+v", got[0])
	}
}
