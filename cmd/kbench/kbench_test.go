package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kbroker/kbroker/internal/testpki"
	"github.com/twmb/franz-go/pkg/kfake"
)

func durs(ms ...int) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	one2hundred := make([]time.Duration, 100)
	for i := range one2hundred {
		one2hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	thousand := make([]time.Duration, 1000)
	for i := range thousand {
		thousand[i] = time.Duration(i+1) * time.Millisecond
	}
	cases := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"single p0", durs(7), 0, 7 * time.Millisecond},
		{"single p50", durs(7), 50, 7 * time.Millisecond},
		{"single p100", durs(7), 100, 7 * time.Millisecond},
		{"two p50", durs(1, 2), 50, 1 * time.Millisecond},
		{"two p51", durs(1, 2), 51, 2 * time.Millisecond},
		{"100 p50", one2hundred, 50, 50 * time.Millisecond},
		{"100 p99", one2hundred, 99, 99 * time.Millisecond},
		{"100 p99.9", one2hundred, 99.9, 100 * time.Millisecond},
		{"100 p100", one2hundred, 100, 100 * time.Millisecond},
		{"1000 p99.9", thousand, 99.9, 999 * time.Millisecond},
		{"1000 p99", thousand, 99, 990 * time.Millisecond},
		{"1000 p0.1", thousand, 0.1, 1 * time.Millisecond},
		{"below 0", durs(3, 4), -5, 3 * time.Millisecond},
		{"above 100", durs(3, 4), 150, 4 * time.Millisecond},
	}
	for _, c := range cases {
		if got := percentile(c.sorted, c.p); got != c.want {
			t.Errorf("%s: percentile(p=%v) = %v, want %v", c.name, c.p, got, c.want)
		}
	}
}

func TestLatencyStatsSorts(t *testing.T) {
	lats := durs(5, 1, 4, 2, 3)
	var r result
	r.latencyStats(lats)
	if r.LatP50ms != 3 || r.LatP99ms != 5 || r.LatP999ms != 5 || r.LatMaxms != 5 {
		t.Fatalf("got p50=%v p99=%v p99.9=%v max=%v", r.LatP50ms, r.LatP99ms, r.LatP999ms, r.LatMaxms)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := append([]float64(nil), c.in...)
		if got := median(in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Errorf("median modified its input: %v", in)
			}
		}
	}
}

func TestMedianResultAndRatios(t *testing.T) {
	runs := []result{
		{Target: "kbroker", Run: 1, ProduceRecS: 100, LatP99ms: 3, PeakRSSMiB: 50},
		{Target: "kbroker", Run: 2, ProduceRecS: 300, LatP99ms: 1, PeakRSSMiB: 70},
		{Target: "kbroker", Run: 3, ProduceRecS: 200, LatP99ms: 2, PeakRSSMiB: 60},
		{Target: "kbroker", Run: 4, Error: "boom"},
	}
	m, ok := medianResult("kbroker", runs)
	if !ok || m.ProduceRecS != 200 || m.LatP99ms != 2 || m.PeakRSSMiB != 60 || m.Run != 0 {
		t.Fatalf("median result = %+v, %v", m, ok)
	}
	if _, ok := medianResult("x", []result{{Error: "e"}}); ok {
		t.Fatal("median of only failed runs should not be ok")
	}
	single, ok := medianResult("kfake", []result{{Target: "kfake", Run: 1, ProduceRecS: 5}})
	if !ok || single.Target != "kfake" || single.Run != 0 || single.ProduceRecS != 5 {
		t.Fatalf("single = %+v", single)
	}
	r := ratios(m, result{ProduceRecS: 400, LatP99ms: 1})
	if r["prod rec/s"] != 0.5 || r["p99 ms"] != 2 {
		t.Fatalf("ratios = %v", r)
	}
	if _, ok := r["peak RSS MiB"]; ok {
		t.Fatal("ratio with an unknown side should be omitted")
	}
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	rows := []result{
		{Target: "kbroker", ProduceRecS: 123456, LatP50ms: 1.5, PeakRSSMiB: 42},
		{Target: "kfake", Error: "nope"},
	}
	if err := writeTable(&buf, rows, []ratioRow{{name: "kbroker/kfake", ratio: map[string]float64{"prod rec/s": 1.25}}}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"prod rec/s", "123456", "1.50", "42.0", "error: nope", "1.25x"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestParseFlags(t *testing.T) {
	ok := []struct {
		args  []string
		check func(*config) bool
	}{
		{[]string{"--kfake"}, func(c *config) bool {
			return c.records == 200000 && c.recordSize == 1024 && c.partitions == 6 && c.replication == 1 &&
				c.acks == "1" && !c.idempotent && c.consume && c.compression == "none" && c.rate == 0 &&
				c.timeout == 5*time.Minute && c.runs == 1
		}},
		{[]string{"--kfake", "--acks", "all"}, func(c *config) bool { return c.idempotent }},
		{[]string{"--kfake", "--acks", "-1"}, func(c *config) bool { return c.acks == "all" && c.idempotent }},
		{[]string{"--kfake", "--acks", "all", "--idempotent=false"}, func(c *config) bool { return !c.idempotent }},
		{[]string{"--kfake", "--acks", "0"}, func(c *config) bool { return !c.idempotent }},
		{[]string{"--brokers", "a:1, b:2,", "--vs-kfake", "--runs", "3"}, func(c *config) bool {
			return len(c.brokers) == 2 && c.brokers[1] == "b:2" && c.vsKfake && c.runs == 3
		}},
		{[]string{"--kbroker", "/bin/kbroker", "--kbroker-arg", "--foo", "--kbroker-arg=bar"}, func(c *config) bool {
			return len(c.brokerArgs) == 2 && c.brokerArgs[0] == "--foo"
		}},
		{[]string{"--brokers", "a:1", "--topic-config", "kbroker.acks.fsync=true", "--topic-config=min.insync.replicas=2"}, func(c *config) bool {
			return len(c.topicConfigs) == 2 && *c.topicConfigs["kbroker.acks.fsync"] == "true" && *c.topicConfigs["min.insync.replicas"] == "2"
		}},
		{[]string{"--brokers", "a:1", "--vs-variant", "--topic-config kbroker.acks.fsync=true"}, func(c *config) bool {
			return c.topicConfigs == nil && c.variant != nil && *c.variant.topicConfigs["kbroker.acks.fsync"] == "true"
		}},
		{[]string{"--kfake", "--rate", "20000", "--consume=false", "--linger", "5ms", "--compression", "zstd"}, func(c *config) bool {
			return c.rate == 20000 && !c.consume && c.linger == 5*time.Millisecond && c.compression == "zstd"
		}},
		{[]string{"--kfake"}, func(c *config) bool {
			return c.txnRecords == 0 && c.isolation == readUncommitted && c.variant == nil && c.variantArgs == nil
		}},
		{[]string{"--kfake", "--acks", "all", "--txn-records", "100", "--isolation", "read_committed"}, func(c *config) bool {
			return c.txnRecords == 100 && c.isolation == readCommitted && c.idempotent
		}},
		// The variant is the same command line with its flags on top.
		{[]string{"--kbroker", "/bin/kbroker", "--kbroker-arg", "x", "--acks", "all", "--txn-records", "100", "--records", "5000",
			"--vs-variant", " --txn-records 0  --isolation read_committed"}, func(c *config) bool {
			v := c.variant
			return c.txnRecords == 100 && c.isolation == readUncommitted && strings.Join(c.variantArgs, "|") == "--txn-records|0|--isolation|read_committed" &&
				v != nil && v.txnRecords == 0 && v.isolation == readCommitted && v.records == 5000 && v.acks == "all" &&
				v.idempotent && v.kbrokerPath == "/bin/kbroker" && len(v.brokerArgs) == 1 && v.variant == nil && v.variantArgs == nil
		}},
		// The transaction's own cost: against an idempotent producer
		// flushing at the same points.
		{[]string{"--kbroker", "/bin/kbroker", "--acks", "all", "--txn-records", "100", "--vs-variant", "--txn-records 0 --flush-every 100"}, func(c *config) bool {
			return c.txnRecords == 100 && c.flushEvery == 0 && c.variant != nil && c.variant.txnRecords == 0 && c.variant.flushEvery == 100
		}},
		// Idle connections held in one arm only.
		{[]string{"--kbroker", "/bin/kbroker", "--rate", "5000", "--idle-conns", "10000", "--vs-variant", "--idle-conns 0"}, func(c *config) bool {
			return c.idleConns == 10000 && c.variant != nil && c.variant.idleConns == 0 && c.variant.rate == 5000
		}},
		// A variant may undo the idempotence that --acks all implied.
		{[]string{"--brokers", "a:1", "--acks", "all", "--vs-variant", "--acks 1"}, func(c *config) bool {
			return c.idempotent && c.variant.acks == "1" && !c.variant.idempotent
		}},
		// --security: plaintext by default, which needs no secured
		// listeners on any target.
		{[]string{"--kfake"}, func(c *config) bool { return c.security == secPlaintext && !c.securedListeners }},
		{[]string{"--brokers", "a:1", "--security", "plaintext"}, func(c *config) bool {
			return c.security == secPlaintext && !c.securedListeners
		}},
		{[]string{"--kbroker", "/bin/kbroker", "--security", "ssl"}, func(c *config) bool {
			return c.security == secSSL && c.securedListeners
		}},
		{[]string{"--kbroker", "/bin/kbroker", "--security=sasl_ssl"}, func(c *config) bool {
			return c.security == secSASLSSL && c.securedListeners
		}},
		// In a variant, both arms start the same broker (secured
		// listeners too) and differ in the listener their clients use.
		{[]string{"--kbroker", "/bin/kbroker", "--security", "ssl", "--vs-variant", "--security plaintext"}, func(c *config) bool {
			v := c.variant
			return c.security == secSSL && c.securedListeners && v != nil && v.security == secPlaintext && v.securedListeners
		}},
		{[]string{"--kbroker", "/bin/kbroker", "--vs-variant", "--security sasl_ssl"}, func(c *config) bool {
			v := c.variant
			return c.security == secPlaintext && c.securedListeners && v != nil && v.security == secSASLSSL && v.securedListeners
		}},
		{[]string{"--kbroker", "/bin/kbroker", "--security", "sasl_ssl", "--vs-variant", "--security ssl --acks all"}, func(c *config) bool {
			v := c.variant
			return c.security == secSASLSSL && c.acks == "1" && v.security == secSSL && v.acks == "all" && v.securedListeners
		}},
		// Another build of the broker against the first.
		{[]string{"--kbroker", "/bin/new", "--vs-variant", "--kbroker /bin/old"}, func(c *config) bool {
			return c.kbrokerPath == "/bin/new" && c.variant != nil && c.variant.kbrokerPath == "/bin/old"
		}},
		// Without --security on either side nothing is secured.
		{[]string{"--kbroker", "/bin/kbroker", "--vs-variant", "--acks all"}, func(c *config) bool {
			return !c.securedListeners && !c.variant.securedListeners
		}},
		// --acls: no authorizer by default.
		{[]string{"--kbroker", "/bin/kbroker"}, func(c *config) bool {
			return c.acls == noAuthorizer && !c.adminListener && c.setup() == brokerSetup{}
		}},
		{[]string{"--kfake"}, func(c *config) bool { return c.acls == noAuthorizer && !c.adminListener }},
		{[]string{"--kbroker", "/bin/kbroker", "--acls", "1000"}, func(c *config) bool {
			return c.acls == 1000 && c.adminListener && c.setup() == brokerSetup{admin: true, authorizer: true}
		}},
		{[]string{"--kbroker", "/bin/kbroker", "--acls=0"}, func(c *config) bool {
			return c.acls == 0 && c.setup() == brokerSetup{admin: true, authorizer: true}
		}},
		{[]string{"--kbroker", "/bin/kbroker", "--acls", "-1"}, func(c *config) bool { return c.acls == noAuthorizer && !c.adminListener }},
		// In a variant, both arms start the broker with the same
		// listeners (the admin's too) and differ in the authorizer and
		// its ACLs.
		{[]string{"--kbroker", "/bin/kbroker", "--acls", "1000", "--vs-variant", "--acls -1"}, func(c *config) bool {
			v := c.variant
			return c.acls == 1000 && v != nil && v.acls == noAuthorizer &&
				c.setup() == brokerSetup{admin: true, authorizer: true} && v.setup() == brokerSetup{admin: true}
		}},
		{[]string{"--kbroker", "/bin/kbroker", "--vs-variant", "--acls 10"}, func(c *config) bool {
			v := c.variant
			return c.acls == noAuthorizer && v.acls == 10 &&
				c.setup() == brokerSetup{admin: true} && v.setup() == brokerSetup{admin: true, authorizer: true}
		}},
		{[]string{"--kbroker", "/bin/kbroker", "--acls", "1000", "--vs-variant", "--acls 0"}, func(c *config) bool {
			return c.variant.acls == 0 && c.variant.setup() == brokerSetup{admin: true, authorizer: true}
		}},
		// With --security both: the workload's principal is the SCRAM
		// user on SASL_SSL, ANONYMOUS otherwise.
		{[]string{"--kbroker", "/bin/kbroker", "--security", "sasl_ssl", "--acls", "1000", "--vs-variant", "--acls -1"}, func(c *config) bool {
			v := c.variant
			return c.setup() == brokerSetup{secured: true, admin: true, authorizer: true} &&
				v.setup() == brokerSetup{secured: true, admin: true} && c.workloadPrincipal() == "User:kbench" && v.workloadPrincipal() == "User:kbench"
		}},
		{[]string{"--kbroker", "/bin/kbroker", "--security", "ssl", "--acls", "5"}, func(c *config) bool {
			return c.workloadPrincipal() == "User:ANONYMOUS"
		}},
		{[]string{"--kbroker", "/bin/kbroker", "--acls", "5", "--acks", "all", "--txn-records", "10", "--vs-variant", "--acls -1 --txn-records 0"}, func(c *config) bool {
			return c.acls == 5 && c.txnRecords == 10 && c.variant.acls == noAuthorizer && c.variant.txnRecords == 0 && c.variant.adminListener
		}},
	}
	for _, c := range ok {
		cfg, err := parseFlags(c.args, io.Discard)
		if err != nil {
			t.Errorf("%q: unexpected error %v", c.args, err)
			continue
		}
		if !c.check(cfg) {
			t.Errorf("%q: unexpected config %+v", c.args, cfg)
		}
	}

	bad := [][]string{
		{"--brokers", "a:1", "--topic-config", "no-equals-sign"},
		{"--brokers", "a:1", "--topic-config", "=x"},
		{},                                // no target
		{"--kfake", "--brokers", "a:1"},   // two targets
		{"--kfake", "--kbroker", "x"},     // two targets
		{"--instant", "--kfake"},          // two targets
		{"--kfake", "--vs-kfake"},         // nothing to compare
		{"--brokers", ","},                // empty broker list
		{"--kfake", "--kbroker-arg", "x"}, // arg without --kbroker
		{"--kfake", "--acks", "2"},
		{"--kfake", "--idempotent"}, // needs acks=all
		{"--kfake", "--acks", "1", "--idempotent"},
		{"--kfake", "--compression", "brotli"},
		{"--kfake", "--records", "0"},
		{"--kfake", "--record-size", "-1"},
		{"--kfake", "--partitions", "0"},
		{"--kfake", "--replication-factor", "0"},
		{"--kfake", "--rate", "-1"},
		{"--kfake", "--runs", "0"},
		{"--kfake", "--timeout", "0s"},
		{"--kfake", "--linger", "-1ms"},
		{"--kfake", "--batch-max-bytes", "0"},
		{"--kfake", "--record-size", "2000", "--batch-max-bytes", "1000"},
		{"--kfake", "extra"},
		{"--nope"},
		{"--kfake", "--txn-records", "100"}, // needs idempotence
		{"--kfake", "--acks", "all", "--idempotent=false", "--txn-records", "10"}, // needs idempotence
		{"--kfake", "--acks", "all", "--txn-records", "-1"},
		{"--kfake", "--acks", "all", "--txn-records", "10", "--rate", "100"},
		{"--kfake", "--acks", "all", "--txn-records", "10", "--flush-every", "10"}, // a transaction flushes itself
		{"--kfake", "--flush-every", "10", "--rate", "100"},
		{"--kfake", "--flush-every", "-1"},
		{"--kfake", "--isolation", "read_uncommited"},
		{"--kfake", "--vs-variant", ""},                                  // no flags
		{"--kfake", "--vs-variant", "--runs 3"},                          // same runs for both
		{"--kfake", "--vs-variant", "--brokers a:1"},                     // same target
		{"--kfake", "--vs-variant", "--kbroker-arg x"},                   // same target
		{"--kfake", "--vs-variant", "--kbroker /bin/old"},                // another build needs --kbroker
		{"--brokers", "a:1", "--vs-kfake", "--vs-variant", "--acks all"}, // one comparison
		{"--kfake", "--vs-variant", "--txn-records 5"},                   // variant invalid: not idempotent
		{"--kfake", "--vs-variant", "--nope"},
		{"--kfake", "--vs-variant", "extra"},
		{"--instant", "--vs-variant", "--records 5"},
		{"--kbroker", "x", "--security", "tls"},                               // not a protocol
		{"--kbroker", "x", "--security", "SSL"},                               // lower case only
		{"--kbroker", "x", "--security", "sasl_plaintext"},                    // not benchmarked
		{"--kbroker", "x", "--security", ""},                                  // empty
		{"--kfake", "--security", "ssl"},                                      // kbench makes the PKI: needs --kbroker
		{"--brokers", "a:1", "--security", "sasl_ssl"},                        // likewise
		{"--instant", "--security", "ssl"},                                    // likewise
		{"--kbroker", "x", "--security", "ssl", "--vs-kfake"},                 // kfake is plaintext
		{"--kfake", "--vs-variant", "--security ssl"},                         // variant needs --kbroker
		{"--kbroker", "x", "--vs-variant", "--security nope"},                 // variant invalid
		{"--kbroker", "x", "--security", "ssl", "--vs-variant", "--security"}, // flag without value
		{"--kbroker", "x", "--acls", "-2"},                                    // -1 is the only negative
		{"--kbroker", "x", "--acls", "1001000"},                               // above maxACLs
		{"--kbroker", "x", "--acls", "many"},                                  // not a number
		{"--kfake", "--acls", "1000"},                                         // kbench starts the broker it configures
		{"--brokers", "a:1", "--acls", "0"},                                   // likewise
		{"--instant", "--acls", "10"},                                         // likewise
		{"--kbroker", "x", "--acls", "10", "--vs-kfake"},                      // kfake has no authorizer
		{"--kfake", "--vs-variant", "--acls 10"},                              // variant needs --kbroker
		{"--kbroker", "x", "--vs-variant", "--acls -5"},                       // variant invalid
		{"--kbroker", "x", "--acls", "10", "--vs-variant", "--acls"},          // flag without value
		{"--kbroker", "x", "--idle-conns", "-1"},
		{"--kfake", "--idle-conns", "10"},                      // the broker's RSS is read from its process
		{"--brokers", "a:1", "--idle-conns", "10"},             // likewise
		{"--kbroker", "x", "--idle-conns", "10", "--vs-kfake"}, // compared with a variant instead
		{"--kfake", "--vs-variant", "--idle-conns 10"},         // variant needs --kbroker
	}
	for _, args := range bad {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%q: expected an error", args)
		}
	}
}

func TestParseStatCPU(t *testing.T) {
	// The command name may hold spaces and parentheses.
	stat := "4242 (kb (x) 1) S 1 4242 4242 0 -1 4194560 2531 0 0 0 250 37 0 0 20 0 12 0 1000 800000 5000 18446744073709551615\n"
	got, err := parseStatCPU(stat)
	if err != nil || got != 2870*time.Millisecond {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "4242 kbroker S 1", "4242 (k) S 1 2 3", "4242 (k) S 1 4242 4242 0 -1 4194560 2531 0 0 0 x 37 0"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("%q: expected an error", bad)
		}
	}
}

func TestPairedRatios(t *testing.T) {
	a := []result{{Run: 1, ProduceRecS: 10, ConsumeRecS: 9}, {Run: 2, ProduceRecS: 30}, {Run: 3, ProduceRecS: 20, ConsumeRecS: 8}, {Run: 4, ProduceRecS: 5}}
	b := []result{{ProduceRecS: 100, ConsumeRecS: 10}, {Error: "x"}, {ProduceRecS: 40, ConsumeRecS: 10}, {ProduceRecS: 10}}
	pairs, med := pairedRatios(a, b)
	// Run 2 failed on one side: no pair. Consume is known in two pairs.
	if len(pairs) == 3 && pairs[1].Run != 3 {
		t.Fatalf("pairs = %v", pairs)
	}
	if len(pairs) != 3 || pairs[0].Ratio["prod rec/s"] != 0.1 || pairs[1].Ratio["prod rec/s"] != 0.5 {
		t.Fatalf("pairs = %v", pairs)
	}
	if med["prod rec/s"] != 0.5 || math.Abs(med["cons rec/s"]-0.85) > 1e-9 {
		t.Fatalf("median = %v", med)
	}
	if pairs, med := pairedRatios(a[1:2], b[1:2]); pairs != nil || med != nil {
		t.Fatalf("no pair: %v %v", pairs, med)
	}
	_, _, lo, hi := pairedRatioStats(a, b)
	if lo["prod rec/s"] != 0.1 || hi["prod rec/s"] != 0.5 || lo["cons rec/s"] != 0.8 || hi["cons rec/s"] != 0.9 {
		t.Fatalf("range %v - %v", lo, hi)
	}
}

// The broker's CPU per GB moved counts both phases' CPU over both phases'
// bytes; unknown CPU leaves it unknown.
func TestCPUPerGB(t *testing.T) {
	r := result{Records: 1000, ConsumedBytes: 1_000_000, ProduceCPUSecs: 0.3, ConsumeCPUSecs: 0.1}
	r.setCPUPerGB(1000) // 1 MB produced, 1 MB consumed: 0.4 s over 2 MB
	if math.Abs(r.CPUPerGB-200) > 1e-9 {
		t.Fatalf("CPUPerGB = %v, want 200", r.CPUPerGB)
	}
	unknown := result{Records: 1000, ConsumedBytes: 1_000_000}
	if unknown.setCPUPerGB(1000); unknown.CPUPerGB != 0 {
		t.Fatalf("CPUPerGB without CPU = %v", unknown.CPUPerGB)
	}
	if got := perGB(0.5, 500_000_000); got != 1 {
		t.Fatalf("perGB = %v", got)
	}
	if got := perGB(0.5, 0); got != 0 {
		t.Fatalf("perGB of no bytes = %v", got)
	}
}

func TestProfileFileName(t *testing.T) {
	if got := profileFileName("kbroker --security ssl"); got != "kbroker_--security_ssl" {
		t.Fatalf("got %q", got)
	}
}

func TestParseVmHWM(t *testing.T) {
	status := "Name:\tkbroker\nVmPeak:\t  800000 kB\nVmHWM:\t   12345 kB\nVmRSS:\t   10000 kB\n"
	got, err := parseVmHWM(strings.NewReader(status))
	if err != nil || got != 12345*1024 {
		t.Fatalf("got %d, %v", got, err)
	}
	if _, err := parseVmHWM(strings.NewReader("Name:\tx\n")); err == nil {
		t.Fatal("expected an error without VmHWM")
	}
	if _, err := parseVmHWM(strings.NewReader("VmHWM:\t12 MB\n")); err == nil {
		t.Fatal("expected an error for an unexpected unit")
	}
}

func TestValuePool(t *testing.T) {
	p, err := newValuePool(1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 8387, 1 << 20} {
		if v := p.value(i); len(v) != 1000 || cap(v) != 1000 {
			t.Fatalf("value(%d): len %d cap %d", i, len(v), cap(v))
		}
	}
	z, _ := newValuePool(0)
	if v := z.value(3); v == nil || len(v) != 0 {
		t.Fatalf("zero-size value = %v", v)
	}
}

// TestKfakeSmoke runs the whole workload against an in-process kfake
// cluster, once at max speed and once rate-limited.
func TestKfakeSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, args := range [][]string{
		{"--kfake", "--records", "3000", "--record-size", "100", "--timeout", "30s"},
		{"--kfake", "--records", "500", "--record-size", "10", "--rate", "5000", "--acks", "all", "--compression", "lz4", "--timeout", "30s"},
		{"--kfake", "--records", "1050", "--record-size", "100", "--acks", "all", "--txn-records", "100", "--isolation", "read_committed", "--timeout", "30s"},
	} {
		cfg, err := parseFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := runAll(context.Background(), cfg, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if rep.failed() || len(rep.Summary) != 1 {
			t.Fatalf("%q: report %+v", args, rep)
		}
		s := rep.Summary[0]
		if s.Records != cfg.records || s.Consumed != cfg.records || s.ProduceRecS <= 0 || s.ConsumeRecS <= 0 ||
			s.LatP50ms <= 0 || s.LatP50ms > s.LatP99ms || s.LatP99ms > s.LatP999ms || math.IsNaN(s.ProduceMBs) {
			t.Fatalf("%q: implausible summary %+v", args, s)
		}
		if s.PeakRSSMiB <= 0 || s.StartupMs <= 0 {
			t.Fatalf("%q: kfake runs in a process of its own, measured: %+v", args, s)
		}
		if cfg.txnRecords > 0 && (s.LatMaxms <= 0 || s.ProduceSecs <= 0) {
			t.Fatalf("%q: implausible transactional produce %+v", args, s)
		}
		if cfg.rate > 0 && (s.ProduceRecS > cfg.rate*1.5 || s.OfferedRate != cfg.rate) {
			t.Fatalf("%q: rate %v not respected (offered %v)", args, s.ProduceRecS, s.OfferedRate)
		}
		var buf bytes.Buffer
		if err := rep.writeText(&buf); err != nil || !strings.Contains(buf.String(), "kfake") {
			t.Fatalf("text output %q, %v", buf.String(), err)
		}
		buf.Reset()
		if err := rep.writeJSON(&buf); err != nil || !strings.Contains(buf.String(), `"produce_records_per_sec"`) {
			t.Fatalf("json output %q, %v", buf.String(), err)
		}
	}
}

// TestMain lets the test binary pose as a kbroker: with KBENCH_FAKE_KBROKER
// set it serves kfake on the port given by --override listeners=... until
// SIGTERM, which exercises --kbroker's process handling without a real
// broker.
func TestMain(m *testing.M) {
	// --kfake and --vs-kfake run kbench's own binary (here: this test
	// binary) as kfake, also where it poses as a kbroker.
	if len(os.Args) > 1 && os.Args[1] == "--serve-kfake" {
		if err := serveKfake(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "kfake:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv("KBENCH_FAKE_KBROKER") != "" {
		fakeKbroker()
		return
	}
	// --instant runs kbench's own binary (here: this test binary) as the
	// stand-in.
	if len(os.Args) > 1 && os.Args[1] == "--serve-instant" {
		cfg, err := parseFlags(os.Args[1:], os.Stderr)
		if err == nil {
			err = serveInstant(cfg.serveInstant, cfg.partitions, cfg.recordSize, cfg.batchMax)
		}
		fmt.Fprintln(os.Stderr, "instant stand-in:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func fakeKbroker() {
	port := -1
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "listeners=PLAINTEXT://"); ok {
			_, p, _ := net.SplitHostPort(v)
			port, _ = strconv.Atoi(p)
		}
	}
	if port <= 0 {
		fmt.Fprintln(os.Stderr, "fake kbroker: no listeners override")
		os.Exit(2)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake kbroker:", err)
		os.Exit(1)
	}
	<-sig
	c.Close()
	os.Exit(0)
}

// The instant stand-in serves every record asked for, in its own process,
// and only consumption is measured.
func TestInstantStandIn(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	cfg, err := parseFlags([]string{"--instant", "--records", "5000", "--record-size", "100",
		"--partitions", "3", "--batch-max-bytes", "20000", "--timeout", "30s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := runAll(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rep.failed() || len(rep.Summary) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if s := rep.Summary[0]; s.Target != "instant" || s.Consumed < 5000 || s.ConsumeRecS <= 0 || s.ProduceRecS != 0 {
		t.Fatalf("instant summary %+v", s)
	}
}

func TestKbrokerProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	t.Setenv("KBENCH_FAKE_KBROKER", "1")
	cfg, err := parseFlags([]string{"--kbroker", os.Args[0], "--vs-kfake", "--records", "2000",
		"--record-size", "100", "--timeout", "30s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := runAll(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rep.failed() || len(rep.Summary) != 2 || rep.RatioName != "kbroker/kfake" {
		t.Fatalf("report %+v", rep)
	}
	kb := rep.Summary[0]
	if kb.Target != "kbroker" || kb.PeakRSSMiB <= 0 || kb.StartupMs <= 0 || kb.Consumed != 2000 {
		t.Fatalf("kbroker summary %+v", kb)
	}
	if kf := rep.Summary[1]; kf.Target != "kfake" || kf.PeakRSSMiB <= 0 || kf.StartupMs <= 0 || kf.Consumed != 2000 {
		t.Fatalf("kfake summary %+v", kf)
	}
	if _, ok := rep.Ratio["prod rec/s"]; !ok {
		t.Fatalf("ratio %v", rep.Ratio)
	}

	// The broker's CPU time is read from /proc (a few ms here: below its
	// 10 ms resolution, so the per-GB figures above may be unknown).
	b, err := startKbroker(context.Background(), os.Args[0], nil, brokerSetup{}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := b.cpuTime()
	b.stop()
	if err != nil || cpu < 0 {
		t.Fatalf("broker CPU time %v, %v", cpu, err)
	}

	// A variant of the workload against the same kind of target: both
	// arms start their own broker, alternating.
	cfg, err = parseFlags([]string{"--kbroker", os.Args[0], "--records", "300", "--record-size", "100", "--acks", "all",
		"--txn-records", "50", "--isolation", "read_committed", "--runs", "2",
		"--vs-variant", "--txn-records 0 --isolation read_uncommitted", "--timeout", "30s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rep, err = runAll(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	const variant = "kbroker --txn-records 0 --isolation read_uncommitted"
	if rep.failed() || len(rep.Summary) != 2 || len(rep.Runs) != 4 || rep.Runs[1].Target != variant || rep.Runs[2].Target != variant ||
		rep.RatioName != "kbroker/variant" || len(rep.PairedRatios) != 2 || rep.PairedRatio["prod rec/s"] <= 0 {
		t.Fatalf("variant report %+v", rep)
	}
	for _, s := range rep.Summary {
		if s.Records != 300 || s.Consumed != 300 || s.PeakRSSMiB <= 0 {
			t.Fatalf("variant summary %+v", s)
		}
	}
	var buf bytes.Buffer
	if err := rep.writeText(&buf); err != nil || !strings.Contains(buf.String(), "median of 2 paired runs") ||
		!strings.Contains(buf.String(), "variant: --txn-records 0") || !strings.Contains(buf.String(), "kbroker/variant #2") {
		t.Fatalf("text output %q, %v", buf.String(), err)
	}

	// A binary that exits at once is reported, not waited for.
	if _, err := startKbroker(context.Background(), "/bin/false", nil, brokerSetup{}, 10*time.Second); err == nil ||
		!strings.Contains(err.Error(), "exited") {
		t.Fatalf("start /bin/false: %v", err)
	}
}

// The secured kbroker's settings: its listeners and TLS files, and a TLS
// client of kbench's that trusts the throwaway CA (and only it) and accepts
// the broker's certificate for 127.0.0.1.
func TestSecuredPKI(t *testing.T) {
	dir := t.TempDir()
	ca, props, err := securedPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	args := brokerOverrides(brokerPorts{ssl: 9001, saslSSL: 9002}, props, "", false)
	want := []string{
		"listeners=PLAINTEXT://{addr},SSL://127.0.0.1:9001,SASL_SSL://127.0.0.1:9002",
		"inter.broker.listener.name=PLAINTEXT",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + filepath.Join(dir, "server-keystore.pem"),
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + filepath.Join(dir, "ca.pem"),
	}
	if len(args) != 2*len(want) {
		t.Fatalf("overrides %q", args)
	}
	for i, w := range want {
		if args[2*i] != "--override" || args[2*i+1] != w {
			t.Errorf("override %d: %q %q, want %q", i, args[2*i], args[2*i+1], w)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "server-keystore.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("keystore: %v, %v", fi, err)
	}

	// The keystore (key and chain in one file) serves TLS that kbench's
	// clients accept.
	ks := filepath.Join(dir, "server-keystore.pem")
	cert, err := tls.LoadX509KeyPair(ks, ks)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	sec := &secured{ca: ca, sslAddr: "ssl:1", saslSSLAddr: "sasl:2", password: "pw"}
	c, err := tls.Dial("tcp", ln.Addr().String(), sec.tlsConfig())
	if err != nil {
		t.Fatalf("TLS client of the throwaway CA: %v", err)
	}
	c.Close()
	// Another CA's client refuses the broker.
	other, err := testpki.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := tls.Dial("tcp", ln.Addr().String(), (&secured{ca: other}).tlsConfig()); err == nil {
		c.Close()
		t.Fatal("a client trusting another CA accepted the broker")
	}

	// Each protocol's listener and client options.
	for _, c := range []struct {
		security, addr string
		opts           int
	}{{secPlaintext, "plain:0", 0}, {secSSL, "ssl:1", 1}, {secSASLSSL, "sasl:2", 2}} {
		addr, opts := sec.listener(c.security, "plain:0")
		if addr != c.addr || len(opts) != c.opts {
			t.Errorf("%s: %s with %d options, want %s with %d", c.security, addr, len(opts), c.addr, c.opts)
		}
	}
}
