package integration

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ZooKeeper for cluster tests: a standalone server from the Debian
// zookeeper package (scripts/test.sh installs it), on a free port with its
// data in a temporary directory.

const (
	zookeeperJar     = "/usr/share/java/zookeeper.jar"
	zookeeperTimeout = 30 * time.Second // JVM start included
)

// ZooKeeper is one standalone ZooKeeper server run by a test.
type ZooKeeper struct {
	t       testing.TB
	port    int
	dataDir string
	logPath string

	mu   sync.Mutex // guards proc
	proc *process
}

// StartZooKeeper starts a standalone ZooKeeper and waits until it serves. It skips the test when java or the zookeeper package is missing.
func StartZooKeeper(t testing.TB) *ZooKeeper {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("java not installed (scripts/test.sh installs zookeeper, which brings it)")
	}
	if !fileExists(zookeeperJar) {
		t.Skip(zookeeperJar + " not installed (scripts/test.sh installs zookeeper)")
	}
	z := &ZooKeeper{t: t, dataDir: t.TempDir()}
	z.logPath = filepath.Join(t.TempDir(), "zookeeper.log")
	t.Cleanup(func() {
		z.current().kill(stopTimeout)
		if t.Failed() {
			dumpLog(t, "zookeeper "+z.Addr(), z.logPath)
		}
	})
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		z.port = freePort(t)
		if lastErr = z.start(); lastErr != nil {
			break
		}
		if lastErr = z.waitReady(); lastErr == nil {
			return z
		}
		if z.current().alive() {
			break
		}
	}
	t.Fatalf("starting zookeeper: %v", lastErr)
	return nil
}

// Addr is the client address, as zookeeper.connect takes it.
func (z *ZooKeeper) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(z.port)) }

func (z *ZooKeeper) current() *process {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.proc
}

func (z *ZooKeeper) start() error {
	args := []string{
		"-Xmx256m",
		"-Dzookeeper.admin.enableServer=false",
		"-Dzookeeper.4lw.commands.whitelist=ruok,srvr,stat",
		"-cp", zookeeperJar,
		"org.apache.zookeeper.server.ZooKeeperServerMain",
		strconv.Itoa(z.port), z.dataDir,
	}
	p, err := spawn("java", args, z.dataDir, z.logPath)
	if err != nil {
		return err
	}
	z.mu.Lock()
	z.proc = p
	z.mu.Unlock()
	return nil
}

// fourLetter sends a four-letter command and returns the answer.
func fourLetter(addr, cmd string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	out, err := io.ReadAll(c)
	return string(out), err
}

func (z *ZooKeeper) waitReady() error {
	p := z.current()
	deadline := time.Now().Add(zookeeperTimeout)
	for {
		if !p.alive() {
			return fmt.Errorf("zookeeper exited during startup (%v); see %s", p.state, z.logPath)
		}
		// "ruok" answers as soon as the process runs; "srvr" names the
		// mode only once the server serves sessions.
		out, err := fourLetter(z.Addr(), "srvr", time.Second)
		if err == nil && strings.Contains(out, "Mode: ") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zookeeper on %s not ready after %v: %q %v", z.Addr(), zookeeperTimeout, out, err)
		}
		select {
		case <-p.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM and waits for the JVM to exit.
func (z *ZooKeeper) Stop() {
	z.t.Helper()
	p := z.current()
	if !p.alive() {
		z.t.Fatalf("zookeeper Stop: not running")
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		p.kill(stopTimeout)
		z.t.Fatalf("zookeeper did not exit within %v of SIGTERM", stopTimeout)
	}
}

// Kill sends SIGKILL: every session it held expires with it.
func (z *ZooKeeper) Kill() {
	z.t.Helper()
	z.current().kill(stopTimeout)
}

// Restart stops a running server, then starts it again on the same port
// and data directory.
func (z *ZooKeeper) Restart() {
	z.t.Helper()
	if z.current().alive() {
		z.Stop()
	}
	if err := z.start(); err != nil {
		z.t.Fatalf("zookeeper Restart: %v", err)
	}
	if err := z.waitReady(); err != nil {
		z.t.Fatalf("zookeeper Restart: %v", err)
	}
}

// DataDir is the server's data directory.
func (z *ZooKeeper) DataDir() string { return z.dataDir }
