package devcluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// DefaultDir is where a dev cluster lives unless --dir says otherwise.
const DefaultDir = "kbroker-dev-cluster"

// Exit codes, as kbroker's.
const (
	exitOK     = 0
	exitError  = 1
	exitConfig = 2
)

// cliOptions is what `kbroker dev-cluster` was asked for.
type cliOptions struct {
	brokers   int
	dir       string
	overrides []string
	// request is a control request for a running cluster ("kill 2"), or
	// "" to run one.
	request string
}

type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, " ") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// brokerFlag records one of the mutually exclusive control flags.
type brokerFlag struct {
	verb    string
	request *string
}

func (f brokerFlag) String() string { return "" }
func (f brokerFlag) Set(v string) error {
	id, err := strconv.ParseInt(v, 10, 32)
	if err != nil || id < 0 {
		return fmt.Errorf("want a broker id, got %q", v)
	}
	if *f.request != "" {
		return fmt.Errorf("only one of --kill, --stop, --restart and --status may be given")
	}
	*f.request = f.verb + " " + strconv.Itoa(int(id))
	return nil
}

type statusFlag struct{ request *string }

func (f statusFlag) String() string   { return "" }
func (f statusFlag) IsBoolFlag() bool { return true }
func (f statusFlag) Set(v string) error {
	if b, err := strconv.ParseBool(v); err != nil || !b {
		return fmt.Errorf("--status takes no value")
	}
	if *f.request != "" {
		return fmt.Errorf("only one of --kill, --stop, --restart and --status may be given")
	}
	*f.request = "status"
	return nil
}

func newFlagSet(o *cliOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("kbroker dev-cluster", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&o.brokers, "brokers", 3, "number of brokers (ids 1..`N`)")
	fs.StringVar(&o.dir, "dir", DefaultDir, "`DIR` holding ZooKeeper's and every broker's data, logs and ports")
	fs.Var((*repeated)(&o.overrides), "override", "set broker property `key=value` on every broker; repeatable")
	fs.Var(brokerFlag{"kill", &o.request}, "kill", "kill broker `ID` of the cluster running in --dir with SIGKILL (a crash)")
	fs.Var(brokerFlag{"stop", &o.request}, "stop", "stop broker `ID` with a controlled shutdown")
	fs.Var(brokerFlag{"restart", &o.request}, "restart", "(re)start broker `ID` on its data")
	fs.Var(statusFlag{&o.request}, "status", "list the running cluster's processes")
	return fs
}

func parseCLI(args []string) (cliOptions, error) {
	var o cliOptions
	fs := newFlagSet(&o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.brokers < 1 {
		return o, fmt.Errorf("--brokers %d: want at least 1", o.brokers)
	}
	if o.dir == "" {
		return o, errors.New("--dir must not be empty")
	}
	return o, nil
}

// Main is `kbroker dev-cluster ARGS`: it runs a cluster until SIGINT or
// SIGTERM, or sends a control request to the one running in --dir. bin is
// the kbroker binary the brokers run. It returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, bin string, logger *slog.Logger) int {
	o, err := parseCLI(args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "kbroker dev-cluster: %v\nRun 'kbroker dev-cluster --help' for usage.\n", err)
		return exitConfig
	}
	if o.request != "" {
		reply, err := Control(ctx, o.dir, o.request)
		if err != nil {
			fmt.Fprintf(stderr, "kbroker dev-cluster: %v\n", err)
			return exitError
		}
		fmt.Fprintln(stdout, reply)
		return exitOK
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := Start(ctx, Options{Brokers: o.brokers, Dir: o.dir, Bin: bin, Overrides: o.overrides, Out: stdout, Logger: logger})
	if err != nil {
		fmt.Fprintf(stderr, "kbroker dev-cluster: %v\n", err)
		return exitError
	}
	c.PrintSummary()
	go func() {
		// After the first signal, a second one kills a shutdown that
		// hangs (the brokers die with us: launch gives them
		// PDEATHSIG).
		<-ctx.Done()
		fmt.Fprintln(stdout, "shutting down every broker (controlled shutdown); press Ctrl-C again to kill them")
		stop()
	}()
	if err := c.Serve(ctx); err != nil {
		fmt.Fprintf(stderr, "kbroker dev-cluster: %v\n", err)
		return exitError
	}
	return exitOK
}

func printUsage(w io.Writer) {
	var o cliOptions
	fs := newFlagSet(&o)
	fs.SetOutput(w)
	fmt.Fprint(w, `kbroker dev-cluster: a local replicated cluster for trying kbroker.

Starts a ZooKeeper (the Debian zookeeper package) and N brokers (this
binary) with default.replication.factor=3 and min.insync.replicas=2, all
data under --dir, and prints the bootstrap servers and console addresses.
Ctrl-C stops every broker with a controlled shutdown; running it again on
the same --dir keeps the data and the ports.

Usage:
  kbroker dev-cluster [--brokers 3] [--dir DIR] [--override key=value ...]
  kbroker dev-cluster [--dir DIR] --kill ID | --stop ID | --restart ID | --status

Flags:
`)
	fs.PrintDefaults()
}
