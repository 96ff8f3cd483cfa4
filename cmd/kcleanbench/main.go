// Command kcleanbench is the log cleaner benchmark (issue 11), run by
// scripts/bench-cleaner.sh. It starts kbroker itself (embedded, one node)
// and prints figures; it is not a test.
//
//  1. Data: a compacted topic of one partition filled with --mb MiB of
//     --record-size records over --keys keys (uniform), written with the
//     cleaner off; the broker is stopped and the data directory kept as
//     a snapshot that every later run starts from (a fresh copy each).
//  2. Read speed of the partition's segment files, as the cleaner reads
//     them: buffered (from the page cache, where the copy left them) and
//     with O_DIRECT (the device), when the file system allows it.
//  3. Cleaning: the broker started on a copy with the cleaner on, timed
//     until its cleaner checkpoint passes every closed segment; figures
//     from its "log cleaned" lines (bytes read and written, time taken,
//     rounds when the key map is full): MB/s of log cleaned, records/s,
//     peak RSS (VmHWM). Three configurations: Kafka's default dedupe
//     buffer (128 MiB), a small one (--small-buffer-mb, more rounds,
//     less memory), and log.cleaner.io.max.bytes.per.second at
//     --throttle-mb (the rate must hold it).
//  4. Produce while cleaning: on a copy the cleaner starts cleaning at
//     once, a producer (franz-go, acks=all, the same keys) first sends
//     --rate records/s for --window (produce-ack latency from each
//     record's scheduled send time), then as fast as it can for --window
//     (throughput). Arms: cleaner off, cleaner on, cleaner on throttled;
//     --runs rounds, the arms' order rotating; medians, and each arm's
//     ratio to the cleaner-off arm, and the median of each round's own
//     ratio (the steadier figure on a shared machine). The share of each
//     window the cleaner was busy is printed beside it, so a window it
//     missed shows.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"

	"github.com/kbroker/kbroker/internal/launch"
)

type options struct {
	kbroker       string
	dir           string
	mb            int
	recordSize    int
	keys          int
	segmentMB     int
	smallBufferMB int
	throttleMB    float64
	rate          int
	window        time.Duration
	runs          int
	timeout       time.Duration
}

const topic = "cleaned"

func main() {
	var o options
	flag.StringVar(&o.kbroker, "kbroker", "", "kbroker binary (required)")
	flag.StringVar(&o.dir, "dir", "", "work directory (default: a new temporary one, removed at the end)")
	flag.IntVar(&o.mb, "mb", 256, "MiB of records to clean")
	flag.IntVar(&o.recordSize, "record-size", 512, "bytes of each record's value")
	flag.IntVar(&o.keys, "keys", 200000, "distinct keys")
	flag.IntVar(&o.segmentMB, "segment-mb", 16, "segment.bytes in MiB")
	flag.IntVar(&o.smallBufferMB, "small-buffer-mb", 2, "the small log.cleaner.dedupe.buffer.size in MiB (2 MiB: about 78,000 keys per round)")
	flag.Float64Var(&o.throttleMB, "throttle-mb", 20, "log.cleaner.io.max.bytes.per.second in MB/s (10^6) for the throttled runs")
	flag.IntVar(&o.rate, "rate", 4000, "records/s of the latency window")
	flag.DurationVar(&o.window, "window", 8*time.Second, "length of each produce window")
	flag.IntVar(&o.runs, "runs", 3, "rounds of the produce-while-cleaning arms")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "bound of each wait")
	flag.Parse()
	if o.kbroker == "" {
		fmt.Fprintln(os.Stderr, "kcleanbench: --kbroker is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kcleanbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	if o.dir == "" {
		d, err := os.MkdirTemp("", "kcleanbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		o.dir = d
	}
	fmt.Fprintf(out, "kcleanbench: %d MiB of %d B records over %d keys, segment.bytes %d MiB, loadavg %s, %d CPUs\n",
		o.mb, o.recordSize, o.keys, o.segmentMB, loadavg(), numCPU())
	snapshot := filepath.Join(o.dir, "snapshot")
	records, err := fill(ctx, o, snapshot)
	if err != nil {
		return fmt.Errorf("filling the topic: %w", err)
	}
	partDir := filepath.Join(snapshot, topic+"-0")
	segs, dirtyBytes, activeBase, err := closedSegments(partDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "data: %d records, %d closed segments (%.1f MiB) below offset %d, then the active segment\n",
		records, len(segs), float64(dirtyBytes)/(1<<20), activeBase)

	work := filepath.Join(o.dir, "work")
	if err := restore(snapshot, work); err != nil {
		return err
	}
	cached, err := readSpeed(filepath.Join(work, topic+"-0"), segs, false)
	if err != nil {
		return err
	}
	direct, derr := readSpeed(filepath.Join(work, topic+"-0"), segs, true)
	fmt.Fprintf(out, "read speed of the segment files: %.0f MB/s buffered (page cache)", cached)
	if derr == nil {
		fmt.Fprintf(out, ", %.0f MB/s O_DIRECT (device)\n", direct)
	} else {
		fmt.Fprintf(out, ", O_DIRECT unavailable (%v)\n", derr)
	}

	fmt.Fprintf(out, "\n== cleaning %.1f MiB (one cleaner thread)\n", float64(dirtyBytes)/(1<<20))
	fmt.Fprintf(out, "%-44s %8s %9s %9s %11s %7s %9s %9s %9s %9s\n", "configuration", "wall s", "MB/s log", "MB/s I/O", "records/s", "rounds", "written", "peak RSS", "vs cache", "vs disk")
	configs := []struct {
		name string
		args []string
	}{
		{"dedupe buffer 128 MiB (Kafka's default)", []string{"log.cleaner.dedupe.buffer.size=134217728"}},
		{fmt.Sprintf("dedupe buffer %d MiB", o.smallBufferMB), []string{"log.cleaner.dedupe.buffer.size=" + strconv.Itoa(o.smallBufferMB<<20)}},
		{fmt.Sprintf("io.max.bytes.per.second %g MB/s", o.throttleMB), []string{"log.cleaner.dedupe.buffer.size=134217728",
			"log.cleaner.io.max.bytes.per.second=" + strconv.FormatFloat(o.throttleMB*1e6, 'f', 0, 64)}},
	}
	baseRSS, err := baselineRSS(ctx, o, snapshot, work)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	fmt.Fprintf(out, "%-44s %8s %9s %9s %11s %7s %9s %8.0fM\n", "cleaner off (the broker's own peak RSS)", "-", "-", "-", "-", "-", "-", float64(baseRSS)/(1<<20))
	for _, c := range configs {
		r, err := cleanOnce(ctx, o, snapshot, work, activeBase, c.args)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		logRate := float64(dirtyBytes) / 1e6 / r.took.Seconds()
		vsDisk := "-"
		if derr == nil {
			vsDisk = fmt.Sprintf("%.2fx", logRate/direct)
		}
		fmt.Fprintf(out, "%-44s %8.1f %9.1f %9.1f %11.0f %7d %8.1fM %8.0fM %8.2fx %9s\n", c.name, r.wall.Seconds(),
			logRate, float64(r.read+r.written)/1e6/r.took.Seconds(),
			float64(activeBase)/r.took.Seconds(), r.rounds, float64(r.written)/(1<<20), float64(r.peakRSS)/(1<<20),
			logRate/cached, vsDisk)
	}
	fmt.Fprintf(out, "(MB/s log: closed segments' bytes over the cleanings' time; MB/s I/O: bytes read + written, which the throttle bounds; vs cache / vs disk: MB/s log over the buffered / O_DIRECT read speed)\n")

	fmt.Fprintf(out, "\n== produce while cleaning: %d runs, acks=all, %d B records over the same keys; latency at %d records/s for %v, then throughput for %v\n",
		o.runs, o.recordSize, o.rate, o.window, o.window)
	arms := []struct {
		name string
		args []string
	}{
		{"cleaner off", []string{"log.cleaner.enable=false"}},
		{"cleaner on", nil},
		{fmt.Sprintf("cleaner on, %g MB/s throttle", o.throttleMB), []string{"log.cleaner.io.max.bytes.per.second=" + strconv.FormatFloat(o.throttleMB*1e6, 'f', 0, 64)}},
	}
	results := make([][]produceResult, len(arms))
	for round := 0; round < o.runs; round++ {
		for k := range arms {
			i := (k + round) % len(arms)
			r, err := produceOnce(ctx, o, snapshot, work, arms[i].args)
			if err != nil {
				return fmt.Errorf("%s, run %d: %w", arms[i].name, round+1, err)
			}
			partial := ""
			if r.busyPartial {
				partial = " (at least: a cleaning was still running)"
			}
			fmt.Fprintf(out, "  run %d %-34s %8.1f MB/s  p50 %6.1f ms  p99 %7.1f ms  max %7.1f ms  cleaner busy %3.0f%% / %3.0f%% of the windows%s\n",
				round+1, arms[i].name, r.mbps, ms(r.p50), ms(r.p99), ms(r.max), 100*r.busyLatency, 100*r.busyThroughput, partial)
			results[i] = append(results[i], r)
		}
	}
	fmt.Fprintf(out, "%-36s %10s %8s %9s %9s %10s %10s %14s %14s\n", "medians", "MB/s", "ratio", "p50 ms", "p99 ms", "p99 ratio", "busy", "paired MB/s", "paired p99")
	base := medianOf(results[0])
	for i, a := range arms {
		m := medianOf(results[i])
		// Each round runs the arms back to back: the median of the
		// rounds' own ratios is the steadier figure on a shared machine.
		var tput, p99 []float64
		for r := range results[i] {
			tput = append(tput, results[i][r].mbps/results[0][r].mbps)
			p99 = append(p99, float64(results[i][r].p99)/float64(results[0][r].p99))
		}
		fmt.Fprintf(out, "%-36s %10.1f %7.2fx %9.1f %9.1f %9.2fx %4.0f%%/%3.0f%% %13.2fx %13.2fx\n", a.name, m.mbps, m.mbps/base.mbps,
			ms(m.p50), ms(m.p99), float64(m.p99)/float64(base.p99), 100*m.busyLatency, 100*m.busyThroughput, medianFloat(tput), medianFloat(p99))
	}
	fmt.Fprintf(out, "loadavg at the end: %s\n", loadavg())
	return nil
}

// broker is one kbroker run on a data directory.
type broker struct {
	kb      *launch.Kbroker
	logPath string
	addr    string
	started time.Time
}

func startBroker(ctx context.Context, o options, data string, extra ...string) (*broker, error) {
	logPath := data + ".log"
	_ = os.Remove(logPath)
	args := append([]string{"log.cleaner.backoff.ms=100", "log.cleaner.threads=1", "num.partitions=1"}, extra...)
	kb := launch.NewKbroker(launch.KbrokerSpec{Bin: o.kbroker, DataDir: data, Args: launch.Overrides(args...), LogPath: logPath,
		Timeout: 60 * time.Second, Attempts: launch.PortAttempts})
	b := &broker{kb: kb, logPath: logPath, started: time.Now()}
	if err := kb.Start(ctx); err != nil {
		_, _ = kb.Process().Stop(10 * time.Second)
		return nil, fmt.Errorf("starting kbroker: %w", err)
	}
	b.addr = kb.Addr()
	return b, nil
}

func (b *broker) stop() {
	_, _ = b.kb.Process().Stop(30 * time.Second)
}

func (b *broker) peakRSS() int64 {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.kb.Process().Pid()))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(st), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// fill writes the data with the cleaner off and stops the broker.
func fill(ctx context.Context, o options, data string) (int64, error) {
	if err := os.MkdirAll(data, 0o755); err != nil {
		return 0, err
	}
	b, err := startBroker(ctx, o, data, "log.cleaner.enable=false")
	if err != nil {
		return 0, err
	}
	defer b.stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	cfg := map[string]*string{}
	for k, v := range map[string]string{"cleanup.policy": "compact", "segment.bytes": strconv.Itoa(o.segmentMB << 20),
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400000"} {
		cfg[k] = &v
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if resp, err := kadm.NewClient(cl).CreateTopic(cctx, 1, 1, cfg, topic); err != nil || resp.Err != nil {
		return 0, fmt.Errorf("create topic: %v %v", err, resp.Err)
	}
	n := int64(o.mb) << 20 / int64(o.recordSize)
	keys := newKeys(o.keys, 1)
	value := randomValue(o.recordSize)
	errc := make(chan error, 1)
	for i := int64(0); i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Key: keys.next(), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, err
	}
	select {
	case err := <-errc:
		return 0, err
	default:
	}
	return n, nil
}

// randomValue is an incompressible record value (the producers send it
// uncompressed anyway, so the log holds what the MB figures say).
func randomValue(n int) []byte {
	r := rand.New(rand.NewPCG(3, 0x76616c))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// keyGen draws keys uniformly.
type keyGen struct {
	r    *rand.Rand
	keys int
}

func newKeys(keys int, seed uint64) *keyGen {
	return &keyGen{r: rand.New(rand.NewPCG(seed, 0x6b657973)), keys: keys}
}

func (k *keyGen) next() []byte { return []byte(fmt.Sprintf("key-%09d", k.r.IntN(k.keys))) }

type segFile struct {
	path string
	size int64
}

// closedSegments lists a partition's .log files but the last (active)
// one: their sizes and the active segment's base offset.
func closedSegments(dir string) ([]segFile, int64, int64, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, 0, 0, err
	}
	slices.Sort(names)
	if len(names) < 2 {
		return nil, 0, 0, fmt.Errorf("%s: %d segments; write more (--mb) or smaller segments (--segment-mb)", dir, len(names))
	}
	var segs []segFile
	var total int64
	for _, n := range names[:len(names)-1] {
		st, err := os.Stat(n)
		if err != nil {
			return nil, 0, 0, err
		}
		segs = append(segs, segFile{n, st.Size()})
		total += st.Size()
	}
	base, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(names[len(names)-1]), ".log"), 10, 64)
	return segs, total, base, err
}

// restore replaces dst with a copy of src.
func restore(src, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a %s %s: %v: %s", src, dst, err, out)
	}
	return nil
}

// readSpeed reads the segment files (found in dir by name) start to end
// in 1 MiB reads and returns MB/s; direct uses O_DIRECT.
func readSpeed(dir string, segs []segFile, direct bool) (float64, error) {
	const chunk = 1 << 20
	buf, err := unix.Mmap(-1, 0, chunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // page-aligned
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(buf)
	flags := os.O_RDONLY
	if direct {
		flags |= unix.O_DIRECT
	}
	var total int64
	start := time.Now()
	for _, s := range segs {
		f, err := os.OpenFile(filepath.Join(dir, filepath.Base(s.path)), flags, 0)
		if err != nil {
			return 0, err
		}
		for {
			n, err := f.Read(buf)
			total += int64(n)
			if errors.Is(err, io.EOF) || (err == nil && n == 0) {
				break
			}
			if err != nil {
				f.Close()
				return 0, err
			}
		}
		f.Close()
	}
	return float64(total) / 1e6 / time.Since(start).Seconds(), nil
}

// cleaning is one "log cleaned" line of the broker.
type cleaning struct {
	at            time.Time
	took          time.Duration
	read, written int64
	endOffset     int64
}

var cleanedLine = regexp.MustCompile(`^time=(\S+) level=INFO msg="log cleaned" partition=(\S+) first_dirty=\d+ end_offset=(\d+) dirty_ratio=\S+ bytes_read=(\d+) bytes_written=(\d+)(?: \S+=\S+)*? took=(\S+)`)

// cleanings parses the broker's "log cleaned" lines of the topic (fields
// the broker adds between bytes_written and took, as markers_removed, are
// skipped: a new field once made every run report no cleaning).
func cleanings(logPath string) ([]cleaning, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cleaning
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := cleanedLine.FindStringSubmatch(sc.Text())
		if m == nil || m[2] != topic+"-0" {
			continue
		}
		var c cleaning
		var errs [5]error
		c.at, errs[0] = time.Parse(time.RFC3339Nano, m[1])
		c.endOffset, errs[1] = strconv.ParseInt(m[3], 10, 64)
		c.read, errs[2] = strconv.ParseInt(m[4], 10, 64)
		c.written, errs[3] = strconv.ParseInt(m[5], 10, 64)
		c.took, errs[4] = time.ParseDuration(m[6])
		if err := errors.Join(errs[:]...); err != nil {
			return nil, fmt.Errorf("%q: %w", sc.Text(), err)
		}
		out = append(out, c)
	}
	return out, sc.Err()
}

// baselineRSS is the broker's peak RSS on a copy of the snapshot with the
// cleaner off, 2 s after it started (its partition open).
func baselineRSS(ctx context.Context, o options, snapshot, work string) (int64, error) {
	if err := restore(snapshot, work); err != nil {
		return 0, err
	}
	b, err := startBroker(ctx, o, work, "log.cleaner.enable=false")
	if err != nil {
		return 0, err
	}
	defer b.stop()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(2 * time.Second):
	}
	return b.peakRSS(), nil
}

type cleanResult struct {
	wall, took    time.Duration
	read, written int64
	rounds        int
	peakRSS       int64
}

// cleanOnce starts the broker on a fresh copy of the snapshot with the
// cleaner on and waits until its cleanings reach target (the active
// segment's base).
func cleanOnce(ctx context.Context, o options, snapshot, work string, target int64, args []string) (cleanResult, error) {
	var r cleanResult
	if err := restore(snapshot, work); err != nil {
		return r, err
	}
	b, err := startBroker(ctx, o, work, args...)
	if err != nil {
		return r, err
	}
	defer b.stop()
	deadline := time.Now().Add(o.timeout)
	for {
		cs, err := cleanings(b.logPath)
		if err != nil {
			return r, err
		}
		if len(cs) > 0 && cs[len(cs)-1].endOffset >= target {
			r.wall = time.Since(b.started)
			for _, c := range cs {
				r.took += c.took
				r.read += c.read
				r.written += c.written
			}
			r.rounds = len(cs)
			r.peakRSS = b.peakRSS()
			return r, nil
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("the cleaner did not reach offset %d within %v (%d cleanings); see %s", target, o.timeout, len(cs), b.logPath)
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type produceResult struct {
	mbps                        float64
	p50, p99, max               time.Duration
	busyLatency, busyThroughput float64 // share of each window the cleaner was busy
	busyPartial                 bool    // a cleaning still ran cleaningWait after the windows: the shares are lower bounds
}

// cleaningWait bounds the wait after the windows for the cleaning then
// running to end and log its time.
const cleaningWait = 60 * time.Second

// produceOnce starts the broker on a fresh copy of the snapshot (the
// cleaner, if on, starts on its dirty segments at once) and runs the
// latency window, then the throughput window.
func produceOnce(ctx context.Context, o options, snapshot, work string, args []string) (produceResult, error) {
	var r produceResult
	if err := restore(snapshot, work); err != nil {
		return r, err
	}
	b, err := startBroker(ctx, o, work, args...)
	if err != nil {
		return r, err
	}
	defer b.stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(20000),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return r, err
	}
	defer cl.Close()
	keys := newKeys(o.keys, 2)
	value := randomValue(o.recordSize)

	// Latency: records scheduled every 1/rate, latency from the
	// scheduled time (a stall delays the later sends' schedule too).
	latStart := time.Now()
	n := int(float64(o.rate) * o.window.Seconds())
	lats := make([]time.Duration, n)
	errc := make(chan error, 1)
	fail := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	every := time.Second / time.Duration(o.rate)
	for i := 0; i < n; i++ {
		due := latStart.Add(time.Duration(i) * every)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		cl.Produce(ctx, &kgo.Record{Key: keys.next(), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				fail(err)
			}
			lats[i] = time.Since(due)
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return r, err
	}
	latEnd := time.Now()
	slices.Sort(lats)
	r.p50, r.p99, r.max = lats[n/2], lats[n*99/100], lats[n-1]

	// Throughput: as fast as the client can for the window.
	tStart := time.Now()
	var sent int64
	for time.Since(tStart) < o.window {
		cl.Produce(ctx, &kgo.Record{Key: keys.next(), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				fail(err)
			}
		})
		sent++
	}
	if err := cl.Flush(ctx); err != nil {
		return r, err
	}
	tEnd := time.Now()
	select {
	case err := <-errc:
		return r, err
	default:
	}
	r.mbps = float64(sent*int64(o.recordSize)) / 1e6 / tEnd.Sub(tStart).Seconds()
	// A cleaning is logged when it ends: wait (bounded) for the one
	// running at the end of the windows, if any, to count its time.
	var cs []cleaning
	deadline := time.Now().Add(cleaningWait)
	for {
		if cs, err = cleanings(b.logPath); err != nil {
			return r, err
		}
		if slices.Contains(args, "log.cleaner.enable=false") || (len(cs) > 0 && !cs[len(cs)-1].at.Before(tEnd)) {
			break
		}
		if time.Now().After(deadline) {
			r.busyPartial = true
			break
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	r.busyLatency = busyShare(cs, latStart, latEnd)
	r.busyThroughput = busyShare(cs, tStart, tEnd)
	return r, nil
}

// busyShare is the share of [from, to) covered by the cleanings.
func busyShare(cs []cleaning, from, to time.Time) float64 {
	var busy time.Duration
	for _, c := range cs {
		s, e := c.at.Add(-c.took), c.at
		if s.Before(from) {
			s = from
		}
		if e.After(to) {
			e = to
		}
		if e.After(s) {
			busy += e.Sub(s)
		}
	}
	return busy.Seconds() / to.Sub(from).Seconds()
}

func medianOf(rs []produceResult) produceResult {
	med := func(f func(produceResult) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	return produceResult{
		mbps:           med(func(r produceResult) float64 { return r.mbps }),
		p50:            time.Duration(med(func(r produceResult) float64 { return float64(r.p50) })),
		p99:            time.Duration(med(func(r produceResult) float64 { return float64(r.p99) })),
		max:            time.Duration(med(func(r produceResult) float64 { return float64(r.max) })),
		busyLatency:    med(func(r produceResult) float64 { return r.busyLatency }),
		busyThroughput: med(func(r produceResult) float64 { return r.busyThroughput }),
	}
}

func medianFloat(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func numCPU() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0
	}
	return set.Count()
}
