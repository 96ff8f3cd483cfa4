// Command kverify runs a Jepsen-style fault test against a kbroker cluster
// it starts itself (ZooKeeper and three brokers behind fault-injecting
// proxies) and checks the recorded history. See package verify.
//
//	kverify short [--seed N] [--unsafe] [--txn] [--compact] [--expect-anomaly NAME] [--log-dir-tmpfs MiB] [--security sasl_ssl [--sasl-mechanism PLAIN]]
//	kverify long --duration 10m --seed N [--overlap 2] [--unsafe] [--txn] [--compact] [--security sasl_ssl]
//	kverify check HISTORY.jsonl
//
// A plain run (neither --unsafe nor --txn) also writes keyed records and
// tombstones to a compacted topic beside the plain workload; --compact
// runs that workload alone with the faults aimed at its leaders. A plain
// run also has a share group (KIP-932) read a topic of its own: three
// franz-go share consumers accept every record they get, and the checker
// wants every acknowledged write delivered (share-lost), no record
// delivered again after its acceptance was acknowledged
// (share-redelivered-after-ack), no delivered record that was never
// written (share-unknown-record).
//
// Exit status: 0 when no anomaly was found (with --expect-anomaly: when
// that anomaly was found), 1 otherwise, 2 on usage or setup errors.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kbroker/kbroker/verify"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage:
  kverify short [flags]              CI run: every fault kind once (fixed seed 1 unless --seed)
  kverify long --duration D [flags]  random faults for D
  kverify check HISTORY.jsonl        re-check a recorded history
flags:
`)
	flag.PrintDefaults()
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	seed := fs.Uint64("seed", 1, "seed of the fault schedule")
	duration := fs.Duration("duration", 10*time.Minute, "long mode: how long to inject faults")
	unsafe := fs.Bool("unsafe", false, "min.insync.replicas=1, unclean leader election, leader isolated from its followers then killed: must show lost-write")
	txn := fs.Bool("txn", false, "transactional workload: transactional producers (commit or abort), read_committed consumers, a consume-transform-produce loop; checks aborted-read, intermediate-read, lost-committed-write, duplicate, read-past-lso")
	compact := fs.Bool("compact", false, "compacted topic workload alone, faults aimed at its leaders: keyed writes and tombstones on a cleanup.policy=compact topic cleaned every second; checks lost-latest-value, resurrected-key, reordered-key, tombstone-retained (plain runs have it beside their workload)")
	overlap := fs.Int("overlap", 1, "long mode: faults at once (each on brokers no other holds; ZooKeeper restarts, re-creations and reassignments run alone)")
	faultList := fs.String("faults", "", "only these fault kinds, comma-separated (default: every kind): "+strings.Join(verify.AllFaults, ", "))
	expect := fs.String("expect-anomaly", "", "invert the verdict: exit 0 only if this anomaly (e.g. lost-write) was found")
	dir := fs.String("dir", "", "working directory (default: a new temporary directory, kept)")
	bin := fs.String("kbroker-bin", "", "kbroker binary (default: go build ./cmd/kbroker)")
	brokers := fs.Int("brokers", 3, "number of brokers")
	partitions := fs.Int("partitions", 3, "partitions of the test topic")
	quiet := fs.Bool("q", false, "no progress output")
	tmpfs := fs.Int64("log-dir-tmpfs", 256, "MiB of each broker's own tmpfs log dir, which the disk-full fault fills (needs root; 0: plain directories, fault disabled)")
	security := fs.String("security", verify.SecurityPlaintext, "listeners: plaintext, or sasl_ssl (every listener SASL_SSL, inter-broker too, with a CA and certificates made for the run)")
	mechanism := fs.String("sasl-mechanism", verify.MechanismSCRAM, "with --security sasl_ssl: the workload clients' SASL mechanism, SCRAM-SHA-512 (user created through a broker) or PLAIN; kverify's admin clients and the brokers use PLAIN")
	flag.Usage = usage
	fs.Usage = usage
	_ = fs.Parse(os.Args[2:])

	switch mode {
	case "check":
		if fs.NArg() != 1 {
			usage()
			os.Exit(2)
		}
		events, err := verify.ReadHistory(fs.Arg(0))
		if err != nil {
			fmt.Fprintln(os.Stderr, "kverify:", err)
			os.Exit(2)
		}
		rep := &verify.Report{Result: verify.Check(events), HistoryPath: fs.Arg(0), Events: events}
		for _, e := range events {
			if e.Kind == verify.KindFault {
				rep.Faults = append(rep.Faults, e)
			}
		}
		rep.Options.Mode = "check"
		rep.Print(os.Stdout)
		os.Exit(verdict(rep.Result, *expect))
	case "short", "long":
		if *compact && (*txn || *unsafe) {
			fmt.Fprintln(os.Stderr, "kverify: --compact runs alone: not with --txn or --unsafe")
			os.Exit(2)
		}
	default:
		usage()
		os.Exit(2)
	}
	kinds, err := verify.ParseFaultKinds(*faultList)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kverify: --faults:", err)
		os.Exit(2)
	}
	if *faultList == "" {
		kinds = nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *overlap < 1 || (*overlap > 1 && mode != "long") {
		fmt.Fprintln(os.Stderr, "kverify: --overlap takes a count of at least 1, and more than 1 in long mode only")
		os.Exit(2)
	}
	o := verify.Options{Mode: mode, Seed: *seed, Duration: *duration, Overlap: *overlap, Unsafe: *unsafe, Txn: *txn, Compact: *compact, Faults: kinds, Dir: *dir, Bin: *bin,
		Brokers: *brokers, Partitions: int32(*partitions), TmpfsSize: *tmpfs << 20, Security: *security, SASLMechanism: *mechanism}
	if *tmpfs <= 0 {
		o.TmpfsSize = -1
	}
	if !*quiet {
		o.Log = os.Stderr
	}
	rep, err := verify.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kverify:", err)
		os.Exit(2)
	}
	rep.Print(os.Stdout)
	code := verdict(rep.Result, *expect)
	if *expect != "" {
		fmt.Printf("expected anomaly %s: %v\n", *expect, code == 0)
	}
	os.Exit(code)
}

func verdict(r verify.Result, expect string) int {
	if expect != "" {
		if r.Has(expect) {
			return 0
		}
		return 1
	}
	if r.Valid() {
		return 0
	}
	return 1
}
