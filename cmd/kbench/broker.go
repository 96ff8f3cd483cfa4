package main

import (
	"bufio"
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
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// waitAnswering polls addr until a Kafka request (kgo Ping: ApiVersions on
// connect, then a broker-only Metadata request) succeeds. exited, if not nil,
// aborts the wait when the process behind addr is gone.
func waitAnswering(ctx context.Context, addr string, exited <-chan struct{}) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	var last error
	for {
		select {
		case <-exited:
			return errors.New("process exited before answering")
		default:
		}
		// A plain dial is cheap; only try a request once something listens.
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			err = cl.Ping(pctx)
			cancel()
			if err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-exited:
			return errors.New("process exited before answering")
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// startKfake starts a one-broker in-process kfake cluster.
func startKfake(ctx context.Context, timeout time.Duration) (c *kfake.Cluster, seeds []string, startup time.Duration, err error) {
	t0 := time.Now()
	c, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("kfake: %w", err)
	}
	seeds = c.ListenAddrs()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := waitAnswering(wctx, seeds[0], nil); err != nil {
		c.Close()
		return nil, nil, 0, fmt.Errorf("kfake not answering: %w", err)
	}
	return c, seeds, time.Since(t0), nil
}

// brokerProc is a process started by kbench: a kbroker, or the --instant
// stand-in.
type brokerProc struct {
	cmd     *exec.Cmd
	dir     string // temp dir: data/ and kbroker.log
	addr    string
	startup time.Duration
	exited  chan struct{}
	waitErr error
}

// freePort asks the kernel for a free 127.0.0.1 port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startKbroker starts path on a free port with a fresh data dir and waits
// until it answers; startup is measured from exec to the first successful
// request.
func startKbroker(ctx context.Context, path string, extra []string, timeout time.Duration) (*brokerProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("free port: %w", err)
	}
	dir, err := os.MkdirTemp("", "kbench-kbroker-")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "kbroker.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := append([]string{
		"--override", "listeners=PLAINTEXT://" + addr,
		"--override", "log.dirs=" + data,
	}, extra...)
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	t0 := time.Now()
	b, err := launch(cmd, dir, addr)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := waitAnswering(wctx, addr, b.exited); err != nil {
		tail := b.logTail(20)
		b.stop()
		return nil, fmt.Errorf("kbroker not answering on %s: %w\n--- kbroker log tail ---\n%s", addr, err, tail)
	}
	b.startup = time.Since(t0)
	return b, nil
}

// launch starts cmd as a brokerProc listening on addr; stop removes dir
// (if not empty). The process gets its own process group, so that a
// terminal ^C reaches only kbench, which then stops it itself, and is
// killed if kbench dies abruptly.
func launch(cmd *exec.Cmd, dir, addr string) (*brokerProc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &brokerProc{cmd: cmd, dir: dir, addr: addr, exited: make(chan struct{})}
	go func() { b.waitErr = cmd.Wait(); close(b.exited) }()
	return b, nil
}

// peakRSS returns the process's peak resident set size (VmHWM) in bytes.
func (b *brokerProc) peakRSS() (int64, error) {
	return readVmHWM(fmt.Sprintf("/proc/%d/status", b.cmd.Process.Pid))
}

func readVmHWM(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseVmHWM(f)
}

// parseVmHWM extracts "VmHWM:   12345 kB" from a /proc/PID/status stream.
func parseVmHWM(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "VmHWM:") {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, "VmHWM:"))
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmHWM line %q", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, err
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no VmHWM in status")
}

func (b *brokerProc) alive() bool {
	select {
	case <-b.exited:
		return false
	default:
		return true
	}
}

// stop terminates the process (SIGTERM, then SIGKILL after 5s) and removes
// its temp dir.
func (b *brokerProc) stop() {
	if b.alive() {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.exited:
		case <-time.After(5 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.exited
		}
	}
	os.RemoveAll(b.dir)
}

func (b *brokerProc) logTail(lines int) string {
	data, err := os.ReadFile(filepath.Join(b.dir, "kbroker.log"))
	if err != nil {
		return err.Error()
	}
	all := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return string(bytes.Join(all, []byte("\n")))
}
