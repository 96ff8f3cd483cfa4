package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// result is the outcome of one workload run against one target.
type result struct {
	Target string `json:"target"`
	Run    int    `json:"run,omitempty"` // 1-based; 0 for aggregated rows

	Records       int     `json:"records"`         // records acknowledged without error
	ProduceErrors int     `json:"produce_errors"`  // records whose promise carried an error
	ProduceSecs   float64 `json:"produce_seconds"` // first send to last ack
	ProduceRecS   float64 `json:"produce_records_per_sec"`
	ProduceMBs    float64 `json:"produce_mb_per_sec"` // value bytes, MB = 1e6 bytes
	OfferedRate   float64 `json:"offered_rate,omitempty"`
	LatP50ms      float64 `json:"latency_p50_ms"`
	LatP99ms      float64 `json:"latency_p99_ms"`
	LatP999ms     float64 `json:"latency_p999_ms"`
	LatMaxms      float64 `json:"latency_max_ms"`

	Consumed      int     `json:"consumed,omitempty"`
	ConsumedBytes int     `json:"consumed_bytes,omitempty"` // record value bytes
	ConsumeSecs   float64 `json:"consume_seconds,omitempty"`
	ConsumeRecS   float64 `json:"consume_records_per_sec,omitempty"`
	ConsumeMBs    float64 `json:"consume_mb_per_sec,omitempty"`

	// Broker CPU seconds (user + system) per GB (1e9 bytes of record
	// values) produced or consumed, when the broker is a process kbench
	// started.
	ProduceCPUPerGB float64 `json:"produce_broker_cpu_s_per_gb,omitempty"`
	ConsumeCPUPerGB float64 `json:"consume_broker_cpu_s_per_gb,omitempty"`
	// ProduceCPUSecs and ConsumeCPUSecs are the broker's CPU seconds in
	// each phase, and CPUPerGB their sum per GB produced plus consumed:
	// what the broker spends per byte it moves, both ways.
	ProduceCPUSecs float64 `json:"produce_broker_cpu_seconds,omitempty"`
	ConsumeCPUSecs float64 `json:"consume_broker_cpu_seconds,omitempty"`
	CPUPerGB       float64 `json:"broker_cpu_s_per_gb,omitempty"`

	PeakRSSMiB float64 `json:"peak_rss_mib,omitempty"` // VmHWM of the broker process, when known
	// IdleConns is how many idle connections were held through the run
	// (--idle-conns), and IdleConnKiB the broker's RSS growth per
	// connection when they were opened.
	IdleConns   int     `json:"idle_conns,omitempty"`
	IdleConnKiB float64 `json:"idle_conn_rss_kib,omitempty"`
	StartupMs   float64 `json:"startup_ms,omitempty"` // exec to first successful request, when known

	Error string `json:"error,omitempty"`
}

// percentile returns the p-th percentile (0 <= p <= 100) of sorted using the
// nearest-rank method: the smallest value such that at least p% of the
// samples are <= it. sorted must be sorted ascending; an empty slice yields 0.
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if p <= 0 {
		return sorted[0]
	}
	if p >= 100 {
		return sorted[n-1]
	}
	// A tiny epsilon keeps e.g. 99.9% of 1000 samples at rank 999 rather
	// than 1000 because of floating point error in p/100*n.
	rank := int(math.Ceil(p/100*float64(n) - 1e-9))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

// latencyStats sorts lats in place and fills the latency fields of r.
func (r *result) latencyStats(lats []time.Duration) {
	slices.Sort(lats)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	r.LatP50ms = ms(percentile(lats, 50))
	r.LatP99ms = ms(percentile(lats, 99))
	r.LatP999ms = ms(percentile(lats, 99.9))
	if len(lats) > 0 {
		r.LatMaxms = ms(lats[len(lats)-1])
	}
}

// median returns the median of xs (mean of the middle two for an even
// count); xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// metric describes one numeric column of the table.
type metric struct {
	name string
	get  func(*result) *float64
	prec int
}

var metrics = []metric{
	{"prod rec/s", func(r *result) *float64 { return &r.ProduceRecS }, 0},
	{"prod MB/s", func(r *result) *float64 { return &r.ProduceMBs }, 1},
	{"p50 ms", func(r *result) *float64 { return &r.LatP50ms }, 2},
	{"p99 ms", func(r *result) *float64 { return &r.LatP99ms }, 2},
	{"p99.9 ms", func(r *result) *float64 { return &r.LatP999ms }, 2},
	{"cons rec/s", func(r *result) *float64 { return &r.ConsumeRecS }, 0},
	{"cons MB/s", func(r *result) *float64 { return &r.ConsumeMBs }, 1},
	{"prod cpu s/GB", func(r *result) *float64 { return &r.ProduceCPUPerGB }, 2},
	{"cons cpu s/GB", func(r *result) *float64 { return &r.ConsumeCPUPerGB }, 2},
	{"cpu s/GB", func(r *result) *float64 { return &r.CPUPerGB }, 2},
	{"peak RSS MiB", func(r *result) *float64 { return &r.PeakRSSMiB }, 1},
	{"idle conn KiB", func(r *result) *float64 { return &r.IdleConnKiB }, 2},
	{"start ms", func(r *result) *float64 { return &r.StartupMs }, 1},
}

// medianResult aggregates the successful runs of one target metric by
// metric. It returns false when no run succeeded.
func medianResult(target string, runs []result) (result, bool) {
	var ok []result
	for _, r := range runs {
		if r.Error == "" {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return result{}, false
	}
	m := result{Target: target + " (median)"}
	if len(ok) == 1 {
		m = ok[0]
		m.Target = target
		m.Run = 0
		return m, true
	}
	for _, mt := range metrics {
		xs := make([]float64, 0, len(ok))
		for i := range ok {
			xs = append(xs, *mt.get(&ok[i]))
		}
		*mt.get(&m) = median(xs)
	}
	var recs, errs, cons, consBytes, prodCPU, consCPU []float64
	for _, r := range ok {
		recs = append(recs, float64(r.Records))
		errs = append(errs, float64(r.ProduceErrors))
		cons = append(cons, float64(r.Consumed))
		consBytes = append(consBytes, float64(r.ConsumedBytes))
		prodCPU = append(prodCPU, r.ProduceCPUSecs)
		consCPU = append(consCPU, r.ConsumeCPUSecs)
	}
	m.ProduceCPUSecs = median(prodCPU)
	m.ConsumeCPUSecs = median(consCPU)
	m.Records = int(median(recs))
	m.ProduceErrors = int(median(errs))
	m.Consumed = int(median(cons))
	m.ConsumedBytes = int(median(consBytes))
	m.OfferedRate = ok[0].OfferedRate
	m.IdleConns = ok[0].IdleConns
	return m, true
}

// ratios returns a/b metric by metric; a metric is omitted when either side
// is unknown (zero).
func ratios(a, b result) map[string]float64 {
	out := map[string]float64{}
	for _, mt := range metrics {
		x, y := *mt.get(&a), *mt.get(&b)
		if x == 0 || y == 0 {
			continue
		}
		out[mt.name] = x / y
	}
	return out
}

func fmtNum(v float64, prec int) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

// pairedRatio is the two arms' ratios in one run.
type pairedRatio struct {
	Run   int                `json:"run"`
	Ratio map[string]float64 `json:"ratio"`
}

// pairedRatios returns ratios(a[i], b[i]) for every run i in which both
// sides succeeded, and the median of each metric over them.
func pairedRatios(a, b []result) ([]pairedRatio, map[string]float64) {
	pairs, med, _, _ := pairedRatioStats(a, b)
	return pairs, med
}

// pairedRatioStats is pairedRatios with the smallest and largest paired
// ratio of each metric: the spread of the runs.
func pairedRatioStats(a, b []result) (pairs []pairedRatio, med, lo, hi map[string]float64) {
	for i := range min(len(a), len(b)) {
		if a[i].Error == "" && b[i].Error == "" {
			pairs = append(pairs, pairedRatio{Run: a[i].Run, Ratio: ratios(a[i], b[i])})
		}
	}
	if len(pairs) == 0 {
		return nil, nil, nil, nil
	}
	med, lo, hi = map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, mt := range metrics {
		var xs []float64
		for _, p := range pairs {
			if v, ok := p.Ratio[mt.name]; ok {
				xs = append(xs, v)
			}
		}
		if len(xs) > 0 {
			med[mt.name] = median(xs)
			lo[mt.name], hi[mt.name] = slices.Min(xs), slices.Max(xs)
		}
	}
	return pairs, med, lo, hi
}

// ratioRow is a row of ratios under the table, metric name to ratio; with
// hi set, a row of ranges from ratio (the lowest) to hi.
type ratioRow struct {
	name  string
	ratio map[string]float64
	hi    map[string]float64
}

// writeTable prints rows (and ratio rows under them) as an aligned table.
func writeTable(w io.Writer, rows []result, ratios []ratioRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"target"}
	for _, mt := range metrics {
		head = append(head, mt.name)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, r := range rows {
		cells := []string{r.Target}
		if r.Error != "" {
			msg, _, _ := strings.Cut(r.Error, "\n")
			if len(msg) > 100 {
				msg = msg[:97] + "..."
			}
			cells = append(cells, "error: "+msg)
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
			continue
		}
		for _, mt := range metrics {
			cells = append(cells, fmtNum(*mt.get(&r), mt.prec))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	for _, rr := range ratios {
		cells := []string{rr.name}
		for _, mt := range metrics {
			v, ok := rr.ratio[mt.name]
			h, okHi := rr.hi[mt.name]
			if ok && okHi {
				cells = append(cells, fmt.Sprintf("%.2f-%.2fx", v, h))
			} else if ok {
				cells = append(cells, fmt.Sprintf("%.2fx", v))
			} else {
				cells = append(cells, "-")
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
}
