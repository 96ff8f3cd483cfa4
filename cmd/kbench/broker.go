package main

import (
	"bufio"
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
	"time"

	"github.com/kbroker/kbroker/internal/launch"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Probing for a started target: every 2ms, each Kafka request (kgo Ping:
// ApiVersions, then a broker-only Metadata request) bounded by 1s once
// something listens.
const (
	probeEvery   = 2 * time.Millisecond
	probeTimeout = time.Second
)

// startKfake starts a one-broker kfake cluster in a process of its own
// (kbench's own binary, run with the hidden --serve-kfake flag), so that
// its heap and garbage collector are not the client's, and its CPU time
// and peak RSS are measured as a kbroker's are; startup is measured from
// exec to the first successful request.
func startKfake(ctx context.Context, timeout time.Duration) (*brokerProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var last error
	for attempt := 1; attempt <= launch.PortAttempts; attempt++ {
		port, err := launch.FreePort()
		if err != nil {
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		p, err := launch.Start(launch.Spec{Path: self, Args: []string{"--serve-kfake", addr}, Stderr: os.Stderr})
		if err != nil {
			return nil, fmt.Errorf("start kfake: %w", err)
		}
		b := &brokerProc{proc: p, addr: addr}
		wctx, cancel := context.WithTimeout(ctx, timeout)
		err = launch.WaitReady(wctx, p, probeEvery, func() error { return launch.KafkaPing(addr, probeTimeout) })
		cancel()
		if err == nil {
			b.startup = time.Since(p.Started())
			return b, nil
		}
		b.stop()
		last = err
		if !errors.Is(err, launch.ErrExited) {
			break // running but not answering: another port will not help
		}
		// The port found free was taken again before kfake bound it.
	}
	return nil, fmt.Errorf("kfake not answering: %w", last)
}

// serveKfake is the --serve-kfake process: a one-broker kfake cluster on
// addr until SIGTERM or SIGINT.
func serveKfake(addr string) error {
	_, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--serve-kfake %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return fmt.Errorf("--serve-kfake %q: port: %w", addr, err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
	if err != nil {
		return fmt.Errorf("kfake: %w", err)
	}
	fmt.Println(strings.Join(c.ListenAddrs(), ","))
	<-sig
	c.Close()
	return nil
}

// brokerProc is a process started by kbench: a kbroker, kfake, or the
// --instant stand-in. Both run in a process group of their own, so that a terminal
// ^C reaches only kbench, which then stops them itself, and die if kbench
// dies abruptly.
type brokerProc struct {
	proc    *launch.Process
	dir     string // temp dir: data/ and kbroker.log; "" for none
	addr    string // PLAINTEXT
	startup time.Duration
	// sec is set when the kbroker also serves SSL and SASL_SSL.
	sec *secured
	// admin is set when the kbroker also serves the admin listener.
	admin *admin
}

// brokerSetup is what a started kbroker serves besides PLAINTEXT.
type brokerSetup struct {
	// secured: SSL and SASL_SSL listeners, with a throwaway CA's
	// certificate made in the run's temp dir, and a SCRAM-SHA-512 user.
	secured bool
	// admin: a SASL_PLAINTEXT listener with a PLAIN admin user of a
	// random password.
	admin bool
	// authorizer: Kafka's ACL authorizer, nothing allowed without an
	// ACL, the admin user the only super user (needs admin).
	authorizer bool
}

// setup is the broker a run of c starts.
func (c *config) setup() brokerSetup {
	return brokerSetup{secured: c.securedListeners, admin: c.adminListener, authorizer: c.acls != noAuthorizer}
}

// startKbroker starts path on a free port with a fresh data dir and waits
// until it answers; startup is measured from exec to the first successful
// request. The listeners and settings of setup come before extra, which
// may override them. Its secured and admin listeners take free ports; the
// SCRAM user is created after startup, through the admin listener if there
// is one (the authorizer allows it the super user only), else PLAINTEXT.
func startKbroker(ctx context.Context, path string, extra []string, setup brokerSetup, timeout time.Duration) (*brokerProc, error) {
	dir, err := os.MkdirTemp("", "kbench-kbroker-")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var (
		sec         *secured
		adm         *admin
		tlsProps    []string
		adminConfig string
	)
	attempts := 1
	if setup.secured {
		sec = &secured{}
		if sec.ca, tlsProps, err = securedPKI(dir); err == nil {
			sec.password, err = newPassword()
		}
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if setup.admin {
		adm = &admin{}
		if adm.password, err = newPassword(); err == nil {
			adminConfig, err = writeAdminConfig(dir, adm.password)
		}
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if setup.secured || setup.admin {
		// The extra listeners' ports, found free, may be taken again
		// before the broker binds them: then it exits, and another
		// attempt takes other ports.
		attempts = launch.PortAttempts
	}
	var b *brokerProc
	for attempt := 1; ; attempt++ {
		args := extra
		if setup.secured || setup.admin || setup.authorizer {
			var ports brokerPorts
			var errs []error
			free := func() int {
				p, err := launch.FreePort()
				errs = append(errs, err)
				return p
			}
			if setup.secured {
				ports.ssl, ports.saslSSL = free(), free()
				sec.sslAddr = "127.0.0.1:" + strconv.Itoa(ports.ssl)
				sec.saslSSLAddr = "127.0.0.1:" + strconv.Itoa(ports.saslSSL)
			}
			if setup.admin {
				ports.admin = free()
				adm.addr = "127.0.0.1:" + strconv.Itoa(ports.admin)
			}
			if err := errors.Join(errs...); err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
			// Before --kbroker-arg, which may override them.
			args = append(brokerOverrides(ports, tlsProps, adminConfig, setup.authorizer), extra...)
		}
		k := launch.NewKbroker(launch.KbrokerSpec{
			Bin:          path,
			DataDir:      data,
			Args:         args,
			LogPath:      filepath.Join(dir, "kbroker.log"),
			Timeout:      timeout,
			Every:        probeEvery,
			ProbeTimeout: probeTimeout,
		})
		err = k.Start(ctx)
		b = &brokerProc{proc: k.Process(), dir: dir, addr: k.Addr(), sec: sec, admin: adm}
		if err == nil {
			break
		}
		if attempt < attempts && errors.Is(err, launch.ErrExited) {
			continue
		}
		tail := b.logTail(20)
		b.stop()
		return nil, fmt.Errorf("%w\n--- kbroker log tail ---\n%s", err, tail)
	}
	b.startup = time.Since(b.proc.Started())
	fail := func(err error) (*brokerProc, error) {
		tail := b.logTail(20)
		b.stop()
		return nil, fmt.Errorf("%w\n--- kbroker log tail ---\n%s", err, tail)
	}
	// Through the admin listener if there is one, else PLAINTEXT.
	seedOpts := []kgo.Opt{kgo.SeedBrokers(b.addr)}
	if adm != nil {
		seedOpts = adm.opts()
		wctx, cancel := context.WithTimeout(ctx, timeout)
		ping := launch.KafkaPingWith(adm.login())
		err := launch.WaitReady(wctx, nil, 20*time.Millisecond, func() error { return ping(adm.addr, probeTimeout) })
		cancel()
		if err != nil {
			return fail(fmt.Errorf("admin user cannot log in on SASL_PLAINTEXT %s: %w", adm.addr, err))
		}
	}
	if sec != nil {
		if err := sec.createUser(ctx, seedOpts, timeout); err != nil {
			return fail(err)
		}
	}
	return b, nil
}

// peakRSS returns the process's peak resident set size (VmHWM) in bytes.
func (b *brokerProc) peakRSS() (int64, error) {
	return readVmHWM(fmt.Sprintf("/proc/%d/status", b.proc.Pid()))
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
func parseVmHWM(r io.Reader) (int64, error) { return parseStatusBytes(r, "VmHWM") }

// rss returns the process's resident set size (VmRSS) in bytes.
func (b *brokerProc) rss() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", b.proc.Pid()))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseStatusBytes(f, "VmRSS")
}

// parseStatusBytes extracts a "<field>:   12345 kB" line of a
// /proc/PID/status stream, in bytes.
func parseStatusBytes(r io.Reader, field string) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, field+":") {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, field+":"))
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected %s line %q", field, line)
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
	return 0, fmt.Errorf("no %s in status", field)
}

// cpuTime returns the CPU time (user + system, every thread) the process
// has used so far.
func (b *brokerProc) cpuTime() (time.Duration, error) {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", b.proc.Pid()))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(st))
}

// userHZ is the unit of the times in /proc/PID/stat: USER_HZ, 100 on every
// Linux architecture Go supports.
const userHZ = 100

// parseStatCPU returns utime + stime (fields 14 and 15) of a /proc/PID/stat
// line. The command name (field 2) is in parentheses and may hold spaces and
// parentheses itself, so the fields are counted from the last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc stat %q", stat)
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc stat %q", stat)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

func (b *brokerProc) alive() bool { return b.proc.Running() }

// stop terminates the process (SIGTERM, then SIGKILL after 5s) and removes
// its temp dir.
func (b *brokerProc) stop() {
	_, _ = b.proc.Stop(5 * time.Second)
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

func (b *brokerProc) logTail(lines int) string {
	if b.dir == "" {
		return "(its output went to kbench's standard error)" // kfake, the instant stand-in
	}
	tail, err := launch.Tail(filepath.Join(b.dir, "kbroker.log"), 0, lines)
	if err != nil {
		return err.Error()
	}
	return tail
}
