package segment

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// After a kill -9 the unflushed segments are rescanned; when they are
// intact, the recovery point stays at its checkpoint, as in Kafka's
// LogLoader: the rescanned batches were never fsynced, so a later crash
// must rescan them again. Only a recovery that cut damage makes its state
// durable and starts from the log end.
func TestRecoveryPointAfterUncleanOpen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage bool
	}{{"intact", false}, {"torn tail", true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = 2000
			dir := t.TempDir()
			l := openLog(t, dir, cfg, true, nil)
			a := newAppender(t, l)
			for range 30 {
				a.add(2, 150)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			flushedEnd := l.EndOffset()
			a.add(1, 10) // unflushed, in the active segment
			a.add(1, 10)
			l.mu.RLock()
			active := l.activeLocked().name()
			l.mu.RUnlock()
			crash(l)
			ckpt := filepath.Join(dir, RecoveryPointCheckpointFile)
			rp, err := readOffsetCheckpoint(ckpt)
			if err != nil || rp > flushedEnd {
				t.Fatalf("checkpoint %d, %v; want <= %d", rp, err, flushedEnd)
			}
			want := a.headers[len(a.headers)-1].NextOffset()
			if tc.damage {
				st, _ := os.Stat(active)
				if err := os.Truncate(active, st.Size()-5); err != nil {
					t.Fatal(err)
				}
				want = a.headers[len(a.headers)-2].NextOffset()
			}

			l = openLog(t, dir, cfg, false, nil)
			defer l.Close()
			if l.EndOffset() != want {
				t.Fatalf("LEO %d after recovery, want %d", l.EndOffset(), want)
			}
			l.mu.RLock()
			got := l.recoveryPoint
			l.mu.RUnlock()
			wantRP := rp
			if tc.damage {
				wantRP = want
			}
			if got != wantRP {
				t.Fatalf("recovery point %d after unclean open, want %d (checkpoint %d, log end %d)", got, wantRP, rp, want)
			}
			if now, err := readOffsetCheckpoint(ckpt); err != nil || (!tc.damage && now != rp) {
				t.Fatalf("checkpoint now %d, %v; want %d unchanged", now, err, rp)
			}
			data, err := l.Read(0, 1<<20, l.EndOffset(), false)
			if err != nil || !bytes.HasPrefix(a.from(0), data) || len(data) < len(a.from(0))-len(a.batches[len(a.batches)-1]) {
				t.Fatalf("data differs after recovery: %v", err)
			}
		})
	}
}

// A new partition writes no recovery point checkpoint (a missing one
// recovers every segment, as one inside the first segment does): creating
// thousands of partitions spends no fsync on it. It appears once the
// recovery point reaches a second segment, and crash recovery then skips
// the flushed segments.
func TestRecoveryPointCheckpointWrittenFromSecondSegment(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	dir := t.TempDir()
	ckpt := filepath.Join(dir, RecoveryPointCheckpointFile)
	l := openLog(t, dir, cfg, true, nil)
	a := newAppender(t, l)
	a.add(2, 100)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ckpt); !os.IsNotExist(err) {
		t.Fatalf("recovery point checkpoint of a one-segment log: %v, want none", err)
	}
	for l.NumSegments() < 3 {
		a.add(2, 150)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	rp, err := readOffsetCheckpoint(ckpt)
	if err != nil || rp != l.EndOffset() {
		t.Fatalf("checkpoint %d, %v after a flush of %d segments; want %d", rp, err, l.NumSegments(), l.EndOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
