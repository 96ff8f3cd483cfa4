package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// config is the parsed and validated command line.
type config struct {
	brokers      []string // --brokers: an already running cluster
	kfake        bool     // --kfake: a kfake cluster in a process of its own
	kbrokerPath  string   // --kbroker: a kbroker binary to start per run
	instant      bool     // --instant: a stand-in that answers fetches at once (consume only)
	serveInstant string   // --serve-instant: be that stand-in (kbench runs itself so)
	serveKfake   string   // --serve-kfake: be the kfake process (kbench runs itself so)
	vsKfake      bool     // --vs-kfake: also run the workload against kfake
	runs         int      // --runs: repetitions; medians are reported
	topic        string   // --topic: empty = fresh unique name per run
	partitions   int      // --partitions
	replication  int      // --replication-factor
	records      int      // --records
	recordSize   int      // --record-size (value bytes)
	acks         string   // --acks: all, 1 or 0
	compression  string   // --compression
	rate         float64  // --rate: offered records/s, 0 = max speed
	idempotent   bool     // --idempotent (effective value)
	linger       time.Duration
	batchMax     int // --batch-max-bytes
	consume      bool
	json         bool
	jsonOut      string             // --json-out: also write the JSON report to this file
	timeout      time.Duration      // per workload run (produce + consume)
	startTimeout time.Duration      // how long a started kbroker may take to answer
	brokerArgs   []string           // --kbroker-arg: extra args for the kbroker binary
	topicConfigs map[string]*string // --topic-config: configs of the created topic
	txnRecords   int                // --txn-records: records per transaction, 0 = no transactions
	flushEvery   int                // --flush-every: without transactions, flush after every N records; 0 = never
	isolation    string             // --isolation: the consumer's read_uncommitted or read_committed
	security     string             // --security: the listener the clients use: plaintext, ssl or sasl_ssl
	// securedListeners: a started kbroker also serves SSL and SASL_SSL
	// (true when this config or its variant uses one of them, so that
	// both arms of a comparison run the same broker and differ only in
	// the listener their clients use).
	securedListeners bool
	// acls is --acls: with --kbroker, the broker runs Kafka's ACL
	// authorizer (allow.everyone.if.no.acl.found=false) and kbench creates
	// this many ACLs that do not match the workload, plus those it needs;
	// -1 (noAuthorizer) runs the broker without an authorizer.
	acls int
	// idleConns is --idle-conns: with --kbroker, connections opened
	// (one ApiVersions each) and held idle through the workload; the
	// broker's RSS per idle connection is reported.
	idleConns int
	// adminListener: a started kbroker also serves a SASL_PLAINTEXT
	// listener with a PLAIN admin user (the super user when the authorizer
	// is on), through which kbench sets up ACLs and SCRAM users (true when
	// this config or its variant uses --acls, so that both arms start the
	// broker with the same listeners).
	adminListener bool
	// profileDir is --profile-dir: where CPU profiles of a started
	// kbroker's produce and consume phases are saved ("" for none).
	profileDir string
	// variant is --vs-variant: the same workload, against the same kind of
	// target, with these flags applied on top (nil without it).
	variant *config
	// variantArgs are the flags of --vs-variant, split on white space.
	variantArgs []string
}

// Isolation levels for --isolation.
const (
	readUncommitted = "read_uncommitted"
	readCommitted   = "read_committed"
)

// variantForbidden are the flags a --vs-variant may not set: the variant
// runs against the same kind of target, as many times, in the same report.
// It may name another kbroker binary (--kbroker): another build of the
// broker, paired with the first run by run (a before/after figure).
var variantForbidden = []string{"brokers", "kfake", "instant", "serve-instant", "serve-kfake", "kbroker-arg",
	"vs-kfake", "vs-variant", "runs", "json", "json-out", "profile-dir"}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// parseFlags parses args (without the program name) into a validated config.
// It is pure apart from writing usage/errors to out.
func parseFlags(args []string, out io.Writer) (*config, error) {
	c, err := parseOne(args, out)
	if err != nil || c.variantArgs == nil {
		return c, err
	}
	// The variant is the same command line with its flags appended, so
	// that they override; first check which flags it sets on its own.
	fs, _ := newFlagSet(out)
	if err := fs.Parse(c.variantArgs); err != nil {
		return nil, fmt.Errorf("--vs-variant: %w", err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("--vs-variant: unexpected arguments: %q", fs.Args())
	}
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(variantForbidden, f.Name) {
			bad = append(bad, "--"+f.Name)
		}
	})
	if len(bad) > 0 {
		return nil, fmt.Errorf("--vs-variant may not set %s (the variant runs against the same target, in the same report)", strings.Join(bad, ", "))
	}
	if fs.Lookup("kbroker").Value.String() != "" && c.kbrokerPath == "" {
		return nil, errors.New("--vs-variant --kbroker (another broker build) needs --kbroker")
	}
	if len(c.variantArgs) == 0 {
		return nil, errors.New("--vs-variant: no flags given")
	}
	if c.vsKfake {
		return nil, errors.New("--vs-variant and --vs-kfake are mutually exclusive")
	}
	v, err := parseOne(append(slices.Clone(args), c.variantArgs...), out)
	if err != nil {
		return nil, fmt.Errorf("--vs-variant: %w", err)
	}
	v.variantArgs = nil
	c.variant = v
	c.securedListeners = c.securedListeners || v.securedListeners
	v.securedListeners = c.securedListeners
	c.adminListener = c.adminListener || v.adminListener
	v.adminListener = c.adminListener
	return c, nil
}

// flagValues is where kbench's flags land: the config itself and the raw
// values that parseOne turns into config fields.
type flagValues struct {
	c            config
	brokers      string
	idempotent   bool
	brokerArgs   stringList
	topicConfigs stringList
	variant      string
}

// newFlagSet defines kbench's flags over a fresh flagValues.
func newFlagSet(out io.Writer) (*flag.FlagSet, *flagValues) {
	fs := flag.NewFlagSet("kbench", flag.ContinueOnError)
	fs.SetOutput(out)
	v := &flagValues{}
	c := &v.c
	fs.StringVar(&v.brokers, "brokers", "", "comma separated seed brokers of a running cluster (host:port[,host:port...])")
	fs.BoolVar(&c.kfake, "kfake", false, "run against a franz-go kfake cluster (1 broker) started per run in a process of its own")
	fs.BoolVar(&c.instant, "instant", false, "run against a stand-in broker process that answers every fetch at once from memory: the consumer's own ceiling (consume only)")
	fs.StringVar(&c.serveInstant, "serve-instant", "", "internal: be the --instant stand-in, listening on this address")
	fs.StringVar(&c.serveKfake, "serve-kfake", "", "internal: be the kfake process of --kfake and --vs-kfake, listening on this address, until SIGTERM")
	fs.StringVar(&c.kbrokerPath, "kbroker", "", "path of a kbroker binary to start (per run) on a free 127.0.0.1 port with a temp data dir")
	fs.Var(&v.brokerArgs, "kbroker-arg", "extra argument passed to the --kbroker binary (repeatable)")
	fs.Var(&v.topicConfigs, "topic-config", "key=value config of the created topic, e.g. kbroker.acks.fsync=true (repeatable; a --vs-variant may set it)")
	fs.BoolVar(&c.vsKfake, "vs-kfake", false, "also run the same workload against kfake (started per run in a process of its own, measured as a started kbroker is) and print ratios target/kfake")
	fs.IntVar(&c.runs, "runs", 1, "number of runs per target (order alternates with --vs-kfake); medians are reported")
	fs.StringVar(&c.topic, "topic", "", "topic to use (default: a fresh unique name per run)")
	fs.IntVar(&c.partitions, "partitions", 6, "partitions of the created topic")
	fs.IntVar(&c.replication, "replication-factor", 1, "replication factor of the created topic")
	fs.IntVar(&c.records, "records", 200000, "number of records to produce")
	fs.IntVar(&c.recordSize, "record-size", 1024, "record value size in bytes")
	fs.StringVar(&c.acks, "acks", "1", "required acks: all, 1 or 0")
	fs.StringVar(&c.compression, "compression", "none", "batch compression: none, gzip, snappy, lz4, zstd")
	fs.Float64Var(&c.rate, "rate", 0, "offered load in records/s (0 = as fast as possible); latency is measured from the scheduled send time")
	fs.BoolVar(&v.idempotent, "idempotent", false, "idempotent producer (requires --acks all; default true with --acks all, false otherwise)")
	fs.DurationVar(&c.linger, "linger", 0, "producer linger (kgo ProducerLinger)")
	fs.IntVar(&c.batchMax, "batch-max-bytes", 1000012, "producer max batch bytes (kgo ProducerBatchMaxBytes)")
	fs.BoolVar(&c.consume, "consume", true, "after producing, consume all records from the start with a direct consumer")
	fs.BoolVar(&c.json, "json", false, "print machine-readable JSON instead of a table")
	fs.StringVar(&c.jsonOut, "json-out", "", "also write the JSON report to this `file` (the table still goes to stdout)")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "bound on each workload run (topic creation + produce + consume)")
	fs.DurationVar(&c.startTimeout, "start-timeout", 30*time.Second, "how long a started --kbroker may take to answer")
	fs.IntVar(&c.flushEvery, "flush-every", 0, "without transactions: send N records, flush (wait until every one is acknowledged), and so on: the acknowledgement points a transaction of N records has, without the transaction (compare with --vs-variant \"--txn-records 0 --flush-every N\"); 0 = never flush")
	fs.IntVar(&c.txnRecords, "txn-records", 0, "records per transaction with a transactional producer (begin, produce N, flush, commit; the produce time includes every commit); 0 = no transactions; requires --acks all and idempotence")
	fs.StringVar(&c.isolation, "isolation", readUncommitted, "the consumer's isolation level: read_uncommitted or read_committed")
	fs.StringVar(&c.security, "security", secPlaintext, "with --kbroker: the listener the producer and consumer use, plaintext, ssl or sasl_ssl (SCRAM-SHA-512); with ssl or sasl_ssl kbench makes a throwaway CA and certificates and starts the broker with PLAINTEXT, SSL and SASL_SSL listeners")
	fs.IntVar(&c.acls, "acls", noAuthorizer, "with --kbroker: run the broker with Kafka's ACL authorizer (allow.everyone.if.no.acl.found=false, the clients' principal not a super user) and create this many ACLs that do not match the workload, plus the ones it needs, before it; -1 = no authorizer")
	fs.IntVar(&c.idleConns, "idle-conns", 0, "with --kbroker: open this many connections (one ApiVersions request each) before the workload and hold them idle through it; the broker's RSS per idle connection is reported (compare latency with --vs-variant \"--idle-conns 0\")")
	fs.StringVar(&c.profileDir, "profile-dir", "", "with --kbroker: save CPU profiles (pprof) of the broker's produce and consume phases of every run into this directory (the broker serves them on a loopback --pprof-address; profiling costs the broker a little CPU, so compare figures of runs without it)")
	fs.StringVar(&v.variant, "vs-variant", "", `also run the same workload against the same kind of target with these flags on top (e.g. "--txn-records 0", or "--kbroker OLD-BUILD" for a before/after figure; split on spaces), alternating, and print ratios primary/variant`)
	return fs, v
}

// parseOne parses one command line into a validated config, leaving the
// --vs-variant flags unparsed in variantArgs.
func parseOne(args []string, out io.Writer) (*config, error) {
	fs, v := newFlagSet(out)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	c := &v.c
	if v.brokers != "" {
		for _, b := range strings.Split(v.brokers, ",") {
			if b = strings.TrimSpace(b); b != "" {
				c.brokers = append(c.brokers, b)
			}
		}
		if len(c.brokers) == 0 {
			return nil, errors.New("--brokers: no broker given")
		}
	}
	c.brokerArgs = v.brokerArgs
	for _, kv := range v.topicConfigs {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--topic-config %q: want key=value", kv)
		}
		if c.topicConfigs == nil {
			c.topicConfigs = map[string]*string{}
		}
		c.topicConfigs[k] = &val
	}
	if set["idempotent"] {
		c.idempotent = v.idempotent
	} else {
		c.idempotent = c.acks == "all" || c.acks == "-1"
	}
	if set["vs-variant"] {
		c.variantArgs = strings.Fields(v.variant)
		if c.variantArgs == nil {
			c.variantArgs = []string{}
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	c.securedListeners = c.security != secPlaintext
	c.adminListener = c.acls != noAuthorizer
	return c, nil
}

// validate checks the config for consistency.
func (c *config) validate() error {
	targets := 0
	if len(c.brokers) > 0 {
		targets++
	}
	if c.kfake {
		targets++
	}
	if c.kbrokerPath != "" {
		targets++
	}
	if c.instant {
		targets++
	}
	switch {
	case c.serveInstant != "" || c.serveKfake != "":
		return nil
	case targets == 0:
		return errors.New("one of --brokers, --kfake, --kbroker or --instant is required")
	case targets > 1:
		return errors.New("--brokers, --kfake, --kbroker and --instant are mutually exclusive")
	case c.vsKfake && c.kfake:
		return errors.New("--vs-kfake needs --brokers or --kbroker as the other target")
	case len(c.brokerArgs) > 0 && c.kbrokerPath == "":
		return errors.New("--kbroker-arg needs --kbroker")
	case c.profileDir != "" && c.kbrokerPath == "":
		return errors.New("--profile-dir needs --kbroker (the broker kbench starts is profiled)")
	case c.variantArgs != nil && c.instant:
		return errors.New("--vs-variant needs a target that is produced to (not --instant)")
	}
	if c.runs < 1 {
		return fmt.Errorf("--runs must be >= 1, got %d", c.runs)
	}
	if c.partitions < 1 {
		return fmt.Errorf("--partitions must be >= 1, got %d", c.partitions)
	}
	if c.replication < 1 || c.replication > 32767 {
		return fmt.Errorf("--replication-factor must be in [1, 32767], got %d", c.replication)
	}
	if c.records < 1 {
		return fmt.Errorf("--records must be >= 1, got %d", c.records)
	}
	if c.recordSize < 0 {
		return fmt.Errorf("--record-size must be >= 0, got %d", c.recordSize)
	}
	switch c.acks {
	case "all", "-1":
		c.acks = "all"
	case "1", "0":
	default:
		return fmt.Errorf("--acks must be all, 1 or 0, got %q", c.acks)
	}
	if c.idempotent && c.acks != "all" {
		return errors.New("--idempotent requires --acks all")
	}
	if _, err := compressionCodec(c.compression); err != nil {
		return err
	}
	if c.rate < 0 {
		return fmt.Errorf("--rate must be >= 0, got %v", c.rate)
	}
	if c.linger < 0 {
		return fmt.Errorf("--linger must be >= 0, got %v", c.linger)
	}
	if c.batchMax < 1 || c.batchMax > 1<<30 {
		return fmt.Errorf("--batch-max-bytes must be in [1, 2^30], got %d", c.batchMax)
	}
	if c.recordSize+100 > c.batchMax {
		return fmt.Errorf("--record-size %d does not fit in --batch-max-bytes %d", c.recordSize, c.batchMax)
	}
	if c.timeout <= 0 {
		return fmt.Errorf("--timeout must be > 0, got %v", c.timeout)
	}
	if c.startTimeout <= 0 {
		return fmt.Errorf("--start-timeout must be > 0, got %v", c.startTimeout)
	}
	if c.txnRecords < 0 {
		return fmt.Errorf("--txn-records must be >= 0, got %d", c.txnRecords)
	}
	if c.txnRecords > 0 && !c.idempotent {
		return errors.New("--txn-records needs an idempotent producer (--acks all)")
	}
	if c.flushEvery < 0 {
		return fmt.Errorf("--flush-every must be >= 0, got %d", c.flushEvery)
	}
	if c.flushEvery > 0 && (c.txnRecords > 0 || c.rate > 0) {
		return errors.New("--flush-every is for a producer without transactions (a transaction flushes itself) sending as fast as possible (no --rate)")
	}
	if c.txnRecords > 0 && c.rate > 0 {
		return errors.New("--txn-records and --rate cannot be combined (a transaction's records are sent as fast as possible)")
	}
	if c.txnRecords > 0 && c.instant {
		return errors.New("--txn-records needs a target that is produced to (not --instant)")
	}
	switch c.isolation {
	case readUncommitted, readCommitted:
	default:
		return fmt.Errorf("--isolation must be %s or %s, got %q", readUncommitted, readCommitted, c.isolation)
	}
	switch c.security {
	case secPlaintext:
	case secSSL, secSASLSSL:
		// kbench makes the certificates and the SCRAM user, so it must
		// start the broker itself.
		if c.kbrokerPath == "" {
			return fmt.Errorf("--security %s needs --kbroker", c.security)
		}
		if c.vsKfake {
			return fmt.Errorf("--security %s and --vs-kfake cannot be combined (kfake is compared over plaintext)", c.security)
		}
	default:
		return fmt.Errorf("--security must be %s, %s or %s, got %q", secPlaintext, secSSL, secSASLSSL, c.security)
	}
	switch {
	case c.acls < noAuthorizer:
		return fmt.Errorf("--acls must be >= 0, or -1 for no authorizer, got %d", c.acls)
	case c.acls > maxACLs:
		return fmt.Errorf("--acls must be at most %d, got %d", maxACLs, c.acls)
	case c.acls >= 0 && c.kbrokerPath == "":
		// kbench configures the authorizer and its admin user, so it
		// must start the broker itself.
		return errors.New("--acls needs --kbroker")
	case c.acls >= 0 && c.vsKfake:
		return errors.New("--acls and --vs-kfake cannot be combined (kfake runs without an authorizer)")
	}
	switch {
	case c.idleConns < 0:
		return fmt.Errorf("--idle-conns must be >= 0, got %d", c.idleConns)
	case c.idleConns > 0 && c.kbrokerPath == "":
		// The broker's RSS is read from its process.
		return errors.New("--idle-conns needs --kbroker")
	case c.idleConns > 0 && c.vsKfake:
		return errors.New("--idle-conns and --vs-kfake cannot be combined (compare with --vs-variant \"--idle-conns 0\")")
	}
	return nil
}

func compressionCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none", "":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("--compression must be none, gzip, snappy, lz4 or zstd, got %q", name)
}

// requiredAcks maps the validated --acks value to kgo's type.
func (c *config) requiredAcks() kgo.Acks {
	switch c.acks {
	case "0":
		return kgo.NoAck()
	case "1":
		return kgo.LeaderAck()
	}
	return kgo.AllISRAcks()
}

// clientOpts returns the kgo options shared by every target, so that the
// targets are measured with identical client settings.
func (c *config) producerOpts() []kgo.Opt {
	codec, _ := compressionCodec(c.compression)
	opts := []kgo.Opt{
		kgo.RequiredAcks(c.requiredAcks()),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(c.linger),
		kgo.ProducerBatchMaxBytes(int32(c.batchMax)),
		kgo.RecordDeliveryTimeout(c.timeout),
	}
	if !c.idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	return opts
}
