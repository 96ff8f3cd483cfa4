package integration

// End-to-end consumer groups (issue 3): for each client library, three
// members of one group share a 6-partition topic; one leaves cleanly, one
// is SIGKILLed, the survivor takes over every partition; the broker is
// restarted and a new member resumes from the committed offsets. From the
// records every member printed (groups_members_test.go) and a poller that
// samples the group's committed offsets all along, the test checks:
//
//   - the group's assignment (DescribeGroups) covers all 6 partitions with
//     no overlap, for 3, then 2, then 1 member;
//   - every produced record was consumed, with the value produced at that
//     partition and offset (nothing skipped or mixed up);
//   - every time a member starts consuming a partition (a handover, or a
//     member jumping back in its own partition), it starts at or above the
//     offset committed before that moment: no record below a committed
//     offset is consumed again;
//   - records consumed twice come only from handovers whose previous owner
//     was killed (it processed them after its last commit); a member that
//     handed a partition over cleanly (revoke or LeaveGroup) committed
//     everything it had printed;
//   - committed offsets never move backwards, survive a clean broker restart
//     unchanged, and the member that joins after the restart starts exactly
//     at them.

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	groupsPartitions = 6
	groupsInitial    = 3000 // records produced before the members start
	groupsMore       = 600  // records produced after the takeover
	groupsAfterBoot  = 300  // records produced after the broker restart
)

// groupsBrokerOverrides: no initial rebalance delay and sessions as short
// as 1s, so the suite is fast.
var groupsBrokerOverrides = []string{
	"group.initial.rebalance.delay.ms=0",
	"group.min.session.timeout.ms=1000",
	"num.partitions=1",
}

// groupsClient is one client library under test.
type groupsClient struct {
	name string
	cmd  func(t *testing.T, spec groupMemberSpec) *exec.Cmd
	// closedLine: the member prints CLOSED after a clean close (all but
	// kcat, whose clean close we only see as exit status 0).
	closedLine bool
	// idleLeave: leave only while no records flow. kcat's -G loop drops
	// (does not print) a message rd_kafka_consumer_poll returns after
	// SIGTERM, although librdkafka already stored its offset
	// (enable.auto.offset.store), so the close commits past a record
	// nobody printed: an at-most-once window of the client, not of the
	// broker.
	idleLeave bool
	// asyncCommits: segmentio/kafka-go hands CommitMessages to a commit
	// loop per generation; a message fetched just before a rebalance is
	// committed by the next generation's loop, after the partition was
	// already resumed from the older committed offset, so even clean
	// handovers may deliver records again (always at or above the
	// committed offset, which is still checked). For the same reason its
	// stale commit can land after the new owner's and move the committed
	// offset back (a Kafka broker accepts it just the same: the
	// generation is current), so for it that check only logs.
	asyncCommits bool
}

func groupsGoMember(client string) func(t *testing.T, spec groupMemberSpec) *exec.Cmd {
	return func(t *testing.T, spec groupMemberSpec) *exec.Cmd {
		spec.Client = client
		return goMemberCmd(t, spec)
	}
}

func TestGroupsClients(t *testing.T) {
	clients := []groupsClient{
		{name: "franz-range", cmd: groupsGoMember("franz-range"), closedLine: true},
		{name: "franz-coop", cmd: groupsGoMember("franz-coop"), closedLine: true},
		{name: "sarama", cmd: groupsGoMember("sarama"), closedLine: true},
		{name: "kafka-go", cmd: groupsGoMember("kafka-go"), closedLine: true, asyncCommits: true},
		{name: "kcat", cmd: kcatMemberCmd, idleLeave: true},
		{name: "kafka-python", cmd: pythonMemberCmd, closedLine: true},
		{name: "kafkajs", cmd: nodeMemberCmd, closedLine: true},
	}
	b := StartBroker(t, groupsBrokerOverrides...)
	for _, c := range clients {
		c := c
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			runGroupScenario(t, b, c)
			t.Logf("%s: scenario took %v", c.name, time.Since(start).Round(time.Millisecond))
		})
	}
}

// groupPO names one record: partition and offset.
type groupPO struct {
	p int32
	o int64
}

// groupsProducer produces records with unique values round robin over the
// partitions and remembers where each landed.
type groupsProducer struct {
	cl     *kgo.Client
	topic  string
	prefix string

	mu       sync.Mutex // guards next and produced
	next     int
	produced map[groupPO]string
}

func newGroupsProducer(t *testing.T, b *Broker, topic, prefix string) *groupsProducer {
	return &groupsProducer{
		// Uncompressed: kafkajs and Debian's kafka-python have no snappy.
		cl: b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
			kgo.ProducerBatchCompression(kgo.NoCompression())),
		topic:    topic,
		prefix:   prefix,
		produced: make(map[groupPO]string),
	}
}

// produce produces n records and waits for their acknowledgements.
func (g *groupsProducer) produce(ctx context.Context, n int) error {
	g.mu.Lock()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		seq := g.next + i
		rs[i] = &kgo.Record{
			Topic:     g.topic,
			Partition: int32(seq % groupsPartitions),
			Value:     []byte(fmt.Sprintf("%s-%07d", g.prefix, seq)),
		}
	}
	g.next += n
	g.mu.Unlock()
	res := g.cl.ProduceSync(ctx, rs...)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("producing %s: %w", r.Record.Value, r.Err)
		}
		g.produced[groupPO{r.Record.Partition, r.Record.Offset}] = string(r.Record.Value)
	}
	return nil
}

func (g *groupsProducer) snapshot() map[groupPO]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[groupPO]string, len(g.produced))
	for k, v := range g.produced {
		out[k] = v
	}
	return out
}

// background produces 12 records every 20ms until the returned stop is
// called, so records keep flowing while members leave and die; stop
// returns the first error.
func (g *groupsProducer) background(t *testing.T) (stop func() error) {
	done := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				result <- nil
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			err := g.produce(ctx, 2*groupsPartitions)
			cancel()
			if err != nil {
				result <- err
				return
			}
		}
	}()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			close(done)
			err = <-result
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// groupCommitSample is one sample of the group's committed offsets (-1: none),
// taken before at.
type groupCommitSample struct {
	at      time.Time
	offsets map[int32]int64
}

// groupCommitPoller samples a group's committed offsets every 25ms.
type groupCommitPoller struct {
	mu   sync.Mutex // guards obs
	obs  []groupCommitSample
	stop chan struct{}
	done chan struct{}
}

func startGroupCommitPoller(t *testing.T, b *Broker, group, topic string) *groupCommitPoller {
	adm := b.Admin(t)
	cp := &groupCommitPoller{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(cp.done)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			resp, err := adm.FetchOffsets(ctx, group)
			cancel()
			at := time.Now()
			if err == nil && resp.Error() == nil {
				offs := make(map[int32]int64)
				for p := int32(0); p < groupsPartitions; p++ {
					offs[p] = -1
					if o, ok := resp.Lookup(topic, p); ok {
						offs[p] = o.At
					}
				}
				cp.mu.Lock()
				cp.obs = append(cp.obs, groupCommitSample{at: at, offsets: offs})
				cp.mu.Unlock()
			}
			select {
			case <-cp.stop:
				return
			case <-time.After(25 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(cp.Stop)
	return cp
}

// Stop ends the sampling; idempotent.
func (cp *groupCommitPoller) Stop() {
	select {
	case <-cp.stop:
	default:
		close(cp.stop)
	}
	<-cp.done
}

func (cp *groupCommitPoller) snapshot() []groupCommitSample {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]groupCommitSample(nil), cp.obs...)
}

// groupAssignment polls DescribeGroups until the group is Stable with
// exactly the members whose client ids are want, and their assignments of
// topic cover all partitions with no overlap. It returns each member's
// partitions by client id.
func groupAssignment(t *testing.T, adm *kadm.Client, group, topic string, want []string, within time.Duration) map[string][]int32 {
	t.Helper()
	var got map[string][]int32
	checkFor(t, within, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dgs, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		dg, ok := dgs[group]
		if !ok {
			return fmt.Errorf("group %s not described", group)
		}
		if dg.Err != nil {
			return fmt.Errorf("describing %s: %w", group, dg.Err)
		}
		if dg.State != "Stable" {
			return fmt.Errorf("group %s is %s", group, dg.State)
		}
		if dg.ProtocolType != "consumer" {
			return fmt.Errorf("group %s protocol type %q", group, dg.ProtocolType)
		}
		got = make(map[string][]int32)
		owner := make(map[int32]string)
		var ids []string
		for _, m := range dg.Members {
			ids = append(ids, m.ClientID)
			if _, dup := got[m.ClientID]; dup {
				return fmt.Errorf("two members with client id %s", m.ClientID)
			}
			got[m.ClientID] = nil
			ca, ok := m.Assigned.AsConsumer()
			if !ok {
				return fmt.Errorf("member %s: assignment is not a consumer assignment", m.ClientID)
			}
			for _, tp := range ca.Topics {
				if tp.Topic != topic {
					return fmt.Errorf("member %s assigned foreign topic %s", m.ClientID, tp.Topic)
				}
				for _, p := range tp.Partitions {
					if prev, taken := owner[p]; taken {
						return fmt.Errorf("partition %d assigned to both %s and %s", p, prev, m.ClientID)
					}
					owner[p] = m.ClientID
					got[m.ClientID] = append(got[m.ClientID], p)
				}
			}
		}
		sort.Strings(ids)
		w := append([]string(nil), want...)
		sort.Strings(w)
		if strings.Join(ids, ",") != strings.Join(w, ",") {
			return fmt.Errorf("group %s members %v, want %v", group, ids, w)
		}
		for p := int32(0); p < groupsPartitions; p++ {
			if _, ok := owner[p]; !ok {
				return fmt.Errorf("partition %d unassigned (assignment %v)", p, got)
			}
		}
		return nil
	})
	return got
}

// waitGroupMemberGone polls DescribeGroups until no member has client id name
// and returns how long that took.
func waitGroupMemberGone(t *testing.T, adm *kadm.Client, group, name string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	checkFor(t, within, 20*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dgs, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		for _, m := range dgs[group].Members {
			if m.ClientID == name {
				return fmt.Errorf("member %s still in group %s (%s)", name, group, dgs[group].State)
			}
		}
		return nil
	})
	return time.Since(start)
}

// waitGroupConsumedAll polls until every produced record was consumed.
func waitGroupConsumedAll(t *testing.T, prod *groupsProducer, log *groupRecordLog, within time.Duration, what string) {
	t.Helper()
	checkFor(t, within, 50*time.Millisecond, func() error {
		want := prod.snapshot()
		seen := make(map[groupPO]bool, len(want))
		for _, c := range log.snapshot() {
			seen[groupPO{c.partition, c.offset}] = true
		}
		missing := 0
		var first groupPO
		for k := range want {
			if !seen[k] {
				if missing == 0 || k.p < first.p || (k.p == first.p && k.o < first.o) {
					first = k
				}
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%s: %d of %d produced records not consumed yet (e.g. p%d@%d)", what, missing, len(want), first.p, first.o)
		}
		return nil
	})
}

// groupsFetchCommitted returns the group's committed offsets of topic (-1: none).
func groupsFetchCommitted(ctx context.Context, adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	resp, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	if err := resp.Error(); err != nil {
		return nil, err
	}
	out := make(map[int32]int64)
	for p := int32(0); p < groupsPartitions; p++ {
		out[p] = -1
		if o, ok := resp.Lookup(topic, p); ok {
			out[p] = o.At
		}
	}
	return out, nil
}

func groupsEndOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := lo.Error(); err != nil {
		return nil, err
	}
	out := make(map[int32]int64)
	lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

// waitGroupCommittedEnd polls until the group's committed offsets equal the end
// offsets of every partition and returns them.
func waitGroupCommittedEnd(t *testing.T, adm *kadm.Client, group, topic string, within time.Duration) map[int32]int64 {
	t.Helper()
	var committed map[int32]int64
	checkFor(t, within, 50*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := groupsEndOffsets(ctx, adm, topic)
		if err != nil {
			return err
		}
		if committed, err = groupsFetchCommitted(ctx, adm, group, topic); err != nil {
			return err
		}
		for p := int32(0); p < groupsPartitions; p++ {
			if committed[p] != ends[p] {
				return fmt.Errorf("committed %v, end offsets %v", committed, ends)
			}
		}
		return nil
	})
	return committed
}

func groupsCreateTopic(t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	resp, err := adm.CreateTopic(ctx, groupsPartitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
}

func runGroupScenario(t *testing.T, b *Broker, c groupsClient) {
	topic, group := "groups-"+c.name, "group-"+c.name
	adm := b.Admin(t)
	groupsCreateTopic(t, adm, topic)
	prod := newGroupsProducer(t, b, topic, c.name)
	if err := prod.produce(testContext(t, 30*time.Second), groupsInitial); err != nil {
		t.Fatal(err)
	}
	poller := startGroupCommitPoller(t, b, group, topic)
	log := &groupRecordLog{}
	spec := func(id string) groupMemberSpec {
		return groupMemberSpec{Addr: b.Addr(), Topic: topic, Group: group, ClientID: id}
	}
	members := make(map[string]*groupMember)
	for _, id := range []string{"m1", "m2", "m3"} {
		members[id] = startGroupMember(t, id, c.cmd(t, spec(id)), log)
	}
	tPhase := time.Now()
	phase := func(what string) {
		t.Logf("%-45s %v", what, time.Since(tPhase).Round(time.Millisecond))
		tPhase = time.Now()
	}

	// 2. Three members share the six partitions.
	a3 := groupAssignment(t, adm, group, topic, []string{"m1", "m2", "m3"}, 60*time.Second)
	phase(fmt.Sprintf("3 members assigned %v", a3))
	waitGroupConsumedAll(t, prod, log, 60*time.Second, "3 members")
	phase("3 members consumed the first records")

	// 3. With records flowing, m1 leaves cleanly and m2 is killed.
	var stopBackground func() error
	if !c.idleLeave {
		stopBackground = prod.background(t)
	}
	members["m1"].Leave(t, c.closedLine)
	// LeaveGroup removes a member at once; without it the coordinator
	// would wait for the session timeout since the last heartbeat, at
	// least groupsSessionTimeout-groupsHeartbeat after the exit.
	if took := waitGroupMemberGone(t, adm, group, "m1", 30*time.Second); took > groupsSessionTimeout-groupsHeartbeat-500*time.Millisecond {
		t.Errorf("m1 left the group %v after its clean exit: it did not send LeaveGroup, or the coordinator ignored it", took)
	}
	a2 := groupAssignment(t, adm, group, topic, []string{"m2", "m3"}, 60*time.Second)
	phase(fmt.Sprintf("m1 left, 2 members assigned %v", a2))
	if c.idleLeave {
		stopBackground = prod.background(t)
	}
	// Let m2 consume some of the flowing records before it dies.
	nBefore := groupsCountBy(log.snapshot(), "m2")
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if n := groupsCountBy(log.snapshot(), "m2"); n < nBefore+20 {
			return fmt.Errorf("m2 consumed %d records since the rebalance", n-nBefore)
		}
		return nil
	})
	members["m2"].Kill(t)
	tKill := time.Now()
	// 4. The survivor takes over once m2's session times out.
	a1 := groupAssignment(t, adm, group, topic, []string{"m3"}, 60*time.Second)
	phase(fmt.Sprintf("m2 killed, m3 owns %v after %v", a1["m3"], time.Since(tKill).Round(time.Millisecond)))
	if err := stopBackground(); err != nil {
		t.Fatal(err)
	}
	if err := prod.produce(testContext(t, 30*time.Second), groupsMore); err != nil {
		t.Fatal(err)
	}
	waitGroupConsumedAll(t, prod, log, 60*time.Second, "after takeover")
	waitGroupCommittedEnd(t, adm, group, topic, 30*time.Second)
	members["m3"].Leave(t, c.closedLine)
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dgs, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		if dg := dgs[group]; dg.State != "Empty" || len(dg.Members) != 0 {
			return fmt.Errorf("group %s is %s with %d members, want Empty", group, dg.State, len(dg.Members))
		}
		return nil
	})
	phase("m3 consumed everything, committed, left")

	// 5. Committed offsets survive a clean broker restart.
	ctx := testContext(t, 30*time.Second)
	before, err := groupsFetchCommitted(ctx, adm, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	b.Restart()
	checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		after, err := groupsFetchCommitted(ctx, adm, group, topic)
		if err != nil {
			return err
		}
		for p := int32(0); p < groupsPartitions; p++ {
			if after[p] != before[p] {
				return fmt.Errorf("committed offsets after restart %v, before %v", after, before)
			}
		}
		return nil
	})
	phase(fmt.Sprintf("broker restarted, committed offsets intact %v", before))
	if err := prod.produce(testContext(t, 30*time.Second), groupsAfterBoot); err != nil {
		t.Fatal(err)
	}
	members["m4"] = startGroupMember(t, "m4", c.cmd(t, spec("m4")), log)
	groupAssignment(t, adm, group, topic, []string{"m4"}, 60*time.Second)
	waitGroupConsumedAll(t, prod, log, 60*time.Second, "after restart")
	waitGroupCommittedEnd(t, adm, group, topic, 30*time.Second)
	members["m4"].Leave(t, c.closedLine)
	phase("m4 resumed after the restart and consumed the rest")
	poller.Stop()

	recs := log.snapshot()
	for p := int32(0); p < groupsPartitions; p++ {
		first := int64(-1)
		for _, r := range recs {
			if r.member == "m4" && r.partition == p {
				first = r.offset
				break
			}
		}
		if first != before[p] {
			t.Errorf("partition %d: the member joining after the restart started at offset %d, want the committed offset %d", p, first, before[p])
		}
	}
	checkGroupRun(t, prod.snapshot(), recs, poller.snapshot(), "m2", c.asyncCommits)
}

func groupsCountBy(recs []groupRecord, member string) int {
	n := 0
	for _, r := range recs {
		if r.member == member {
			n++
		}
	}
	return n
}

// groupsHandoverSlack: a commit sample counts as "before" a member's first record
// of a partition only if it was taken at least this long before the test
// read that record, so the sample cannot include that member's own commits.
const groupsHandoverSlack = 5 * time.Millisecond

// checkGroupRun checks a scenario's consumed records (see the file
// comment). killed is the member that was SIGKILLed; cleanDupsOK allows
// records at or above the committed offset to be consumed again after a
// clean handover too.
func checkGroupRun(t testing.TB, produced map[groupPO]string, recs []groupRecord, obs []groupCommitSample, killed string, cleanDupsOK bool) {
	t.Helper()
	const maxReports = 10
	reports := 0
	report := func(format string, args ...any) {
		t.Helper()
		if reports < maxReports {
			t.Errorf(format, args...)
		}
		reports++
	}
	defer func() {
		if reports > maxReports {
			t.Errorf("... and %d more", reports-maxReports)
		}
	}()

	// Every record consumed is one produced, with its value; every record
	// produced was consumed.
	seen := make(map[groupPO]int)
	for _, r := range recs {
		k := groupPO{r.partition, r.offset}
		v, ok := produced[k]
		if !ok {
			report("%s consumed p%d@%d = %q, which was never produced", r.member, r.partition, r.offset, r.value)
		} else if v != r.value {
			report("%s consumed p%d@%d = %q, produced %q", r.member, r.partition, r.offset, r.value, v)
		}
		seen[k]++
	}
	for k, v := range produced {
		if seen[k] == 0 {
			report("p%d@%d (%q) was never consumed", k.p, k.o, v)
		}
	}

	// Committed offsets never go backwards (except by a client's own
	// late commit, see asyncCommits).
	for p := int32(0); p < groupsPartitions; p++ {
		prev := int64(-1)
		for _, o := range obs {
			if o.offsets[p] < prev {
				if cleanDupsOK {
					t.Logf("partition %d: committed offset went back from %d to %d at %s (the client's late commit)", p, prev, o.offsets[p], o.at.Format("15:04:05.000"))
				} else {
					report("partition %d: committed offset went back from %d to %d at %s", p, prev, o.offsets[p], o.at.Format("15:04:05.000"))
				}
			}
			if o.offsets[p] > prev {
				prev = o.offsets[p]
			}
		}
	}
	committedBefore := func(p int32, at time.Time) int64 {
		c := int64(-1)
		for _, o := range obs {
			if !o.at.Before(at.Add(-groupsHandoverSlack)) {
				break
			}
			c = o.offsets[p]
		}
		return c
	}

	// Per partition, in the order the test read the records: a segment is
	// a run of one member's consecutive offsets; each new segment is a
	// (re)start of consumption and must begin at or above the offset
	// committed before it, and not past anything not yet consumed.
	byPart := make(map[int32][]groupRecord)
	for _, r := range recs {
		byPart[r.partition] = append(byPart[r.partition], r)
	}
	var handovers, killDups, cleanDups int
	for p := int32(0); p < groupsPartitions; p++ {
		rs := byPart[p]
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].at.Before(rs[j].at) })
		maxSeen := int64(-1)
		var prev *groupRecord
		for i := range rs {
			r := &rs[i]
			if prev == nil || r.member != prev.member || r.offset != prev.offset+1 {
				from := "(start)"
				if prev != nil {
					from = fmt.Sprintf("%s (last p%d@%d)", prev.member, p, prev.offset)
					handovers++
				}
				c := committedBefore(p, r.at)
				if c < 0 {
					c = 0 // nothing committed: auto.offset.reset=earliest
				}
				if r.offset < c {
					report("partition %d: %s started consuming at offset %d after %s, below the offset %d committed before: records [%d, %d) consumed again",
						p, r.member, r.offset, from, c, r.offset, c)
				}
				if r.offset > maxSeen+1 {
					report("partition %d: %s started consuming at offset %d after %s, but only [0, %d] was consumed before: records skipped",
						p, r.member, r.offset, from, maxSeen)
				}
				if r.offset <= maxSeen {
					dups := maxSeen - r.offset + 1
					if prev != nil && prev.member == killed && r.member != killed {
						killDups += int(dups)
					} else {
						cleanDups += int(dups)
						if !cleanDupsOK {
							report("partition %d: %s re-consumed [%d, %d] after %s, which was not killed: a clean handover must commit what was consumed",
								p, r.member, r.offset, maxSeen, from)
						}
					}
				}
			}
			if r.offset > maxSeen {
				maxSeen = r.offset
			}
			prev = r
		}
	}
	t.Logf("%d records produced, %d consumed (%d distinct); %d partition handovers; %d records consumed again after the kill, %d after clean handovers; %d commit samples",
		len(produced), len(recs), len(seen), handovers, killDups, cleanDups, len(obs))
}

// groupsRecorder is a testing.TB that records Errorf calls.
type groupsRecorder struct {
	testing.TB
	errs []string
}

func (r *groupsRecorder) Helper() {}
func (r *groupsRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *groupsRecorder) Logf(string, ...any) {}

// TestGroupsCheckCatchesViolations feeds checkGroupRun made-up runs, so a
// checker that accepts everything cannot pass the suite.
func TestGroupsCheckCatchesViolations(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	produced := make(map[groupPO]string)
	for o := int64(0); o < 10; o++ {
		produced[groupPO{0, o}] = fmt.Sprintf("v%d", o)
	}
	run := func(member string, from, to int64, startMs int) []groupRecord {
		var out []groupRecord
		for o := from; o <= to; o++ {
			out = append(out, groupRecord{at: at(startMs + int(o)), member: member, partition: 0, offset: o, value: fmt.Sprintf("v%d", o)})
		}
		return out
	}
	commits := func(samples ...[2]int64) []groupCommitSample {
		var out []groupCommitSample
		for _, s := range samples {
			offs := map[int32]int64{0: s[1]}
			for p := int32(1); p < groupsPartitions; p++ {
				offs[p] = -1
			}
			out = append(out, groupCommitSample{at: at(int(s[0])), offsets: offs})
		}
		return out
	}
	cases := []struct {
		name        string
		recs        []groupRecord
		obs         []groupCommitSample
		cleanDupsOK bool
		want        string // substring of an expected error; "" for none
	}{
		{"clean handover", append(run("x", 0, 5, 0), run("y", 6, 9, 100)...), commits([2]int64{50, 6}), false, ""},
		{"killed owner's uncommitted records again", append(run("dead", 0, 7, 0), run("y", 5, 9, 100)...), commits([2]int64{50, 5}), false, ""},
		{"restart below the committed offset", append(run("dead", 0, 7, 0), run("y", 3, 9, 100)...), commits([2]int64{50, 5}), false, "below the offset 5 committed"},
		{"skipped records", append(run("x", 0, 4, 0), run("y", 7, 9, 100)...), commits([2]int64{50, 5}), false, "never consumed"},
		{"clean owner's records again", append(run("x", 0, 7, 0), run("y", 5, 9, 100)...), commits([2]int64{50, 5}), false, "which was not killed"},
		{"clean owner's records again, async commits", append(run("x", 0, 7, 0), run("y", 5, 9, 100)...), commits([2]int64{50, 5}), true, ""},
		{"committed offset going back", append(run("x", 0, 5, 0), run("y", 6, 9, 100)...), commits([2]int64{50, 6}, [2]int64{60, 2}), false, "went back"},
		{"wrong value", append(run("x", 0, 8, 0), groupRecord{at: at(9), member: "x", partition: 0, offset: 9, value: "other"}), nil, false, "produced \"v9\""},
	}
	for _, c := range cases {
		r := &groupsRecorder{TB: t}
		checkGroupRun(r, produced, c.recs, c.obs, "dead", c.cleanDupsOK)
		all := strings.Join(r.errs, "\n")
		switch {
		case c.want == "" && len(r.errs) > 0:
			t.Errorf("%s: unexpected errors:\n%s", c.name, all)
		case c.want != "" && !strings.Contains(all, c.want):
			t.Errorf("%s: want an error containing %q, got:\n%s", c.name, c.want, all)
		}
	}
}
