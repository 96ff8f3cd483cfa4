package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func produceOne(t *testing.T, b *Broker, version int16, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := handleProduce(context.Background(), b, &requestContext{}, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*produceResponse).Topics[0].Partitions[0]
}

// A keyless record on a compacted topic gets INVALID_RECORD naming it, and
// nothing of the batch is appended; keyed records (tombstones too) go in;
// a topic with cleanup.policy=delete takes keyless records.
func TestProduceCompactedNeedsKeys(t *testing.T) {
	b := newAdminTestBroker(t)
	mustCreateTopic(t, b, "compacted", 1, map[string]string{"cleanup.policy": "compact,delete"})
	mustCreateTopic(t, b, "plain", 1, nil)
	keyless := recordbatch.Build(recordbatch.NoProducer(), []recordbatch.Record{
		{Key: []byte("a"), Value: []byte("1")}, {Key: nil, Value: []byte("2")}, {Key: []byte("c"), Value: nil},
	})
	got := produceOne(t, b, 9, "compacted", keyless)
	if got.ErrorCode != kerr.InvalidRecord.Code || len(got.ErrorRecords) != 1 || got.ErrorRecords[0].RelativeOffset != 1 || got.ErrorMessage == nil {
		t.Fatalf("keyless record on a compacted topic: %+v, want INVALID_RECORD for record 1", got)
	}
	if got := *got.ErrorRecords[0].ErrorMessage; got != "Compacted topic cannot accept message without key in topic partition compacted-0." {
		t.Fatalf("record error message %q", got)
	}
	part, _ := b.replicas.Get(replica.TopicPartition{Topic: "compacted", Partition: 0})
	if leo := part.State().LogEndOffset; leo != 0 {
		t.Fatalf("log end %d after a refused batch, want 0", leo)
	}
	if got := produceOne(t, b, 7, "compacted", keyless); got.ErrorCode != kerr.InvalidRecord.Code || len(got.ErrorRecords) != 0 {
		t.Fatalf("Produce v7 (no record errors field): %+v", got)
	}
	keyed := recordbatch.Build(recordbatch.NoProducer(), []recordbatch.Record{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: nil}})
	if got := produceOne(t, b, 9, "compacted", keyed); got.ErrorCode != 0 || got.BaseOffset != 0 {
		t.Fatalf("keyed records: %+v", got)
	}
	if got := produceOne(t, b, 9, "plain", keyless); got.ErrorCode != 0 {
		t.Fatalf("keyless records on a delete topic: %+v", got)
	}
}

func TestOutOfRangeTimestamps(t *testing.T) {
	now := time.UnixMilli(10_000_000)
	batch := func(deltas ...int64) [][]byte {
		spec := recordbatch.NoProducer()
		spec.FirstTimestamp = now.UnixMilli()
		var recs []recordbatch.Record
		for _, d := range deltas {
			recs = append(recs, recordbatch.Record{Value: []byte("v"), TimestampDelta: d})
		}
		return [][]byte{recordbatch.Build(spec, recs)}
	}
	for _, c := range []struct {
		name          string
		batches       [][]byte
		before, after time.Duration
		bad           []int32
	}{
		{"within both", batch(0, -1000, 1000), 2 * time.Second, 2 * time.Second, nil},
		{"at the edges", batch(-2000, 2000), 2 * time.Second, 2 * time.Second, nil},
		{"too old", batch(0, -2001), 2 * time.Second, 2 * time.Second, []int32{1}},
		{"too new", batch(2001, 0, 5000), 2 * time.Second, 2 * time.Second, []int32{0, 2}},
		{"no before bound", batch(-1 << 40), -1, 0, nil},
		{"no after bound", batch(1 << 40), 0, -1, nil},
		{"indexes run across batches", append(batch(0, 0), batch(0, 9000)...), time.Second, time.Second, []int32{3}},
	} {
		errs, err := outOfRangeTimestamps(c.batches, now, c.before, c.after)
		var got []int32
		for _, e := range errs {
			got = append(got, e.RelativeOffset)
		}
		if (err != nil) != (c.bad != nil) || fmt.Sprint(got) != fmt.Sprint(c.bad) {
			t.Errorf("%s: record errors %v, err %v; want %v", c.name, got, err, c.bad)
		}
		if err != nil && !errors.Is(err, kerr.InvalidTimestamp) {
			t.Errorf("%s: %v, want INVALID_TIMESTAMP", c.name, err)
		}
	}
}
