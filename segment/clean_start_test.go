package segment

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
)

// Cleaning never moves the log start (Kafka: only retention and
// DeleteRecords do): a first segment whose records were all superseded is
// kept, empty, under its base offset, through later cleanings that group
// it with the next segments and through a restart after a crash.
func TestCleanKeepsLogStart(t *testing.T) {
	dir := t.TempDir()
	cfg := cleanConfig()
	l := openLog(t, dir, cfg, true, nil)
	write := func(n int) {
		for range n {
			base := l.EndOffset()
			spec := recordbatch.NoProducer()
			spec.BaseOffset, spec.FirstTimestamp = base, 1_000_000+base
			b := recordbatch.Build(spec, []recordbatch.Record{{Key: []byte(fmt.Sprint("k", base%3)), Value: []byte(fmt.Sprint("v", base))}})
			h, err := recordbatch.Validate(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Append(b, h); err != nil {
				t.Fatal(err)
			}
		}
	}
	for round := range 6 {
		write(120)
		if _, err := l.Clean(CleanOptions{FirstUncleanable: math.MaxInt64, DedupeBufferBytes: 1 << 20, DeleteRetention: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if s, first := l.StartOffset(), l.SegmentStats()[0].Base; s != 0 || first != 0 {
			t.Fatalf("round %d: log start %d, first segment %d, want 0 and 0 (%d segments)", round, s, first, l.NumSegments())
		}
	}
	crash(l)
	l = openLog(t, dir, cfg, false, nil)
	defer l.Close()
	if s := l.StartOffset(); s != 0 {
		t.Fatalf("log start %d after a crash", s)
	}
}
