// Command kbench benchmarks a Kafka-compatible cluster with franz-go:
// produce throughput, produce-ack latency (coordinated-omission safe at a
// fixed --rate), and consume throughput. It can start a kbroker binary
// itself (--kbroker, measuring its CPU time per GB moved, peak RSS and
// start-up time) and compare against franz-go's kfake cluster with identical
// client settings (--vs-kfake), which it starts per run in a process of its
// own and measures the same way (run in the benchmark's process, kfake's
// heap would share the client's garbage collector). --profile-dir saves CPU
// profiles of the started kbroker's produce and consume phases. --instant measures the consumer alone, against a
// stand-in broker that answers every fetch at once. --security ssl or
// sasl_ssl has the producer and consumer use a TLS (and SCRAM-SHA-512)
// listener of the kbroker it starts. --acls N starts it with Kafka's ACL
// authorizer and N ACLs that do not match the workload, beside those it
// needs (-1, the default: no authorizer). --idle-conns N holds N idle
// connections to the kbroker it starts through the run and reports the
// broker's RSS per idle connection.
//
// Examples:
//
//	kbench --kfake --records 50000
//	kbench --kbroker ./kbroker --vs-kfake --runs 3
//	kbench --kbroker ./kbroker --runs 1 --profile-dir /tmp/prof
//	kbench --kbroker ./kbroker --vs-kfake --rate 20000 --runs 3
//	kbench --brokers 127.0.0.1:9092 --acks all --compression zstd --json
//	kbench --instant --vs-kfake --runs 3   # the consumer's own ceiling
//	kbench --kbroker ./kbroker --security ssl --vs-variant "--security plaintext" --runs 5
//	kbench --kbroker ./kbroker --acls 1000 --vs-variant "--acls -1" --runs 5
//	kbench --kbroker ./kbroker --rate 5000 --idle-conns 10000 --vs-variant "--idle-conns 0" --runs 3
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kbroker/kbroker/internal/launch"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kbench:", err)
		os.Exit(2)
	}
	if cfg.serveKfake != "" {
		if err := serveKfake(cfg.serveKfake); err != nil {
			fmt.Fprintln(os.Stderr, "kbench: kfake:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if cfg.serveInstant != "" {
		err := serveInstant(cfg.serveInstant, cfg.partitions, cfg.recordSize, cfg.batchMax)
		fmt.Fprintln(os.Stderr, "kbench: instant stand-in:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := runAll(ctx, cfg, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kbench:", err)
		os.Exit(1)
	}
	if cfg.jsonOut != "" {
		if err := writeJSONFile(cfg.jsonOut, rep); err != nil {
			fmt.Fprintln(os.Stderr, "kbench:", err)
			os.Exit(1)
		}
	}
	if cfg.json {
		err = rep.writeJSON(os.Stdout)
	} else {
		err = rep.writeText(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kbench:", err)
		os.Exit(1)
	}
	if rep.failed() {
		os.Exit(1)
	}
}

// report is everything kbench measured in one invocation.
type report struct {
	Config    map[string]any `json:"config"`
	Runs      []result       `json:"runs"`
	Summary   []result       `json:"summary"`
	RatioName string         `json:"ratio_name,omitempty"`
	// Ratio is the first arm's medians over the second's, metric by metric.
	Ratio map[string]float64 `json:"ratio,omitempty"`
	// PairedRatios are the two arms' ratios in each run where both
	// succeeded (in run order), and PairedRatio their median, metric by
	// metric: on a noisy machine, the steadier figure.
	PairedRatios []pairedRatio      `json:"paired_ratios,omitempty"`
	PairedRatio  map[string]float64 `json:"paired_ratio_median,omitempty"`
	// PairedRatioMin and PairedRatioMax are the smallest and largest of
	// the paired ratios, metric by metric: the spread of the runs.
	PairedRatioMin map[string]float64 `json:"paired_ratio_min,omitempty"`
	PairedRatioMax map[string]float64 `json:"paired_ratio_max,omitempty"`
	showRuns       bool
}

func (r *report) failed() bool {
	for _, x := range r.Runs {
		if x.Error != "" {
			return true
		}
	}
	return false
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeJSONFile writes the JSON report to path.
func writeJSONFile(path string, r *report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--json-out: %w", err)
	}
	if err := r.writeJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("--json-out %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--json-out %s: %w", path, err)
	}
	return nil
}

func (r *report) writeText(w io.Writer) error {
	fmt.Fprintf(w, "kbench: %v records x %v B, %v partitions, rf %v, acks=%v, compression=%v, rate=%v, idempotent=%v, linger=%v, batch-max-bytes=%v, txn-records=%v, flush-every=%v, isolation=%v, security=%v, acls=%v, idle-conns=%v, loadavg %v\n",
		r.Config["records"], r.Config["record_size"], r.Config["partitions"], r.Config["replication_factor"],
		r.Config["acks"], r.Config["compression"], r.Config["rate"], r.Config["idempotent"],
		r.Config["linger"], r.Config["batch_max_bytes"], r.Config["txn_records"], r.Config["flush_every"], r.Config["isolation"], r.Config["security"], r.Config["acls"], r.Config["idle_conns"], r.Config["loadavg"])
	if v, ok := r.Config["vs_variant"]; ok {
		fmt.Fprintf(w, "kbench: variant: %v\n", v)
	}
	rows := r.Summary
	if r.showRuns {
		rows = append(append([]result{}, r.Runs...), r.Summary...)
	}
	for i := range rows {
		if rows[i].Run > 0 {
			rows[i].Target = fmt.Sprintf("%s #%d", rows[i].Target, rows[i].Run)
		}
	}
	var ratios []ratioRow
	if r.RatioName != "" {
		ratios = append(ratios, ratioRow{name: r.RatioName, ratio: r.Ratio})
		if r.showRuns {
			for _, p := range r.PairedRatios {
				ratios = append(ratios, ratioRow{name: fmt.Sprintf("%s #%d", r.RatioName, p.Run), ratio: p.Ratio})
			}
		}
		if len(r.PairedRatios) > 1 {
			ratios = append(ratios, ratioRow{name: fmt.Sprintf("%s (median of %d paired runs)", r.RatioName, len(r.PairedRatios)), ratio: r.PairedRatio},
				ratioRow{name: fmt.Sprintf("%s (range of the %d paired runs)", r.RatioName, len(r.PairedRatios)), ratio: r.PairedRatioMin, hi: r.PairedRatioMax})
		}
	}
	return writeTable(w, rows, ratios)
}

type targetKind string

const (
	kindBrokers targetKind = "brokers"
	kindKfake   targetKind = "kfake"
	kindKbroker targetKind = "kbroker"
	kindInstant targetKind = "instant"
)

func (c *config) primary() targetKind {
	switch {
	case c.kfake:
		return kindKfake
	case c.kbrokerPath != "":
		return kindKbroker
	case c.instant:
		return kindInstant
	}
	return kindBrokers
}

func (c *config) summary() map[string]any {
	rate := "max"
	if c.rate > 0 {
		rate = fmt.Sprintf("%g/s", c.rate)
	}
	m := map[string]any{
		"records":            c.records,
		"record_size":        c.recordSize,
		"partitions":         c.partitions,
		"replication_factor": c.replication,
		"acks":               c.acks,
		"compression":        c.compression,
		"rate":               rate,
		"idempotent":         c.idempotent,
		"linger":             c.linger.String(),
		"batch_max_bytes":    c.batchMax,
		"consume":            c.consume,
		"runs":               c.runs,
		"txn_records":        c.txnRecords,
		"flush_every":        c.flushEvery,
		"isolation":          c.isolation,
		"security":           c.security,
		"acls":               c.acls,
		"idle_conns":         c.idleConns,
		"gomaxprocs":         runtime.GOMAXPROCS(0),
		"loadavg":            loadavg(),
	}
	if c.variantArgs != nil {
		m["vs_variant"] = strings.Join(c.variantArgs, " ")
	}
	return m
}

// loadavg returns the 1, 5 and 15 minute load averages from /proc/loadavg
// (empty if unavailable), printed so that a noisy machine shows.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// arm is one side of a comparison: a kind of target and the workload
// configuration run against it.
type arm struct {
	name string
	kind targetKind
	cfg  *config
}

// arms returns what each run measures: the primary target, then kfake
// (--vs-kfake) or the variant (--vs-variant) when asked.
func (c *config) arms() []arm {
	primary := c.primary()
	name := string(primary)
	if c.security != secPlaintext {
		name += " --security " + c.security
	}
	if c.acls != noAuthorizer {
		name += " --acls " + strconv.Itoa(c.acls)
	}
	out := []arm{{name: name, kind: primary, cfg: c}}
	switch {
	case c.vsKfake:
		out = append(out, arm{name: string(kindKfake), kind: kindKfake, cfg: c})
	case c.variant != nil:
		out = append(out, arm{name: string(primary) + " " + strings.Join(c.variantArgs, " "), kind: primary, cfg: c.variant})
	}
	return out
}

// runAll runs the workload cfg.runs times against each arm (the second
// arm, if any, alternating which goes first) and aggregates.
func runAll(ctx context.Context, cfg *config, log io.Writer) (*report, error) {
	pool, err := newValuePool(cfg.recordSize)
	if err != nil {
		return nil, err
	}
	arms := cfg.arms()
	rep := &report{Config: cfg.summary(), showRuns: cfg.runs > 1}
	byArm := make([][]result, len(arms))
	for run := 1; run <= cfg.runs; run++ {
		order := []int{0}
		if len(arms) == 2 {
			order = append(order, 1)
			if run%2 == 0 {
				order[0], order[1] = order[1], order[0]
			}
		}
		for _, i := range order {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			res := runOnce(ctx, arms[i], pool, run, log)
			if res.Error != "" {
				fmt.Fprintf(log, "kbench: %s run %d: %s\n", arms[i].name, run, res.Error)
			}
			rep.Runs = append(rep.Runs, res)
			byArm[i] = append(byArm[i], res)
			// Don't let one run's garbage (kfake keeps every record in
			// memory) burden the next.
			runtime.GC()
			debug.FreeOSMemory()
		}
	}
	var meds []result
	for i, a := range arms {
		if m, ok := medianResult(a.name, byArm[i]); ok {
			rep.Summary = append(rep.Summary, m)
			meds = append(meds, m)
		} else {
			rep.Summary = append(rep.Summary, result{Target: a.name, Error: "no successful run"})
		}
	}
	if len(arms) == 2 {
		rep.RatioName = fmt.Sprintf("%s/%s", arms[0].name, arms[1].kind)
		if cfg.variant != nil {
			rep.RatioName = arms[0].name + "/variant"
		}
		if len(meds) == 2 {
			rep.Ratio = ratios(meds[0], meds[1])
		}
		rep.PairedRatios, rep.PairedRatio, rep.PairedRatioMin, rep.PairedRatioMax = pairedRatioStats(byArm[0], byArm[1])
	}
	return rep, nil
}

func uniqueTopic() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("kbench-%d-%s", time.Now().Unix(), hex.EncodeToString(b[:]))
}

// runOnce sets up the target, runs the workload, and tears the target down.
func runOnce(ctx context.Context, a arm, pool *valuePool, run int, log io.Writer) result {
	cfg, kind := a.cfg, a.kind
	res := result{Target: a.name, Run: run}
	topic := cfg.topic
	if topic == "" {
		topic = uniqueTopic()
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	w := &workload{cfg: cfg, pool: pool, log: log, label: fmt.Sprintf("%s run %d", a.name, run)}

	var seeds []string
	var after func() // measures target-side figures after the workload
	switch kind {
	case kindBrokers:
		seeds = cfg.brokers
	case kindKfake:
		b, err := startKfake(ctx, cfg.startTimeout)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		defer b.stop()
		seeds = []string{b.addr}
		w.cpu = b.cpuTime
		res.StartupMs = ms(b.startup)
		w.logf("started kfake on %s in %.1f ms", b.addr, res.StartupMs)
		after = func() { w.afterProcess(b, "kfake", &res) }
	case kindInstant:
		p, err := startInstant(ctx, cfg)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		defer p.stop()
		// Nothing to produce: every offset of every partition exists.
		start := make(map[int32]int64, cfg.partitions)
		for i := 0; i < cfg.partitions; i++ {
			start[int32(i)] = 0
		}
		w.logf("consuming %d records from the instant stand-in on %s", cfg.records, p.addr)
		if err := w.consumeAll(wctx, []string{p.addr}, topic, start, cfg.records, &res); err != nil {
			res.Error = err.Error()
		}
		return res
	case kindKbroker:
		brokerArgs := cfg.brokerArgs
		var pprofAddr string
		if cfg.profileDir != "" {
			// The directory is made here, so a fresh path works.
			if err := os.MkdirAll(cfg.profileDir, 0o755); err != nil {
				res.Error = fmt.Sprintf("profile directory: %v", err)
				return res
			}
			port, err := launch.FreePort()
			if err != nil {
				res.Error = err.Error()
				return res
			}
			pprofAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			brokerArgs = append(slices.Clone(brokerArgs), "--pprof-address", pprofAddr)
		}
		b, err := startKbroker(ctx, cfg.kbrokerPath, brokerArgs, cfg.setup(), cfg.startTimeout)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		defer b.stop()
		seeds = []string{b.addr}
		w.cpu = b.cpuTime
		if pprofAddr != "" {
			w.profiler = newPhaseProfiler(pprofAddr, cfg.profileDir, a.name, run)
		}
		res.StartupMs = ms(b.startup)
		w.logf("started %s on %s in %.1f ms", cfg.kbrokerPath, b.addr, res.StartupMs)
		if b.sec != nil {
			var addr string
			addr, w.clientOpts = b.sec.listener(cfg.security, b.addr)
			seeds = []string{addr}
			w.logf("clients use the %s listener on %s (SSL on %s, SASL_SSL on %s)",
				strings.ToUpper(cfg.security), addr, b.sec.sslAddr, b.sec.saslSSLAddr)
		}
		if cfg.acls != noAuthorizer {
			t0 := time.Now()
			n, err := setupACLs(ctx, b, cfg, topic, cfg.startTimeout)
			if err != nil {
				res.Error = fmt.Sprintf("%v\n--- kbroker log tail ---\n%s", err, b.logTail(20))
				return res
			}
			w.logf("authorizer on: %d ACLs created through %s as User:%s in %.1f ms (%d that do not match the workload, %d it needs as %s)",
				n, b.admin.addr, adminUser, ms(time.Since(t0)), cfg.acls, n-cfg.acls, cfg.workloadPrincipal())
		}
		var idle *idleConns
		if cfg.idleConns > 0 {
			before, err := b.rss()
			if err == nil {
				t0 := time.Now()
				idle, err = openIdleConns(ctx, b.addr, cfg.idleConns)
				if err == nil {
					defer idle.close()
					var after int64
					if after, err = b.rss(); err == nil {
						res.IdleConns = cfg.idleConns
						res.IdleConnKiB = float64(after-before) / 1024 / float64(cfg.idleConns)
						w.logf("%d idle connections opened in %.1f s: broker RSS %.1f -> %.1f MiB, %.2f KiB each",
							cfg.idleConns, time.Since(t0).Seconds(), float64(before)/(1<<20), float64(after)/(1<<20), res.IdleConnKiB)
					}
				}
			}
			if err != nil {
				res.Error = fmt.Sprintf("%v\n--- kbroker log tail ---\n%s", err, b.logTail(20))
				return res
			}
		}
		after = func() {
			if idle != nil && res.Error == "" {
				// Still held and answered after the workload (a sample).
				if err := idle.check(100); err != nil {
					res.Error = err.Error()
				}
			}
			w.afterProcess(b, "kbroker", &res)
		}
	}
	if err := w.run(wctx, seeds, topic, &res); err != nil {
		res.Error = err.Error()
	}
	if after != nil {
		after()
	}
	return res
}

// afterProcess checks that the started broker process (a kbroker or kfake)
// outlived the workload and reads its peak RSS.
func (w *workload) afterProcess(b *brokerProc, what string, res *result) {
	if !b.alive() {
		res.Error = fmt.Sprintf("%s exited during the run (%v)\n--- %s log tail ---\n%s", what, b.proc.ExitStatus(), what, b.logTail(20))
		return
	}
	if rss, err := b.peakRSS(); err == nil {
		res.PeakRSSMiB = float64(rss) / (1 << 20)
	} else {
		w.logf("peak RSS: %v", err)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
