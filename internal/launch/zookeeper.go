package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ZooKeeperJar is the Debian zookeeper package's server jar.
const ZooKeeperJar = "/usr/share/java/zookeeper.jar"

// ZooKeeperAvailable reports why a ZooKeeper cannot be started here, or nil.
func ZooKeeperAvailable() error {
	if _, err := exec.LookPath("java"); err != nil {
		return fmt.Errorf("java is not installed (install the Debian packages default-jre-headless and zookeeper): %w", err)
	}
	if _, err := os.Stat(ZooKeeperJar); err != nil {
		return fmt.Errorf("ZooKeeper is not installed (install the Debian package zookeeper): %w", err)
	}
	return nil
}

// ZooKeeperSpec describes a standalone ZooKeeper server (the Debian
// package's ZooKeeperServerMain in a java process).
type ZooKeeperSpec struct {
	// Dir holds zoo.cfg and data/, and is the working directory.
	Dir  string
	Port int // 0: a free port, chosen at the first Start and kept
	// TickTime is the server's tick (default 500ms): sessions may be as
	// short as 2 and as long as 20 ticks.
	TickTime time.Duration
	// LogPath collects the server's output (default Dir/zookeeper.log).
	LogPath string
	// NoSync turns off fsync of the transaction log (forceSync=no): a
	// killed server loses nothing, only a power loss would.
	NoSync bool
	// Timeout bounds each wait until the server serves (default 30s).
	Timeout time.Duration
}

// ZooKeeper is a ZooKeeper server whose port and data survive a kill, so
// that it can be started again where clients expect it.
type ZooKeeper struct {
	service
	spec ZooKeeperSpec
}

// NewZooKeeper returns a server that Start will run.
func NewZooKeeper(spec ZooKeeperSpec) *ZooKeeper {
	if spec.TickTime <= 0 {
		spec.TickTime = 500 * time.Millisecond
	}
	if spec.LogPath == "" {
		spec.LogPath = filepath.Join(spec.Dir, "zookeeper.log")
	}
	if spec.Timeout <= 0 {
		spec.Timeout = 30 * time.Second
	}
	return &ZooKeeper{service: service{name: "ZooKeeper", port: spec.Port}, spec: spec}
}

// Dir is the server's directory (config, data and, by default, log).
func (z *ZooKeeper) Dir() string { return z.spec.Dir }

// LogPath is the server's log file.
func (z *ZooKeeper) LogPath() string { return z.spec.LogPath }

// Kill kills the server (SIGKILL to its process group: ZooKeeper writes
// its transaction log before it answers, so nothing acknowledged is lost)
// and waits at most timeout.
func (z *ZooKeeper) Kill(timeout time.Duration) error { return z.Process().Kill(timeout) }

// Start runs the server and waits until it serves (Serving). Without a
// port yet it takes a free one, and on failure kills the server and tries
// another (PortAttempts in all).
func (z *ZooKeeper) Start(ctx context.Context) error {
	return z.start(ctx, PortAttempts, true, z.startOnce)
}

func (z *ZooKeeper) startOnce(ctx context.Context, addr string) error {
	cfgPath, err := z.writeConfig()
	if err != nil {
		return err
	}
	p, err := Start(Spec{
		Path: "java",
		Args: []string{
			"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-Dzookeeper.jmx.log4j.disable=true",
			"-Dorg.slf4j.simpleLogger.showDateTime=true",
			"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
			"-cp", zooKeeperClasspath(),
			"org.apache.zookeeper.server.ZooKeeperServerMain", cfgPath,
		},
		Dir:     z.spec.Dir,
		LogPath: z.spec.LogPath,
	})
	if err != nil {
		return err
	}
	z.setProcess(p)
	wctx, cancel := context.WithTimeout(ctx, z.spec.Timeout)
	defer cancel()
	return WaitReady(wctx, p, 50*time.Millisecond, func() error { return Serving(addr, time.Second) })
}

// writeConfig writes zoo.cfg for the current port and returns its path.
func (z *ZooKeeper) writeConfig() (string, error) {
	dataDir := filepath.Join(z.spec.Dir, "data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", err
	}
	lines := []string{
		"tickTime=" + strconv.Itoa(int(z.spec.TickTime/time.Millisecond)),
		"dataDir=" + dataDir,
		"clientPort=" + strconv.Itoa(z.Port()),
		"clientPortAddress=127.0.0.1",
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=*",
		"preAllocSize=1024",
	}
	if z.spec.NoSync {
		lines = append(lines, "forceSync=no")
	}
	path := filepath.Join(z.spec.Dir, "zoo.cfg")
	return path, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// zooKeeperClasspath puts slf4j-simple first (when present) so the
// server's log goes to its log file rather than to whichever slf4j binding
// the wildcard finds first (Debian ships a no-op one).
func zooKeeperClasspath() string {
	parts := []string{ZooKeeperJar}
	for _, jar := range []string{"/usr/share/java/slf4j-api.jar", "/usr/share/java/slf4j-simple.jar"} {
		if _, err := os.Stat(jar); err == nil {
			parts = append(parts, jar)
		}
	}
	return strings.Join(append(parts, "/usr/share/java/*"), ":")
}
