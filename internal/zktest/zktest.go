// Package zktest runs a real, single-node Apache ZooKeeper for tests: the
// Debian package's server (ZooKeeperServerMain) in a child java process,
// with its data and log in t.TempDir().
//
// When java or /usr/share/java/zookeeper.jar is missing, Start skips the
// test, unless KBROKER_REQUIRE_ZK=1 (set it in CI), in which case it fails:
// a missing ZooKeeper must never turn the suite silently green.
package zktest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// ZooKeeperJar is the Debian zookeeper package's server jar.
	ZooKeeperJar = "/usr/share/java/zookeeper.jar"
	// RequireEnv names the variable that turns a missing ZooKeeper from a
	// skip into a failure.
	RequireEnv = "KBROKER_REQUIRE_ZK"

	// TickTime is the server's tick: sessions may be as short as
	// 2*TickTime and as long as 20*TickTime.
	TickTime = 500 * time.Millisecond

	startTimeout = 30 * time.Second
	stopTimeout  = 10 * time.Second
	// logTail bounds how much of the server log a failed test prints.
	logTail = 32 << 10
)

// Server is one running (or stopped) ZooKeeper. Its port and data survive
// Stop and Restart, so clients can reconnect to the same address and find
// their data (and, within the session timeout, their sessions) again.
type Server struct {
	t       testing.TB
	dir     string
	cfgPath string
	logPath string
	port    int

	// mu guards cmd and exited.
	mu     sync.Mutex
	cmd    *exec.Cmd     // nil while stopped
	exited chan struct{} // closed when cmd exits
}

// Available reports why a ZooKeeper cannot be started here, or nil.
func Available() error {
	if _, err := exec.LookPath("java"); err != nil {
		return fmt.Errorf("java is not installed (install the Debian packages default-jre-headless and zookeeper): %w", err)
	}
	if _, err := os.Stat(ZooKeeperJar); err != nil {
		return fmt.Errorf("ZooKeeper is not installed (install the Debian package zookeeper): %w", err)
	}
	return nil
}

// Start runs a ZooKeeper on a free 127.0.0.1 port and waits until it
// serves. t.Cleanup stops it; a failed test gets the tail of its log.
func Start(t testing.TB) *Server {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("zktest: %v (%s=1 requires a real ZooKeeper)", err, RequireEnv)
		}
		t.Skipf("zktest: skipping, %v (set %s=1 to make this a failure)", err, RequireEnv)
	}
	s := &Server{t: t, dir: t.TempDir()}
	s.logPath = filepath.Join(s.dir, "zookeeper.log")
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			s.dumpLog()
		}
	})
	// A free port can be taken between our probe and the server's bind;
	// try a few.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if s.port, err = freePort(); err != nil {
			t.Fatalf("zktest: %v", err)
		}
		if err = s.writeConfig(); err != nil {
			t.Fatalf("zktest: %v", err)
		}
		if err = s.start(); err == nil {
			return s
		}
		s.Stop()
	}
	s.dumpLog()
	t.Fatalf("zktest: %v", err)
	return nil
}

// Addr is the server's client address, host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Dir is the server's working directory (config, log, data).
func (s *Server) Dir() string { return s.dir }

// LogPath is the server's log file.
func (s *Server) LogPath() string { return s.logPath }

// Stop kills the server (its whole process group) and waits for it to
// exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	// SIGKILL is what a crash looks like; ZooKeeper's transaction log is
	// written before it answers, so nothing acknowledged is lost.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		s.t.Errorf("zktest: ZooKeeper (pid %d) did not exit within %v of SIGKILL", cmd.Process.Pid, stopTimeout)
	}
}

// Restart stops the server and starts it again on the same port with the
// same data, waiting until it serves.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.dumpLog()
		s.t.Fatalf("zktest: restart: %v", err)
	}
}

func (s *Server) writeConfig() error {
	dataDir := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	cfg := strings.Join([]string{
		"tickTime=" + strconv.Itoa(int(TickTime/time.Millisecond)),
		"dataDir=" + dataDir,
		"clientPort=" + strconv.Itoa(s.port),
		"clientPortAddress=127.0.0.1",
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=*",
		// Small preallocated logs and no fsync: test speed, not durability
		// against power loss (a killed process loses nothing).
		"preAllocSize=1024",
		"forceSync=no",
		"",
	}, "\n")
	s.cfgPath = filepath.Join(s.dir, "zoo.cfg")
	return os.WriteFile(s.cfgPath, []byte(cfg), 0o644)
}

// classpath puts slf4j-simple first (when present) so the server's log goes
// to our log file rather than to whichever slf4j binding the wildcard finds
// first (Debian ships a no-op one).
func classpath() string {
	parts := []string{ZooKeeperJar}
	for _, jar := range []string{"/usr/share/java/slf4j-api.jar", "/usr/share/java/slf4j-simple.jar"} {
		if _, err := os.Stat(jar); err == nil {
			parts = append(parts, jar)
		}
	}
	return strings.Join(append(parts, "/usr/share/java/*"), ":")
}

func (s *Server) start() error {
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logFile, "=== zktest: starting ZooKeeper on %s at %s\n", s.Addr(), time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command("java",
		"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
		"-cp", classpath(),
		"org.apache.zookeeper.server.ZooKeeperServerMain", s.cfgPath)
	cmd.Dir = s.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Own process group, so Stop kills java and anything it started; and
	// die with the test binary if it is killed first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start java: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-exited:
			return fmt.Errorf("ZooKeeper exited during startup (%v); see %s", cmd.ProcessState, s.logPath)
		default:
		}
		if err := Serving(s.Addr(), 500*time.Millisecond); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("ZooKeeper did not serve on %s within %v: %w", s.Addr(), startTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Ruok asks the server at addr "ruok" and wants "imok" (the server is up,
// though perhaps not serving yet).
func Ruok(addr string, timeout time.Duration) error {
	reply, err := fourLetterWord(addr, "ruok", timeout)
	if err != nil {
		return err
	}
	if reply != "imok" {
		return fmt.Errorf("ruok answered %q", reply)
	}
	return nil
}

// Serving reports whether the server at addr serves clients: "ruok" says
// imok and "srvr" reports a mode (before its database is loaded it says
// it is "not currently serving requests").
func Serving(addr string, timeout time.Duration) error {
	if err := Ruok(addr, timeout); err != nil {
		return err
	}
	reply, err := fourLetterWord(addr, "srvr", timeout)
	if err != nil {
		return err
	}
	if !strings.Contains(reply, "Mode: ") {
		return fmt.Errorf("srvr answered %q", reply)
	}
	return nil
}

// fourLetterWord sends a ZooKeeper four-letter command and reads the whole
// reply (the server closes the connection after it).
func fourLetterWord(addr, cmd string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", err
	}
	reply, err := io.ReadAll(conn)
	if err != nil && len(reply) == 0 {
		return "", err
	}
	return string(reply), nil
}

func (s *Server) dumpLog() {
	data, err := os.ReadFile(s.logPath)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.t.Logf("zktest: read ZooKeeper log: %v", err)
		}
		return
	}
	if len(data) > logTail {
		data = data[len(data)-logTail:]
	}
	s.t.Logf("zktest: tail of ZooKeeper log %s:\n%s", s.logPath, data)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreePort returns a 127.0.0.1 port nothing listens on right now, for tests
// that need an address where no ZooKeeper answers.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
