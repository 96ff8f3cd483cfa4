package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets by timestamp answers at record precision, as Kafka: the
// first record (in offset order) whose timestamp is at or after the
// target, with that record's timestamp, also inside a batch; -3 the record
// carrying the largest timestamp.
func TestListOffsetsByTimestampAtRecordPrecision(t *testing.T) {
	b := StartBroker(t)
	topic := "lo-records"
	createTopic(t, b.Admin(t), topic, 1, nil)
	cl := b.Client(t)
	ctx := testContext(t, 30*time.Second)
	base := time.Now().Add(-time.Hour).UnixMilli()
	// Two batches: offsets 0-3 at base+{0,50,20,90}, offsets 4-5 at
	// base+{200,100}.
	for _, deltas := range [][]int64{{0, 50, 20, 90}, {200, 100}} {
		var recs []recordbatch.Record
		for i, d := range deltas {
			recs = append(recs, recordbatch.Record{Value: []byte(fmt.Sprint(i)), TimestampDelta: d})
		}
		spec := recordbatch.NoProducer()
		spec.FirstTimestamp = base
		resp, err := produceRequest(7, -1, topic, recordbatch.Build(spec, recs)).RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
	for _, c := range []struct {
		ts       int64
		off, got int64
	}{
		{base, 0, base},
		{base + 1, 1, base + 50},
		{base + 21, 1, base + 50},
		{base + 51, 3, base + 90},
		{base + 91, 4, base + 200},
		{base + 150, 4, base + 200},
		{base + 201, -1, -1},
		{-3, 4, base + 200}, // MAX_TIMESTAMP: the record, not its batch's end
	} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 7
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = c.ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.Offset != c.off || p.Timestamp != c.got {
			t.Errorf("ListOffsets(%d): offset %d timestamp %d (%v); want %d, %d", c.ts, p.Offset, p.Timestamp, kerr.ErrorForCode(p.ErrorCode), c.off, c.got)
		}
	}
}
