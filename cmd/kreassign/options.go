//lint:file-ignore ST1005 error messages are kafka-reassign-partitions.sh's, word for word

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The actions, named by their flags; exactly one per invocation.
const (
	actGenerate = "generate"
	actExecute  = "execute"
	actVerify   = "verify"
	actCancel   = "cancel"
	actList     = "list"
	actDrain    = "drain"
)

var actions = []string{actGenerate, actExecute, actVerify, actCancel, actList, actDrain}

// options are a parsed command line.
type options struct {
	action        string
	bootstrap     []string
	commandConfig string

	// generate and drain
	brokers          []int32 // nil: every registered broker
	topics           []string
	topicsFile       string
	rf               int
	disableRackAware bool
	outputFile       string
	drain            int32

	// execute, verify, cancel
	reassignmentFile string
	additional       bool
	wait             bool
	// throttle (--throttle, B/s; 0 none) limits the copying of an
	// --execute; preserveThrottles keeps throttles on at --verify.
	throttle          int64
	preserveThrottles bool
	timeout           time.Duration
	interval          time.Duration
}

// defaultTimeout bounds --wait (and every request) when --timeout is not
// given.
const defaultTimeout = 5 * time.Minute

// permitted lists the options each action accepts besides the common
// --bootstrap-server and --command-config, as Kafka's tool refuses an
// option that does nothing for the action.
var permitted = map[string][]string{
	actGenerate: {"brokers", "broker-list", "topics", "topics-to-move-json-file", "replication-factor", "disable-rack-aware", "output", "timeout"},
	actDrain:    {"brokers", "broker-list", "topics", "topics-to-move-json-file", "replication-factor", "disable-rack-aware", "output", "timeout"},
	actExecute:  {"reassignment-json-file", "additional", "wait", "timeout", "interval", "throttle", "preserve-throttles"},
	actVerify:   {"reassignment-json-file", "wait", "timeout", "interval", "preserve-throttles"},
	actCancel:   {"reassignment-json-file", "timeout"},
	actList:     {"timeout"},
}

// required lists the options each action needs.
var required = map[string][]string{
	actGenerate: {"brokers|broker-list"},
	actExecute:  {"reassignment-json-file"},
	actVerify:   {"reassignment-json-file"},
	actCancel:   {"reassignment-json-file"},
}

const usageText = `kreassign moves topic partitions between brokers, as kafka-reassign-partitions.sh,
and plans the moves so that the cluster ends balanced while copying as little as it can.

  kreassign --bootstrap-server HOST:PORT --generate --brokers 1,2,3,4 [--topics a,b] [--replication-factor N] [--output FILE]
  kreassign --bootstrap-server HOST:PORT --drain 3 [--brokers 1,2,4] [--output FILE]
  kreassign --bootstrap-server HOST:PORT --execute --reassignment-json-file FILE [--throttle B/s] [--wait [--timeout 10m]]
  kreassign --bootstrap-server HOST:PORT --verify --reassignment-json-file FILE [--preserve-throttles] [--wait [--timeout 10m]]
  kreassign --bootstrap-server HOST:PORT --cancel --reassignment-json-file FILE
  kreassign --bootstrap-server HOST:PORT --list

--generate prints the current assignment of the partitions that change (keep it to roll back) and the
proposed one as Kafka's reassignment JSON, then a summary. --drain B plans every topic off broker B.
--verify exits 0 when every partition of the file has its target replicas, 3 when some have not (yet),
1 on errors, 2 on usage errors. --throttle limits the copying to that many bytes per second per broker
(Kafka's replication throttles); --verify removes the throttles once every partition is done.

Options:
`

// parseArgs parses a command line; errors are usage errors.
func parseArgs(args []string, stderr io.Writer) (*options, error) {
	o := &options{timeout: defaultTimeout, interval: time.Second, drain: -1}
	fs := flag.NewFlagSet("kreassign", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	var bootstrap, brokers, brokerList, topics string
	var act = map[string]*bool{}
	for _, a := range actions {
		if a != actDrain {
			act[a] = new(bool)
		}
	}
	fs.StringVar(&bootstrap, "bootstrap-server", "", "`HOST:PORT`[,HOST:PORT...] of brokers to connect to (required)")
	fs.StringVar(&o.commandConfig, "command-config", "", "Kafka client properties `FILE` (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.*, ssl.keystore.*)")
	fs.BoolVar(act[actGenerate], actGenerate, false, "plan a reassignment onto --brokers and print it")
	fs.BoolVar(act[actExecute], actExecute, false, "start the reassignment in --reassignment-json-file")
	fs.BoolVar(act[actVerify], actVerify, false, "report which partitions of --reassignment-json-file are done")
	fs.BoolVar(act[actCancel], actCancel, false, "cancel the reassignments of --reassignment-json-file still in progress")
	fs.BoolVar(act[actList], actList, false, "list the reassignments in progress")
	drainSet := false
	fs.Func(actDrain, "plan moving every replica off broker `ID` (as --generate onto the other brokers)", func(v string) error {
		id, err := strconv.ParseInt(v, 10, 32)
		if err != nil || id < 0 {
			return fmt.Errorf("not a broker id: %q", v)
		}
		o.drain, drainSet = int32(id), true
		return nil
	})
	fs.StringVar(&brokers, "brokers", "", "broker `IDS` to spread replicas over, e.g. 1,2,3,4")
	fs.StringVar(&brokerList, "broker-list", "", "the same as --brokers (Kafka's name)")
	fs.StringVar(&topics, "topics", "", "`TOPICS` to plan, e.g. a,b (default: every topic, internal ones included)")
	fs.StringVar(&o.topicsFile, "topics-to-move-json-file", "", "topics to plan as Kafka's JSON `FILE`: {\"version\":1,\"topics\":[{\"topic\":\"a\"}]}")
	fs.IntVar(&o.rf, "replication-factor", 0, "give every planned partition `N` replicas (raise or lower; default: keep)")
	fs.BoolVar(&o.disableRackAware, "disable-rack-aware", false, "ignore broker racks")
	fs.StringVar(&o.outputFile, "output", "", "also write the proposed reassignment JSON to `FILE`")
	fs.StringVar(&o.reassignmentFile, "reassignment-json-file", "", "the reassignment as Kafka's JSON `FILE`")
	fs.BoolVar(&o.additional, "additional", false, "execute even while other reassignments are in progress")
	fs.Int64Var(&o.throttle, "throttle", 0, "limit the copying of --execute to `B/s` per broker (leader and follower replication throttles); removed by --verify when done")
	fs.BoolVar(&o.preserveThrottles, "preserve-throttles", false, "do not remove the replication throttles when the reassignment is done")
	fs.BoolVar(&o.wait, "wait", false, "after --execute, or with --verify: poll until every partition is done or --timeout passes")
	fs.Func("timeout", "bound on --wait and on each request: a `DURATION` (30s, 10m) or milliseconds as Kafka's tool (default 5m)", func(v string) error {
		d, err := parseTimeout(v)
		o.timeout = d
		return err
	})
	fs.DurationVar(&o.interval, "interval", time.Second, "how often --wait polls")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}

	var chosen []string
	for _, a := range actions {
		if a == actDrain && drainSet || a != actDrain && *act[a] {
			chosen = append(chosen, a)
		}
	}
	if len(chosen) != 1 {
		var names []string
		for _, a := range actions {
			names = append(names, "--"+a)
		}
		return nil, fmt.Errorf("Command must include exactly one action: %s", strings.Join(names, ", "))
	}
	o.action = chosen[0]
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name := range given {
		if name == o.action || name == "bootstrap-server" || name == "command-config" || slices.Contains(permitted[o.action], name) {
			continue
		}
		return nil, fmt.Errorf("Option \"--%s\" can't be used with action \"--%s\"", name, o.action)
	}
	for _, req := range required[o.action] {
		ok := false
		for _, name := range strings.Split(req, "|") {
			ok = ok || given[name]
		}
		if !ok {
			return nil, fmt.Errorf("Missing required argument \"[%s]\"", strings.ReplaceAll(req, "|", "/"))
		}
	}
	if bootstrap == "" {
		return nil, errors.New("Please specify --bootstrap-server")
	}
	for _, b := range strings.Split(bootstrap, ",") {
		if b = strings.TrimSpace(b); b != "" {
			o.bootstrap = append(o.bootstrap, b)
		}
	}
	if given["brokers"] && given["broker-list"] {
		return nil, errors.New("give --brokers or --broker-list, not both")
	}
	if given["broker-list"] {
		brokers = brokerList
	}
	if given["brokers"] || given["broker-list"] {
		ids, err := parseBrokerIDs(brokers)
		if err != nil {
			return nil, err
		}
		o.brokers = ids
	}
	if given["topics"] && given["topics-to-move-json-file"] {
		return nil, errors.New("give --topics or --topics-to-move-json-file, not both")
	}
	if given["topics"] {
		seen := map[string]bool{}
		for _, t := range strings.Split(topics, ",") {
			if t = strings.TrimSpace(t); t == "" {
				continue
			}
			if seen[t] {
				return nil, fmt.Errorf("List of topics to reassign contains duplicate entries: %s", t)
			}
			seen[t] = true
			o.topics = append(o.topics, t)
		}
		if len(o.topics) == 0 {
			return nil, errors.New("--topics names no topic")
		}
	}
	if given["replication-factor"] && o.rf < 1 {
		return nil, fmt.Errorf("--replication-factor %d: must be at least 1", o.rf)
	}
	if o.action == actDrain && slices.Contains(o.brokers, o.drain) {
		return nil, fmt.Errorf("--drain %d: broker %d is also in --brokers", o.drain, o.drain)
	}
	if given["throttle"] && o.throttle <= 0 {
		return nil, fmt.Errorf("--throttle %d: must be a positive number of bytes per second", o.throttle)
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("--timeout %v: must be positive", o.timeout)
	}
	if o.interval <= 0 {
		return nil, fmt.Errorf("--interval %v: must be positive", o.interval)
	}
	return o, nil
}

// parseBrokerIDs parses "1,2,3" with Kafka's check for duplicates.
func parseBrokerIDs(s string) ([]int32, error) {
	var ids []int32
	var dups []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		id, err := strconv.ParseInt(f, 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("not a broker id: %q", f)
		}
		if slices.Contains(ids, int32(id)) {
			dups = append(dups, f)
			continue
		}
		ids = append(ids, int32(id))
	}
	if len(dups) > 0 {
		return nil, fmt.Errorf("Broker list contains duplicate entries: %s", strings.Join(dups, ","))
	}
	return ids, nil
}

// parseTimeout reads a Go duration, or a bare number of milliseconds as
// Kafka's tool takes --timeout.
func parseTimeout(v string) (time.Duration, error) {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(ms) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("not a duration or milliseconds: %q", v)
	}
	return d, nil
}
