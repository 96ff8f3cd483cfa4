package replica

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kbroker/kbroker/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// waitParked waits (bounded) until n goroutines are blocked on a channel
// receive inside fn (a function name as a goroutine dump prints it), so a
// test knows they reached the wait it is about.
func waitParked(t *testing.T, fn string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := 0
		for _, g := range goroutineStacks() {
			if strings.Contains(g, "[chan receive") && strings.Contains(g, fn) {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines parked in %s after 20s, want %d", got, fn, n)
		}
		runtime.Gosched()
	}
}

// goroutineID is the id a goroutine dump's stack starts with
// ("goroutine 42 [running]:" gives "42").
func goroutineID(stack string) string {
	id, _, _ := strings.Cut(strings.TrimPrefix(stack, "goroutine "), " ")
	return id
}

// goroutineStacks is every goroutine's stack, one string each.
func goroutineStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// waitClosed waits (bounded) for ch to close.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: not done after 20s", what)
	}
}

// Concurrent opens of one partition open its log once: the first opens it
// outside the manager's lock, the others wait for it and get the same
// partition.
func TestConcurrentOpensOfOnePartitionOpenItOnce(t *testing.T) {
	m := openDirs(t, []string{t.TempDir()})
	defer m.Close()
	tp := TopicPartition{"t", 0}
	var opens atomic.Int32
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce() // before Close, which waits for opens, on a failure
	m.openHook = func(opening TopicPartition) {
		if opening == tp {
			opens.Add(1)
			<-release
		}
	}
	const callers = 8
	got := make([]*Partition, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			if i%2 == 0 {
				got[i], errs[i] = m.MakeLeader(tp, [16]byte{7}, 0, 0, []int32{1}, testConfig())
			} else {
				got[i], errs[i] = m.open(tp, [16]byte{7}, testConfig())
			}
		})
	}
	// One in the hook, the others waiting for its marker.
	waitParked(t, "replica.(*Manager).open(", callers)
	if n := opens.Load(); n != 1 {
		t.Fatalf("%d opens of the log under way, want 1", n)
	}
	// Meanwhile the manager's lock is free: other partitions open.
	if _, err := m.open(TopicPartition{"t", 1}, [16]byte{7}, testConfig()); err != nil {
		t.Fatalf("open of another partition while one opens: %v", err)
	}
	releaseOnce()
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if got[i] != got[0] {
			t.Fatalf("caller %d got another partition", i)
		}
	}
	if n := opens.Load(); n != 1 {
		t.Fatalf("log opened %d times, want 1", n)
	}
	if p, ok := m.Get(tp); !ok || p != got[0] || !p.State().IsLeader {
		t.Fatalf("hosted %v %v, want the opened partition, leading", p, ok)
	}
}

// A partition whose log is being closed (retiring) is not opened until the
// close is done.
func TestRetiringPartitionIsNotOpenedConcurrently(t *testing.T) {
	m := openDirs(t, []string{t.TempDir()})
	defer m.Close()
	tp := TopicPartition{"t", 0}
	old := lead(t, m, tp)
	appendValues(t, old, "a", "b")
	// Hold the partition's lock: Remove marks it retiring, then blocks
	// in retire.
	old.mu.Lock()
	removed := make(chan struct{})
	go func() {
		defer close(removed)
		if err := m.Remove(tp, false); err != nil {
			t.Errorf("remove: %v", err)
		}
	}()
	waitFor(t, func() bool {
		m.mu.RLock()
		defer m.mu.RUnlock()
		_, retiring := m.retiring[tp]
		return retiring
	})
	var sawOpenLog atomic.Bool
	m.openHook = func(TopicPartition) {
		m.mu.RLock()
		_, retiring := m.retiring[tp]
		m.mu.RUnlock()
		if retiring || !errors.Is(old.log().Flush(), segment.ErrClosed) {
			sawOpenLog.Store(true)
		}
	}
	opened := make(chan *Partition, 1)
	go func() {
		p, err := m.MakeLeader(tp, [16]byte{7}, 1, 0, []int32{1}, testConfig())
		if err != nil {
			t.Errorf("open after the close: %v", err)
		}
		opened <- p
	}()
	waitParked(t, "replica.(*Manager).open(", 1)
	old.mu.Unlock()
	waitClosed(t, removed, "remove")
	var p *Partition
	select {
	case p = <-opened:
	case <-time.After(20 * time.Second):
		t.Fatal("open not done 20s after the close")
	}
	if sawOpenLog.Load() {
		t.Fatal("the log was opened while its earlier instance was still being closed")
	}
	if p == nil || p == old {
		t.Fatalf("reopened partition %p, old %p", p, old)
	}
	if got := readValues(t, p); strings.Join(got, ",") != "a,b" {
		t.Fatalf("reopened log holds %q, want a,b", got)
	}
}

// waitFor polls cond (bounded).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met after 20s")
		}
		runtime.Gosched()
	}
}

// A removal (with deletion) of a partition being opened waits for the
// open, then deletes the log: no directory is left behind the deletion.
func TestRemoveWaitsForOpen(t *testing.T) {
	m := openDirs(t, []string{t.TempDir()})
	defer m.Close()
	tp := TopicPartition{"t", 0}
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce()
	m.openHook = func(TopicPartition) { <-release }
	opened := make(chan error, 1)
	go func() {
		_, err := m.open(tp, [16]byte{7}, testConfig())
		opened <- err
	}()
	waitParked(t, "replica.(*Manager).finishOpen(", 1)
	removed := make(chan error, 1)
	go func() { removed <- m.Remove(tp, true) }()
	waitParked(t, "replica.(*Manager).Remove(", 1)
	releaseOnce()
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get(tp); ok {
		t.Fatal("partition still hosted after its removal")
	}
	if _, err := os.Stat(m.PartitionDir(tp)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("partition dir after the removal: %v", err)
	}
}

// The log dir of a partition being opened fails: the open answers
// KAFKA_STORAGE_ERROR, the log is not hosted, the replica is listed
// offline, and the other dir's partitions open.
func TestDirFailureDuringOpen(t *testing.T) {
	dirs := twoDirs(t)
	var failures failureRecorder
	m := openDirs(t, dirs, func(c *Config) { c.OnLogDirFailure = failures.record })
	defer m.Close()
	tp := TopicPartition{"t", 0}
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce()
	m.openHook = func(TopicPartition) { <-release }
	opened := make(chan error, 1)
	go func() {
		_, err := m.open(tp, [16]byte{7}, testConfig())
		opened <- err
	}()
	waitParked(t, "replica.(*Manager).finishOpen(", 1)
	home := filepath.Dir(m.PartitionDir(tp))
	m.reportDirFailure(home, errors.New("disk gone"))
	handleQueued(m)
	releaseOnce()
	err := <-opened
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("open in a failed dir: %v, want KAFKA_STORAGE_ERROR", err)
	}
	if _, ok := m.Get(tp); ok {
		t.Fatal("a partition of a failed dir is hosted")
	}
	if off := m.OfflineReplicas(); len(off) != 1 || off[0] != tp {
		t.Fatalf("offline replicas %v, want [%v]", off, tp)
	}
	if f := failures.all(); len(f) != 1 || len(f[0].Partitions) != 1 || f[0].Partitions[0] != tp {
		t.Fatalf("failure reports %+v, want one naming %v", f, tp)
	}
	m.openHook = nil
	other := lead(t, m, TopicPartition{"t", 1})
	if logDirOf(other) == home {
		t.Fatalf("new partition placed in the failed dir %s", home)
	}
}

// OpenAll opens at most RecoveryThreadsPerDataDir logs of one log dir at a
// time, and does open that many at once.
func TestOpenAllBoundsConcurrencyPerLogDir(t *testing.T) {
	const threads = 3
	dirs := twoDirs(t)
	m := openDirs(t, dirs, func(c *Config) { c.RecoveryThreadsPerDataDir = threads })
	defer m.Close()
	var mu sync.Mutex
	inFlight := map[string]int{}
	peak := map[string]int{}
	gate := make(chan struct{})
	openGate := sync.OnceFunc(func() { close(gate) })
	defer openGate()
	m.openHook = func(tp TopicPartition) {
		dir := filepath.Dir(m.PartitionDir(tp))
		mu.Lock()
		inFlight[dir]++
		peak[dir] = max(peak[dir], inFlight[dir])
		mu.Unlock()
		<-gate
		mu.Lock()
		inFlight[dir]--
		mu.Unlock()
	}
	var reqs []OpenRequest
	for i := range 40 {
		reqs = append(reqs, OpenRequest{TopicPartition: TopicPartition{"t", int32(i)}, TopicID: [16]byte{7}, Config: testConfig()})
	}
	result := make(chan []error, 1)
	go func() { result <- m.OpenAll(context.Background(), reqs) }()
	// Every worker started (OpenAll waits for them) and each stopped at
	// the gate with a log of its dir. Workers are the goroutines OpenEach's
	// goroutine made with wg.Go: one made but not yet run shows only
	// WaitGroup.Go's wrapper, not OpenEach's closure, so it is counted by
	// its creator (a count by the closure's name once passed with a
	// sixth worker not yet run: CI, "5 open workers").
	deadline := time.Now().Add(20 * time.Second)
	for {
		waiting, workers, atGate := false, 0, 0
		stacks := goroutineStacks()
		opener := ""
		for _, g := range stacks {
			if strings.Contains(g, "replica.(*Manager).OpenEach(") && strings.Contains(g, "sync.(*WaitGroup).Wait") {
				waiting = true
				opener = goroutineID(g)
			}
		}
		for _, g := range stacks {
			if opener != "" && strings.Contains(g, "created by sync.(*WaitGroup).Go in goroutine "+opener+"\n") {
				workers++
				if strings.Contains(g, "[chan receive") && strings.Contains(g, "TestOpenAllBoundsConcurrencyPerLogDir.func") {
					atGate++
				}
			}
		}
		if waiting && workers > 0 && workers == atGate {
			if workers != 2*threads {
				t.Fatalf("%d open workers for 2 log dirs, want %d", workers, 2*threads)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("open workers not all at the gate after 20s: %d of %d (OpenAll waiting: %v)", atGate, workers, waiting)
		}
		runtime.Gosched()
	}
	mu.Lock()
	for _, d := range dirs {
		if inFlight[d] != threads {
			t.Errorf("opens at once in %s: %d, want %d", d, inFlight[d], threads)
		}
	}
	mu.Unlock()
	openGate()
	for i, err := range <-result {
		if err != nil {
			t.Fatalf("open %v: %v", reqs[i].TopicPartition, err)
		}
	}
	perDir := map[string]int{}
	for _, r := range reqs {
		p, ok := m.Get(r.TopicPartition)
		if !ok {
			t.Fatalf("%v not hosted", r.TopicPartition)
		}
		perDir[logDirOf(p)]++
	}
	if perDir[dirs[0]] != 20 || perDir[dirs[1]] != 20 {
		t.Fatalf("logs per dir %v, want 20 in each", perDir)
	}
	for _, d := range dirs {
		if peak[d] != threads {
			t.Fatalf("peak concurrent opens in %s: %d, want %d", d, peak[d], threads)
		}
	}
	// Open ones are not opened again; a cancelled context opens nothing.
	m.openHook = func(tp TopicPartition) { t.Errorf("%v opened again", tp) }
	for _, err := range m.OpenAll(context.Background(), reqs) {
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errs := m.OpenAll(ctx, []OpenRequest{{TopicPartition: TopicPartition{"u", 0}, Config: testConfig()}})
	if !errors.Is(errs[0], context.Canceled) {
		t.Fatalf("open with a cancelled context: %v", errs[0])
	}
	if _, ok := m.Get(TopicPartition{"u", 0}); ok {
		t.Fatal("opened with a cancelled context")
	}
}

// Close flushes and closes every log (in a pool) and writes the
// clean-shutdown marker of each dir; the next start skips recovery there
// and finds every record. No log opens after Close.
func TestCloseClosesEveryLogAndWritesMarkers(t *testing.T) {
	dirs := twoDirs(t)
	m := openDirs(t, dirs, func(c *Config) { c.RecoveryThreadsPerDataDir = 4 })
	var reqs []OpenRequest
	for i := range 30 {
		reqs = append(reqs, OpenRequest{TopicPartition: TopicPartition{"t", int32(i)}, TopicID: [16]byte{7}, Config: testConfig()})
	}
	for _, err := range m.OpenAll(context.Background(), reqs) {
		if err != nil {
			t.Fatal(err)
		}
	}
	var parts []*Partition
	for _, r := range reqs {
		p := lead(t, m, r.TopicPartition)
		appendValues(t, p, r.TopicPartition.String())
		parts = append(parts, p)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if err := p.log().Flush(); !errors.Is(err, segment.ErrClosed) {
			t.Fatalf("%v log after Close: flush %v, want closed", p.tp, err)
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, cleanShutdownFile)); err != nil {
			t.Fatalf("clean shutdown marker of %s: %v", d, err)
		}
	}
	if _, err := m.open(TopicPartition{"t", 99}, [16]byte{7}, testConfig()); !errors.Is(err, errManagerClosed) {
		t.Fatalf("open after Close: %v, want refused", err)
	}

	m2 := openDirs(t, dirs)
	defer m2.Close()
	for _, d := range dirs {
		if !m2.cleanDirs[d] {
			t.Fatalf("%s not taken as cleanly shut down", d)
		}
	}
	for i, err := range m2.OpenAll(context.Background(), reqs) {
		if err != nil {
			t.Fatalf("reopen %v: %v", reqs[i].TopicPartition, err)
		}
	}
	for _, r := range reqs {
		p := lead(t, m2, r.TopicPartition)
		if got := readValues(t, p); len(got) != 1 || got[0] != r.TopicPartition.String() {
			t.Fatalf("%v after restart: %q", r.TopicPartition, got)
		}
	}
}

// Close waits for an open under way, and closes that log too.
func TestCloseWaitsForOpen(t *testing.T) {
	dirs := []string{t.TempDir()}
	m := openDirs(t, dirs)
	tp := TopicPartition{"t", 0}
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce()
	m.openHook = func(TopicPartition) { <-release }
	opened := make(chan *Partition, 1)
	go func() {
		p, err := m.open(tp, [16]byte{7}, testConfig())
		if err != nil {
			t.Errorf("open: %v", err)
		}
		opened <- p
	}()
	waitParked(t, "replica.(*Manager).finishOpen(", 1)
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	waitParked(t, "replica.(*Manager).waitOpeningLocked(", 1)
	releaseOnce()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	p := <-opened
	if p == nil {
		t.Fatal("open failed")
	}
	if err := p.log().Flush(); !errors.Is(err, segment.ErrClosed) {
		t.Fatalf("log opened during Close: flush %v, want closed", err)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], cleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
}
