package verify

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Fault kinds.
const (
	KillLeader        = "kill-leader"         // kill -9 a partition leader, restart it later
	KillFollower      = "kill-follower"       // kill -9 a follower
	KillController    = "kill-controller"     // kill -9 the controller
	PauseShort        = "pause-short"         // SIGSTOP a broker for less than replica.lag.time.max.ms
	PauseLag          = "pause-lag"           // SIGSTOP a leader longer than the lag time, shorter than the session
	PauseLong         = "pause-long"          // SIGSTOP a leader longer than the ZooKeeper session
	PartitionBrokers  = "partition-brokers"   // cut two brokers from each other (both ways)
	IsolateLeader     = "isolate-leader"      // cut a leader from every other broker (both ways); clients still reach it
	IsolateLeaderKill = "isolate-leader-kill" // followers cannot reach the leader (the leader can still reach the controller), then kill -9 the leader
	PartitionZKShort  = "partition-zk-short"  // cut a broker from ZooKeeper for less than the session
	PartitionZKLong   = "partition-zk-long"   // cut a leader from ZooKeeper for longer than the session
	RestartZK         = "restart-zk"          // kill -9 ZooKeeper, start it again
	PartitionClients  = "partition-clients"   // cut a leader from every client
	DiskFull          = "disk-full"           // fill a leader's log dir (its tmpfs): it must stop; free the space and restart it
	Reassign          = "reassign"            // reassign a partition without its leader (RF 3 -> 2), then with it again (a full copy)
	// The re-created topic (recreate.go) is deleted and created again
	// while a broker other than the controller is cut off from the other
	// brokers (RecreateTopic) or SIGSTOPped for less than the session
	// (RecreateTopicPaused).
	RecreateTopic       = "recreate-topic"
	RecreateTopicPaused = "recreate-topic-paused"
)

// AllFaults is every fault kind, in a fixed order.
var AllFaults = []string{
	KillLeader, KillFollower, KillController, PauseShort, PauseLag, PauseLong, PartitionBrokers,
	IsolateLeader, IsolateLeaderKill, PartitionZKShort, PartitionZKLong, RestartZK, PartitionClients,
	DiskFull, RecreateTopic, RecreateTopicPaused, Reassign,
}

// Fault is one planned fault.
type Fault struct {
	Kind      string
	Partition int32         // whose leader/follower is targeted
	Duration  time.Duration // how long it lasts before healing
	Gap       time.Duration // quiet time before it starts
}

// Timing is what fault durations are derived from.
type Timing struct {
	Lag, Session time.Duration
}

func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return (lo + time.Duration(r.Int64N(int64(hi-lo)+1))).Round(time.Millisecond)
}

func (t Timing) plan(r *rand.Rand, kind string, partitions int32) Fault {
	f := Fault{Kind: kind, Partition: r.Int32N(partitions), Gap: between(r, time.Second, 2500*time.Millisecond)}
	switch kind {
	case KillLeader, KillFollower, KillController, DiskFull, Reassign:
		f.Duration = between(r, 2*time.Second, 4*time.Second)
	case PauseShort:
		f.Duration = between(r, t.Lag/3, t.Lag*3/4)
	case PauseLag:
		f.Duration = between(r, t.Lag+t.Lag/3, t.Session-t.Session/10)
	case PauseLong:
		f.Duration = between(r, t.Session+t.Session/2, 2*t.Session)
	case PartitionBrokers, IsolateLeader, PartitionClients:
		f.Duration = between(r, 3*time.Second, 5*time.Second)
	case IsolateLeaderKill:
		f.Duration = between(r, 3*t.Lag, 4*t.Lag)
	case PartitionZKShort:
		f.Duration = between(r, t.Session/3, t.Session/2)
	case PartitionZKLong:
		f.Duration = between(r, t.Session+t.Session/2, 2*t.Session)
	case RestartZK:
		f.Duration = between(r, time.Second, 4*time.Second)
	case RecreateTopic:
		// The views sent meanwhile are lost whatever the length.
		f.Duration = between(r, 2*time.Second, 3*time.Second)
	case RecreateTopicPaused:
		f.Duration = between(r, t.Session/2, t.Session*4/5)
	}
	return f
}

// ParseFaultKinds reads a comma-separated list of fault kinds (kverify
// --faults); empty means every kind (AllFaults). An unknown kind is an
// error naming the known ones.
func ParseFaultKinds(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return slices.Clone(AllFaults), nil
	}
	var kinds []string
	for _, k := range strings.Split(list, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(AllFaults, k) {
			return nil, fmt.Errorf("unknown fault kind %q (known: %s)", k, strings.Join(AllFaults, ", "))
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds, nil
}

// ShortSchedule runs each of kinds (nil: every fault kind) once, in an
// order and with durations drawn from seed.
func ShortSchedule(seed uint64, t Timing, partitions int32, kinds []string) []Fault {
	r := rand.New(rand.NewPCG(seed, 0x6b766572))
	if kinds == nil {
		kinds = AllFaults
	}
	kinds = slices.Clone(kinds)
	r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	var out []Fault
	for _, k := range kinds {
		out = append(out, t.plan(r, k, partitions))
	}
	return out
}

// LongSchedule draws faults of kinds (nil: every fault kind) at random
// until their total reaches d.
func LongSchedule(seed uint64, t Timing, partitions int32, d time.Duration, kinds []string) []Fault {
	r := rand.New(rand.NewPCG(seed, 0x6b766572))
	if kinds == nil {
		kinds = AllFaults
	}
	var out []Fault
	var total time.Duration
	for total < d {
		f := t.plan(r, kinds[r.IntN(len(kinds))], partitions)
		total += f.Gap + f.Duration + 2*time.Second // restarts and healing take time too
		out = append(out, f)
	}
	return out
}

// UnsafeSchedule is the one fault that loses data when
// min.insync.replicas=1 and unclean election is on.
func UnsafeSchedule(t Timing) []Fault {
	return []Fault{{Kind: IsolateLeaderKill, Partition: 0, Duration: 4 * t.Lag, Gap: 5 * time.Second}}
}

// Nemesis applies faults to a cluster and records them.
type Nemesis struct {
	C     *Cluster
	ZK    *ZKView
	Rec   *Recorder
	Topic string
	// Recreate is the topic the RecreateTopic fault deletes and creates
	// again (nil: that fault is skipped).
	Recreate *Incarnations
	Rand     *rand.Rand
	Logf     func(string, ...any)

	// randMu guards Rand: faults of overlapping streams draw at once.
	randMu sync.Mutex
	// claimMu guards claimed and exclusiveWaiting. With overlapping
	// streams (RunStreams) a fault claims the brokers it acts on and
	// is skipped if another fault holds one; a fault that acts on the
	// whole cluster (exclusive) waits until it can claim every broker,
	// and no new fault claims one meanwhile.
	claimMu          sync.Mutex
	claimed          map[*Broker]bool
	exclusiveWaiting bool
}

// intN draws from Rand.
func (n *Nemesis) intN(k int) int {
	n.randMu.Lock()
	defer n.randMu.Unlock()
	return n.Rand.IntN(k)
}

// claim marks bs as under fault f and reports whether it could: not when
// another fault holds one of them (the fault is then recorded as skipped)
// or a cluster-wide fault is waiting for its turn.
func (n *Nemesis) claim(f Fault, bs ...*Broker) bool {
	n.claimMu.Lock()
	defer n.claimMu.Unlock()
	busy := n.exclusiveWaiting
	for _, b := range bs {
		busy = busy || n.claimed[b]
	}
	if busy {
		var ids []string
		for _, b := range bs {
			ids = append(ids, fmt.Sprintf("b%d", b.ID))
		}
		n.record(f.Kind, "skip", fmt.Sprintf("%s under another fault", strings.Join(ids, ", ")))
		return false
	}
	if n.claimed == nil {
		n.claimed = map[*Broker]bool{}
	}
	for _, b := range bs {
		n.claimed[b] = true
	}
	return true
}

// claimAll waits (bounded by ctx) until no fault holds a broker and claims
// them all, for a fault that acts on the whole cluster.
func (n *Nemesis) claimAll(ctx context.Context) bool {
	n.claimMu.Lock()
	n.exclusiveWaiting = true
	n.claimMu.Unlock()
	defer func() {
		n.claimMu.Lock()
		n.exclusiveWaiting = false
		n.claimMu.Unlock()
	}()
	for {
		n.claimMu.Lock()
		if len(n.claimed) == 0 {
			n.claimed = map[*Broker]bool{}
			for _, b := range n.C.Brokers {
				n.claimed[b] = true
			}
			n.claimMu.Unlock()
			return true
		}
		n.claimMu.Unlock()
		sleepCtx(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return false
		}
	}
}

// release ends the claims of bs (every broker when bs is empty).
func (n *Nemesis) release(bs ...*Broker) {
	n.claimMu.Lock()
	defer n.claimMu.Unlock()
	if len(bs) == 0 {
		bs = n.C.Brokers
	}
	for _, b := range bs {
		delete(n.claimed, b)
	}
}

func (n *Nemesis) logf(format string, args ...any) {
	if n.Logf != nil {
		n.Logf(format, args...)
	}
}

func (n *Nemesis) record(kind, phase, detail string) {
	n.Rec.Add(Event{Kind: KindFault, Fault: kind, Phase: phase, Detail: detail})
	n.logf("fault %-20s %-5s %s", kind, phase, detail)
}

// leader is the current leader of p, or a random live broker if it has
// none.
func (n *Nemesis) leader(p int32) *Broker {
	if s, err := n.ZK.State(n.Topic, p); err == nil && s.Leader > 0 && n.C.Broker(s.Leader).Alive() {
		return n.C.Broker(s.Leader)
	}
	return n.random(nil)
}

func (n *Nemesis) random(except *Broker) *Broker {
	var live []*Broker
	for _, b := range n.C.Brokers {
		if b != except && b.Alive() {
			live = append(live, b)
		}
	}
	if len(live) == 0 {
		return n.C.Brokers[0]
	}
	return live[n.intN(len(live))]
}

// cutFromBrokers partitions b from every other broker, both ways.
func (n *Nemesis) cutFromBrokers(b *Broker) {
	b.Proxy.Cut(n.others(b)...)
	for _, o := range n.C.Brokers {
		if o != b {
			o.Proxy.Cut(fmt.Sprintf("b%d", b.ID))
		}
	}
}

// healFromBrokers undoes cutFromBrokers.
func (n *Nemesis) healFromBrokers(b *Broker) {
	b.Proxy.HealFrom(n.others(b)...)
	for _, o := range n.C.Brokers {
		if o != b {
			o.Proxy.HealFrom(fmt.Sprintf("b%d", b.ID))
		}
	}
}

func (n *Nemesis) others(b *Broker) []string {
	var out []string
	for _, o := range n.C.Brokers {
		if o != b {
			out = append(out, fmt.Sprintf("b%d", o.ID))
		}
	}
	return out
}

// Run applies the faults in order, each healed before the next.
func (n *Nemesis) Run(ctx context.Context, faults []Fault) {
	n.RunStreams(ctx, faults, 1)
}

// RunStreams applies the faults in order from streams goroutines at once,
// so up to streams faults overlap (kverify long --overlap): each takes
// the next fault, waits its gap and applies it. A fault whose brokers
// another holds is skipped; one that acts on the whole cluster (a
// ZooKeeper restart, a topic re-creation, a reassignment) waits for the
// others to end and runs alone.
func (n *Nemesis) RunStreams(ctx context.Context, faults []Fault, streams int) {
	next := make(chan Fault)
	go func() {
		defer close(next)
		for _, f := range faults {
			select {
			case next <- f:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range max(streams, 1) {
		wg.Go(func() {
			for f := range next {
				sleepCtx(ctx, f.Gap)
				if ctx.Err() != nil {
					continue // drain: the feeder stops at ctx's end
				}
				n.apply(ctx, f)
			}
		})
	}
	wg.Wait()
}

// restart starts a killed broker again. A broker refuses to start while
// its previous ZooKeeper session still holds /brokers/ids/<id> (as Kafka
// does), so it first waits for that session to expire; it then waits until
// the new process has registered, retrying if it exited.
func (n *Nemesis) restart(ctx context.Context, b *Broker) {
	registered := func() bool {
		ids, err := n.ZK.Registered()
		return err == nil && slices.Contains(ids, b.ID)
	}
	for attempt := 0; attempt < 5 && ctx.Err() == nil; attempt++ {
		_ = waitFor(ctx, 3*n.C.cfg.SessionTimeout, func() error {
			if registered() {
				return fmt.Errorf("b%d still registered", b.ID)
			}
			return nil
		})
		if err := b.Restart(ctx); err != nil {
			n.logf("restart b%d: %v", b.ID, err)
			b.Kill()
			continue
		}
		err := waitFor(ctx, 10*time.Second, func() error {
			if !b.Alive() {
				return fmt.Errorf("b%d exited after starting; see %s", b.ID, b.LogPath)
			}
			if !registered() {
				return fmt.Errorf("b%d not registered", b.ID)
			}
			return nil
		})
		if err == nil {
			return
		}
		n.logf("restart b%d: %v", b.ID, err)
		b.Kill()
	}
	n.Rec.Add(Event{Kind: KindPhase, Detail: fmt.Sprintf("warning: b%d could not be restarted", b.ID)})
}

func (n *Nemesis) apply(ctx context.Context, f Fault) {
	switch f.Kind {
	case KillLeader, KillFollower, KillController:
		var b *Broker
		switch f.Kind {
		case KillLeader:
			b = n.leader(f.Partition)
		case KillFollower:
			b = n.random(n.leader(f.Partition))
		default:
			b = n.random(nil)
			if id, err := n.ZK.Controller(); err == nil && id > 0 {
				b = n.C.Broker(id)
			}
		}
		if !n.claim(f, b) {
			return
		}
		defer n.release(b)
		n.record(f.Kind, "start", fmt.Sprintf("kill -9 b%d (partition %d) for %v", b.ID, f.Partition, f.Duration))
		b.Kill()
		sleepCtx(ctx, f.Duration)
		n.restart(ctx, b)
		n.record(f.Kind, "end", fmt.Sprintf("restarted b%d", b.ID))
	case PauseShort, PauseLag, PauseLong:
		b := n.leader(f.Partition)
		if f.Kind == PauseShort {
			b = n.random(nil)
		}
		if !n.claim(f, b) {
			return
		}
		defer n.release(b)
		n.record(f.Kind, "start", fmt.Sprintf("SIGSTOP b%d for %v", b.ID, f.Duration))
		b.Pause()
		sleepCtx(ctx, f.Duration)
		b.Resume()
		n.record(f.Kind, "end", fmt.Sprintf("SIGCONT b%d", b.ID))
	case PartitionBrokers:
		a := n.random(nil)
		b := n.random(a)
		if !n.claim(f, a, b) {
			return
		}
		defer n.release(a, b)
		n.record(f.Kind, "start", fmt.Sprintf("cut b%d <-> b%d for %v", a.ID, b.ID, f.Duration))
		a.Proxy.Cut(fmt.Sprintf("b%d", b.ID))
		b.Proxy.Cut(fmt.Sprintf("b%d", a.ID))
		sleepCtx(ctx, f.Duration)
		a.Proxy.HealFrom(fmt.Sprintf("b%d", b.ID))
		b.Proxy.HealFrom(fmt.Sprintf("b%d", a.ID))
		n.record(f.Kind, "end", "healed")
	case IsolateLeader:
		l := n.leader(f.Partition)
		if !n.claim(f, l) {
			return
		}
		defer n.release(l)
		n.record(f.Kind, "start", fmt.Sprintf("cut b%d (leader of %d) <-> all brokers for %v", l.ID, f.Partition, f.Duration))
		n.cutFromBrokers(l)
		sleepCtx(ctx, f.Duration)
		n.healFromBrokers(l)
		n.record(f.Kind, "end", "healed")
	case IsolateLeaderKill:
		l := n.leader(f.Partition)
		if !n.claim(f, l) {
			return
		}
		defer n.release(l)
		n.record(f.Kind, "start", fmt.Sprintf("brokers cannot reach b%d (leader of %d) for %v, then kill -9 b%d", l.ID, f.Partition, f.Duration, l.ID))
		l.Proxy.Cut(n.others(l)...)
		sleepCtx(ctx, f.Duration)
		if s, err := n.ZK.State(n.Topic, f.Partition); err == nil {
			n.record(f.Kind, "kill", fmt.Sprintf("kill -9 b%d; partition %d state before: leader %d epoch %d ISR %v", l.ID, f.Partition, s.Leader, s.LeaderEpoch, s.ISR))
		}
		l.Kill()
		l.Proxy.HealFrom(n.others(l)...)
		// Long enough for the session to expire and a new leader (unclean,
		// if allowed) to take over.
		sleepCtx(ctx, n.C.cfg.SessionTimeout*2+time.Second)
		if s, err := n.ZK.State(n.Topic, f.Partition); err == nil {
			n.record(f.Kind, "restart", fmt.Sprintf("partition %d state with b%d dead: leader %d epoch %d ISR %v", f.Partition, l.ID, s.Leader, s.LeaderEpoch, s.ISR))
		}
		n.restart(ctx, l)
		n.record(f.Kind, "end", fmt.Sprintf("restarted b%d", l.ID))
	case PartitionZKShort, PartitionZKLong:
		b := n.leader(f.Partition)
		if f.Kind == PartitionZKShort {
			b = n.random(nil)
		}
		if !n.claim(f, b) {
			return
		}
		defer n.release(b)
		n.record(f.Kind, "start", fmt.Sprintf("cut b%d <-> ZooKeeper for %v", b.ID, f.Duration))
		b.ZKProxy.Cut("*")
		sleepCtx(ctx, f.Duration)
		b.ZKProxy.Heal()
		n.record(f.Kind, "end", "healed")
	case RestartZK:
		if !n.claimAll(ctx) {
			return
		}
		defer n.release()
		n.record(f.Kind, "start", fmt.Sprintf("kill -9 ZooKeeper, down %v", f.Duration))
		if err := n.C.ZK.Restart(f.Duration); err != nil {
			n.logf("restart ZooKeeper: %v", err)
		}
		n.record(f.Kind, "end", "ZooKeeper serving")
	case PartitionClients:
		b := n.leader(f.Partition)
		if !n.claim(f, b) {
			return
		}
		defer n.release(b)
		n.record(f.Kind, "start", fmt.Sprintf("cut clients -> b%d for %v", b.ID, f.Duration))
		b.Proxy.Cut("client")
		sleepCtx(ctx, f.Duration)
		b.Proxy.HealFrom("client")
		n.record(f.Kind, "end", "healed")
	case DiskFull:
		n.diskFull(ctx, f)
	case RecreateTopic, RecreateTopicPaused:
		if !n.claimAll(ctx) {
			return
		}
		defer n.release()
		n.recreate(ctx, f)
	case Reassign:
		if !n.claimAll(ctx) {
			return
		}
		defer n.release()
		n.reassign(ctx, f)
	}
}

// diskFullStop is how long a broker whose log dir is full may keep
// running: the workload writes to every partition all the time, so its
// next append as leader or follower comes within moments.
const diskFullStop = 20 * time.Second

// diskFull fills the log dir of partition f.Partition's leader. The
// broker's next log write fails; it must answer KAFKA_STORAGE_ERROR and
// stop by itself with exit status 1 and an ERROR line naming ENOSPC, as
// Kafka halts when its log dirs fail. It stays down for f.Duration, then
// the filler is deleted and the broker restarted on its logs.
func (n *Nemesis) diskFull(ctx context.Context, f Fault) {
	b := n.leader(f.Partition)
	if !n.claim(f, b) {
		return
	}
	defer n.release(b)
	if !b.Tmpfs {
		n.record(f.Kind, "skip", fmt.Sprintf("b%d's log dir is not a tmpfs of its own: fault disabled (%v)", b.ID, n.C.TmpfsErr))
		return
	}
	logFrom := fileSize(b.LogPath)
	free, _ := b.FreeBytes()
	size, err := b.FillDisk()
	filled := time.Now()
	if err != nil {
		n.logf("fill b%d's log dir: %v", b.ID, err)
		_ = b.FreeDisk()
		n.record(f.Kind, "skip", fmt.Sprintf("could not fill b%d's log dir: %v", b.ID, err))
		return
	}
	n.record(f.Kind, "start", fmt.Sprintf("fill b%d's log dir (leader of %d; %d MiB free) with a %d MiB file", b.ID, f.Partition, free>>20, size>>20))
	err = waitFor(ctx, diskFullStop, func() error {
		if b.Alive() {
			return fmt.Errorf("b%d still running", b.ID)
		}
		return nil
	})
	switch {
	case ctx.Err() != nil:
	case err != nil:
		n.warn(fmt.Sprintf("b%d still running %v after its log dir filled (no log write failed?); killed; see %s", b.ID, diskFullStop, b.LogPath))
	default:
		status := b.ExitStatus()
		line := logLine(b.LogPath, logFrom, "level=ERROR", "log dir failed", "no space left on device")
		detail := fmt.Sprintf("b%d stopped %v after the fill: %s", b.ID, time.Since(filled).Round(time.Millisecond), status)
		if line != "" {
			detail += ", logged the ENOSPC ERROR"
		}
		n.record(f.Kind, "stop", detail)
		if status != "exit status 1" || line == "" {
			n.warn(fmt.Sprintf("b%d ended with %q after its log dir filled, ERROR line naming ENOSPC logged: %v; want exit status 1 and that line; see %s", b.ID, status, line != "", b.LogPath))
		}
	}
	b.Kill() // if it still runs; forgets its pid either way
	sleepCtx(ctx, f.Duration)
	if err := b.FreeDisk(); err != nil {
		n.warn(fmt.Sprintf("freeing b%d's log dir: %v", b.ID, err))
	}
	n.restart(ctx, b)
	n.record(f.Kind, "end", fmt.Sprintf("freed b%d's log dir and restarted it", b.ID))
}

// warn records a warning, which the report lists.
func (n *Nemesis) warn(msg string) {
	n.Rec.Add(Event{Kind: KindPhase, Detail: "warning: " + msg})
	n.logf("warning: %s", msg)
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logLine returns the first line of the file from offset from that holds
// every one of subs, or "".
func logLine(path string, from int64, subs ...string) string {
	data, err := os.ReadFile(path)
	if err != nil || from > int64(len(data)) {
		return ""
	}
next:
	for _, l := range strings.Split(string(data[from:]), "\n") {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue next
			}
		}
		return l
	}
	return ""
}

// HealEverything undoes whatever is still broken: cuts, paused and dead
// brokers, a dead ZooKeeper.
func (n *Nemesis) HealEverything(ctx context.Context) {
	n.C.HealAll()
	for _, b := range n.C.Brokers {
		if err := b.FreeDisk(); err != nil {
			n.warn(fmt.Sprintf("freeing b%d's log dir: %v", b.ID, err))
		}
	}
	if !n.C.ZK.Alive() {
		if err := n.C.ZK.start(); err != nil {
			n.logf("start ZooKeeper: %v", err)
		}
	}
	for _, b := range n.C.Brokers {
		if b.Alive() {
			b.Resume()
		} else {
			n.Rec.Add(Event{Kind: KindPhase, Detail: fmt.Sprintf("warning: b%d was found dead when healing (crashed?); see %s", b.ID, b.LogPath)})
			n.restart(ctx, b)
		}
	}
}
