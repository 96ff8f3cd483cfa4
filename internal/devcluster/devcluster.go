// Package devcluster runs a local kbroker cluster for trying replication
// by hand: a ZooKeeper (the Debian zookeeper package's server, started by
// internal/launch as the tests start it) and N kbroker processes (this
// very binary, re-executed) with RF 3 and min.insync.replicas=2, all data
// under one directory. It prints the bootstrap servers and console
// addresses, shuts every broker down with a controlled shutdown on
// Ctrl-C, and finds its data and ports again when started on the same
// directory. A second invocation on the same directory (--kill, --stop,
// --restart, --status) talks to the running one over a control socket.
package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/kbroker/kbroker/internal/launch"
)

const (
	// sessionTimeout is the brokers' zookeeper.session.timeout.ms: a
	// killed broker is declared dead (and its partitions fail over) this
	// long after it died. Short, for trying failover by hand.
	sessionTimeout = 6 * time.Second
	// zkTick allows sessions of up to 20 ticks (10 s).
	zkTick = 500 * time.Millisecond
	// startTimeout bounds each process's start until it answers.
	startTimeout = 60 * time.Second
	// stopTimeout bounds a broker's controlled shutdown before it is
	// killed.
	stopTimeout = 30 * time.Second
)

// Options is what a dev cluster is started with.
type Options struct {
	Brokers int    // broker ids 1..Brokers
	Dir     string // everything lives here
	// Bin is the kbroker binary each broker runs (this one).
	Bin string
	// Overrides are extra broker properties (key=value), after the
	// defaults.
	Overrides []string
	// Out receives what the operator reads: addresses, broker deaths.
	Out io.Writer
	// Logger receives the supervisor's own diagnostics.
	Logger *slog.Logger
}

// Cluster is a running dev cluster.
type Cluster struct {
	opts   Options
	dir    string // absolute
	layout layout
	zk     *launch.ZooKeeper
	// control is the claimed control socket (see control.go).
	control net.Listener

	// mu guards brokers' runs and expected; outMu serialises Out.
	mu      sync.Mutex
	brokers map[int32]*launch.Kbroker
	// expected holds the pids whose exit was asked for (kill, stop,
	// shutdown), so that only surprising deaths are reported.
	expected map[int]bool
	outMu    sync.Mutex
}

// brokerOverrides are broker id's properties: the dev cluster's defaults
// (replication capped by the number of brokers), then extra.
func brokerOverrides(id int32, n int, zkAddr string, metricsAddr string, extra []string) []string {
	rf := strconv.Itoa(min(3, n))
	minISR := strconv.Itoa(min(2, n))
	ov := []string{
		"broker.id=" + strconv.Itoa(int(id)),
		"zookeeper.connect=" + zkAddr,
		"zookeeper.session.timeout.ms=" + strconv.Itoa(int(sessionTimeout/time.Millisecond)),
		"kbroker.metrics.address=" + metricsAddr,
		"default.replication.factor=" + rf,
		"min.insync.replicas=" + minISR,
		"offsets.topic.replication.factor=" + rf,
		"transaction.state.log.replication.factor=" + rf,
		"transaction.state.log.min.isr=" + minISR,
		"unclean.leader.election.enable=false",
	}
	return append(ov, extra...)
}

// Start starts ZooKeeper and the brokers and returns once every broker
// answers. ctx bounds the start only; Close stops the cluster.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Brokers < 1 {
		return nil, fmt.Errorf("--brokers %d: want at least 1", opts.Brokers)
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := launch.ZooKeeperAvailable(); err != nil {
		return nil, fmt.Errorf("dev-cluster needs ZooKeeper: %w (on Debian or Ubuntu: sudo apt-get install zookeeper default-jre-headless)", err)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dev cluster dir: %w", err)
	}
	control, err := listenControl(dir)
	if err != nil {
		return nil, err
	}
	saved, err := readLayout(dir)
	if err != nil {
		return nil, err
	}
	l, err := completeLayout(saved, opts.Brokers, launch.FreePort)
	if err == nil {
		err = writeLayout(dir, l)
	}
	if err != nil {
		control.Close()
		return nil, err
	}
	c := &Cluster{opts: opts, dir: dir, layout: l, control: control, brokers: map[int32]*launch.Kbroker{}, expected: map[int]bool{}}
	c.zk = launch.NewZooKeeper(launch.ZooKeeperSpec{
		Dir:      filepath.Join(dir, "zookeeper"),
		Port:     l.ZooKeeperPort,
		TickTime: zkTick,
		Timeout:  startTimeout,
	})
	if err := os.MkdirAll(c.zk.Dir(), 0o755); err != nil {
		control.Close()
		return nil, err
	}
	c.printf("starting ZooKeeper on %s (log %s)\n", c.zk.Addr(), c.zk.LogPath())
	if err := c.zk.Start(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("starting ZooKeeper: %w", err)
	}
	ids := c.ids()
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		c.brokers[id] = c.newBroker(id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.startBroker(ctx, id)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// ids lists the broker ids this run starts, in order.
func (c *Cluster) ids() []int32 {
	ids := make([]int32, 0, c.opts.Brokers)
	for id := int32(1); id <= int32(c.opts.Brokers); id++ {
		ids = append(ids, id)
	}
	return ids
}

func (c *Cluster) newBroker(id int32) *launch.Kbroker {
	bl := c.layout.Brokers[c.layout.index(id)]
	bdir := brokerDir(c.dir, id)
	return launch.NewKbroker(launch.KbrokerSpec{
		Bin:     c.opts.Bin,
		Port:    bl.Port,
		DataDir: filepath.Join(bdir, "data"),
		Args: launch.Overrides(brokerOverrides(id, c.opts.Brokers, c.zk.Addr(),
			net.JoinHostPort("127.0.0.1", strconv.Itoa(bl.MetricsPort)), c.opts.Overrides)...),
		Dir:     bdir,
		LogPath: filepath.Join(bdir, "kbroker.log"),
		Timeout: startTimeout,
	})
}

// startBroker starts broker id (once a previous run's registration is
// gone: a killed broker's stays until its session expires) and watches it
// for a surprising exit.
func (c *Cluster) startBroker(ctx context.Context, id int32) error {
	if err := os.MkdirAll(brokerDir(c.dir, id), 0o755); err != nil {
		return err
	}
	if err := c.waitUnregistered(ctx, id); err != nil {
		return err
	}
	c.mu.Lock()
	k := c.brokers[id]
	c.mu.Unlock()
	if err := k.Start(ctx); err != nil {
		return fmt.Errorf("broker %d: %w (see %s)", id, err, k.LogPath())
	}
	p := k.Process()
	go func() {
		<-p.Done()
		c.mu.Lock()
		expected := c.expected[p.Pid()]
		delete(c.expected, p.Pid())
		c.mu.Unlock()
		if !expected {
			c.printf("broker %d (pid %d) exited: %s; see %s\n", id, p.Pid(), p.ExitStatus(), k.LogPath())
		}
	}()
	return nil
}

// waitUnregistered waits until /brokers/ids/<id> is gone, bounded by a
// session timeout and some slack.
func (c *Cluster) waitUnregistered(ctx context.Context, id int32) error {
	conn, _, err := zk.Connect([]string{c.zk.Addr()}, sessionTimeout, zk.WithLogInfo(false))
	if err != nil {
		return fmt.Errorf("connect to ZooKeeper: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, sessionTimeout+10*time.Second)
	defer cancel()
	path := "/brokers/ids/" + strconv.Itoa(int(id))
	for {
		ok, _, err := conn.Exists(path)
		if err == nil && !ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker %d still registered in ZooKeeper (%s; err %v): %w", id, path, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Bootstrap is the brokers' addresses, comma separated.
func (c *Cluster) Bootstrap() string {
	var addrs []string
	for _, id := range c.ids() {
		addrs = append(addrs, c.brokerAddr(id))
	}
	return strings.Join(addrs, ",")
}

func (c *Cluster) brokerAddr(id int32) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.layout.Brokers[c.layout.index(id)].Port))
}

// ConsoleURL is broker id's HTTP address (console and /metrics).
func (c *Cluster) ConsoleURL(id int32) string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(c.layout.Brokers[c.layout.index(id)].MetricsPort)) + "/"
}

// PrintSummary tells the operator where everything is.
func (c *Cluster) PrintSummary() {
	var b strings.Builder
	fmt.Fprintf(&b, "dev cluster of %d brokers ready (data in %s)\n", c.opts.Brokers, c.dir)
	fmt.Fprintf(&b, "  bootstrap.servers=%s\n", c.Bootstrap())
	fmt.Fprintf(&b, "  zookeeper.connect=%s\n", c.zk.Addr())
	for _, id := range c.ids() {
		fmt.Fprintf(&b, "  broker %d: %s  console %s  metrics %smetrics  log %s\n", id, c.brokerAddr(id), c.ConsoleURL(id), c.ConsoleURL(id), filepath.Join(brokerDir(c.dir, id), "kbroker.log"))
	}
	fmt.Fprintf(&b, "try failover: kbroker dev-cluster --dir %s --kill 1 (then --restart 1)\n", c.dir)
	b.WriteString("Ctrl-C stops every broker with a controlled shutdown; starting again on the same --dir keeps the data.\n")
	c.printf("%s", b.String())
}

func (c *Cluster) printf(format string, args ...any) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	fmt.Fprintf(c.opts.Out, format, args...)
}

func (c *Cluster) broker(id int32) (*launch.Kbroker, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.brokers[id]
	if !ok {
		return nil, fmt.Errorf("no broker %d in this dev cluster (brokers 1..%d)", id, c.opts.Brokers)
	}
	return k, nil
}

func (c *Cluster) expectExit(p *launch.Process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expected[p.Pid()] = true
}

// Kill kills broker id with SIGKILL, as a crash.
func (c *Cluster) Kill(id int32) (string, error) {
	k, err := c.broker(id)
	if err != nil {
		return "", err
	}
	p := k.Process()
	if !p.Running() {
		return "", fmt.Errorf("broker %d is not running (%s)", id, p.ExitStatus())
	}
	c.expectExit(p)
	if err := p.Kill(stopTimeout); err != nil {
		return "", fmt.Errorf("kill broker %d: %w", id, err)
	}
	msg := fmt.Sprintf("broker %d (pid %d) killed with SIGKILL; its partitions fail over once its ZooKeeper session expires (%v)", id, p.Pid(), sessionTimeout)
	c.printf("%s\n", msg)
	return msg, nil
}

// Stop shuts broker id down with a controlled shutdown (SIGTERM).
func (c *Cluster) Stop(id int32) (string, error) {
	k, err := c.broker(id)
	if err != nil {
		return "", err
	}
	p := k.Process()
	if !p.Running() {
		return "", fmt.Errorf("broker %d is not running (%s)", id, p.ExitStatus())
	}
	c.expectExit(p)
	start := time.Now()
	clean, err := p.Stop(stopTimeout)
	if !clean {
		return "", fmt.Errorf("broker %d did not stop within %v and was killed (%v)", id, stopTimeout, err)
	}
	msg := fmt.Sprintf("broker %d stopped (controlled shutdown, %s) in %v", id, p.ExitStatus(), time.Since(start).Round(time.Millisecond))
	c.printf("%s\n", msg)
	return msg, nil
}

// Restart stops broker id if it runs, then starts it again on its data.
func (c *Cluster) Restart(ctx context.Context, id int32) (string, error) {
	k, err := c.broker(id)
	if err != nil {
		return "", err
	}
	if k.Process().Running() {
		if _, err := c.Stop(id); err != nil {
			return "", err
		}
	}
	if err := c.startBroker(ctx, id); err != nil {
		return "", err
	}
	msg := fmt.Sprintf("broker %d restarted (pid %d) on %s", id, k.Process().Pid(), c.brokerAddr(id))
	c.printf("%s\n", msg)
	return msg, nil
}

// Status describes every broker's process.
func (c *Cluster) Status() string {
	var b strings.Builder
	fmt.Fprintf(&b, "zookeeper %s: %s\n", c.zk.Addr(), c.zk.Process().ExitStatus())
	for _, id := range c.ids() {
		k, _ := c.broker(id)
		p := k.Process()
		fmt.Fprintf(&b, "broker %d %s: %s (pid %d) console %s\n", id, c.brokerAddr(id), p.ExitStatus(), p.Pid(), c.ConsoleURL(id))
	}
	return b.String()
}

// Serve answers control requests until ctx ends, then shuts the cluster
// down (Close).
func (c *Cluster) Serve(ctx context.Context) error {
	c.ServeControl(ctx, c.control)
	return c.Close()
}

// Close shuts the cluster down: every running broker with a controlled
// shutdown, one at a time (each moves its leaderships to brokers still
// up), highest id first, then ZooKeeper.
func (c *Cluster) Close() error {
	var errs []error
	ids := c.ids()
	slices.Reverse(ids)
	for _, id := range ids {
		k, err := c.broker(id)
		if err != nil || !k.Process().Running() {
			continue
		}
		if _, err := c.Stop(id); err != nil {
			errs = append(errs, err)
		}
	}
	if p := c.zk.Process(); p.Running() {
		if clean, err := p.Stop(10 * time.Second); !clean {
			errs = append(errs, fmt.Errorf("ZooKeeper did not stop: %v", err))
		}
	}
	c.control.Close()
	c.printf("dev cluster stopped; start it again with the same --dir to keep its data\n")
	return errors.Join(errs...)
}
