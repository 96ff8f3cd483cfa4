package replica

import (
	"io"
	"log/slog"
	"testing"

	"golang.org/x/sys/unix"
)

// A cleaner thread runs at niceness cleanerNice; the others keep theirs.
func TestLowerCleanerPriority(t *testing.T) {
	// getpriority(2) itself answers 20 - nice on Linux.
	nice := func() int {
		prio, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
		if err != nil {
			t.Error(err)
		}
		return 20 - prio
	}
	done := make(chan int)
	go func() {
		lowerCleanerPriority(slog.New(slog.NewTextHandler(io.Discard, nil)))
		done <- nice()
	}()
	if got := <-done; got != cleanerNice {
		t.Fatalf("cleaner thread niceness %d, want %d", got, cleanerNice)
	}
	if got := nice(); got == cleanerNice {
		t.Fatalf("the test's own thread was lowered too")
	}
}
