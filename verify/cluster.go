package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kbroker/kbroker/internal/launch"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"
)

// ZooKeeperJar is the Debian zookeeper package's server jar.
const ZooKeeperJar = launch.ZooKeeperJar

// killWait bounds the wait for a killed process to exit.
const killWait = 15 * time.Second

// ZooKeeper is a standalone ZooKeeper server with a short tick.
type ZooKeeper struct {
	Port int
	zk   *launch.ZooKeeper
}

func startZooKeeper(dir string) (*ZooKeeper, error) {
	if err := launch.ZooKeeperAvailable(); err != nil {
		return nil, err
	}
	z := &ZooKeeper{zk: launch.NewZooKeeper(launch.ZooKeeperSpec{Dir: dir, TickTime: 500 * time.Millisecond})}
	if err := z.start(); err != nil {
		_ = z.zk.Kill(killWait)
		return nil, err
	}
	return z, nil
}

// Addr is the server's client address.
func (z *ZooKeeper) Addr() string { return z.zk.Addr() }

// start starts the server (again, on the same port and data) and waits
// until it serves.
func (z *ZooKeeper) start() error {
	err := z.zk.Start(context.Background())
	z.Port = z.zk.Port()
	return err
}

// Alive reports whether the server process runs.
func (z *ZooKeeper) Alive() bool { return z.zk.Process().Running() }

// Restart kills the server (SIGKILL) and starts it again after down.
func (z *ZooKeeper) Restart(down time.Duration) error {
	_ = z.zk.Kill(killWait)
	time.Sleep(down)
	return z.start()
}

// Stop kills the server.
func (z *ZooKeeper) Stop() { _ = z.zk.Kill(killWait) }

// ClusterConfig describes the cluster a run starts.
type ClusterConfig struct {
	Brokers        int
	Bin            string // kbroker binary
	Dir            string // working directory: logs, data
	SessionTimeout time.Duration
	LagTime        time.Duration
	MinISR         int
	Unclean        bool
	Extra          []string // more --override settings
	// Security secures every listener (nil: plaintext).
	Security *Security
	// TmpfsSize, when positive, gives each broker's log dir a tmpfs of its
	// own of this many bytes, which the disk-full fault fills. Mounting
	// needs root (CAP_SYS_ADMIN); without it the log dirs are plain
	// directories and Cluster.TmpfsErr says why.
	TmpfsSize int64
}

// Broker is one kbroker process behind its proxies: Proxy in front of its
// listener (clients and other brokers reach it only there, through
// advertised.listeners) and ZKProxy between it and ZooKeeper.
type Broker struct {
	ID       int32
	Port     int // the real listener
	Proxy    *Proxy
	ZKProxy  *Proxy
	LogDir   string
	LogPath  string
	Tmpfs    bool // LogDir is a tmpfs mount of its own
	metrics  string
	cluster  *Cluster
	kb       *launch.Kbroker
	stopped  bool // SIGSTOPped
	procLock sync.Mutex
}

// Addr is the address clients use (the proxy's).
func (b *Broker) Addr() string { return b.Proxy.Addr() }

// Cluster is a ZooKeeper and brokers 1..n.
type Cluster struct {
	cfg     ClusterConfig
	ZK      *ZooKeeper
	Brokers []*Broker // Brokers[i] has id i+1
	// TmpfsErr is why the log dirs are not tmpfs mounts although
	// ClusterConfig.TmpfsSize asked for them.
	TmpfsErr error

	// mu guards pids and ports.
	mu    sync.Mutex
	pids  map[int]int  // live broker pid -> broker id
	ports map[int]bool // handed out by listenPort
}

// listenPort returns a free 127.0.0.1 port below the kernel's ephemeral
// range (ip_local_port_range), for a broker to listen on. A port from
// launch.FreePort is an ephemeral one, and any process's next outgoing
// connection may take it as its source port before the broker binds it: a
// kverify run in CI once lost a broker at startup to "bind: address
// already in use" so. Ports below the range are only ever bound on
// purpose. taken holds the ports already handed out, so none is given
// twice before its broker binds it.
func listenPort(taken map[int]bool) (int, error) {
	from, lo := listenPortRange()
	if lo-from >= 1000 {
		for range 100 {
			p := from + rand.IntN(lo-from)
			if taken[p] {
				continue
			}
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				continue // bound by someone
			}
			l.Close()
			taken[p] = true
			return p, nil
		}
	}
	return launch.FreePort() // no room below the range: the old way
}

// listenPortRange is where listenPort picks: [from, lo), lo being the
// first port of the kernel's ephemeral range (32768 if unreadable).
func listenPortRange() (from, lo int) {
	lo = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				lo = v
			}
		}
	}
	return max(lo/2, 1024), lo
}

// StartCluster starts ZooKeeper and the brokers and waits until every
// broker listens.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	zkDir := filepath.Join(cfg.Dir, "zookeeper")
	if err := os.MkdirAll(zkDir, 0o755); err != nil {
		return nil, err
	}
	z, err := startZooKeeper(zkDir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, ZK: z, pids: map[int]int{}, ports: map[int]bool{}}
	for id := 1; id <= cfg.Brokers; id++ {
		b, err := c.newBroker(int32(id))
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Brokers = append(c.Brokers, b)
	}
	for _, b := range c.Brokers {
		if err := b.start(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) newBroker(id int32) (*Broker, error) {
	b := &Broker{ID: id, cluster: c, LogDir: filepath.Join(c.cfg.Dir, fmt.Sprintf("broker%d", id))}
	b.LogPath = b.LogDir + ".log"
	var err error
	c.mu.Lock()
	b.Port, err = listenPort(c.ports)
	mp, merr := listenPort(c.ports)
	c.mu.Unlock()
	if err = errors.Join(err, merr); err != nil {
		return nil, err
	}
	b.metrics = "127.0.0.1:" + strconv.Itoa(mp)
	if b.Proxy, err = NewProxy(fmt.Sprintf("b%d", id), 0, "127.0.0.1:"+strconv.Itoa(b.Port), c.identify); err != nil {
		return nil, err
	}
	if b.ZKProxy, err = NewProxy(fmt.Sprintf("zk-b%d", id), 0, c.ZK.Addr(), nil); err != nil {
		return nil, err
	}
	b.kb = launch.NewKbroker(launch.KbrokerSpec{
		Bin:          c.cfg.Bin,
		Port:         b.Port,
		DataDir:      b.LogDir,
		Args:         b.args(),
		Dir:          c.cfg.Dir,
		LogPath:      b.LogPath,
		Timeout:      20 * time.Second,
		Every:        25 * time.Millisecond,
		Probe:        c.cfg.Security.Probe(), // plaintext: a listening broker is ready, as kverify always had it
		ProbeTimeout: time.Second,
		OnSpawn: func(pid int) {
			c.mu.Lock()
			c.pids[pid] = int(id)
			c.mu.Unlock()
		},
	})
	if err := os.MkdirAll(b.LogDir, 0o755); err != nil {
		return nil, err
	}
	if c.cfg.TmpfsSize > 0 && c.TmpfsErr == nil {
		// Last step: a broker returned with an error has mounted nothing.
		opts := "size=" + strconv.FormatInt(c.cfg.TmpfsSize, 10) + ",mode=0755"
		if err := unix.Mount("tmpfs", b.LogDir, "tmpfs", 0, opts); err != nil {
			c.TmpfsErr = fmt.Errorf("mount -t tmpfs -o %s tmpfs %s: %w", opts, b.LogDir, err)
		} else {
			b.Tmpfs = true
		}
	}
	return b, nil
}

// fillerName is the file the disk-full fault fills a log dir with. It is
// not a partition directory, so the broker ignores it.
const fillerName = "kverify-disk-filler"

// FillDisk writes a filler file into the broker's tmpfs until the file
// system has no space left, and returns its size. The broker's next log
// write then fails with ENOSPC.
func (b *Broker) FillDisk() (int64, error) {
	if !b.Tmpfs {
		return 0, fmt.Errorf("b%d's log dir is not a tmpfs of its own", b.ID)
	}
	f, err := os.OpenFile(filepath.Join(b.LogDir, fillerName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var size int64
	// Big writes until one fails, then page-sized ones for what is left.
	for _, chunk := range []int{1 << 20, 4 << 10} {
		buf := make([]byte, chunk)
		for {
			n, err := f.Write(buf)
			size += int64(n)
			if errors.Is(err, unix.ENOSPC) {
				break
			}
			if err != nil {
				return size, err
			}
		}
	}
	return size, nil
}

// FreeDisk removes the disk-full fault's filler file, if any.
func (b *Broker) FreeDisk() error {
	if err := os.Remove(filepath.Join(b.LogDir, fillerName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// FreeBytes is the space left in the broker's log dir.
func (b *Broker) FreeBytes() (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(b.LogDir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// unmount removes the broker's tmpfs. The data on it is first copied
// (sparse) to the directory underneath, so that a run's working directory
// keeps the replica logs for a post-mortem as it does without tmpfs.
func (b *Broker) unmount() error {
	if !b.Tmpfs {
		return nil
	}
	var errs []error
	if err := b.FreeDisk(); err != nil {
		errs = append(errs, err)
	}
	saved := b.LogDir + ".saved"
	if out, err := exec.Command("cp", "-a", "--sparse=always", b.LogDir, saved).CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("saving %s: %v: %s", b.LogDir, err, bytes.TrimSpace(out)))
		saved = ""
	}
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		if err = unix.Unmount(b.LogDir, 0); err == nil || !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(100 * time.Millisecond) // a process still leaving it
	}
	if errors.Is(err, unix.EBUSY) {
		// Never leave a mount behind: detach it, gone once unused.
		err = unix.Unmount(b.LogDir, unix.MNT_DETACH)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("umount %s: %w", b.LogDir, err))
		return errors.Join(errs...)
	}
	b.Tmpfs = false
	if saved != "" {
		if err := os.Remove(b.LogDir); err != nil {
			errs = append(errs, err)
		} else if err := os.Rename(saved, b.LogDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// identify labels a proxied connection "b<id>" when a broker process owns
// its other end, else "client".
func (c *Cluster) identify(conn net.Conn) string {
	c.mu.Lock()
	pids := make(map[int]int, len(c.pids))
	for k, v := range c.pids {
		pids[k] = v
	}
	c.mu.Unlock()
	if id := socketOwner(conn, pids); id > 0 {
		return "b" + strconv.Itoa(id)
	}
	return "client"
}

// args are the broker's settings after its listener and log.dirs (which
// launch.Kbroker adds).
func (b *Broker) args() []string {
	cfg := b.cluster.cfg
	ov := []string{
		"broker.id=" + strconv.Itoa(int(b.ID)),
		"advertised.listeners=" + cfg.Security.Protocol() + "://" + b.Proxy.Addr(),
		"zookeeper.connect=" + b.ZKProxy.Addr(),
		"zookeeper.session.timeout.ms=" + strconv.Itoa(int(cfg.SessionTimeout/time.Millisecond)),
		"replica.lag.time.max.ms=" + strconv.Itoa(int(cfg.LagTime/time.Millisecond)),
		"min.insync.replicas=" + strconv.Itoa(cfg.MinISR),
		"default.replication.factor=3",
		"unclean.leader.election.enable=" + strconv.FormatBool(cfg.Unclean),
		"offsets.topic.replication.factor=3",
		"offsets.topic.num.partitions=3",
		"group.initial.rebalance.delay.ms=0",
		"auto.leader.rebalance.enable=false",
		"kbroker.metrics.address=" + b.metrics,
	}
	ov = append(ov, cfg.Security.BrokerSettings()...)
	return launch.Overrides(append(ov, cfg.Extra...)...)
}

// start runs the broker and waits until it listens.
func (b *Broker) start(ctx context.Context) error {
	b.procLock.Lock()
	defer b.procLock.Unlock()
	b.stopped = false
	if err := b.kb.Start(ctx); err != nil {
		return fmt.Errorf("broker %d: %w", b.ID, err)
	}
	return nil
}

func (b *Broker) forget() {
	b.cluster.mu.Lock()
	defer b.cluster.mu.Unlock()
	for pid, id := range b.cluster.pids {
		if id == int(b.ID) {
			delete(b.cluster.pids, pid)
		}
	}
}

// Kill sends SIGKILL and waits for the process to exit.
func (b *Broker) Kill() {
	b.procLock.Lock()
	defer b.procLock.Unlock()
	_ = b.kb.Process().Kill(killWait)
	b.stopped = false
	b.forget()
}

// Restart starts a killed broker again.
func (b *Broker) Restart(ctx context.Context) error {
	if b.Alive() {
		return errors.New("broker still running")
	}
	return b.start(ctx)
}

// Alive reports whether the process runs (stopped or not).
func (b *Broker) Alive() bool {
	b.procLock.Lock()
	defer b.procLock.Unlock()
	return b.kb.Process().Running()
}

// ExitStatus describes how the broker process ended ("exit status 1",
// "signal: killed"), or "running".
func (b *Broker) ExitStatus() string {
	b.procLock.Lock()
	defer b.procLock.Unlock()
	return b.kb.Process().ExitStatus()
}

// Pause sends SIGSTOP, Resume SIGCONT.
func (b *Broker) Pause() {
	b.procLock.Lock()
	defer b.procLock.Unlock()
	_ = b.kb.Process().Pause()
	b.stopped = true
}

// Resume continues a paused broker.
func (b *Broker) Resume() {
	b.procLock.Lock()
	defer b.procLock.Unlock()
	_ = b.kb.Process().Resume()
	b.stopped = false
}

// Stop shuts the broker down with SIGTERM (a controlled shutdown), killing
// it after timeout; it reports whether it exited by itself.
func (b *Broker) Stop(timeout time.Duration) bool {
	b.procLock.Lock()
	defer b.procLock.Unlock()
	ok, _ := b.kb.Process().Stop(timeout)
	b.forget()
	return ok
}

// HealAll lifts every network cut.
func (c *Cluster) HealAll() {
	for _, b := range c.Brokers {
		b.Proxy.Heal()
		b.ZKProxy.Heal()
	}
}

// Close kills everything, closes the proxies and unmounts the log dirs'
// tmpfs mounts.
func (c *Cluster) Close() error {
	for _, b := range c.Brokers {
		b.Kill()
		b.Proxy.Close()
		b.ZKProxy.Close()
	}
	c.ZK.Stop()
	var errs []error
	for _, b := range c.Brokers {
		errs = append(errs, b.unmount())
	}
	return errors.Join(errs...)
}

// LogDirs describes where the brokers keep their logs, for the report.
func (c *Cluster) LogDirs() string {
	n := 0
	for _, b := range c.Brokers {
		if b.Tmpfs {
			n++
		}
	}
	switch {
	case c.cfg.TmpfsSize <= 0:
		return "plain directories (tmpfs not asked for; disk-full fault disabled)"
	case n == len(c.Brokers):
		return fmt.Sprintf("a tmpfs of %d MiB per broker", c.cfg.TmpfsSize>>20)
	default:
		return fmt.Sprintf("plain directories on %d of %d brokers: disk-full fault disabled there (%v)", len(c.Brokers)-n, len(c.Brokers), c.TmpfsErr)
	}
}

// Seeds are the brokers' proxied addresses.
func (c *Cluster) Seeds() []string {
	var out []string
	for _, b := range c.Brokers {
		out = append(out, b.Addr())
	}
	return out
}

// ClientOpts are the options kverify's own clients (admin requests) need
// besides their seeds.
func (c *Cluster) ClientOpts(more ...kgo.Opt) []kgo.Opt { return c.cfg.Security.Admin(more...) }

// Broker returns broker id.
func (c *Cluster) Broker(id int32) *Broker { return c.Brokers[id-1] }
