package replica

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Running out of file descriptors while a segment rolls is not a storage
// failure: the append is answered with a retriable error, the broker is
// not told to stop, nothing is written, and the same append succeeds once
// descriptors are free again.
func TestAppendOutOfDescriptorsIsRetriable(t *testing.T) {
	var storageErrors []error
	m := testManager(t, t.TempDir(), func(err error) { storageErrors = append(storageErrors, err) })
	defer m.Close()
	cfg := testConfig()
	cfg.Log.SegmentBytes = 100 // every append after the first rolls
	p, err := m.MakeLeader(TopicPartition{"t", 0}, [16]byte{1}, 0, 0, []int32{0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, h := idempotentBatch(5, 0, 1)
	if _, err := p.AppendAsLeader(b, h, -1, time.Now()); err != nil {
		t.Fatal(err)
	}

	// Use up the descriptors: lower the soft limit (restored after) and
	// open /dev/null until the process has none left.
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	low := syscall.Rlimit{Cur: min(orig.Cur, 1024), Max: orig.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig)
	var hoard []*os.File
	release := func() {
		for _, f := range hoard {
			f.Close()
		}
		hoard = nil
	}
	defer release()
	for {
		f, err := os.Open(os.DevNull)
		if errors.Is(err, syscall.EMFILE) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		hoard = append(hoard, f)
		if len(hoard) > 4096 {
			t.Fatal("no EMFILE after 4096 opens")
		}
	}

	b, h = idempotentBatch(5, 1, 1)
	_, err = p.AppendAsLeader(b, h, -1, time.Now())
	if !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("append out of descriptors: %v, want REQUEST_TIMED_OUT", err)
	}
	if len(storageErrors) != 0 {
		t.Fatalf("reported as a storage failure: %v", storageErrors)
	}
	if leo := p.State().LogEndOffset; leo != 1 {
		t.Fatalf("log end offset %d after the failed append, want 1", leo)
	}

	release()
	res, err := p.AppendAsLeader(b, h, -1, time.Now())
	if err != nil || res.BaseOffset != 1 {
		t.Fatalf("retry once descriptors are free: %+v %v", res, err)
	}
	if n := p.Log().NumSegments(); n != 2 {
		t.Fatalf("%d segments, want 2", n)
	}
	if len(storageErrors) != 0 {
		t.Fatalf("storage failures: %v", storageErrors)
	}
}
