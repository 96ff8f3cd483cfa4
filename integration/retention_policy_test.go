package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestRetentionSparesCompactedAndForeverTopics: time and size retention
// delete only where cleanup.policy holds "delete", and retention.ms =
// Long.MAX_VALUE keeps forever. Three topics get records with producer
// timestamps three days old, in small segments: a compacted topic with
// retention.ms=1 and retention.bytes=1, a topic with retention.ms=
// 9223372036854775807, one with retention.ms=18446744073710 (584 years, too
// long for a time.Duration: it used to wrap to 0.4 ms), and a control
// topic (delete, retention.ms=1) whose log start moving proves retention
// ran. All but the control topic keep every record.
func TestRetentionSparesCompactedAndForeverTopics(t *testing.T) {
	b := StartBroker(t, "log.retention.check.interval.ms=200")
	adm := b.Admin(t)
	const (
		compacted = "retention-compacted"
		forever   = "retention-forever"
		wrapping  = "retention-wrapping"
		control   = "retention-control"
		perTopic  = 30
	)
	str := kadm.StringPtr
	createTopic(t, adm, compacted, 1, map[string]*string{
		"cleanup.policy": str("compact"), "retention.ms": str("1"), "retention.bytes": str("1"), "segment.bytes": str("1024"),
	})
	createTopic(t, adm, forever, 1, map[string]*string{
		"retention.ms": str("9223372036854775807"), "segment.bytes": str("1024"),
	})
	createTopic(t, adm, wrapping, 1, map[string]*string{
		"retention.ms": str("18446744073710"), "segment.bytes": str("1024"),
	})
	createTopic(t, adm, control, 1, map[string]*string{
		"cleanup.policy": str("delete"), "retention.ms": str("1"), "segment.bytes": str("1024"),
	})

	cl := b.Client(t)
	old := time.Now().Add(-72 * time.Hour)
	// produceOld sends n keyed records one at a time (a batch each, several
	// to a 1024-byte segment) with old timestamps, starting at offset from.
	produceOld := func(topic string, from, n int) []rec {
		t.Helper()
		ctx := testContext(t, 30*time.Second)
		out := make([]rec, 0, n)
		for i := from; i < from+n; i++ {
			r := rec{Key: fmt.Appendf(nil, "key-%03d", i), Value: fmt.Appendf(nil, "%s-%03d-%0300d", topic, i, i)}
			kr := toKgo(r, topic)
			kr.Timestamp = old.Add(time.Duration(i) * time.Millisecond)
			got, err := cl.ProduceSync(ctx, kr).First()
			if err != nil {
				t.Fatalf("producing to %s: %v", topic, err)
			}
			r.Partition, r.Offset = got.Partition, got.Offset
			out = append(out, r)
		}
		return out
	}
	kept := map[string][]rec{
		compacted: produceOld(compacted, 0, perTopic),
		forever:   produceOld(forever, 0, perTopic),
		wrapping:  produceOld(wrapping, 0, perTopic),
	}
	produceOld(control, 0, perTopic)

	// waitStart waits until the control topic's log start reaches want:
	// retention deleted every segment up to there.
	waitStart := func(want int64) {
		t.Helper()
		checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			starts, err := offsetsOf(ctx, adm, control, false)
			if err != nil {
				return err
			}
			if starts[0] != want {
				return fmt.Errorf("control topic log start offset %d, want %d", starts[0], want)
			}
			return nil
		})
	}
	waitStart(perTopic)
	// The retention pass that deleted the control topic's records may have
	// visited the other topics first. Passes run one after another over
	// every partition, so the pass that deletes records written after the
	// first deletion was seen visits the other topics after all of their
	// records were written.
	produceOld(control, perTopic, 2)
	waitStart(perTopic + 2)

	ctx := testContext(t, 30*time.Second)
	for _, topic := range []string{compacted, forever, wrapping} {
		starts, err := offsetsOf(ctx, adm, topic, false)
		if err != nil {
			t.Fatalf("listing start offsets of %s: %v", topic, err)
		}
		ends, err := offsetsOf(ctx, adm, topic, true)
		if err != nil {
			t.Fatalf("listing end offsets of %s: %v", topic, err)
		}
		if starts[0] != 0 || ends[0] != perTopic {
			t.Errorf("%s: offsets [%d, %d), want [0, %d): retention deleted records", topic, starts[0], ends[0], perTopic)
		}
		segs := logSegments(t, b.PartitionDir(topic, 0))
		if len(segs) < 3 || segs[0].base != 0 {
			t.Errorf("%s: segments %v; want at least 3, from offset 0", topic, segs)
		}
		consumed := consumeKgo(t, b.Addr(), topic, nil, map[int32]int64{0: perTopic}, 30*time.Second)
		compareRecords(t, kept[topic], consumed, compareOpts{checkProducedOffsets: true})
	}
}
