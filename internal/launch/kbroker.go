package launch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

// PortAttempts is how many free ports ZooKeeper.Start tries, and a good
// KbrokerSpec.Attempts: the port found free may be taken again before the
// process binds it.
const PortAttempts = 3

// KbrokerSpec describes a kbroker process. Its command line is
// --override listeners=PLAINTEXT://127.0.0.1:<port> --override
// log.dirs=<DataDir>, then Args.
type KbrokerSpec struct {
	Bin  string
	Port int // 0: a free port, chosen at the first Start and kept
	// Attempts is how many free ports the first Start tries while the
	// process exits during startup (default 1; only without Port).
	Attempts int
	// DataDir is log.dirs.
	DataDir string
	// Args follow the listener and data directory; see Overrides. In
	// each, {addr} and {port} stand for the broker's address and port, so
	// that a test can set listeners of its own with the probed one among
	// them (listeners=BROKER://{addr},CLIENT://127.0.0.1:9093).
	Args []string
	// Dir is the working directory ("" for ours).
	Dir string
	// LogPath collects the broker's output over all its runs; "" discards
	// it.
	LogPath string

	// Timeout bounds each wait until the broker answers (default 15s).
	Timeout time.Duration
	// Every is the wait's poll interval (default 50ms).
	Every time.Duration
	// Probe tells whether the broker answers (default KafkaPing), each
	// call bounded by ProbeTimeout (default 500ms).
	Probe        func(addr string, timeout time.Duration) error
	ProbeTimeout time.Duration
	// OnSpawn, if set, is called with the pid of each run as soon as it
	// was started, before the wait.
	OnSpawn func(pid int)
}

// Overrides turns "key=value" settings into kbroker arguments.
func Overrides(kv ...string) []string {
	args := make([]string, 0, 2*len(kv))
	for _, o := range kv {
		args = append(args, "--override", o)
	}
	return args
}

// Kbroker is a kbroker that can be started again on the same port and data
// directory after it stopped.
type Kbroker struct {
	service
	spec KbrokerSpec
}

// NewKbroker returns a kbroker that Start will run.
func NewKbroker(spec KbrokerSpec) *Kbroker {
	if spec.Timeout <= 0 {
		spec.Timeout = 15 * time.Second
	}
	if spec.Every <= 0 {
		spec.Every = 50 * time.Millisecond
	}
	if spec.Probe == nil {
		spec.Probe = KafkaPing
	}
	if spec.ProbeTimeout <= 0 {
		spec.ProbeTimeout = 500 * time.Millisecond
	}
	return &Kbroker{service: service{name: "kbroker", port: spec.Port}, spec: spec}
}

// LogPath is the file collecting the broker's output.
func (k *Kbroker) LogPath() string { return k.spec.LogPath }

// Start runs the broker and waits until it answers. Without a port yet it
// takes a free one, and tries another (Attempts in all) while the process
// exits during startup. A broker that runs but does not answer is left
// running for the caller to inspect and stop.
func (k *Kbroker) Start(ctx context.Context) error {
	return k.start(ctx, k.spec.Attempts, false, k.startOnce)
}

func (k *Kbroker) startOnce(ctx context.Context, addr string) error {
	_, port, _ := net.SplitHostPort(addr)
	var logFrom int64 // where this run's output starts in LogPath
	if fi, err := os.Stat(k.spec.LogPath); err == nil {
		logFrom = fi.Size()
	}
	args := Overrides("listeners=PLAINTEXT://"+addr, "log.dirs="+k.spec.DataDir)
	for _, a := range k.spec.Args {
		// A test with several listeners names the probed one's address.
		args = append(args, strings.NewReplacer("{addr}", addr, "{port}", port).Replace(a))
	}
	p, err := Start(Spec{Path: k.spec.Bin, Args: args, Dir: k.spec.Dir, LogPath: k.spec.LogPath})
	if err != nil {
		return err
	}
	k.setProcess(p)
	if k.spec.OnSpawn != nil {
		k.spec.OnSpawn(p.Pid())
	}
	wctx, cancel := context.WithTimeout(ctx, k.spec.Timeout)
	defer cancel()
	if err := WaitReady(wctx, p, k.spec.Every, func() error { return k.spec.Probe(addr, k.spec.ProbeTimeout) }); err != nil {
		return err
	}
	if k.spec.LogPath == "" {
		return nil
	}
	// A broker answers before its partitions serve (each serves once its
	// log is open): ready is once it says all of them do, so a caller
	// starts from the state a restart recovers, as before.
	return WaitReady(wctx, p, k.spec.Every, func() error { return servingAll(k.spec.LogPath, logFrom) })
}

// Lines kbroker logs at Info: once listening, and once every partition of
// its first cluster view serves.
const (
	listeningLine = "kbroker listening"
	servingLine   = "serving every partition"
)

// servingAll tells whether the broker whose output starts at offset from
// of logPath serves every partition: it said so, or it logs nothing at
// Info (its log level is higher), so there is nothing to wait for.
func servingAll(logPath string, from int64) error {
	f, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	out, err := io.ReadAll(io.NewSectionReader(f, from, 1<<62))
	if err != nil {
		return err
	}
	if bytes.Contains(out, []byte(servingLine)) || !bytes.Contains(out, []byte(listeningLine)) {
		return nil
	}
	return errors.New("kbroker is listening but does not serve every partition yet")
}
