// Command kbroker runs a Kafka-compatible broker.
//
//	kbroker [--config FILE | FILE] [--override key=value ...] [--log-level LEVEL]
//	kbroker dev-cluster [--brokers 3] [--dir DIR] [--kill ID | --restart ID ...]
//
// The positional FILE form is the one Kafka's kafka-server-start.sh uses, so
// existing scripts work unchanged. This file is wiring only: flags, logging,
// configuration and signals; the broker lives in package server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/internal/devcluster"
	"github.com/kbroker/kbroker/internal/profhttp"
	"github.com/kbroker/kbroker/server"
)

// version is set at link time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version and VCS revision from the build info are
// used.
var version string

// Exit codes.
const (
	exitOK     = 0
	exitError  = 1 // the broker failed
	exitConfig = 2 // bad flags or configuration
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// options is what the command line asks for.
type options struct {
	configPath string
	overrides  []string
	logLevel   string
	version    bool
	cpuProfile string
	pprofAddr  string
}

// repeated collects every use of a repeatable flag.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, " ") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("kbroker", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run reports errors itself, once
	fs.StringVar(&o.configPath, "config", "", "read properties from `FILE` (Java .properties, as Kafka's server.properties)")
	fs.Var((*repeated)(&o.overrides), "override", "set property `key=value`, over the file; repeatable")
	fs.StringVar(&o.logLevel, "log-level", "", "log `level`: debug, info, warn or error (default $KBROKER_LOG_LEVEL, else info)")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to `FILE` (for performance work)")
	fs.StringVar(&o.pprofAddr, "pprof-address", "", "serve Go's profiles (net/http/pprof, and a CPU profile between POST /debug/pprof/cpu/start and /stop) on this loopback `host:port` (for performance work)")
	return fs
}

// parseArgs reads the command line. Besides --config FILE it accepts
// Kafka's form, the file as the first non-flag argument, with flags before
// or after it. It returns flag.ErrHelp for -h / --help.
func parseArgs(args []string) (options, error) {
	var o options
	fs := newFlagSet(&o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	positional := ""
	// The flag package stops at the first non-flag argument; take it as
	// the file and carry on parsing what follows it.
	for fs.NArg() > 0 {
		if positional != "" {
			return o, fmt.Errorf("unexpected argument %q (only one properties file may be given)", fs.Arg(0))
		}
		positional = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return o, err
		}
	}
	if positional != "" {
		if o.configPath != "" {
			return o, fmt.Errorf("properties file given twice: --config %s and %s", o.configPath, positional)
		}
		o.configPath = positional
	}
	return o, nil
}

// run is main without the process: it returns the exit code. The broker
// stops when ctx is done or on SIGINT / SIGTERM.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) > 0 && args[0] == devClusterCommand {
		return runDevCluster(ctx, args[1:], stdout, stderr)
	}
	opts, err := parseArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "kbroker: %v\nRun 'kbroker --help' for usage.\n", err)
		return exitConfig
	}
	if opts.version {
		fmt.Fprintln(stdout, "kbroker", versionString())
		return exitOK
	}

	levelText := opts.logLevel
	if levelText == "" {
		levelText = getenv("KBROKER_LOG_LEVEL")
	}
	level := slog.LevelInfo
	if levelText != "" {
		if err := level.UnmarshalText([]byte(levelText)); err != nil {
			fmt.Fprintf(stderr, "kbroker: log level %q: want debug, info, warn or error\n", levelText)
			return exitConfig
		}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	cfg, unknown, err := config.Load(opts.configPath, opts.overrides)
	if err != nil {
		fmt.Fprintf(stderr, "kbroker: %v\n", err)
		return exitConfig
	}
	if len(unknown) > 0 {
		logger.Warn("ignoring unknown properties", "keys", strings.Join(unknown, ","))
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal, restore the default handling so that a
		// second one kills a shutdown that hangs.
		<-ctx.Done()
		stop()
	}()

	if opts.cpuProfile != "" {
		f, err := os.Create(opts.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "kbroker: cpu profile: %v\n", err)
			return exitConfig
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "kbroker: cpu profile: %v\n", err)
			return exitConfig
		}
		defer pprof.StopCPUProfile()
	}
	if opts.pprofAddr != "" {
		addr, err := profhttp.Start(ctx, opts.pprofAddr)
		if err != nil {
			fmt.Fprintf(stderr, "kbroker: %v\n", err)
			return exitConfig
		}
		logger.Info("serving Go profiles", "address", addr.String())
	}

	b, err := server.NewBroker(cfg, logger)
	if err != nil {
		logger.Error("cannot create broker", "err", err)
		return exitError
	}
	logger.Info("kbroker starting", "version", versionString(), "broker.id", cfg.BrokerID,
		"listeners", strings.Join(cfg.Listeners, ","), "log.dirs", strings.Join(cfg.LogDirs, ","))
	if err := b.Run(ctx); err != nil {
		logger.Error("kbroker stopped with an error", "err", err)
		return exitError
	}
	logger.Info("kbroker stopped")
	return exitOK
}

// devClusterCommand is the subcommand that runs a local cluster
// (internal/devcluster). Only the first argument selects it, so every
// earlier command line keeps its meaning (save a properties file named
// dev-cluster without a path: ./dev-cluster still names the file).
const devClusterCommand = "dev-cluster"

func runDevCluster(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	bin, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "kbroker dev-cluster: finding this binary to run the brokers: %v\n", err)
		return exitError
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return devcluster.Main(ctx, args, stdout, stderr, bin, logger)
}

func versionString() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "" {
		v = bi.Main.Version
		var rev, dirty string
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision":
				rev = s.Value[:min(12, len(s.Value))]
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "-dirty"
			}
		}
		if rev != "" {
			v += " " + rev + dirty
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return v + " " + runtime.Version()
}

func printUsage(w io.Writer) {
	var o options
	fs := newFlagSet(&o)
	fs.SetOutput(w)
	fmt.Fprint(w, `kbroker: a Kafka-compatible broker.

Usage:
  kbroker [flags] [FILE]
  kbroker server.properties --override broker.id=1 --override listeners=PLAINTEXT://:9093
  kbroker dev-cluster --help   (a local 3-broker cluster with ZooKeeper)

Flags:
`)
	fs.PrintDefaults()
	fmt.Fprint(w, `
Properties (Kafka's names; other Kafka keys are accepted and ignored, with a warning):
`)
	for _, d := range config.Docs() {
		def := d.Default
		if def != "" {
			def = " (default " + def + ")"
		}
		fmt.Fprintf(w, "  %s%s\n      %s\n", d.Name, def, d.Doc)
	}
	fmt.Fprint(w, `
Environment:
  KBROKER_LOG_LEVEL  log level when --log-level is not given

Exit status: 0 after a clean shutdown (SIGINT, SIGTERM), 1 on a broker error,
2 on bad flags or configuration.
`)
}
