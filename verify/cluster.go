package verify

import (
	"bytes"
	"context"
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
	"time"

	"golang.org/x/sys/unix"
)

// ZooKeeperJar is the Debian zookeeper package's server jar.
const ZooKeeperJar = "/usr/share/java/zookeeper.jar"

// process is one child process in its own process group, dying with us.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

func spawn(name string, args []string, dir, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "=== kverify: starting %s at %s\n", name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) alive() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *process) signal(sig syscall.Signal) {
	if p.alive() {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// kill sends SIGKILL (after SIGCONT, harmless) and waits.
func (p *process) kill() {
	if p == nil {
		return
	}
	p.signal(syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
	}
}

// terminate sends SIGTERM, waits up to timeout, then kills.
func (p *process) terminate(timeout time.Duration) bool {
	if !p.alive() {
		return true
	}
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return true
	case <-time.After(timeout):
		p.kill()
		return false
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ZooKeeper is a standalone ZooKeeper server with a short tick.
type ZooKeeper struct {
	Port int
	dir  string
	log  string
	proc *process
}

func startZooKeeper(dir string) (*ZooKeeper, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return nil, fmt.Errorf("java is not installed (install the Debian package zookeeper): %w", err)
	}
	if _, err := os.Stat(ZooKeeperJar); err != nil {
		return nil, fmt.Errorf("ZooKeeper is not installed (install the Debian package zookeeper): %w", err)
	}
	z := &ZooKeeper{dir: dir, log: filepath.Join(dir, "zookeeper.log")}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if z.Port, err = freePort(); err != nil {
			return nil, err
		}
		if err = z.start(); err == nil {
			return z, nil
		}
		z.proc.kill()
	}
	return nil, err
}

// Addr is the server's client address.
func (z *ZooKeeper) Addr() string { return "127.0.0.1:" + strconv.Itoa(z.Port) }

func (z *ZooKeeper) start() error {
	data := filepath.Join(z.dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	cfg := strings.Join([]string{
		"tickTime=500",
		"dataDir=" + data,
		"clientPort=" + strconv.Itoa(z.Port),
		"clientPortAddress=127.0.0.1",
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=ruok,srvr",
		"preAllocSize=1024",
		"",
	}, "\n")
	cfgPath := filepath.Join(z.dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	cp := ZooKeeperJar
	for _, jar := range []string{"/usr/share/java/slf4j-api.jar", "/usr/share/java/slf4j-simple.jar"} {
		if _, err := os.Stat(jar); err == nil {
			cp += ":" + jar
		}
	}
	cp += ":/usr/share/java/*"
	p, err := spawn("java", []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.jmx.log4j.disable=true", "-cp", cp,
		"org.apache.zookeeper.server.ZooKeeperServerMain", cfgPath}, z.dir, z.log)
	if err != nil {
		return err
	}
	z.proc = p
	deadline := time.Now().Add(30 * time.Second)
	for {
		if !p.alive() {
			return fmt.Errorf("ZooKeeper exited during startup; see %s", z.log)
		}
		if out, err := fourLetter(z.Addr(), "srvr", time.Second); err == nil && strings.Contains(out, "Mode: ") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ZooKeeper on %s not serving after 30s; see %s", z.Addr(), z.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Restart kills the server (SIGKILL) and starts it again after down.
func (z *ZooKeeper) Restart(down time.Duration) error {
	z.proc.kill()
	time.Sleep(down)
	return z.start()
}

// Stop kills the server.
func (z *ZooKeeper) Stop() { z.proc.kill() }

func fourLetter(addr, cmd string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if len(b) == 0 && err != nil {
		return "", err
	}
	return string(b), nil
}

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
	proc     *process
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

	// mu guards pids.
	mu   sync.Mutex
	pids map[int]int // live broker pid -> broker id
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
	c := &Cluster{cfg: cfg, ZK: z, pids: map[int]int{}}
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
	if b.Port, err = freePort(); err != nil {
		return nil, err
	}
	mp, err := freePort()
	if err != nil {
		return nil, err
	}
	b.metrics = "127.0.0.1:" + strconv.Itoa(mp)
	if b.Proxy, err = NewProxy(fmt.Sprintf("b%d", id), 0, "127.0.0.1:"+strconv.Itoa(b.Port), c.identify); err != nil {
		return nil, err
	}
	if b.ZKProxy, err = NewProxy(fmt.Sprintf("zk-b%d", id), 0, c.ZK.Addr(), nil); err != nil {
		return nil, err
	}
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

func (b *Broker) args() []string {
	cfg := b.cluster.cfg
	ov := []string{
		"broker.id=" + strconv.Itoa(int(b.ID)),
		"listeners=PLAINTEXT://127.0.0.1:" + strconv.Itoa(b.Port),
		"advertised.listeners=PLAINTEXT://" + b.Proxy.Addr(),
		"log.dirs=" + b.LogDir,
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
	ov = append(ov, cfg.Extra...)
	var args []string
	for _, o := range ov {
		args = append(args, "--override", o)
	}
	return args
}

func (b *Broker) start(ctx context.Context) error {
	b.procLock.Lock()
	defer b.procLock.Unlock()
	p, err := spawn(b.cluster.cfg.Bin, b.args(), b.cluster.cfg.Dir, b.LogPath)
	if err != nil {
		return err
	}
	b.proc, b.stopped = p, false
	b.cluster.mu.Lock()
	b.cluster.pids[p.cmd.Process.Pid] = int(b.ID)
	b.cluster.mu.Unlock()
	addr := "127.0.0.1:" + strconv.Itoa(b.Port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if !p.alive() {
			return fmt.Errorf("broker %d exited during startup; see %s", b.ID, b.LogPath)
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("broker %d not listening on %s after 20s; see %s", b.ID, addr, b.LogPath)
		}
		time.Sleep(25 * time.Millisecond)
	}
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
	b.proc.kill()
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
	return b.proc.alive()
}

// ExitStatus describes how the broker process ended ("exit status 1",
// "signal: killed"), or "running".
func (b *Broker) ExitStatus() string {
	b.procLock.Lock()
	defer b.procLock.Unlock()
	if b.proc == nil {
		return "never started"
	}
	if b.proc.alive() {
		return "running"
	}
	return b.proc.cmd.ProcessState.String()
}

// Pause sends SIGSTOP, Resume SIGCONT.
func (b *Broker) Pause() {
	b.procLock.Lock()
	defer b.procLock.Unlock()
	b.proc.signal(syscall.SIGSTOP)
	b.stopped = true
}

// Resume continues a paused broker.
func (b *Broker) Resume() {
	b.procLock.Lock()
	defer b.procLock.Unlock()
	b.proc.signal(syscall.SIGCONT)
	b.stopped = false
}

// Stop shuts the broker down with SIGTERM (a controlled shutdown), killing
// it after timeout; it reports whether it exited by itself.
func (b *Broker) Stop(timeout time.Duration) bool {
	b.procLock.Lock()
	defer b.procLock.Unlock()
	ok := b.proc.terminate(timeout)
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

// Broker returns broker id.
func (c *Cluster) Broker(id int32) *Broker { return c.Brokers[id-1] }
