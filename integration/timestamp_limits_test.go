package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
)

// message.timestamp.before.max.ms / after.max.ms (KIP-937), with the
// deprecated difference.max.ms as their fallback: a CreateTime record
// outside the bounds fails the partition's batches with INVALID_TIMESTAMP
// and the record's index, and nothing is appended; LogAppendTime topics
// are not checked.
func TestTimestampLimits(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin(t)
	hour, minute := "3600000", "60000"
	createTopic(t, adm, "ts-bounds", 1, map[string]*string{"message.timestamp.before.max.ms": &hour, "message.timestamp.after.max.ms": &minute})
	createTopic(t, adm, "ts-difference", 1, map[string]*string{"message.timestamp.difference.max.ms": &minute})
	logAppend := "LogAppendTime"
	createTopic(t, adm, "ts-logappend", 1, map[string]*string{"message.timestamp.difference.max.ms": &minute, "message.timestamp.type": &logAppend})
	cl := b.Client(t)
	ctx := testContext(t, 30*time.Second)
	produce := func(topic string, offsets ...time.Duration) ([]int32, error) {
		now := time.Now()
		spec := recordbatch.NoProducer()
		spec.FirstTimestamp = now.UnixMilli()
		var recs []recordbatch.Record
		for _, d := range offsets {
			recs = append(recs, recordbatch.Record{Value: []byte("v"), TimestampDelta: d.Milliseconds()})
		}
		resp, err := produceRequest(8, -1, topic, recordbatch.Build(spec, recs)).RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		var idx []int32
		for _, re := range p.ErrorRecords {
			idx = append(idx, re.RelativeOffset)
		}
		return idx, kerr.ErrorForCode(p.ErrorCode)
	}
	for _, c := range []struct {
		topic   string
		offsets []time.Duration
		bad     []int32
	}{
		{"ts-bounds", []time.Duration{0, -30 * time.Minute, 30 * time.Second}, nil},
		{"ts-bounds", []time.Duration{0, -2 * time.Hour, 0, 5 * time.Minute}, []int32{1, 3}},
		{"ts-difference", []time.Duration{-30 * time.Second, 30 * time.Second}, nil},
		{"ts-difference", []time.Duration{0, -5 * time.Minute}, []int32{1}},
		{"ts-logappend", []time.Duration{-24 * time.Hour}, nil},
	} {
		before := endOffsets(t, adm, c.topic)[0]
		idx, err := produce(c.topic, c.offsets...)
		if c.bad == nil {
			if err != nil {
				t.Errorf("%s %v: %v, want success", c.topic, c.offsets, err)
			}
			continue
		}
		if !errors.Is(err, kerr.InvalidTimestamp) || len(idx) != len(c.bad) || idx[0] != c.bad[0] || idx[len(idx)-1] != c.bad[len(c.bad)-1] {
			t.Errorf("%s %v: %v, record errors %v; want INVALID_TIMESTAMP at %v", c.topic, c.offsets, err, idx, c.bad)
		}
		if after := endOffsets(t, adm, c.topic)[0]; after != before {
			t.Errorf("%s: %d records appended by a refused batch", c.topic, after-before)
		}
	}
}
