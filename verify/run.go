package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options configure one run.
type Options struct {
	Mode     string // "short" or "long"
	Seed     uint64
	Duration time.Duration // long mode: how long faults run
	// Overlap is how many faults may run at once (long mode; 0 or 1:
	// one at a time). Each holds the brokers it acts on, so overlapping
	// faults act on different brokers (Nemesis.RunStreams).
	Overlap int
	Unsafe  bool // min.insync.replicas=1, unclean election, the isolate-then-kill fault
	// Txn runs the transactional workload (txn_workload.go) instead of the
	// plain one, under the same faults except the topic re-creations.
	Txn bool
	// Compact runs the compacted topic's workload (compact.go) alone,
	// its partitions' leaders the faults' targets, under the same faults
	// except the topic re-creations. Without it (and without Txn and
	// Unsafe) that workload runs beside the plain one.
	Compact bool
	// Faults are the fault kinds to draw from (kverify --faults); nil
	// means every kind.
	Faults     []string
	Brokers    int
	Partitions int32
	Dir        string // working directory (a temporary one if empty)
	Bin        string // kbroker binary (built from the module if empty)
	Session    time.Duration
	Lag        time.Duration
	Interval   time.Duration // each producer's pause between sends
	Log        io.Writer     // progress; nil for none

	// TmpfsSize is the size of each broker's own tmpfs log dir (needs
	// root; the disk-full fault fills it): 0 means 256 MiB, negative
	// plain directories.
	TmpfsSize int64

	// Security is how every listener is secured: SecurityPlaintext (or
	// "") or SecuritySASLSSL. SASLMechanism is then the workload
	// clients' mechanism, MechanismSCRAM (or "") or MechanismPlain.
	Security      string
	SASLMechanism string
}

func (o *Options) defaults() {
	if o.Mode == "" {
		o.Mode = "short"
	}
	if o.Brokers == 0 {
		o.Brokers = 3
	}
	if o.Partitions == 0 {
		o.Partitions = 3
	}
	if o.Session == 0 {
		o.Session = 3 * time.Second
	}
	if o.Lag == 0 {
		o.Lag = 1500 * time.Millisecond
	}
	if o.Interval == 0 {
		o.Interval = 10 * time.Millisecond
	}
	if o.TmpfsSize == 0 {
		o.TmpfsSize = 256 << 20
	}
	if o.Security == "" {
		o.Security = SecurityPlaintext
	}
	if o.Security == SecuritySASLSSL && o.SASLMechanism == "" {
		o.SASLMechanism = MechanismSCRAM
	}
}

// Report is what a run found.
type Report struct {
	Options     Options
	Result      Result
	HistoryPath string
	Dir         string
	Security    string  // how the listeners are secured
	LogDirs     string  // how the brokers' log dirs are mounted
	Faults      []Event // fault events as recorded
	Elapsed     time.Duration
	Phases      []Event
	Warnings    []string
	Events      []Event
}

// BuildBroker builds ./cmd/kbroker of the module that holds the working
// directory into dir.
func BuildBroker(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the kbroker module: run from its checkout or pass --kbroker-bin")
	}
	bin := filepath.Join(dir, "kbroker")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/kbroker")
	cmd.Dir = filepath.Dir(gomod)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/kbroker: %v\n%s", err, b)
	}
	return bin, nil
}

// Run starts a cluster, runs the workload under the fault schedule, heals,
// reads everything back, checks, and tears the cluster down.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	began := time.Now()
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "%8s  %s\n", time.Since(began).Round(time.Millisecond), fmt.Sprintf(format, args...))
		}
	}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "kverify-")
		if err != nil {
			return nil, err
		}
		o.Dir = d
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	sec, err := NewSecurity(o.Security, o.SASLMechanism, filepath.Join(o.Dir, "pki"))
	if err != nil {
		return nil, err
	}
	if o.Bin == "" {
		logf("building kbroker")
		bin, err := BuildBroker(o.Dir)
		if err != nil {
			return nil, err
		}
		o.Bin = bin
	}
	histPath := filepath.Join(o.Dir, "history.jsonl")
	hf, err := os.Create(histPath)
	if err != nil {
		return nil, err
	}
	defer hf.Close()
	rec := NewRecorder(began, hf)
	rep := &Report{Options: o, HistoryPath: histPath, Dir: o.Dir, Security: sec.String()}
	phase := func(detail string) {
		rec.Add(Event{Kind: KindPhase, Detail: detail})
		logf("phase %s", detail)
	}
	phase(fmt.Sprintf("kverify mode=%s seed=%d unsafe=%v txn=%v compact=%v duration=%v brokers=%d partitions=%d security=%s", o.Mode, o.Seed, o.Unsafe, o.Txn, o.Compact, o.Duration, o.Brokers, o.Partitions, sec.Name()))
	phase("security: " + rep.Security)

	timing := Timing{Lag: o.Lag, Session: o.Session}
	var faults []Fault
	switch {
	case o.Unsafe:
		faults = UnsafeSchedule(timing)
	case o.Mode == "long":
		// Overlapping streams go through the schedule that much
		// faster: it is drawn for Duration times Overlap.
		faults = LongSchedule(o.Seed, timing, o.Partitions, o.Duration*time.Duration(max(o.Overlap, 1)), o.Faults)
	default:
		faults = ShortSchedule(o.Seed, timing, o.Partitions, o.Faults)
	}
	if o.Txn || o.Compact {
		// The re-created topic's rules are the plain workload's.
		faults = slices.DeleteFunc(faults, func(f Fault) bool { return f.Kind == RecreateTopic || f.Kind == RecreateTopicPaused })
	}
	if len(faults) == 0 {
		return nil, fmt.Errorf("no faults to run: %v apply to the plain workload only", o.Faults)
	}
	if o.Faults != nil && !o.Unsafe {
		phase("faults drawn from: " + strings.Join(o.Faults, ", "))
	}

	ccfg := ClusterConfig{Brokers: o.Brokers, Bin: o.Bin, Dir: o.Dir, SessionTimeout: o.Session, LagTime: o.Lag, MinISR: 2, TmpfsSize: o.TmpfsSize, Security: sec}
	if o.Unsafe {
		ccfg.MinISR, ccfg.Unclean = 1, true
	}
	if o.Txn {
		// Transactions their producers abandoned end soon after their
		// timeout, so the last stable offsets reach the high watermarks
		// soon after healing.
		ccfg.Extra = append(ccfg.Extra, "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000")
		if o.Unsafe {
			// Else the isolated leader's coordinator cannot commit
			// (the state log wants 2 in sync) and nothing is lost.
			ccfg.Extra = append(ccfg.Extra, "transaction.state.log.min.isr=1")
		}
	}
	// The compacted topic's workload: alone with --compact, else beside
	// the plain one (the unsafe run stays as it was).
	compactOn := o.Compact || (!o.Txn && !o.Unsafe)
	if compactOn {
		ccfg.Extra = append(ccfg.Extra, CompactBrokerSettings...)
	}
	// The share group's workload runs beside the plain one too (not in
	// the unsafe, transactional or compaction-only runs).
	shareOn := !o.Txn && !o.Unsafe && !o.Compact
	logf("starting ZooKeeper and %d brokers in %s", o.Brokers, o.Dir)
	c, err := StartCluster(ctx, ccfg)
	if err != nil {
		return nil, err
	}
	// Also on errors and interrupts: kill everything, unmount the tmpfs
	// log dirs.
	defer func() {
		if err := c.Close(); err != nil {
			rep.Warnings = append(rep.Warnings, "closing the cluster: "+err.Error())
			logf("closing the cluster: %v", err)
		}
	}()
	rep.LogDirs = c.LogDirs()
	phase("log dirs: " + rep.LogDirs)
	if c.TmpfsErr != nil {
		rep.Warnings = append(rep.Warnings, "disk-full fault disabled: "+c.TmpfsErr.Error())
	}
	zv, err := NewZKView(c.ZK.Addr())
	if err != nil {
		return nil, err
	}
	defer zv.Close()
	topic := "kverify"
	topics := []topicSpec{{name: topic, partitions: o.Partitions}}
	switch {
	case o.Txn:
		topic = "kverify-txn"
		topics = []topicSpec{{name: topic, partitions: o.Partitions}, {name: topic + "-out", partitions: o.Partitions}}
	case o.Compact:
		topic = CompactTopicName
		topics = nil
	}
	if compactOn {
		topics = append(topics, topicSpec{name: CompactTopicName, partitions: o.Partitions, configs: CompactTopicConfigs()})
	}
	if shareOn {
		topics = append(topics, topicSpec{name: ShareTopicName, partitions: o.Partitions})
	}
	// The re-created topic has its own workload, only when a fault
	// re-creates it (so the unsafe run is as before).
	var recreate *Incarnations
	if slices.ContainsFunc(faults, func(f Fault) bool { return f.Kind == RecreateTopic || f.Kind == RecreateTopicPaused }) {
		recreate = NewIncarnations(RecreateTopicName, RecreatePartitions)
		topics = append(topics, topicSpec{name: recreate.Topic, partitions: recreate.Partitions})
	}
	for _, t := range topics {
		if err := setup(ctx, c, zv, t); err != nil {
			return nil, err
		}
	}
	if err := sec.CreateUser(ctx, c.Seeds(), 30*time.Second); err != nil {
		return nil, err
	}
	var sw *ShareWorkload
	if shareOn {
		sw = &ShareWorkload{Rec: rec, Seeds: c.Seeds(), Topic: ShareTopicName, Partitions: o.Partitions,
			Group: fmt.Sprintf("kverify-share-%d", o.Seed), Interval: o.Interval, Logf: logf, Security: sec}
		if err := sw.SetUp(ctx); err != nil {
			return nil, err
		}
	}
	phase("cluster-ready")

	watchCtx, stopWatch := context.WithCancel(ctx)
	var watchWG sync.WaitGroup
	watchWG.Add(1)
	go func() { defer watchWG.Done(); zv.WatchEpochs(watchCtx, rec, topic, o.Partitions, 100*time.Millisecond) }()
	defer func() { stopWatch(); watchWG.Wait() }()

	w := &Workload{Rec: rec, Seeds: c.Seeds(), Topic: topic, Partitions: o.Partitions, Interval: o.Interval, Dir: o.Dir, Logf: logf, Recreate: recreate, Security: sec}
	tw := &TxnWorkload{Rec: rec, Seeds: c.Seeds(), Topic: topic, Out: topic + "-out", Partitions: o.Partitions, Producers: 3,
		Group: fmt.Sprintf("kverify-etl-%d", o.Seed), Seed: o.Seed, Interval: 20 * o.Interval, Logf: logf, Security: sec}
	var cw *CompactWorkload
	if compactOn {
		cw = &CompactWorkload{Rec: rec, Seeds: c.Seeds(), Topic: CompactTopicName, Partitions: o.Partitions, Keys: 20,
			Interval: o.Interval, Seed: o.Seed, Logf: logf, Security: sec}
	}
	consCtx, stopCons := context.WithCancel(ctx)
	etlCtx, stopEtl := context.WithCancel(ctx)
	var consWG, etlWG sync.WaitGroup
	switch {
	case o.Txn:
		consWG.Add(1)
		go func() { defer consWG.Done(); tw.RunConsumers(consCtx) }()
		etlWG.Add(1)
		go func() { defer etlWG.Done(); tw.RunEtl(etlCtx) }()
	case !o.Compact:
		consWG.Add(1)
		go func() { defer consWG.Done(); w.RunConsumers(consCtx, fmt.Sprintf("kverify-%d", o.Seed)) }()
	}
	if cw != nil {
		consWG.Add(1)
		go func() { defer consWG.Done(); cw.RunReader(consCtx) }()
	}
	if sw != nil {
		consWG.Add(1)
		go func() { defer consWG.Done(); sw.RunConsumers(consCtx) }()
	}
	defer func() { stopCons(); consWG.Wait() }()
	defer func() { stopEtl(); etlWG.Wait() }()

	prodCtx, stopProd := context.WithCancel(ctx)
	var prodWG sync.WaitGroup
	prodWG.Add(1)
	phase("workload-start")
	go func() {
		defer prodWG.Done()
		switch {
		case o.Txn:
			tw.RunProducers(prodCtx)
		case !o.Compact:
			w.RunProducers(prodCtx)
		}
	}()
	if cw != nil {
		prodWG.Add(1)
		go func() { defer prodWG.Done(); cw.RunProducers(prodCtx) }()
	}
	if sw != nil {
		prodWG.Add(1)
		go func() { defer prodWG.Done(); sw.RunProducer(prodCtx) }()
	}

	nem := &Nemesis{C: c, ZK: zv, Rec: rec, Topic: topic, Recreate: recreate, Rand: rand.New(rand.NewPCG(o.Seed, 0x6e656d)), Logf: logf}
	if o.Overlap > 1 {
		phase(fmt.Sprintf("faults in %d overlapping streams", o.Overlap))
	}
	nem.RunStreams(ctx, faults, o.Overlap)
	nem.HealEverything(ctx)
	phase("healed")
	// Keep writing a little after healing: availability must come back.
	sleepCtx(ctx, 5*time.Second)
	stopProd()
	phase("workload-end")
	prodWG.Wait()
	phase("producers-done")
	// The compacted topic settles (fences, cleanings, tombstones going)
	// and is read while the other topics quiesce and are read.
	var compactEnds map[int32]int64
	var compactErr error
	compactDone := make(chan struct{})
	go func() {
		defer close(compactDone)
		if cw != nil {
			compactEnds, compactErr = cw.Settle(ctx)
		}
	}()

	// Quiesce: every partition back to a full ISR, on its own.
	if err := waitFor(ctx, 60*time.Second, func() error {
		for _, t := range topics {
			if err := fullISR(zv, t.name, t.partitions, o.Brokers); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
		}
		return nil
	}); err != nil {
		rec.Add(Event{Kind: KindReplica, Proc: "isr", Partition: -1, Offset: -1, Outcome: Fail, Detail: "ISR not restored within 60s after healing: " + err.Error()})
		rep.Warnings = append(rep.Warnings, err.Error())
	}
	phase("quiesced")
	// The share group drains (its members keep running) while the other
	// topics are read.
	var shareErr error
	shareDone := make(chan struct{})
	go func() {
		defer close(shareDone)
		if sw != nil {
			shareErr = sw.Drain(ctx)
		}
	}()

	ends := map[string]map[int32]int64{}
	if o.Txn {
		rep.Warnings = append(rep.Warnings, tw.finish(ctx, func() { stopEtl(); etlWG.Wait() }, ends, phase)...)
	}
	for _, t := range topics {
		if o.Txn {
			break
		}
		if t.name == CompactTopicName || t.name == ShareTopicName {
			continue // read by Settle, or by the share group's drain
		}
		var e map[int32]int64
		if err := waitFor(ctx, 30*time.Second, func() error {
			var err error
			e, err = EndOffsets(ctx, c.Seeds(), t.name, c.ClientOpts()...)
			if err == nil && int32(len(e)) != t.partitions {
				err = fmt.Errorf("end offsets of %d partitions", len(e))
			}
			return err
		}); err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("list end offsets of %s: %v", t.name, err))
			continue
		}
		ends[t.name] = e
		fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		if err := w.FinalRead(fctx, t.name, e); err != nil {
			rep.Warnings = append(rep.Warnings, err.Error())
		}
		cancel()
		phase(fmt.Sprintf("final-read %s %v", t.name, e))
	}
	if ends[topic] != nil && !o.Txn {
		if err := waitFor(ctx, 30*time.Second, func() error {
			if !w.CaughtUp(Consumers, ends[topic]) {
				return errors.New("consumers not caught up")
			}
			return nil
		}); err != nil {
			rep.Warnings = append(rep.Warnings, err.Error())
		}
	}
	<-compactDone
	<-shareDone
	if shareErr != nil {
		rep.Warnings = append(rep.Warnings, shareErr.Error())
	} else if sw != nil {
		phase("share-drained")
	}
	if compactErr != nil {
		rep.Warnings = append(rep.Warnings, compactErr.Error())
	} else if cw != nil {
		ends[CompactTopicName] = compactEnds
		phase(fmt.Sprintf("final-read %s %v", CompactTopicName, compactEnds))
	}
	stopCons()
	consWG.Wait()
	phase("consumers-done")

	// Replica logs, after a clean stop.
	states := map[string]map[int32]PartitionState{}
	for _, t := range topics {
		states[t.name] = map[int32]PartitionState{}
		for p := int32(0); p < t.partitions; p++ {
			if s, err := zv.State(t.name, p); err == nil {
				states[t.name][p] = s
			}
		}
	}
	stopWatch()
	watchWG.Wait()
	var stopWG sync.WaitGroup
	for _, b := range c.Brokers {
		stopWG.Add(1)
		go func() {
			defer stopWG.Done()
			if !b.Stop(20 * time.Second) {
				logf("b%d did not stop within 20s of SIGTERM; killed", b.ID)
			}
		}()
	}
	stopWG.Wait()
	phase("brokers-stopped")
	for _, b := range c.Brokers {
		if data, err := os.ReadFile(b.LogPath); err == nil {
			for _, bad := range []string{"panic:", "fatal error:", "DATA RACE"} {
				if bytes.Contains(data, []byte(bad)) {
					rec.Add(Event{Kind: KindPhase, Detail: fmt.Sprintf("warning: %q in %s", bad, b.LogPath)})
				}
			}
			if n := idleCleanings(data); n > idleCleaningsMax {
				rec.Add(Event{Kind: KindPhase, Detail: fmt.Sprintf("warning: %d cleanings that moved no cleaner checkpoint in %s (a cleaner spinning?)", n, b.LogPath)})
			}
		}
	}
	for _, t := range topics {
		if ends[t.name] == nil {
			continue
		}
		for p := int32(0); p < t.partitions; p++ {
			s, ok := states[t.name][p]
			switch {
			case !ok:
			case t.name == CompactTopicName:
				// Replicas clean on their own: compare what they
				// hold, not their bytes.
				CompactReplicaCheck(rec, c, t.name, p, s, ends[t.name][p])
			default:
				ReplicaCheck(rec, c, t.name, w.label(t.name), p, s, ends[t.name][p])
			}
		}
	}
	if err := rec.Flush(); err != nil {
		rep.Warnings = append(rep.Warnings, "history: "+err.Error())
	}
	events := rec.Events()
	rep.Result = Check(events)
	rep.Events = events
	for _, e := range events {
		switch e.Kind {
		case KindFault:
			rep.Faults = append(rep.Faults, e)
		case KindPhase:
			rep.Phases = append(rep.Phases, e)
			if strings.HasPrefix(e.Detail, "warning: ") {
				rep.Warnings = append(rep.Warnings, strings.TrimPrefix(e.Detail, "warning: "))
			}
		}
	}
	rep.Elapsed = time.Since(began)
	return rep, nil
}

// idleCleaningsMax is how many cleanings that clean nothing a broker log
// may hold before the report warns: a correct cleaner plans none, but a
// log truncated under a cleaning may make a few.
const idleCleaningsMax = 20

// idleCleanings counts a broker log's "log cleaned" lines whose end offset
// is their first dirty offset.
func idleCleanings(log []byte) int {
	n := 0
	for _, l := range bytes.Split(log, []byte("\n")) {
		if !bytes.Contains(l, []byte(`msg="log cleaned"`)) {
			continue
		}
		var first, end string
		for _, f := range strings.Fields(string(l)) {
			if v, ok := strings.CutPrefix(f, "first_dirty="); ok {
				first = v
			} else if v, ok := strings.CutPrefix(f, "end_offset="); ok {
				end = v
			}
		}
		if first != "" && first == end {
			n++
		}
	}
	return n
}

type topicSpec struct {
	name       string
	partitions int32
	configs    map[string]*string // topic configs (nil: the brokers' defaults)
}

// setup waits for every broker to register and a controller, creates the
// topic and waits until every partition has its full ISR.
func setup(ctx context.Context, c *Cluster, zv *ZKView, t topicSpec) error {
	topic, partitions := t.name, t.partitions
	if err := waitFor(ctx, 30*time.Second, func() error {
		ids, err := zv.Registered()
		if err != nil {
			return err
		}
		if len(ids) != len(c.Brokers) {
			return fmt.Errorf("registered brokers %v", ids)
		}
		_, err = zv.Controller()
		return err
	}); err != nil {
		return fmt.Errorf("cluster did not form: %w", err)
	}
	cl, err := kgo.NewClient(c.ClientOpts(kgo.SeedBrokers(c.Seeds()...))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := waitFor(ctx, 30*time.Second, func() error {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := adm.CreateTopic(rctx, partitions, 3, t.configs, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
			return nil
		}
		return err
	}); err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	return waitFor(ctx, 30*time.Second, func() error { return fullISR(zv, topic, partitions, len(c.Brokers)) })
}

func fullISR(zv *ZKView, topic string, partitions int32, replicas int) error {
	for p := int32(0); p < partitions; p++ {
		s, err := zv.State(topic, p)
		if err != nil {
			return fmt.Errorf("partition %d: %w", p, err)
		}
		if s.Leader < 0 || len(s.ISR) < min(replicas, 3) {
			return fmt.Errorf("partition %d: leader %d ISR %v", p, s.Leader, s.ISR)
		}
	}
	return nil
}

func waitFor(ctx context.Context, within time.Duration, fn func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// Print writes the report.
func (r *Report) Print(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "\n== kverify %s seed=%d unsafe=%v txn=%v compact=%v: %d brokers, %d partitions, elapsed %v\n", o.Mode, o.Seed, o.Unsafe, o.Txn, o.Compact, o.Brokers, o.Partitions, r.Elapsed.Round(time.Second))
	if r.LogDirs != "" {
		fmt.Fprintf(w, "log dirs: %s\n", r.LogDirs)
	}
	if r.Security != "" {
		fmt.Fprintf(w, "security: %s\n", r.Security)
	}
	fmt.Fprintf(w, "\nfaults:\n")
	for _, f := range r.Faults {
		fmt.Fprintf(w, "  %9s  %-20s %-7s %s\n", us(f.Time), f.Fault, f.Phase, f.Detail)
	}
	res := r.Result
	fmt.Fprintf(w, "\nsends: %d ok, %d failed (definite), %d indefinite\n", res.Sends[OK], res.Sends[Fail], res.Sends[Info])
	procs := make([]string, 0, len(res.SendsByProc))
	for p := range res.SendsByProc {
		procs = append(procs, p)
	}
	sort.Strings(procs)
	for _, p := range procs {
		m := res.SendsByProc[p]
		fmt.Fprintf(w, "  %-10s ok %6d  fail %5d  info %5d\n", p, m[OK], m[Fail], m[Info])
	}
	fmt.Fprintf(w, "reads: %d by consumers, %d in the final read\n", res.Reads, res.Final)
	if t := res.Txn; t.ByStatus != nil {
		fmt.Fprintf(w, "transactions: %d committed, %d aborted, %d unknown; %d records produced in them, %d read_committed by consumers, %d in the final read\n",
			t.ByStatus[TxnCommitted], t.ByStatus[TxnAborted], t.ByStatus[TxnUnknown], t.Writes, t.Reads, t.Final)
	}
	if ss := res.Share; ss.Sends > 0 {
		fmt.Fprintf(w, "share group: %d records sent (%d acknowledged); %d deliveries of %d records to %d members (%d records delivered more than once, highest delivery count %d); acceptances: %d acknowledged, %d refused, %d unknown; %d records delivered whose acceptance was never acknowledged\n",
			ss.Sends, ss.Written, ss.Deliveries, ss.Delivered, ss.Members, ss.Redelivered, ss.MaxDeliveries, ss.Acks, ss.AcksFailed, ss.AcksUnknown, ss.Unaccepted)
	}
	if cs := res.Compact; cs.Sends > 0 {
		fmt.Fprintf(w, "compacted topic: %d records sent (%d tombstones) over %d keys; %d read by the reader; final read after cleaning: %d records (%d tombstones), %d live keys\n",
			cs.Sends, cs.Tombstones, cs.Keys, cs.Reads, cs.Final, cs.FinalTombs, cs.LiveKeys)
	}
	var compared, differ, epochs int
	for _, e := range r.Events {
		switch {
		case e.Kind == KindReplica && e.Outcome == OK:
			compared++
		case e.Kind == KindReplica:
			differ++
		case e.Kind == KindEpoch:
			epochs++
		}
	}
	fmt.Fprintf(w, "replicas: %d ISR member logs identical to the leader's up to the HW (the compacted topic's: the same latest record per key), %d not\n", compared, differ)
	fmt.Fprintf(w, "ZooKeeper: %d partition-state / controller-epoch changes observed\n", epochs)
	what := "a successful acks=all write"
	if res.Txn.ByStatus != nil && res.Sends[OK] == 0 {
		what = "a committed transaction"
	}
	fmt.Fprintf(w, "availability: longest stretch without %s: %v (from t=%s)\n", what, res.Unavailable.Round(time.Millisecond), us(res.UnavailableFrom))
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	if res.Valid() {
		fmt.Fprintf(w, "\nanomalies: none\n")
	} else {
		fmt.Fprintf(w, "\nanomalies:\n")
		for _, name := range slices.Concat(AllAnomalies, TxnAnomalies, CompactAnomalies, ShareAnomalies) {
			if n := res.ByName[name]; n > 0 {
				fmt.Fprintf(w, "  %-28s %d\n", name, n)
			}
		}
		shown := map[string]int{}
		for _, a := range res.Anomalies {
			if shown[a.Name] < 5 {
				shown[a.Name]++
				fmt.Fprintf(w, "    %s\n", a)
			}
		}
	}
	fmt.Fprintf(w, "\nhistory: %s\n", r.HistoryPath)
	if o.Mode != "check" {
		overlap := ""
		if o.Overlap > 1 {
			overlap = fmt.Sprintf(" --overlap %d", o.Overlap)
		}
		fmt.Fprintf(w, "replay:  go run ./cmd/kverify %s --seed %d%s%s%s%s%s%s\n", o.Mode, o.Seed,
			map[bool]string{true: " --unsafe"}[o.Unsafe], map[bool]string{true: " --txn"}[o.Txn], map[bool]string{true: " --compact"}[o.Compact], durationFlag(o), overlap, securityFlags(o))
	}
}

// securityFlags are the replay's --security and --sasl-mechanism.
func securityFlags(o Options) string {
	if o.Security == "" || o.Security == SecurityPlaintext {
		return ""
	}
	f := " --security " + o.Security
	if o.SASLMechanism != "" && o.SASLMechanism != MechanismSCRAM {
		f += " --sasl-mechanism " + o.SASLMechanism
	}
	return f
}

func durationFlag(o Options) string {
	if o.Mode == "long" {
		return " --duration " + o.Duration.String()
	}
	return ""
}
