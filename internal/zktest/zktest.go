// Package zktest runs a real, single-node Apache ZooKeeper for tests: the
// Debian package's server (ZooKeeperServerMain) in a child java process,
// with its data and log in t.TempDir(), started by internal/launch.
//
// When java or /usr/share/java/zookeeper.jar is missing, Start skips the
// test, unless KBROKER_REQUIRE_ZK=1 (set it in CI), in which case it fails:
// a missing ZooKeeper must never turn the suite silently green.
package zktest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/launch"
)

const (
	// ZooKeeperJar is the Debian zookeeper package's server jar.
	ZooKeeperJar = launch.ZooKeeperJar
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
	t  testing.TB
	zk *launch.ZooKeeper
}

// Available reports why a ZooKeeper cannot be started here, or nil.
func Available() error { return launch.ZooKeeperAvailable() }

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
	s := &Server{t: t, zk: launch.NewZooKeeper(launch.ZooKeeperSpec{
		Dir:      t.TempDir(),
		TickTime: TickTime,
		// Test speed, not durability against power loss (a killed process
		// loses nothing).
		NoSync:  true,
		Timeout: startTimeout,
	})}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			s.dumpLog()
		}
	})
	if err := s.zk.Start(context.Background()); err != nil {
		s.dumpLog()
		t.Fatalf("zktest: %v", err)
	}
	return s
}

// Addr is the server's client address, host:port.
func (s *Server) Addr() string { return s.zk.Addr() }

// Dir is the server's working directory (config, log, data).
func (s *Server) Dir() string { return s.zk.Dir() }

// LogPath is the server's log file.
func (s *Server) LogPath() string { return s.zk.LogPath() }

// Stop kills the server (its whole process group) and waits for it to
// exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if err := s.zk.Kill(stopTimeout); err != nil {
		s.t.Errorf("zktest: ZooKeeper (pid %d) did not exit within %v of SIGKILL: %v", s.zk.Process().Pid(), stopTimeout, err)
	}
}

// Restart stops the server and starts it again on the same port with the
// same data, waiting until it serves.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.zk.Start(context.Background()); err != nil {
		s.dumpLog()
		s.t.Fatalf("zktest: restart: %v", err)
	}
}

// Ruok asks the server at addr "ruok" and wants "imok" (the server is up,
// though perhaps not serving yet).
func Ruok(addr string, timeout time.Duration) error { return launch.Ruok(addr, timeout) }

func (s *Server) dumpLog() {
	tail, err := launch.Tail(s.LogPath(), logTail, 0)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.t.Logf("zktest: read ZooKeeper log: %v", err)
		}
		return
	}
	s.t.Logf("zktest: tail of ZooKeeper log %s:\n%s", s.LogPath(), tail)
}

// FreePort returns a 127.0.0.1 port nothing listens on right now, for tests
// that need an address where no ZooKeeper answers.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := launch.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
