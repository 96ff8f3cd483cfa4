package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kbroker/kbroker/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestIsLogDirFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"disk full on write", &fs.PathError{Op: "write", Path: "/d/t-0/0.log", Err: syscall.ENOSPC}, true},
		{"I/O error, wrapped", fmt.Errorf("append to t-0: %w", &fs.PathError{Op: "write", Path: "x", Err: syscall.EIO}), true},
		{"dir removed: a new segment cannot be created", &fs.PathError{Op: "open", Path: "/d/t-0/5.log", Err: syscall.ENOENT}, true},
		{"read-only file system", fmt.Errorf("fsync: %w", syscall.EROFS), true},
		{"rename failed", &os.LinkError{Op: "rename", Old: "a", New: "b", Err: syscall.ENOTDIR}, true},
		{"log closed under the operation", fmt.Errorf("read: %w", segment.ErrClosed), false},
		{"append at an unexpected offset", fmt.Errorf("x: %w", segment.ErrUnexpectedOffset), false},
		{"out of file descriptors", &fs.PathError{Op: "open", Path: "x", Err: syscall.EMFILE}, false},
		{"system out of file descriptors", &fs.PathError{Op: "open", Path: "x", Err: syscall.ENFILE}, false},
		{"interrupted", &fs.PathError{Op: "write", Path: "x", Err: syscall.EINTR}, false},
		{"cancelled", fmt.Errorf("wait: %w", context.Canceled), false},
		{"bad data read back, no OS error", errors.New("batch CRC mismatch"), false},
		{"a Kafka error", kerr.CorruptMessage, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isLogDirFailure(tc.err); got != tc.want {
				t.Fatalf("isLogDirFailure(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// failureRecorder collects what OnLogDirFailure is told.
type failureRecorder struct {
	mu  sync.Mutex
	got []LogDirFailure
}

func (r *failureRecorder) record(f LogDirFailure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, f)
}

func (r *failureRecorder) all() []LogDirFailure {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// handleQueued runs the failure handler on every queued dir.
func handleQueued(m *Manager) {
	for {
		select {
		case dir := <-m.failures.queue:
			m.handleLogDirFailure(dir)
		default:
			return
		}
	}
}

// A log dir removed under a running broker: the next write of its
// checkpoint fails, which takes only that dir offline. Its partitions
// answer KAFKA_STORAGE_ERROR (they are neither opened again nor deleted),
// the other dir's partitions keep serving, the broker is told once, and a
// failure of the last dir says no dir is left.
func TestLogDirFailureTakesOnlyItsPartitionsOffline(t *testing.T) {
	dirs := twoDirs(t)
	rec := &failureRecorder{}
	var storageErrs []error
	m := openDirs(t, dirs, func(c *Config) {
		c.OnLogDirFailure = rec.record
		c.OnStorageError = func(err error) { storageErrs = append(storageErrs, err) }
	})
	defer m.Close()
	parts := map[TopicPartition]*Partition{}
	inDir := map[string][]TopicPartition{}
	for i := range int32(4) {
		tp := TopicPartition{"t", i}
		p := lead(t, m, tp)
		appendValues(t, p, "before")
		parts[tp] = p
		inDir[logDirOf(p)] = append(inDir[logDirOf(p)], tp)
	}
	failed, healthy := dirs[1], dirs[0]
	if len(inDir[failed]) != 2 || len(inDir[healthy]) != 2 {
		t.Fatalf("partitions per dir: %v", inDir)
	}

	// The dir goes away (a disk unmounted, a directory removed): open
	// files still work, anything new in it fails.
	if err := os.Rename(failed, failed+".gone"); err != nil {
		t.Fatal(err)
	}
	if err := m.writeHWCheckpoint(); err == nil {
		t.Fatal("writing the checkpoint of a removed dir succeeded")
	}
	if err := m.dirError(failed); err == nil {
		t.Fatal("the removed dir is not offline after its checkpoint failed")
	}
	if err := m.dirError(healthy); err != nil {
		t.Fatalf("the other dir is offline: %v", err)
	}
	handleQueued(m)

	got := rec.all()
	if len(got) != 1 {
		t.Fatalf("OnLogDirFailure told %d times, want 1: %+v", len(got), got)
	}
	f := got[0]
	if f.Dir != failed || f.AllOffline || !slices.Equal(f.OfflineDirs, []string{failed}) ||
		!slices.Equal(f.Partitions, inDir[failed]) || !slices.Equal(f.OfflineReplicas, inDir[failed]) || f.Err == nil {
		t.Fatalf("failure reported as %+v, want dir %s with %v", f, failed, inDir[failed])
	}
	for _, tp := range inDir[failed] {
		if _, ok := m.Get(tp); ok {
			t.Errorf("%s still hosted", tp)
		}
		err := m.OfflineError(tp)
		if !errors.Is(err, kerr.KafkaStorageError) || !errors.Is(err, ErrLogDirOffline) {
			t.Errorf("%s: OfflineError %v, want KAFKA_STORAGE_ERROR", tp, err)
		}
		if _, err := m.MakeLeader(tp, [16]byte{7}, 1, 0, []int32{1}, testConfig()); !errors.Is(err, kerr.KafkaStorageError) {
			t.Errorf("%s: made leader again in the offline dir: %v", tp, err)
		}
		if _, err := m.MakeFollower(tp, [16]byte{7}, 2, 1, "127.0.0.1:1", testConfig()); !errors.Is(err, kerr.KafkaStorageError) {
			t.Errorf("%s: made follower in the offline dir: %v", tp, err)
		}
		if err := m.Remove(tp, true); !errors.Is(err, kerr.KafkaStorageError) {
			t.Errorf("%s: deleting a replica in an offline dir: %v, want KAFKA_STORAGE_ERROR (stays pending)", tp, err)
		}
		// The partition object a request may still hold answers as a
		// replica of nothing.
		if _, err := parts[tp].AppendAsLeader(nil, nil, -1, time.Now()); !errors.Is(err, kerr.NotLeaderForPartition) {
			t.Errorf("%s: append to the stopped partition: %v", tp, err)
		}
	}
	listed := map[TopicPartition]bool{}
	for _, r := range m.Replicas() {
		listed[r.TopicPartition] = true
	}
	for tp := range parts {
		if !listed[tp] {
			t.Errorf("%s not in Replicas: a deletion of its topic would be confirmed while its data remains", tp)
		}
	}
	for _, tp := range inDir[healthy] {
		if err := m.OfflineError(tp); err != nil {
			t.Errorf("%s in the healthy dir: %v", tp, err)
		}
		appendValues(t, parts[tp], "after")
		if v := readValues(t, parts[tp]); !slices.Equal(v, []string{"before", "after"}) {
			t.Errorf("%s reads %v", tp, v)
		}
	}
	// A new partition goes to the dir left.
	if p := lead(t, m, TopicPartition{"new", 0}); logDirOf(p) != healthy {
		t.Errorf("new partition placed in %s, want %s", logDirOf(p), healthy)
	}
	// A second failure of the same dir is not reported again.
	m.reportDirFailure(failed, errors.New("again"))
	handleQueued(m)
	if n := len(rec.all()); n != 1 {
		t.Fatalf("told %d times after a second failure of the same dir", n)
	}
	if slices.Equal(m.OfflineLogDirs(), dirs) {
		t.Fatal("both dirs offline")
	}

	// An append that fails in the last dir takes it offline too: no dir
	// is left.
	if err := os.Rename(healthy, healthy+".gone"); err != nil {
		t.Fatal(err)
	}
	m.logDirFailed(healthy, &fs.PathError{Op: "write", Path: healthy, Err: syscall.EIO})
	handleQueued(m)
	got = rec.all()
	if len(got) != 2 || !got[1].AllOffline || !slices.Equal(got[1].OfflineDirs, dirs) || len(got[1].OfflineReplicas) != 5 {
		t.Fatalf("after the last dir failed: %+v", got)
	}
	if len(storageErrs) != 1 {
		t.Errorf("OnStorageError told %d times, want 1 (the append failure): %v", len(storageErrs), storageErrs)
	}
}

// An append that fails with an I/O error answers KAFKA_STORAGE_ERROR and
// takes the partition's dir offline, not the broker.
func TestAppendFailureTakesItsDirOffline(t *testing.T) {
	dirs := twoDirs(t)
	rec := &failureRecorder{}
	m := openDirs(t, dirs, func(c *Config) { c.OnLogDirFailure = rec.record })
	defer m.Close()
	cfg := testConfig()
	cfg.Log.SegmentBytes = 1 // every batch rolls a new segment
	var victim *Partition
	for i := range int32(2) {
		p, err := m.MakeLeader(TopicPartition{"roll", i}, [16]byte{8}, 0, 0, []int32{1}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		appendValues(t, p, "first")
		if logDirOf(p) == dirs[1] {
			victim = p
		}
	}
	if victim == nil {
		t.Fatal("no partition in the second dir")
	}
	// The partition's own directory is replaced by a file: the next roll
	// cannot create its segment.
	pdir := victim.log().Dir()
	if err := os.Rename(pdir, pdir+".gone"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pdir, []byte("not a dir"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, h := idempotentBatch(-1, 0, 1)
	_, err := victim.AppendAsLeader(b, h, -1, time.Now())
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("append rolling into a broken dir: %v, want KAFKA_STORAGE_ERROR", err)
	}
	if m.dirError(dirs[1]) == nil || m.dirError(dirs[0]) != nil {
		t.Fatalf("offline dirs %v, want only %s", m.OfflineLogDirs(), dirs[1])
	}
	handleQueued(m)
	if got := rec.all(); len(got) != 1 || got[0].Dir != dirs[1] || got[0].AllOffline {
		t.Fatalf("reported %+v", got)
	}
	if err := m.OfflineError(victim.tp); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("OfflineError %v", err)
	}
}

// A log dir that cannot be read at start (here a file where the dir
// should be, as when a disk is missing and its mount point replaced)
// takes only itself offline, as Kafka's LogManager: the broker opens with
// the other dir, whose partitions serve with their data; a replica no
// online dir holds is refused with KAFKA_STORAGE_ERROR (its log may be in
// the dir that is gone, so it must not start empty) and reported offline;
// once the dir is back, every partition serves its data again. No usable
// dir at all fails the open.
func TestLogDirUnusableAtStart(t *testing.T) {
	dirs := twoDirs(t)
	m := openDirs(t, dirs)
	inDir := map[string][]TopicPartition{}
	for i := range int32(4) {
		tp := TopicPartition{"t", i}
		p := lead(t, m, tp)
		appendValues(t, p, fmt.Sprint("v", i))
		inDir[logDirOf(p)] = append(inDir[logDirOf(p)], tp)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	gone, healthy := dirs[1], dirs[0]
	if len(inDir[gone]) != 2 {
		t.Fatalf("partitions per dir: %v", inDir)
	}
	if err := os.Rename(gone, gone+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gone, []byte("not a dir"), 0o644); err != nil {
		t.Fatal(err)
	}

	rec := &failureRecorder{}
	m = openDirs(t, dirs, func(c *Config) { c.OnLogDirFailure = rec.record })
	if got := m.OfflineLogDirs(); !slices.Equal(got, []string{gone}) {
		t.Fatalf("offline dirs %v, want %v", got, []string{gone})
	}
	for _, tp := range inDir[healthy] {
		p := lead(t, m, tp)
		if v := readValues(t, p); !slices.Equal(v, []string{fmt.Sprint("v", tp.Partition)}) {
			t.Errorf("%s reads %v", tp, v)
		}
	}
	refused := append(slices.Clone(inDir[gone]), TopicPartition{"new", 0}, TopicPartition{"new", 1})
	// As a view applies them: opened together (OpenAll), then made leader.
	var reqs []OpenRequest
	for _, tp := range append(slices.Clone(inDir[healthy]), refused...) {
		reqs = append(reqs, OpenRequest{TopicPartition: tp, TopicID: [16]byte{7}, Config: testConfig()})
	}
	for i, err := range m.OpenAll(context.Background(), reqs) {
		if refusedOne := slices.Contains(refused, reqs[i].TopicPartition); refusedOne != errors.Is(err, kerr.KafkaStorageError) {
			t.Errorf("OpenAll of %s: %v", reqs[i].TopicPartition, err)
		}
	}
	for _, tp := range refused {
		if _, err := m.MakeLeader(tp, [16]byte{7}, 1, 0, []int32{1}, testConfig()); !errors.Is(err, kerr.KafkaStorageError) {
			t.Errorf("%s: made leader with its dir offline since the start: %v", tp, err)
		}
		if _, err := m.MakeFollower(tp, [16]byte{7}, 2, 1, "127.0.0.1:1", testConfig()); !errors.Is(err, kerr.KafkaStorageError) {
			t.Errorf("%s: made follower: %v", tp, err)
		}
		if err := m.OfflineError(tp); !errors.Is(err, kerr.KafkaStorageError) {
			t.Errorf("%s: OfflineError %v", tp, err)
		}
	}
	handleQueued(m) // the dir itself: nothing of it was listed
	m.tellRefused()
	slices.SortFunc(refused, compareTopicPartitions)
	got := rec.all()
	if len(got) != 2 || len(got[0].Partitions) != 0 || !slices.Equal(got[1].Partitions, refused) ||
		!slices.Equal(got[1].OfflineReplicas, refused) || !slices.Equal(got[1].OfflineDirs, []string{gone}) || got[1].AllOffline {
		t.Fatalf("OnLogDirFailure told %+v, want the dir, then %v", got, refused)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// The dir back: everything serves its data.
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(gone+".away", gone); err != nil {
		t.Fatal(err)
	}
	m = openDirs(t, dirs)
	for i := range int32(4) {
		p := lead(t, m, TopicPartition{"t", i})
		if v := readValues(t, p); !slices.Equal(v, []string{fmt.Sprint("v", i)}) {
			t.Errorf("t-%d reads %v after its dir came back", i, v)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// No dir usable: the open fails.
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(d, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(Config{LogDirs: dirs, BrokerID: 1}, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
		t.Fatal("opened with no usable log dir")
	}
}
