package segment

import (
	"slices"
	"testing"
)

// A producer snapshot above the recovery point is not fsynced when written
// (after a crash it would be deleted unread); the flush that moves the
// recovery point past it fsyncs it first. One at or below the recovery
// point is durable at once.
func TestProducerSnapshotSyncedWithTheFlushThatPassesIt(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig(), true, nil)
	defer l.Close()
	a := newAppender(t, l)
	for range 10 {
		a.add(1, 40)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		a.add(1, 40)
	}
	unsynced := func() []int64 {
		l.mu.RLock()
		defer l.mu.RUnlock()
		return l.unsyncedSnapshotsLocked(1 << 62)
	}
	for _, o := range []int64{10, 15, 20} { // recovery point 10, log end 20
		if err := l.WriteProducerSnapshot(o, []ProducerSnapshotEntry{{ProducerID: o, LastSequence: -1, LastOffset: -1, CurrentTxnFirstOffset: -1}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := unsynced(); !slices.Equal(got, []int64{15, 20}) {
		t.Fatalf("unsynced snapshots %v, want [15 20] (10 is at the recovery point)", got)
	}
	if off, e, ok := l.LoadProducerSnapshot(0, 20); !ok || off != 20 || e[0].ProducerID != 20 {
		t.Fatalf("load: %d %+v %v", off, e, ok)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := unsynced(); len(got) != 0 {
		t.Fatalf("unsynced snapshots %v after a flush to the log end", got)
	}
	// A truncation forgets the unsynced snapshot it deletes.
	a.add(1, 40)
	if err := l.WriteProducerSnapshot(21, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(20); err != nil {
		t.Fatal(err)
	}
	if got := unsynced(); len(got) != 0 {
		t.Fatalf("unsynced snapshots %v after truncating them away", got)
	}
}
