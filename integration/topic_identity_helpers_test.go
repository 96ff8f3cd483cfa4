package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic identity (issue 19) helpers: one delete-and-recreate run on a
// replication cluster, and the checks that a deleted incarnation of a topic
// never comes back - on disk (segment bytes, partition.metadata, leftover
// directories) or to a consumer.
//
// Record values name their incarnation: "gen1-<topic>-p<partition>-<n>"
// before the deletion, "gen2-<topic>-p<partition>-<n>" after the
// re-creation, so any record can be told apart by its value alone.

const (
	// tiPauseSession is the session timeout of the clusters whose tests
	// pause a broker: the longest the harness's ZooKeeper allows (20 ticks
	// of 500 ms).
	tiPauseSession = 10 * time.Second
	// tiPause is how long a broker stays stopped (SIGSTOP): longer than the
	// controller's 5 s per-request timeout for sending views, shorter than
	// tiPauseSession, so the paused broker keeps its session and misses
	// the views sent meanwhile.
	tiPause = 6 * time.Second
	// tiKillSession is the session timeout of the clusters whose tests kill
	// brokers: long enough that a follower killed just before the
	// deletion is still registered when the topic is re-created with it in
	// the assignment, short enough that failovers stay quick.
	tiKillSession = 6 * time.Second
	// tiLag is replica.lag.time.max.ms: a stopped follower leaves the ISR
	// well within tiPause, so acks=all writes go on without it.
	tiLag = 1500 * time.Millisecond

	tiGen1Records = 200 // records of the first incarnation
	tiChunk       = 10  // records per produce request

	// tiQuiesce bounds how long the cluster may take, after the fault
	// healed, to bring every replica of the new topic in sync.
	tiQuiesce = 30 * time.Second

	tiLoopsEnv = "KBROKER_TOPIC_IDENTITY_LOOPS"
)

// tiLoops is how many times each scenario runs: KBROKER_TOPIC_IDENTITY_LOOPS,
// default 1 (the proof is 20 in a row).
func tiLoops(t *testing.T) int {
	t.Helper()
	s := os.Getenv(tiLoopsEnv)
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", tiLoopsEnv, s)
	}
	return n
}

// tiCluster starts a 3-broker replication cluster for the topic identity
// tests.
func tiCluster(t *testing.T, session time.Duration) *replCluster {
	t.Helper()
	return startReplCluster(t, replOpts{brokers: 3, session: session, lag: tiLag})
}

// tiRoles returns the controller and the two other brokers (sorted).
func tiRoles(t *testing.T, c *replCluster) (ctrl, a, b int32) {
	t.Helper()
	ctrl = c.controller()
	if ctrl < 0 {
		t.Fatal("no controller")
	}
	o := otherThan(3, ctrl)
	return ctrl, o[0], o[1]
}

// tiRun is one topic's life: created, written, deleted, re-created,
// written again; then checked.
type tiRun struct {
	t     *testing.T
	c     *replCluster
	topic string

	oldID, newID string // base64url topic ids from ZooKeeper
	oldAssign    [][]int32
	newAssign    [][]int32

	gen1 map[string]ackPos // acknowledged first-incarnation records

	// gen2Records is how many records the second incarnation gets: more
	// than the first in even iterations (a replica that kept the old log
	// and fetches from its old log end finds data there, and would splice
	// new records after old ones), fewer in odd ones (the numbers:
	// its fetch position is past the new log end).
	gen2Records int

	gen2Done chan tiProduced // the second incarnation's producer's result
	gen2     map[string]ackPos
	consumer *tiConsumer
}

// newTIRun starts iteration i's run on topic.
func newTIRun(t *testing.T, c *replCluster, topic string, i int) *tiRun {
	n := 3 * tiGen1Records / 2
	if i%2 == 1 {
		n = tiGen1Records / 2
	}
	return &tiRun{t: t, c: c, topic: topic, gen2Records: n}
}

func (r *tiRun) String() string { return r.topic }

// value is the value of the n-th record of generation gen in partition p.
func (r *tiRun) value(gen int, p int32, n int) string {
	return fmt.Sprintf("gen%d-%s-p%d-%04d", gen, r.topic, p, n)
}

func (r *tiRun) genPrefix(gen int) string { return fmt.Sprintf("gen%d-%s-", gen, r.topic) }

// isOld reports whether a value belongs to an earlier incarnation of this
// topic (or of any topic: no gen1 value is ever legitimate after the
// re-creation).
func isOld(v string) bool { return strings.HasPrefix(v, "gen1-") }

// createOld creates the first incarnation with an explicit assignment,
// waits until it is fully replicated and agreed on, and records its id.
func (r *tiRun) createOld(assign [][]int32) {
	r.t.Helper()
	r.oldAssign = assign
	r.createTopic(assign, 30*time.Second)
	r.c.waitSettled(30*time.Second, r.topic, int32(len(assign)), len(assign[0]))
	r.oldID = r.mustTopicID()
	r.t.Logf("%s: first incarnation %s, assignment %v", r.topic, r.oldID, assign)
}

// createTopic sends CreateTopics with an explicit assignment to the
// controller named in ZooKeeper (directly: a paused broker must not stall
// a client's metadata requests), retrying within `within` while there is
// no controller, the name is still taken (a deletion that completes
// asynchronously) or an assigned broker is not live yet.
func (r *tiRun) createTopic(assign [][]int32, within time.Duration) {
	r.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 15000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = r.topic
	rt.NumPartitions = -1
	rt.ReplicationFactor = -1
	for p, replicas := range assign {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition = int32(p)
		ra.Replicas = replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	req.Topics = append(req.Topics, rt)
	attempts := r.toController(within, req, func(resp kmsg.Response) (retriable bool, err error) {
		ts := resp.(*kmsg.CreateTopicsResponse).Topics
		if len(ts) != 1 {
			return false, fmt.Errorf("%d topics in the CreateTopics response", len(ts))
		}
		err = kerr.ErrorForCode(ts[0].ErrorCode)
		if err != nil && ts[0].ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *ts[0].ErrorMessage)
		}
		retriable = errors.Is(err, kerr.TopicAlreadyExists) || errors.Is(err, kerr.InvalidReplicaAssignment) ||
			errors.Is(err, kerr.InvalidReplicationFactor) || errors.Is(err, kerr.NotController) || errors.Is(err, kerr.RequestTimedOut)
		return retriable, err
	})
	if attempts > 1 {
		r.t.Logf("%s: created on attempt %d", r.topic, attempts)
	}
}

// toController sends req to the current controller until check accepts
// the answer (nil error) or calls its error final, retrying for `within`
// while there is no controller, it cannot be reached, or check calls the
// error retriable. It returns the number of attempts.
func (r *tiRun) toController(within time.Duration, req kmsg.Request, check func(kmsg.Response) (retriable bool, err error)) int {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for attempt := 1; ; attempt++ {
		var err error
		retriable := true
		ctrl := r.c.controller()
		if ctrl < 0 {
			err = errors.New("no controller in ZooKeeper")
		} else {
			var resp kmsg.Response
			if resp, err = r.c.request(ctrl, 20*time.Second, req); err != nil {
				err = fmt.Errorf("controller %d: %w", ctrl, err)
			} else if retriable, err = check(resp); err != nil {
				err = fmt.Errorf("controller %d: %w", ctrl, err)
			}
		}
		if err == nil {
			return attempt
		}
		if !retriable || time.Now().After(deadline) {
			r.t.Fatalf("%s: %T to the controller (attempt %d): %v", r.topic, req, attempt, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// topicID reads the topic's id from /brokers/topics/<topic>.
func (r *tiRun) topicID() (string, error) {
	data, _, err := r.c.zkConn().Get("/brokers/topics/" + r.topic)
	if err != nil {
		return "", fmt.Errorf("reading /brokers/topics/%s: %w", r.topic, err)
	}
	var a struct {
		TopicID string `json:"topic_id"`
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return "", fmt.Errorf("/brokers/topics/%s %q: %w", r.topic, data, err)
	}
	if a.TopicID == "" {
		return "", fmt.Errorf("/brokers/topics/%s has no topic_id: %s", r.topic, data)
	}
	return a.TopicID, nil
}

func (r *tiRun) mustTopicID() string {
	r.t.Helper()
	id, err := r.topicID()
	if err != nil {
		r.t.Fatal(err)
	}
	return id
}

// produceGen1 writes tiGen1Records first-incarnation records (acks=all)
// round robin over the partitions and waits until every replica has them.
func (r *tiRun) produceGen1() {
	r.t.Helper()
	cl := r.producer()
	ctx := testContext(r.t, 60*time.Second)
	res := tiProduce(ctx, cl, r, 1, int32(len(r.oldAssign)), tiGen1Records)
	cl.Close()
	if res.err != nil {
		r.t.Fatalf("%s: producing the first incarnation: %v", r.topic, res.err)
	}
	r.gen1 = res.acked
	for p := range r.oldAssign {
		r.c.waitInSyncEverywhere(20*time.Second, r.topic, int32(p))
	}
}

// producer is an acks=all, uncompressed (so values can be read straight
// from the segment files), manually partitioned client, seeded with the
// running brokers other than except.
func (r *tiRun) producer(except ...int32) *kgo.Client {
	r.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.seeds(except...)...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RetryTimeout(60*time.Second))
	if err != nil {
		r.t.Fatalf("kgo.NewClient: %v", err)
	}
	r.t.Cleanup(cl.Close)
	return cl
}

// seeds lists the running brokers' addresses except the given ones.
func (r *tiRun) seeds(except ...int32) []string {
	var out []string
	for i, b := range r.c.brokers {
		if b.Running() && !slices.Contains(except, int32(i+1)) {
			out = append(out, b.Addr())
		}
	}
	return out
}

// tiProduced is what a producer of one generation got.
type tiProduced struct {
	acked map[string]ackPos
	err   error // the first failure, with its record
	fails int
}

// tiProduce writes n records of generation gen, round robin over
// partitions, in requests of tiChunk records (so each partition's log has
// many batches, as a real one: a replica that fetches from the wrong
// position then gets a batch boundary, not the one batch holding
// everything), and waits for every answer. It never calls t.Fatal, so it
// may run in its own goroutine.
func tiProduce(ctx context.Context, cl *kgo.Client, r *tiRun, gen int, partitions int32, n int) tiProduced {
	out := tiProduced{acked: map[string]ackPos{}}
	for from := 0; from < n; from += tiChunk {
		var rs []*kgo.Record
		for i := from; i < min(n, from+tiChunk); i++ {
			p := int32(i) % partitions
			rs = append(rs, &kgo.Record{Topic: r.topic, Partition: p, Value: []byte(r.value(gen, p, i))})
		}
		for _, res := range cl.ProduceSync(ctx, rs...) {
			if res.Err != nil {
				if out.fails++; out.err == nil {
					out.err = fmt.Errorf("record %s to partition %d: %w", res.Record.Value, res.Record.Partition, res.Err)
				}
				continue
			}
			out.acked[string(res.Record.Value)] = ackPos{res.Record.Partition, res.Record.Offset}
		}
	}
	return out
}

// deleteOld deletes the topic through the controller (sent to it
// directly, as createTopic) and checks the answer.
func (r *tiRun) deleteOld() {
	r.t.Helper()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 15000
	req.TopicNames = []string{r.topic}
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(r.topic)
	req.Topics = append(req.Topics, rt)
	r.toController(30*time.Second, req, func(resp kmsg.Response) (retriable bool, err error) {
		ts := resp.(*kmsg.DeleteTopicsResponse).Topics
		if len(ts) != 1 {
			return false, fmt.Errorf("%d topics in the DeleteTopics response", len(ts))
		}
		err = kerr.ErrorForCode(ts[0].ErrorCode)
		if err != nil && ts[0].ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *ts[0].ErrorMessage)
		}
		return errors.Is(err, kerr.NotController) || errors.Is(err, kerr.RequestTimedOut), err
	})
	r.t.Logf("%s: deleted the first incarnation %s", r.topic, r.oldID)
}

// createNew re-creates the topic under the same name with assign, waits
// until every running broker except the given ones names it with its new
// id in Metadata (so a consumer started now cannot be told the old id by
// a broker that simply lags), and records the new id.
func (r *tiRun) createNew(assign [][]int32, except ...int32) {
	r.t.Helper()
	r.newAssign = assign
	start := time.Now()
	r.createTopic(assign, 30*time.Second)
	checkFor(r.t, 30*time.Second, 20*time.Millisecond, func() error {
		id, err := r.topicID()
		if err != nil {
			return err
		}
		if id == r.oldID {
			return fmt.Errorf("/brokers/topics/%s still names the deleted id %s", r.topic, id)
		}
		r.newID = id
		return nil
	})
	checkFor(r.t, 20*time.Second, 20*time.Millisecond, func() error {
		for i, b := range r.c.brokers {
			id := int32(i + 1)
			if !b.Running() || slices.Contains(except, id) {
				continue
			}
			got, parts, err := r.c.metadataTopicID(id, r.topic)
			if err != nil {
				return err
			}
			if got != r.newID || parts != len(assign) {
				return fmt.Errorf("broker %d's Metadata names %s with id %s and %d partitions, want the new id %s and %d", id, r.topic, got, parts, r.newID, len(assign))
			}
		}
		return nil
	})
	r.t.Logf("%s: re-created as %s (was %s), assignment %v, in %v", r.topic, r.newID, r.oldID, assign, time.Since(start).Round(time.Millisecond))
}

// metadataTopicID returns the id and partition count broker id's Metadata
// gives topic.
func (c *replCluster) metadataTopicID(id int32, topic string) (string, int, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := c.request(id, 2*time.Second, req)
	if err != nil {
		return "", 0, fmt.Errorf("metadata from broker %d: %w", id, err)
	}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return "", 0, fmt.Errorf("broker %d: metadata of %s: %w", id, topic, err)
		}
		return base64.RawURLEncoding.EncodeToString(t.TopicID[:]), len(t.Partitions), nil
	}
	return "", 0, fmt.Errorf("broker %d does not list %s", id, topic)
}

// startGen2 starts writing the second incarnation's records in the
// background (acks=all; a write may have to wait for a paused or dead
// replica to leave the ISR, or for a paused leader to return), through
// brokers other than except, and a consumer reading the new topic from its
// start.
func (r *tiRun) startGen2(except ...int32) {
	r.t.Helper()
	cl := r.producer(except...)
	r.gen2Done = make(chan tiProduced, 1)
	ctx := testContext(r.t, 90*time.Second)
	parts := int32(len(r.newAssign))
	n := r.gen2Records
	go func() { r.gen2Done <- tiProduce(ctx, cl, r, 2, parts, n) }()
	r.consumer = startTIConsumer(r.t, r.topic, r.seeds(except...))
}

// waitGen2 waits for the second incarnation's producer and fails the test
// if any record was not acknowledged.
func (r *tiRun) waitGen2(within time.Duration) {
	r.t.Helper()
	select {
	case res := <-r.gen2Done:
		r.gen2 = res.acked
		if res.err != nil {
			r.t.Errorf("%s: %d of %d second-incarnation records failed, first: %v", r.topic, res.fails, r.gen2Records, res.err)
		}
	case <-time.After(within):
		r.t.Fatalf("%s: the second incarnation's %d acks=all records were not all answered within %v", r.topic, r.gen2Records, within)
	}
}

// ---- faults ----

// pauseAcross stops broker id (SIGSTOP), runs during, and resumes it
// (SIGCONT) tiPause after it stopped: the pause is the fault under test, a
// timer, not a synchronisation. during must not wait for the paused
// broker.
func (r *tiRun) pauseAcross(id int32, during func()) {
	r.t.Helper()
	b := r.c.broker(id)
	czxid := r.c.registrationZxid(id)
	b.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			b.Signal(syscall.SIGCONT) // during failed: do not leave it stopped
		}
	}()
	during()
	if took := time.Since(stopped); took > tiPause {
		r.t.Logf("%s: the steps under the pause took %v, longer than the planned %v pause", r.topic, took.Round(time.Millisecond), tiPause)
	}
	time.Sleep(time.Until(stopped.Add(tiPause))) // the pause under test
	b.Signal(syscall.SIGCONT)
	resumed = true
	paused := time.Since(stopped)
	r.t.Logf("%s: broker %d paused for %v (session timeout %v)", r.topic, id, paused.Round(time.Millisecond), r.c.opts.session)
	// The scenario assumes the paused broker kept its ZooKeeper session;
	// say so when the machine was too slow for that.
	checkFor(r.t, 10*time.Second, 50*time.Millisecond, func() error {
		if z := r.c.registrationZxid(id); z < 0 {
			return fmt.Errorf("broker %d is not registered after its pause", id)
		}
		return nil
	})
	if z := r.c.registrationZxid(id); z != czxid {
		r.t.Logf("%s: NOTE broker %d registered again during its %v pause (its session expired): the scenario degraded to a session loss", r.topic, id, paused.Round(time.Millisecond))
	}
}

// registrationZxid is the creation zxid of /brokers/ids/<id>, -1 if absent.
func (c *replCluster) registrationZxid(id int32) int64 {
	_, st, err := c.zkConn().Get("/brokers/ids/" + strconv.Itoa(int(id)))
	if err != nil {
		return -1
	}
	return st.Czxid
}

// waitUnregistered waits until broker id's registration is gone (its
// session ended), so that it can start again under the same id.
func (r *tiRun) waitUnregistered(id int32) {
	r.t.Helper()
	checkFor(r.t, r.c.opts.session+10*time.Second, 25*time.Millisecond, func() error {
		if r.c.brokerRegistered(id) {
			return fmt.Errorf("broker %d still registered", id)
		}
		return nil
	})
}

// waitController waits until a broker other than not is the controller and
// returns it.
func (r *tiRun) waitController(not int32) int32 {
	r.t.Helper()
	var got int32
	checkFor(r.t, r.c.opts.session+15*time.Second, 25*time.Millisecond, func() error {
		got = r.c.controller()
		if got < 0 || got == not {
			return fmt.Errorf("controller is %d", got)
		}
		return nil
	})
	return got
}

// waitAllRegistered waits until every broker is registered and every one's
// Metadata lists all of them.
func (r *tiRun) waitAllRegistered() {
	r.t.Helper()
	n := len(r.c.brokers)
	checkFor(r.t, 30*time.Second, 25*time.Millisecond, func() error {
		for id := int32(1); id <= int32(n); id++ {
			if !r.c.brokerRegistered(id) {
				return fmt.Errorf("broker %d not registered", id)
			}
			m, err := r.c.metadataFrom(id, time.Second)
			if err != nil {
				return err
			}
			if len(m.Brokers) != n {
				return fmt.Errorf("broker %d lists %d brokers", id, len(m.Brokers))
			}
		}
		return nil
	})
}

// ---- the consumer ----

// tiConsumer reads a topic from its start with a franz-go consumer until
// stopped, keeping every record it was given.
type tiConsumer struct {
	cl       *kgo.Client
	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once

	mu   sync.Mutex // guards read
	read []readRec
}

func startTIConsumer(t *testing.T, topic string, seeds []string) *tiConsumer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &tiConsumer{cl: cl, cancel: cancel, done: make(chan struct{})}
	t.Cleanup(func() { c.stop() })
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(rec *kgo.Record) {
				c.mu.Lock()
				c.read = append(c.read, readRec{rec.Partition, rec.Offset, string(rec.Value)})
				c.mu.Unlock()
			})
		}
	}()
	return c
}

// stop ends the consumer; calling it again does nothing.
func (c *tiConsumer) stop() {
	c.stopOnce.Do(func() {
		c.cancel()
		<-c.done
		c.cl.Close()
	})
}

func (c *tiConsumer) records() []readRec {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.read)
}

// ---- the checks ----

// finish waits for the cluster to quiesce and checks everything issue 19
// asks of the new incarnation.
func (r *tiRun) finish() {
	r.t.Helper()
	start := time.Now()
	if err := pollUntil(tiQuiesce, 50*time.Millisecond, r.quiesced); err != nil {
		r.t.Errorf("%s: the new incarnation did not quiesce within %v: %v", r.topic, tiQuiesce, err)
	} else {
		r.t.Logf("%s: quiesced %v after the fault healed", r.topic, time.Since(start).Round(time.Millisecond))
	}
	r.checkRunning()
	r.checkLogs()
	r.checkDirs()
	r.checkConsumer()
}

// pollUntil calls fn every `every` until it returns nil or total passed,
// and returns fn's last error: checkFor that does not end the test, for
// waits after which the checks below give a more precise message.
func pollUntil(total, every time.Duration, fn func() error) error {
	deadline := time.Now().Add(total)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(every)
	}
}

// quiesced: every partition of the new topic has a leader and its whole
// assignment in the ISR, each replica's high watermark equals its log end,
// all replicas have the same log end and hold at least the acknowledged
// records, and every running broker's Metadata gives the new id and the
// leader ZooKeeper names.
func (r *tiRun) quiesced() error {
	want := map[int32]int64{}
	for _, a := range r.gen2 {
		want[a.Partition] = max(want[a.Partition], a.Offset+1)
	}
	states := map[int32]zkPartState{}
	for p, replicas := range r.newAssign {
		s, err := r.c.partState(r.topic, int32(p))
		if err != nil {
			return err
		}
		if s.Leader < 0 || len(s.ISR) != len(replicas) {
			return fmt.Errorf("%s-%d: state %s, want a leader and all of %v in sync", r.topic, p, s, replicas)
		}
		states[int32(p)] = s
		var end int64 = -1
		for _, id := range replicas {
			if !r.c.broker(id).Running() {
				return fmt.Errorf("broker %d (replica of %s-%d) is not running: %s", id, r.topic, p, r.c.broker(id).exitState())
			}
			hw, leo, err := r.c.partitionOffsets(id, r.topic, int32(p))
			if err != nil {
				return err
			}
			if hw != leo {
				return fmt.Errorf("broker %d: %s-%d high watermark %d, log end %d", id, r.topic, p, hw, leo)
			}
			if end >= 0 && leo != end {
				return fmt.Errorf("broker %d: %s-%d log end %d, another replica %d", id, r.topic, p, leo, end)
			}
			end = leo
		}
		if end < want[int32(p)] {
			return fmt.Errorf("%s-%d: replicas end at %d, the acknowledged records reach %d", r.topic, p, end, want[int32(p)])
		}
	}
	for i, b := range r.c.brokers {
		id := int32(i + 1)
		if !b.Running() {
			continue
		}
		got, parts, err := r.c.metadataTopicID(id, r.topic)
		if err != nil {
			return err
		}
		if got != r.newID || parts != len(r.newAssign) {
			return fmt.Errorf("broker %d's Metadata: %s id %s with %d partitions, want %s with %d", id, r.topic, got, parts, r.newID, len(r.newAssign))
		}
		md, err := r.c.mdLeaders(id, r.topic)
		if err != nil {
			return err
		}
		for p, s := range states {
			if m := md[p]; m.Leader != s.Leader || m.LeaderEpoch != s.LeaderEpoch {
				return fmt.Errorf("broker %d: %s-%d leader %d epoch %d, ZooKeeper says %s", id, r.topic, p, m.Leader, m.LeaderEpoch, s)
			}
		}
	}
	return nil
}

// checkRunning: no broker process exited.
func (r *tiRun) checkRunning() {
	r.t.Helper()
	for i, b := range r.c.brokers {
		if !b.Running() {
			r.t.Errorf("%s: broker %d exited: %s (see its log below)", r.topic, i+1, b.exitState())
		}
	}
}

// diskRecord is one record read from a segment file.
type diskRecord struct {
	offset int64
	epoch  int32 // the batch's partition leader epoch
	value  string
}

// diskBatch is one record batch of a partition's log.
type diskBatch struct {
	bytes   []byte
	base    int64
	last    int64
	epoch   int32
	records []diskRecord
	err     error // decoding the records
}

func (b diskBatch) String() string {
	s := fmt.Sprintf("batch %d-%d (leader epoch %d, %d bytes", b.base, b.last, b.epoch, len(b.bytes))
	if len(b.records) > 0 {
		s += fmt.Sprintf(", first value %q", b.records[0].value)
	}
	if b.err != nil {
		s += fmt.Sprintf(", undecodable: %v", b.err)
	}
	return s + ")"
}

// partitionLog is a replica's log as its segment files hold it.
type partitionLog struct {
	segments []string // .log file names, by base offset
	data     []byte   // their concatenation
	batches  []diskBatch
	tail     int // bytes after the last whole batch
}

var segmentName = regexp.MustCompile(`^[0-9]{20}\.log$`)

// readPartitionLog reads every .log segment of dir, in base offset order.
func readPartitionLog(dir string) (*partitionLog, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if segmentName.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names) // zero-padded: lexical order is offset order
	l := &partitionLog{segments: names}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		l.data = append(l.data, data...)
	}
	pos := 0
	for _, bi := range scanBatches(l.data) {
		raw := l.data[bi.pos : bi.pos+bi.size]
		db := diskBatch{bytes: raw, base: bi.baseOffset, last: bi.lastOffset}
		db.epoch = int32(binary.BigEndian.Uint32(raw[12:]))
		db.records, db.err = decodeBatchRecords(raw)
		l.batches = append(l.batches, db)
		pos = int(bi.pos + bi.size)
	}
	l.tail = len(l.data) - pos
	return l, nil
}

// decodeBatchRecords returns the records of one uncompressed v2 batch.
func decodeBatchRecords(raw []byte) ([]diskRecord, error) {
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		return nil, fmt.Errorf("batch header: %w", err)
	}
	if codec := b.Attributes & 0x07; codec != 0 {
		return nil, fmt.Errorf("compressed batch (codec %d): the test writes uncompressed records", codec)
	}
	var out []diskRecord
	rest := b.Records
	for i := int32(0); i < b.NumRecords; i++ {
		length, n := binary.Varint(rest)
		if n <= 0 || length < 0 || int64(n)+length > int64(len(rest)) {
			return out, fmt.Errorf("record %d: bad length", i)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(rest[:int64(n)+length]); err != nil {
			return out, fmt.Errorf("record %d: %w", i, err)
		}
		out = append(out, diskRecord{offset: b.FirstOffset + int64(rec.OffsetDelta), epoch: b.PartitionLeaderEpoch, value: string(rec.Value)})
		rest = rest[int64(n)+length:]
	}
	return out, nil
}

// checkLogs: for every partition of the new topic, the leader's log holds
// only second-incarnation records, dense from offset 0, with every
// acknowledged record where it was acknowledged; every other replica's
// log is byte-identical to the leader's.
func (r *tiRun) checkLogs() {
	r.t.Helper()
	for p, replicas := range r.newAssign {
		p := int32(p)
		s, err := r.c.partState(r.topic, p)
		if err != nil {
			r.t.Errorf("%s-%d: %v", r.topic, p, err)
			continue
		}
		leader := s.Leader
		if !slices.Contains(replicas, leader) {
			r.t.Errorf("%s-%d: leader %d is not one of the replicas %v (state %s)", r.topic, p, leader, replicas, s)
			continue
		}
		ref, err := readPartitionLog(r.c.broker(leader).PartitionDir(r.topic, p))
		if err != nil {
			r.t.Errorf("%s-%d: reading the leader's (broker %d) log: %v", r.topic, p, leader, err)
			continue
		}
		r.checkContent(leader, p, ref, true)
		r.t.Logf("%s-%d: leader %d's log: %d batches, offsets 0..%d, %d bytes in %v", r.topic, p, leader, len(ref.batches), nextOffset(ref.batches)-1, len(ref.data), ref.segments)
		for _, id := range replicas {
			if id == leader {
				continue
			}
			l, err := readPartitionLog(r.c.broker(id).PartitionDir(r.topic, p))
			if err != nil {
				r.t.Errorf("%s-%d: reading broker %d's log: %v", r.topic, p, id, err)
				continue
			}
			r.checkContent(id, p, l, false)
			if d := firstDifference(l, ref); d != "" {
				r.t.Errorf("%s-%d: broker %d's log is not byte-identical to the leader's (broker %d): %s", r.topic, p, id, leader, d)
			}
		}
	}
}

// checkContent checks one replica's records: only this run's
// second-incarnation values; for the leader also dense offsets from 0 and
// every acknowledged record at its offset.
func (r *tiRun) checkContent(id, p int32, l *partitionLog, isLeader bool) {
	r.t.Helper()
	role := "follower"
	if isLeader {
		role = "leader"
	}
	var old, foreign []diskRecord
	at := map[int64]string{}
	next := int64(0)
	gap := ""
	for _, b := range l.batches {
		if b.err != nil {
			r.t.Errorf("%s-%d on broker %d (%s): %s", r.topic, p, id, role, b)
		}
		for _, rec := range b.records {
			switch {
			case isOld(rec.value):
				old = append(old, rec)
			case !strings.HasPrefix(rec.value, r.genPrefix(2)):
				foreign = append(foreign, rec)
			}
			if rec.offset != next && gap == "" {
				gap = fmt.Sprintf("offset %d where %d was expected", rec.offset, next)
			}
			next = rec.offset + 1
			at[rec.offset] = rec.value
		}
	}
	if len(old) > 0 {
		r.t.Errorf("%s-%d on broker %d (%s): %d records of the deleted incarnation %s, offsets %d..%d, first %q (leader epoch %d)",
			r.topic, p, id, role, len(old), r.oldID, old[0].offset, old[len(old)-1].offset, old[0].value, old[0].epoch)
	}
	if len(foreign) > 0 {
		r.t.Errorf("%s-%d on broker %d (%s): %d records that are not this incarnation's, first at offset %d: %q",
			r.topic, p, id, role, len(foreign), foreign[0].offset, foreign[0].value)
	}
	if l.tail != 0 {
		r.t.Errorf("%s-%d on broker %d (%s): %d bytes after the last whole batch", r.topic, p, id, role, l.tail)
	}
	if !isLeader {
		return
	}
	if gap != "" {
		r.t.Errorf("%s-%d on the leader (broker %d): offsets not dense from 0: %s", r.topic, p, id, gap)
	}
	missing := 0
	for v, a := range r.gen2 {
		if a.Partition != p {
			continue
		}
		if got, ok := at[a.Offset]; !ok || got != v {
			if missing++; missing <= 3 {
				r.t.Errorf("%s-%d on the leader (broker %d): acknowledged %q at offset %d, the log has %q there", r.topic, p, id, v, a.Offset, got)
			}
		}
	}
	if missing > 3 {
		r.t.Errorf("%s-%d on the leader (broker %d): %d acknowledged records missing or moved in all", r.topic, p, id, missing)
	}
}

// firstDifference describes where l first differs from ref, "" if their
// bytes are equal.
func firstDifference(l, ref *partitionLog) string {
	if bytes.Equal(l.data, ref.data) {
		if !slices.Equal(l.segments, ref.segments) {
			return fmt.Sprintf("same bytes but segments %v, the leader's %v", l.segments, ref.segments)
		}
		return ""
	}
	for i := 0; ; i++ {
		switch {
		case i >= len(l.batches) && i >= len(ref.batches):
			return fmt.Sprintf("same batches, but %d trailing bytes here and %d on the leader", l.tail, ref.tail)
		case i >= len(l.batches):
			return fmt.Sprintf("ends after %d batches (next offset %d), the leader goes on with %s", i, nextOffset(l.batches), ref.batches[i])
		case i >= len(ref.batches):
			return fmt.Sprintf("the leader ends after %d batches (next offset %d), this replica goes on with %s", i, nextOffset(ref.batches), l.batches[i])
		case !bytes.Equal(l.batches[i].bytes, ref.batches[i].bytes):
			return fmt.Sprintf("first difference at offset %d (batch %d): this replica has %s, the leader %s",
				min(l.batches[i].base, ref.batches[i].base), i, l.batches[i], ref.batches[i])
		}
	}
}

func nextOffset(bs []diskBatch) int64 {
	if len(bs) == 0 {
		return 0
	}
	return bs[len(bs)-1].last + 1
}

// readPartitionTopicIDFile returns the topic_id line of a partition
// directory's partition.metadata (Kafka's format: "version: 0\ntopic_id:
// <base64url uuid>\n").
func readPartitionTopicIDFile(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "partition.metadata"))
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "version: 0" || !strings.HasPrefix(lines[1], "topic_id: ") {
		return "", fmt.Errorf("partition.metadata is %q, want \"version: 0\\ntopic_id: <id>\\n\"", data)
	}
	return strings.TrimPrefix(lines[1], "topic_id: "), nil
}

// topicDirs lists the partitions of topic that broker id has a directory
// for (named exactly <topic>-<partition>; Kafka's "-delete" directories
// waiting for removal do not count).
func (r *tiRun) topicDirs(id int32) ([]int32, error) {
	ents, err := os.ReadDir(r.c.broker(id).DataDir())
	if err != nil {
		return nil, err
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(r.topic) + `-([0-9]+)$`)
	var out []int32
	for _, e := range ents {
		if m := re.FindStringSubmatch(e.Name()); m != nil && e.IsDir() {
			p, _ := strconv.Atoi(m[1])
			out = append(out, int32(p))
		}
	}
	slices.Sort(out)
	return out, nil
}

// dirProblems lists, for every broker, partition directories of the
// topic it should not have (it hosts no replica of that partition of the
// new incarnation), directories it lacks, and partition.metadata files
// that do not name the new id.
func (r *tiRun) dirProblems() []string {
	var out []string
	for i := range r.c.brokers {
		id := int32(i + 1)
		have, err := r.topicDirs(id)
		if err != nil {
			out = append(out, fmt.Sprintf("broker %d: %v", id, err))
			continue
		}
		for p, replicas := range r.newAssign {
			if slices.Contains(replicas, id) && !slices.Contains(have, int32(p)) {
				out = append(out, fmt.Sprintf("broker %d is a replica of %s-%d but has no directory %s-%d", id, r.topic, p, r.topic, p))
			}
		}
		for _, p := range have {
			dir := r.c.broker(id).PartitionDir(r.topic, p)
			got, err := readPartitionTopicIDFile(dir)
			idNote := got
			if err != nil {
				idNote = err.Error()
			}
			if int(p) >= len(r.newAssign) || !slices.Contains(r.newAssign[p], id) {
				what := "a replica of the new incarnation"
				if got == r.oldID {
					what = "the deleted incarnation"
				}
				out = append(out, fmt.Sprintf("broker %d keeps directory %s-%d (partition.metadata: %s, %s) but hosts no replica of it in the new incarnation %s (assignment %v)",
					id, r.topic, p, idNote, what, r.newID, r.newAssign))
				continue
			}
			switch {
			case err != nil:
				out = append(out, fmt.Sprintf("broker %d, %s-%d: %v", id, r.topic, p, err))
			case got == r.oldID:
				out = append(out, fmt.Sprintf("broker %d, %s-%d/partition.metadata names the deleted incarnation's id %s, want the new %s", id, r.topic, p, got, r.newID))
			case got != r.newID:
				out = append(out, fmt.Sprintf("broker %d, %s-%d/partition.metadata names id %s, want the new %s (old %s)", id, r.topic, p, got, r.newID, r.oldID))
			}
		}
	}
	return out
}

// checkDirs: every partition.metadata of the topic names the new id, and
// no broker keeps a directory of a partition it does not host (allowing a
// bounded time for an asynchronous removal).
func (r *tiRun) checkDirs() {
	r.t.Helper()
	var problems []string
	_ = pollUntil(10*time.Second, 100*time.Millisecond, func() error {
		problems = r.dirProblems()
		if len(problems) > 0 {
			return errors.New(problems[0])
		}
		return nil
	})
	for _, p := range problems {
		r.t.Errorf("%s: %s", r.topic, p)
	}
}

// checkConsumer: the consumer that read the new topic from its start since
// its re-creation saw every acknowledged record and never an old one.
func (r *tiRun) checkConsumer() {
	r.t.Helper()
	c := r.consumer
	missing := func() []string {
		seen := map[string]bool{}
		for _, rec := range c.records() {
			seen[rec.Value] = true
		}
		var out []string
		for v := range r.gen2 {
			if !seen[v] {
				out = append(out, v)
			}
		}
		sort.Strings(out)
		return out
	}
	err := pollUntil(15*time.Second, 50*time.Millisecond, func() error {
		if m := missing(); len(m) > 0 {
			return fmt.Errorf("%d acknowledged records not read yet, e.g. %s", len(m), m[0])
		}
		return nil
	})
	c.stop()
	if err != nil {
		r.t.Errorf("%s: the consumer reading the new incarnation from its start: %v", r.topic, err)
	}
	var old []readRec
	for _, rec := range c.records() {
		if isOld(rec.Value) || !strings.HasPrefix(rec.Value, r.genPrefix(2)) {
			old = append(old, rec)
		}
	}
	if len(old) > 0 {
		var ex []string
		for _, rec := range old[:min(len(old), 5)] {
			ex = append(ex, fmt.Sprintf("p%d@%d %q", rec.Partition, rec.Offset, rec.Value))
		}
		r.t.Errorf("%s: the consumer of the new incarnation %s read %d records that are not its own (deleted incarnation %s), e.g. %s",
			r.topic, r.newID, len(old), r.oldID, strings.Join(ex, ", "))
	}
}
