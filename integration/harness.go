// Package integration holds black-box tests that run real kbroker processes
// and talk to them with real Kafka clients (franz-go, sarama, kafka-go,
// kcat). This file is the harness: building the binary once per test run,
// starting, stopping, killing and restarting broker processes, and polling
// for conditions with a bound.
//
// Environment:
//
//	KBROKER_BIN    use this prebuilt kbroker binary instead of building one
//	KBROKER_RACE=1 build the broker binary with -race
//	KBROKER_TEST_AUTHZ=1 run every broker the test did not secure itself
//	               with the ACL authorizer, brokers as super users (authz_mode.go)
package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/launch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// startTimeout bounds how long a broker may take to answer ApiVersions
	// after its process was started.
	startTimeout = 15 * time.Second
	// stopTimeout bounds how long a broker may take to exit after SIGTERM.
	stopTimeout = 15 * time.Second
	// maxLogDump is how much of a broker's output a failing test logs.
	maxLogDump = 64 << 10
)

// brokerBin is the kbroker binary all tests run; set by setupBinary.
var brokerBin string

// setupBinary sets brokerBin from KBROKER_BIN or builds ./cmd/kbroker into
// a fresh temporary directory. The returned cleanup removes that directory.
func setupBinary() (cleanup func(), err error) {
	if bin := os.Getenv("KBROKER_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("KBROKER_BIN: %w", err)
		}
		brokerBin = abs
		return func() {}, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kbroker-bin-")
	if err != nil {
		return nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	bin := filepath.Join(dir, "kbroker")
	args := []string{"build", "-o", bin}
	if os.Getenv("KBROKER_RACE") == "1" {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/kbroker")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return nil, fmt.Errorf("go %s in %s: %v\n%s", strings.Join(args, " "), root, err, out)
	}
	brokerBin = bin
	return cleanup, nil
}

// goTool returns the go command that runs this test, falling back to PATH.
func goTool() string {
	if goroot := os.Getenv("GOROOT"); goroot != "" {
		if p := filepath.Join(goroot, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

// moduleRoot finds the directory holding this module's go.mod: from
// `go env GOMOD`, else by walking up from the working directory.
func moduleRoot() (string, error) {
	if out, err := exec.Command(goTool(), "env", "GOMOD").Output(); err == nil {
		if gomod := strings.TrimSpace(string(out)); gomod != "" && gomod != os.DevNull {
			return filepath.Dir(gomod), nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fileExists(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod found above the working directory")
		}
		dir = parent
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Broker is one kbroker process run by a test. Its methods must be called
// from the test's goroutine (they may call t.Fatal).
type Broker struct {
	t       testing.TB
	dataDir string
	k       *launch.Kbroker
}

// StartBroker starts a kbroker on a free 127.0.0.1 port with a fresh data
// directory and the given Kafka property overrides ("key=value"), and waits
// until it answers ApiVersions.
func StartBroker(t testing.TB, overrides ...string) *Broker {
	t.Helper()
	return StartBrokerIn(t, t.TempDir(), overrides...)
}

// StartBrokerIn is StartBroker with a given data directory, e.g. one that a
// previous broker of the same test wrote.
func StartBrokerIn(t testing.TB, dataDir string, overrides ...string) *Broker {
	t.Helper()
	return startBroker(t, dataDir, nil, overrides...)
}

// StartBrokerProbed is StartBroker for a broker whose probed listener
// needs TLS or SASL: probe tells whether it answers (launch.KafkaPingWith).
func StartBrokerProbed(t testing.TB, probe func(addr string, timeout time.Duration) error, overrides ...string) *Broker {
	t.Helper()
	return startBroker(t, t.TempDir(), probe, overrides...)
}

func startBroker(t testing.TB, dataDir string, probe func(addr string, timeout time.Duration) error, overrides ...string) *Broker {
	t.Helper()
	if brokerBin == "" {
		t.Fatal("integration: broker binary not set up (TestMain must call setupBinary)")
	}
	overrides, authz := authzModeFor(t, probe, overrides)
	b := &Broker{t: t, dataDir: dataDir, k: launch.NewKbroker(launch.KbrokerSpec{
		Bin: brokerBin,
		// A free port may be taken again before the broker binds it: try
		// another when the process exits during startup.
		Attempts:     launch.PortAttempts,
		DataDir:      dataDir,
		Args:         launch.Overrides(overrides...),
		Dir:          dataDir,
		LogPath:      filepath.Join(t.TempDir(), "kbroker.log"),
		Timeout:      startTimeout,
		Every:        50 * time.Millisecond,
		ProbeTimeout: 500 * time.Millisecond,
		Probe:        probe,
	})}
	t.Cleanup(func() {
		b.killQuietly()
		b.checkLog()
		if t.Failed() {
			b.dumpLog()
		}
	})
	if err := b.k.Start(context.Background()); err != nil {
		t.Fatalf("starting kbroker: %v", err)
	}
	if authz != nil {
		authz.grantClients(t, b.Addr())
	}
	return b
}

// Addr is the broker's host:port.
func (b *Broker) Addr() string { return b.k.Addr() }

// DataDir is the broker's log.dirs.
func (b *Broker) DataDir() string { return b.dataDir }

// LogPath is the file collecting the broker's stdout and stderr across all
// of its runs.
func (b *Broker) LogPath() string { return b.k.LogPath() }

// PartitionDir is the directory of one partition's log, as Kafka names it.
func (b *Broker) PartitionDir(topic string, partition int32) string {
	return filepath.Join(b.dataDir, fmt.Sprintf("%s-%d", topic, partition))
}

// Running reports whether the broker process is alive.
func (b *Broker) Running() bool { return b.k.Process().Running() }

// Ping asserts that a fresh client still gets an ApiVersions answer.
func (b *Broker) Ping(t testing.TB) {
	t.Helper()
	if err := launch.KafkaPing(b.Addr(), 5*time.Second); err != nil {
		t.Fatalf("broker %s does not answer a fresh client: %v", b.Addr(), err)
	}
}

// exitState describes how the last process ended.
func (b *Broker) exitState() string { return b.k.Process().ExitStatus() }

// Signal sends sig to the broker process.
func (b *Broker) Signal(sig os.Signal) {
	b.t.Helper()
	if err := b.k.Process().Signal(sig); err != nil {
		b.t.Fatalf("signal %v to kbroker: %v", sig, err)
	}
}

// Wait waits at most timeout for the process to exit and returns its state.
func (b *Broker) Wait(timeout time.Duration) (*os.ProcessState, error) {
	return b.k.Process().Wait(timeout)
}

// Stop sends SIGTERM and asserts a clean exit with status 0 within
// stopTimeout.
func (b *Broker) Stop() {
	b.t.Helper()
	if !b.Running() {
		b.t.Fatalf("Stop: kbroker is not running (%s)", b.exitState())
	}
	start := time.Now()
	if clean, err := b.k.Process().Stop(stopTimeout); !clean {
		b.t.Fatalf("Stop: kbroker still running %v after SIGTERM, killed (%v)", stopTimeout, err)
	}
	if st := b.k.Process().State(); !st.Exited() || st.ExitCode() != 0 {
		b.t.Fatalf("Stop: kbroker exited with %v after SIGTERM, want exit status 0", st)
	}
	b.t.Logf("kbroker %s stopped cleanly in %v", b.Addr(), time.Since(start).Round(time.Millisecond))
}

// Kill sends SIGKILL and waits for the process to be gone.
func (b *Broker) Kill() {
	b.t.Helper()
	if !b.Running() {
		b.t.Fatalf("Kill: kbroker is not running (%s)", b.exitState())
	}
	if err := b.k.Process().Kill(stopTimeout); err != nil {
		b.t.Fatalf("Kill: %v", err)
	}
}

// killQuietly kills a still running process without failing the test.
func (b *Broker) killQuietly() { _ = b.k.Process().Kill(stopTimeout) }

// Restart stops the broker cleanly if it is running, then starts it again
// on the same port and data directory and waits until it answers.
func (b *Broker) Restart() {
	b.t.Helper()
	if b.Running() {
		b.Stop()
	}
	if err := b.k.Start(context.Background()); err != nil {
		b.t.Fatalf("Restart: %v", err)
	}
}

// checkLog fails the test if the broker reported a data race (a -race
// build) or a panic, whatever the test itself checked.
func (b *Broker) checkLog() {
	data, err := os.ReadFile(b.LogPath())
	if err != nil {
		return
	}
	for _, mark := range []string{"WARNING: DATA RACE", "panic: ", "fatal error: "} {
		if bytes.Contains(data, []byte(mark)) {
			b.t.Errorf("kbroker output contains %q", mark)
		}
	}
}

func (b *Broker) dumpLog() { dumpLog(b.t, "kbroker "+b.Addr(), b.LogPath()) }

// dumpLog logs the end of a process's output file.
func dumpLog(t testing.TB, what, logPath string) {
	tail, err := launch.Tail(logPath, maxLogDump, 0)
	if err != nil {
		t.Logf("%s log %s: %v", what, logPath, err)
		return
	}
	t.Logf("%s output (%s):\n%s", what, logPath, tail)
}

// Client returns a kgo client for this broker, closed at test cleanup.
func (b *Broker) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(b.Addr()), kgo.RetryTimeout(20 * time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client over a fresh kgo client for this broker.
func (b *Broker) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(b.Client(t))
}

// freePort returns a 127.0.0.1 TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	port, err := launch.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// checkFor calls fn every `every` until it returns nil, and fails the test
// with fn's last error if that does not happen within total.
func checkFor(t testing.TB, total, every time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", total, err)
		}
		time.Sleep(every)
	}
}

// testContext returns a context that ends after d or at test cleanup.
func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
