package server

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/recordbatch"
	"github.com/kbroker/kbroker/segment"
)

const longMax = "9223372036854775807"

func brokerWith(t *testing.T, overrides ...string) *Broker {
	t.Helper()
	cfg, _, err := config.Load("", overrides)
	if err != nil {
		t.Fatal(err)
	}
	return &Broker{cfg: cfg}
}

func TestPartitionConfigTimesAndPolicy(t *testing.T) {
	week := 7 * 24 * time.Hour
	for _, tc := range []struct {
		name      string
		broker    []string
		topic     map[string]string
		retention time.Duration // RetentionTime; < 0 forever
		bytes     int64         // RetentionBytes; < 0 unlimited
		roll      time.Duration // RollAfter; 0 never
		flush     time.Duration // FlushInterval; 0 never
	}{
		{"defaults", nil, nil, week, -1, week, 0},
		{"retention.ms Long.MAX", nil, map[string]string{"retention.ms": longMax}, -1, -1, week, 0},
		{"retention.ms one past a Duration", nil, map[string]string{"retention.ms": "9223372036855"}, -1, -1, week, 0},
		// 18446744073710 ms * 1e6 wraps to 448384 ns: retention 0.
		{"retention.ms wrapping to zero", nil, map[string]string{"retention.ms": "18446744073710"}, -1, -1, week, 0},
		{"retention.ms largest Duration", nil, map[string]string{"retention.ms": "9223372036854"}, 9223372036854 * time.Millisecond, -1, week, 0},
		{"retention.ms -1", nil, map[string]string{"retention.ms": "-1"}, -1, -1, week, 0},
		{"retention.ms 0", nil, map[string]string{"retention.ms": "0"}, 0, -1, week, 0},
		{"broker log.retention.ms Long.MAX", []string{"log.retention.ms=" + longMax}, nil, -1, -1, week, 0},
		{"compact ignores time and size", nil,
			map[string]string{"cleanup.policy": "compact", "retention.ms": "1", "retention.bytes": "1"}, -1, -1, week, 0},
		{"compact,delete keeps them", nil,
			map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "1", "retention.bytes": "1"}, time.Millisecond, 1, week, 0},
		{"delete,compact keeps them", nil,
			map[string]string{"cleanup.policy": "delete,compact", "retention.ms": "1", "retention.bytes": "1"}, time.Millisecond, 1, week, 0},
		{"broker default compact", []string{"log.cleanup.policy=compact", "log.retention.ms=1", "log.retention.bytes=1"}, nil, -1, -1, week, 0},
		{"topic delete over broker compact", []string{"log.cleanup.policy=compact", "log.retention.ms=1"},
			map[string]string{"cleanup.policy": "delete"}, time.Millisecond, -1, week, 0},
		{"segment.ms Long.MAX", nil, map[string]string{"segment.ms": longMax}, week, -1, 0, 0},
		{"segment.ms wrapping", nil, map[string]string{"segment.ms": "18446744073710"}, week, -1, 0, 0},
		{"broker log.roll.ms Long.MAX", []string{"log.roll.ms=" + longMax}, nil, week, -1, 0, 0},
		{"flush.ms 1000", nil, map[string]string{"flush.ms": "1000"}, week, -1, week, time.Second},
		{"flush.ms wrapping", nil, map[string]string{"flush.ms": "18446744073710"}, week, -1, week, 0},
		{"broker log.flush.interval.ms Long.MAX", []string{"log.flush.interval.ms=" + longMax}, nil, week, -1, week, 0},
	} {
		pc, err := brokerWith(t, tc.broker...).partitionConfig(tc.topic)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := pc.Log
		if (got.RetentionTime < 0) != (tc.retention < 0) || (tc.retention >= 0 && got.RetentionTime != tc.retention) {
			t.Errorf("%s: RetentionTime %v, want %v", tc.name, got.RetentionTime, tc.retention)
		}
		if (got.RetentionBytes < 0) != (tc.bytes < 0) || (tc.bytes >= 0 && got.RetentionBytes != tc.bytes) {
			t.Errorf("%s: RetentionBytes %d, want %d", tc.name, got.RetentionBytes, tc.bytes)
		}
		if got.RollAfter != tc.roll {
			t.Errorf("%s: RollAfter %v, want %v", tc.name, got.RollAfter, tc.roll)
		}
		if got.FlushInterval != tc.flush {
			t.Errorf("%s: FlushInterval %v, want %v", tc.name, got.FlushInterval, tc.flush)
		}
	}
}

func TestPartitionConfigBadNumber(t *testing.T) {
	if _, err := brokerWith(t).partitionConfig(map[string]string{"retention.ms": "soon"}); err == nil {
		t.Fatal("retention.ms=soon accepted")
	}
}

// TestPartitionConfigRetentionOnDisk runs the settings partitionConfig
// gives through a real log: every segment's records are a day old, and
// retention may delete only the control topic's.
func TestPartitionConfigRetentionOnDisk(t *testing.T) {
	for _, tc := range []struct {
		name    string
		broker  []string
		topic   map[string]string
		deletes bool
	}{
		{"control: delete, retention.ms=1", nil, map[string]string{"cleanup.policy": "delete", "retention.ms": "1"}, true},
		{"compact, retention.ms=1, retention.bytes=1", nil,
			map[string]string{"cleanup.policy": "compact", "retention.ms": "1", "retention.bytes": "1"}, false},
		{"retention.ms Long.MAX", nil, map[string]string{"retention.ms": longMax}, false},
		{"retention.ms wrapping to zero", nil, map[string]string{"retention.ms": "18446744073710"}, false},
		{"broker log.cleanup.policy=compact", []string{"log.cleanup.policy=compact", "log.retention.ms=1"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := brokerWith(t, tc.broker...).partitionConfig(tc.topic)
			if err != nil {
				t.Fatal(err)
			}
			cfg := pc.Log
			cfg.SegmentBytes = 200 // a few batches per segment
			l, err := segment.Open(t.TempDir(), cfg, true, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			now := time.Now()
			old := now.Add(-24 * time.Hour).UnixMilli()
			for i := int64(0); i < 20; i++ {
				b := recordbatch.Build(recordbatch.BatchSpec{BaseOffset: i, FirstTimestamp: old + i, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
					[]recordbatch.Record{{Key: []byte{byte(i)}, Value: make([]byte, 40)}})
				h, err := recordbatch.Validate(b)
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Append(b, h); err != nil {
					t.Fatal(err)
				}
			}
			segs := l.NumSegments()
			if segs < 3 {
				t.Fatalf("%d segments; the test wants several", segs)
			}
			n, err := l.DeleteOldSegments(now, l.EndOffset())
			if err != nil {
				t.Fatal(err)
			}
			if !tc.deletes {
				if n != 0 || l.StartOffset() != 0 || l.NumSegments() != segs {
					t.Fatalf("deleted %d of %d segments, start %d; want every segment kept", n, segs, l.StartOffset())
				}
				return
			}
			if n != segs || l.StartOffset() != 20 {
				t.Fatalf("deleted %d of %d segments, start %d; want all, start 20", n, segs, l.StartOffset())
			}
		})
	}
}
