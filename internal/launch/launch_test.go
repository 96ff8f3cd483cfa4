package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// helperEnv makes the test binary a helper process (see TestMain):
//
//	wait       print "ready", exit 3 on SIGTERM
//	deaf       print "ready", ignore SIGTERM
//	exit=N     print "exiting N" (and "stderr N" to stderr), exit N
//	kbroker    serve kfake on --override listeners=PLAINTEXT://... until
//	           SIGTERM, then exit 0
const helperEnv = "LAUNCH_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

func helper(mode string) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	switch {
	case mode == "wait":
		fmt.Println("ready")
		<-sig
		fmt.Println("got SIGTERM")
		return 3
	case mode == "deaf":
		fmt.Println("ready")
		for {
			<-sig
			fmt.Println("ignoring SIGTERM")
		}
	case strings.HasPrefix(mode, "exit="):
		n, _ := strconv.Atoi(strings.TrimPrefix(mode, "exit="))
		fmt.Println("exiting", n)
		fmt.Fprintln(os.Stderr, "stderr", n)
		return n
	case mode == "kbroker":
		port := -1
		for _, a := range os.Args[1:] {
			if v, ok := strings.CutPrefix(a, "listeners=PLAINTEXT://"); ok {
				_, p, _ := net.SplitHostPort(v)
				port, _ = strconv.Atoi(p)
			}
		}
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake kbroker:", err)
			return 1
		}
		<-sig
		c.Close()
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}

// startHelper runs the test binary as a helper in mode.
func startHelper(t *testing.T, mode string) *Process {
	t.Helper()
	t.Setenv(helperEnv, mode)
	p, err := Start(Spec{Path: os.Args[0], LogPath: filepath.Join(t.TempDir(), "helper.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill(KillWait) })
	waitLog(t, p, "ready")
	return p
}

// waitLog waits until p's log contains s.
func waitLog(t *testing.T, p *Process, s string) {
	t.Helper()
	err := WaitReady(ctxFor(t, 10*time.Second), p, 10*time.Millisecond, func() error {
		data, err := os.ReadFile(p.LogPath())
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), s) {
			return fmt.Errorf("no %q in the log yet", s)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for %q: %v", s, err)
	}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// procState is the state letter of /proc/<pid>/stat: R, S, T (stopped)...
func procState(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ...; comm may hold spaces, so cut at the last ')'.
	rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
	return rest[:1]
}

func TestFreePort(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("port %d not free: %v", port, err)
	}
	l.Close()
}

func TestStopReportsExitStatus(t *testing.T) {
	p := startHelper(t, "wait")
	if !p.Running() || p.State() != nil || p.ExitStatus() != "running" {
		t.Fatalf("running helper: Running %v, State %v, ExitStatus %q", p.Running(), p.State(), p.ExitStatus())
	}
	clean, err := p.Stop(10 * time.Second)
	if !clean || err != nil {
		t.Fatalf("Stop: clean %v, err %v", clean, err)
	}
	if st := p.State(); st == nil || !st.Exited() || st.ExitCode() != 3 {
		t.Fatalf("state after SIGTERM %v, want exit status 3", st)
	}
	if got := p.ExitStatus(); got != "exit status 3" {
		t.Fatalf("ExitStatus %q", got)
	}
	var ee interface{ ExitCode() int }
	if !errors.As(p.Err(), &ee) || ee.ExitCode() != 3 {
		t.Fatalf("Err %v", p.Err())
	}
	if err := p.Signal(syscall.SIGTERM); !errors.Is(err, ErrExited) {
		t.Fatalf("Signal after exit: %v, want ErrExited", err)
	}
	if data, _ := os.ReadFile(p.LogPath()); !strings.Contains(string(data), "got SIGTERM") {
		t.Fatalf("log:\n%s", data)
	}
}

func TestStopKillsWhenIgnored(t *testing.T) {
	p := startHelper(t, "deaf")
	start := time.Now()
	clean, err := p.Stop(300 * time.Millisecond)
	if clean || err != nil {
		t.Fatalf("Stop of a process ignoring SIGTERM: clean %v, err %v", clean, err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("killed after %v, before the timeout", took)
	}
	if got := p.ExitStatus(); got != "signal: killed" {
		t.Fatalf("ExitStatus %q", got)
	}
}

func TestKill(t *testing.T) {
	p := startHelper(t, "wait")
	if err := p.Kill(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if st := p.State(); st == nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("state %v, want killed", st)
	}
	if err := p.Kill(time.Second); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
}

func TestPauseResume(t *testing.T) {
	p := startHelper(t, "wait")
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitPaused(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if s := procState(t, p.Pid()); s != "T" {
		t.Fatalf("state %s after WaitPaused, want T", s)
	}
	// A paused process does not act on SIGTERM...
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(200 * time.Millisecond); err == nil {
		t.Fatal("paused process exited")
	}
	// ...until it is resumed.
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode() != 3 {
		t.Fatalf("exit %v, want 3", st)
	}
}

func TestStopResumesPaused(t *testing.T) {
	p := startHelper(t, "wait")
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if clean, err := p.Stop(10 * time.Second); !clean || err != nil {
		t.Fatalf("Stop of a paused process: clean %v, err %v", clean, err)
	}
}

func TestWaitReadyExited(t *testing.T) {
	t.Setenv(helperEnv, "exit=7")
	log := filepath.Join(t.TempDir(), "helper.log")
	p, err := Start(Spec{Path: os.Args[0], LogPath: log})
	if err != nil {
		t.Fatal(err)
	}
	err = WaitReady(ctxFor(t, 10*time.Second), p, 10*time.Millisecond, func() error { return errors.New("never") })
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "exit status 7") || !strings.Contains(err.Error(), log) {
		t.Fatalf("WaitReady on an exiting process: %v", err)
	}
	tail, err := Tail(log, 0, 2)
	if err != nil || tail != "exiting 7\nstderr 7" {
		t.Fatalf("Tail: %q, %v", tail, err)
	}
}

func TestWaitReadyTimeout(t *testing.T) {
	p := startHelper(t, "wait")
	start := time.Now()
	err := WaitReady(ctxFor(t, 200*time.Millisecond), p, 10*time.Millisecond, func() error { return errors.New("not yet") })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not yet") {
		t.Fatalf("WaitReady: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %v", took)
	}
	if !p.Running() {
		t.Fatal("WaitReady stopped the process")
	}
}

func TestStartFailure(t *testing.T) {
	if _, err := Start(Spec{Path: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Fatal("started a missing binary")
	}
	var p *Process
	if p.Running() || p.ExitStatus() != "never started" || p.Kill(time.Second) != nil || !errors.Is(p.Signal(syscall.SIGTERM), ErrNotStarted) {
		t.Fatal("nil *Process")
	}
}

func TestStderrWithoutLog(t *testing.T) {
	t.Setenv(helperEnv, "exit=9")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := Start(Spec{Path: os.Args[0], Stderr: w})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r) // EOF once the helper exited
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	// stdout ("exiting 9") is discarded.
	if string(out) != "stderr 9\n" || p.State().ExitCode() != 9 {
		t.Fatalf("stderr %q, state %v", out, p.State())
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bytes, lines int
		want         string
	}{
		{0, 0, "one\ntwo\nthree"},
		{0, 2, "two\nthree"},
		{5, 0, "...(truncated)...\nthree"},
		{100, 1, "three"},
	} {
		if got, err := Tail(path, c.bytes, c.lines); err != nil || got != c.want {
			t.Errorf("Tail(%d, %d) = %q, %v; want %q", c.bytes, c.lines, got, err, c.want)
		}
	}
}

func TestKbroker(t *testing.T) {
	t.Setenv(helperEnv, "kbroker")
	logPath := filepath.Join(t.TempDir(), "kbroker.log")
	var pids []int
	k := NewKbroker(KbrokerSpec{
		Bin:     os.Args[0],
		DataDir: t.TempDir(),
		Args:    Overrides("broker.id=1"),
		LogPath: logPath,
		OnSpawn: func(pid int) { pids = append(pids, pid) },
	})
	t.Cleanup(func() { _ = k.Process().Kill(KillWait) })
	if err := k.Start(ctxFor(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	addr := k.Addr()
	if k.Port() == 0 || len(pids) != 1 || pids[0] != k.Process().Pid() {
		t.Fatalf("port %d, pids %v, pid %d", k.Port(), pids, k.Process().Pid())
	}
	if err := KafkaPing(addr, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := k.Start(ctxFor(t, time.Minute)); err == nil {
		t.Fatal("second Start of a running broker")
	}
	if clean, err := k.Process().Stop(10 * time.Second); !clean || err != nil || k.Process().State().ExitCode() != 0 {
		t.Fatalf("Stop: clean %v, err %v, %s", clean, err, k.Process().ExitStatus())
	}
	if err := KafkaPing(addr, 200*time.Millisecond); err == nil {
		t.Fatal("a stopped broker answers")
	}
	// Again, on the same port and with the same log.
	if err := k.Start(ctxFor(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if k.Addr() != addr || len(pids) != 2 {
		t.Fatalf("restarted on %s (was %s), pids %v", k.Addr(), addr, pids)
	}
	if err := k.Process().Kill(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	want := "--override listeners=PLAINTEXT://" + addr + " --override log.dirs="
	if n := strings.Count(string(data), want); n != 2 || !strings.Contains(string(data), "--override broker.id=1\n") {
		t.Fatalf("log has %d headers with %q:\n%s", n, want, data)
	}
}

func TestKbrokerExiting(t *testing.T) {
	t.Setenv(helperEnv, "exit=1")
	logPath := filepath.Join(t.TempDir(), "kbroker.log")
	k := NewKbroker(KbrokerSpec{Bin: os.Args[0], DataDir: t.TempDir(), LogPath: logPath, Attempts: PortAttempts})
	err := k.Start(ctxFor(t, time.Minute))
	if !errors.Is(err, ErrExited) {
		t.Fatalf("Start of an exiting broker: %v", err)
	}
	data, _ := os.ReadFile(logPath)
	if n := strings.Count(string(data), "exiting 1"); n != PortAttempts {
		t.Fatalf("%d runs, want %d (a new port each):\n%s", n, PortAttempts, data)
	}
	// With a fixed port, or by default, there is no retry.
	for _, spec := range []KbrokerSpec{{Port: k.Port(), Attempts: PortAttempts}, {}} {
		spec.Bin, spec.DataDir = os.Args[0], t.TempDir()
		spec.LogPath = filepath.Join(t.TempDir(), "kbroker.log")
		if err := NewKbroker(spec).Start(ctxFor(t, time.Minute)); !errors.Is(err, ErrExited) {
			t.Fatalf("Start %+v: %v", spec, err)
		}
		if data, _ := os.ReadFile(spec.LogPath); strings.Count(string(data), "exiting 1") != 1 {
			t.Fatalf("Start %+v: log\n%s", spec, data)
		}
	}
}

func TestKbrokerNotAnswering(t *testing.T) {
	t.Setenv(helperEnv, "wait")
	k := NewKbroker(KbrokerSpec{Bin: os.Args[0], DataDir: t.TempDir(), Timeout: 300 * time.Millisecond,
		Probe: Accepts})
	t.Cleanup(func() { _ = k.Process().Kill(KillWait) })
	err := k.Start(ctxFor(t, time.Minute))
	if !errors.Is(err, context.DeadlineExceeded) || !k.Process().Running() {
		t.Fatalf("Start: %v, running %v", err, k.Process().Running())
	}
}

func TestZooKeeper(t *testing.T) {
	if err := ZooKeeperAvailable(); err != nil {
		if os.Getenv("KBROKER_REQUIRE_ZK") == "1" {
			t.Fatalf("%v (KBROKER_REQUIRE_ZK=1 requires a real ZooKeeper)", err)
		}
		t.Skipf("skipping, %v (set KBROKER_REQUIRE_ZK=1 to make this a failure)", err)
	}
	z := NewZooKeeper(ZooKeeperSpec{Dir: t.TempDir(), NoSync: true})
	t.Cleanup(func() {
		_ = z.Kill(KillWait)
		if t.Failed() {
			tail, _ := Tail(z.LogPath(), 16<<10, 0)
			t.Logf("ZooKeeper log:\n%s", tail)
		}
	})
	if err := z.Start(ctxFor(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	addr := z.Addr()
	if err := Serving(addr, time.Second); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(z.Dir(), "zoo.cfg"))
	if err != nil || !strings.Contains(string(cfg), "tickTime=500\n") || !strings.Contains(string(cfg), "forceSync=no\n") {
		t.Fatalf("zoo.cfg: %s (%v)", cfg, err)
	}
	if err := z.Kill(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := Ruok(addr, 200*time.Millisecond); err == nil {
		t.Fatal("killed ZooKeeper still answers")
	}
	if err := z.Start(ctxFor(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if z.Addr() != addr {
		t.Fatalf("restarted on %s, was %s", z.Addr(), addr)
	}
	if err := Ruok(addr, time.Second); err != nil {
		t.Fatal(err)
	}
}
