package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
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

// tiRoles returns the controller and the two other brokers (sorted).
func tiRoles(t *testing.T, c *testCluster) (ctrl, a, b int32) {
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
	c     *testCluster
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
func newTIRun(t *testing.T, c *testCluster, topic string, i int) *tiRun {
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
	data, _, err := r.c.zkGet("/brokers/topics/" + r.topic)
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
func (c *testCluster) metadataTopicID(id int32, topic string) (string, int, error) {
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

// recreatePaused deletes the topic and creates it again with assign
// (the new incarnation written to) while broker id is paused, then waits
// for the new incarnation's writes and checks everything (finish).
func (r *tiRun) recreatePaused(id int32, assign [][]int32) {
	r.t.Helper()
	r.pauseAcross(id, func() {
		r.deleteOld()
		r.createNew(assign, id)
		r.startGen2(id)
	})
	r.waitGen2(60 * time.Second)
	r.finish()
}

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
func (c *testCluster) registrationZxid(id int32) int64 {
	_, st, err := c.zkGet("/brokers/ids/" + strconv.Itoa(int(id)))
	if err != nil {
		return -1
	}
	return st.Czxid
}

// waitUnregistered waits until broker id's registration is gone (its
// session ended), so that it can start again under the same id.
func (r *tiRun) waitUnregistered(id int32) {
	r.t.Helper()
	r.c.waitUnregistered(id)
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
