package segment

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestSyncToMovesDurableEnd(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig(), true, nil)
	defer l.Close()
	a := newAppender(t, l)
	a.add(5, 100)
	a.add(5, 100)
	if got := l.DurableEnd(); got != 0 {
		t.Fatalf("DurableEnd before any sync = %d, want 0", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.SyncTo(ctx, 10); err != nil {
		t.Fatalf("SyncTo(10): %v", err)
	}
	if got := l.DurableEnd(); got != 10 {
		t.Fatalf("DurableEnd after SyncTo(10) = %d, want 10", got)
	}
	a.add(3, 100)
	if got := l.DurableEnd(); got != 10 {
		t.Fatalf("DurableEnd after an unsynced append = %d, want 10", got)
	}
	// Already durable: no round.
	rounds := l.SyncRounds()
	if err := l.SyncTo(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if l.SyncRounds() != rounds {
		t.Fatalf("SyncTo below the durable end ran a round")
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := l.DurableEnd(); got != 13 {
		t.Fatalf("DurableEnd after Flush = %d, want 13 (the recovery point)", got)
	}
}

// Concurrent callers waiting for offsets appended before any round began
// share one fdatasync round.
func TestSyncToGroupCommit(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig(), true, nil)
	defer l.Close()
	a := newAppender(t, l)
	const callers = 32
	for range callers {
		a.add(1, 200)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Go(func() { errs <- l.SyncTo(ctx, int64(i+1)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := l.SyncRounds(); got != 1 {
		t.Fatalf("%d callers ran %d sync rounds, want 1", callers, got)
	}
	if got := l.DurableEnd(); got != callers {
		t.Fatalf("DurableEnd = %d, want %d", got, callers)
	}
}

// A truncation voids what the durable end said about the offsets it cut:
// data appended again there is not durable until synced.
func TestSyncToAfterTruncation(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig(), true, nil)
	defer l.Close()
	a := newAppender(t, l)
	for range 4 {
		a.add(5, 100)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.SyncTo(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(10); err != nil {
		t.Fatal(err)
	}
	a.add(5, 100) // offsets 10-14 again, not synced
	if got := l.DurableEnd(); got > 10 {
		t.Fatalf("DurableEnd after truncation and re-append = %d, want <= 10", got)
	}
	if err := l.SyncTo(ctx, 20); err == nil {
		t.Fatalf("SyncTo past the log end after a truncation succeeded")
	}
	if err := l.SyncTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	if got := l.DurableEnd(); got != 15 {
		t.Fatalf("DurableEnd = %d, want 15", got)
	}
}

// A round spanning a roll syncs the rolled segment and the new one's
// directory entry; callers waiting on a round give up when their context
// ends; a closed log refuses.
func TestSyncToRollContextClose(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4 << 10
	l := openLog(t, t.TempDir(), cfg, true, nil)
	a := newAppender(t, l)
	for range 10 {
		a.add(2, 1000)
	}
	if l.NumSegments() < 3 {
		t.Fatalf("want several segments, have %d", l.NumSegments())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.SyncTo(ctx, l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	if got, want := l.DurableEnd(), l.EndOffset(); got != want {
		t.Fatalf("DurableEnd = %d, want %d", got, want)
	}

	a.add(1, 10)
	l.syncMu.Lock()
	held := make(chan struct{})
	l.durable.inFlight = held // a round that never ends
	l.syncMu.Unlock()
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if err := l.SyncTo(short, l.EndOffset()); err == nil {
		t.Fatalf("SyncTo behind a stuck round returned nil after its context ended")
	}
	l.syncMu.Lock()
	l.durable.inFlight = nil
	l.syncMu.Unlock()
	close(held)

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.SyncTo(ctx, l.EndOffset()+1); err == nil {
		t.Fatalf("SyncTo on a closed log succeeded")
	}
}

// A target past a log truncated meanwhile is ErrTruncated, which callers
// tell from a storage failure.
func TestSyncToTruncatedIsErrTruncated(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig(), true, nil)
	defer l.Close()
	a := newAppender(t, l)
	a.add(10, 10)
	if err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.SyncTo(ctx, 10); !errors.Is(err, ErrTruncated) {
		t.Fatalf("SyncTo past a truncation: %v, want ErrTruncated", err)
	}
}
