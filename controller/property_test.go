package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/twmb/franz-go/pkg/kerr"
)

// propertyRun is one seeded sequence of cluster events against the
// controller core over the local store.
type propertyRun struct {
	t       *testing.T
	rng     *rand.Rand
	store   *localStore
	c       *Cluster
	epoch   int32 // the controller's epoch
	live    []int32
	unclean map[string]bool
	// last is the partition states at the previous check, by topic id.
	last map[[16]byte][]PartitionState
}

const propertyBrokers = 4

func newPropertyRun(t *testing.T, seed uint64) *propertyRun {
	st := &localState{Metadata: &Metadata{ClusterID: "property", ControllerID: -1, Topics: map[string]*Topic{}}}
	r := &propertyRun{t: t, rng: rand.New(rand.NewPCG(seed, 7)), store: &localStore{state: st}, epoch: 1,
		unclean: map[string]bool{}, last: map[[16]byte][]PartitionState{}}
	for id := int32(1); id <= propertyBrokers; id++ {
		r.live = append(r.live, id)
	}
	r.store.brokers = r.registrations()
	r.c = r.startController()
	for _, name := range []string{"a", "b"} {
		if _, err := r.c.CreateTopic(CreateTopicRequest{Name: name, NumPartitions: 3, ReplicationFactor: 3}, false); err != nil {
			t.Fatalf("seed %d: create %s: %v", seed, name, err)
		}
	}
	return r
}

func (r *propertyRun) registrations() []zk.BrokerInfo {
	var out []zk.BrokerInfo
	for _, id := range r.live {
		out = append(out, zkBroker(scenarioBroker(id)))
	}
	return out
}

// startController starts a controller at r.epoch on the store's current
// epoch version; its broker watch is not used: steps call
// onBrokersChanged themselves, so every step ends in a settled state.
func (r *propertyRun) startController() *Cluster {
	c := &Cluster{cfg: ClusterConfig{Self: scenarioBroker(1)}, logger: quietLogger(), store: r.store, seenEpoch: -1,
		stop: make(chan struct{}), done: make(chan struct{})}
	c.view.Store(&Metadata{ClusterID: "property", ControllerID: -1, Topics: map[string]*Topic{}})
	r.store.mu.Lock()
	version := r.store.epochZkVersion
	r.store.mu.Unlock()
	a, err := startActive(context.Background(), context.Background(), c, r.epoch, version)
	if err != nil {
		r.t.Fatalf("controller at epoch %d: %v", r.epoch, err)
	}
	c.active = a
	r.t.Cleanup(c.Close)
	return c
}

func (r *propertyRun) brokersChanged() {
	r.store.setLive(r.registrations())
	r.c.active.onBrokersChanged()
}

// step makes one random event happen and says what it was.
func (r *propertyRun) step() string {
	switch op := r.rng.IntN(10); {
	case op < 2 && len(r.live) > 1: // a broker dies
		id := r.live[r.rng.IntN(len(r.live))]
		r.live = slices.DeleteFunc(r.live, func(b int32) bool { return b == id })
		r.brokersChanged()
		return fmt.Sprintf("broker %d dies", id)
	case op < 4: // a broker returns (or its session expires and it re-registers)
		id := int32(1 + r.rng.IntN(propertyBrokers))
		if !slices.Contains(r.live, id) {
			r.live = append(r.live, id)
			slices.Sort(r.live)
		}
		r.brokersChanged()
		return fmt.Sprintf("broker %d (re)registers", id)
	case op < 7: // a leader changes the ISR, sometimes at stale epochs
		name := []string{"a", "b"}[r.rng.IntN(2)]
		t := r.c.Metadata().Topics[name]
		p := r.rng.IntN(len(t.Partitions))
		ps := t.Partitions[p]
		if ps.Leader < 0 {
			return "no leader to change an ISR"
		}
		isr := []int32{ps.Leader}
		for _, id := range ps.Replicas {
			if id != ps.Leader && r.rng.IntN(2) == 0 {
				isr = append(isr, id)
			}
		}
		le, pe := ps.LeaderEpoch, ps.PartitionEpoch
		if r.rng.IntN(4) == 0 {
			le--
		}
		if r.rng.IntN(4) == 0 {
			pe--
		}
		_, err := r.c.AlterISR(ps.Leader, name, t.ID, int32(p), le, pe, isr)
		stale := le != ps.LeaderEpoch || pe != ps.PartitionEpoch
		if stale && err == nil {
			r.t.Fatalf("an ISR change at leader epoch %d / partition epoch %d was applied; current %d / %d", le, pe, ps.LeaderEpoch, ps.PartitionEpoch)
		}
		return fmt.Sprintf("%s-%d ISR -> %v at %d/%d: %v", name, p, isr, le, pe, err)
	case op < 8: // unclean election turned on or off for a topic
		name := []string{"a", "b"}[r.rng.IntN(2)]
		r.unclean[name] = !r.unclean[name]
		err := r.c.UpdateTopicConfigs(name, func(map[string]string) (map[string]string, error) {
			return map[string]string{"unclean.leader.election.enable": fmt.Sprint(r.unclean[name])}, nil
		}, false)
		if err != nil {
			r.t.Fatalf("config: %v", err)
		}
		return fmt.Sprintf("%s unclean=%v", name, r.unclean[name])
	default: // another controller takes over; the deposed one is fenced
		before := r.snapshot()
		old := r.c
		r.store.electController()
		_, err := old.CreateTopic(CreateTopicRequest{Name: "zombie", NumPartitions: 1, ReplicationFactor: 1}, false)
		if !errors.Is(err, kerr.NotController) {
			r.t.Fatalf("a deposed controller's write: %v, want NOT_CONTROLLER", err)
		}
		if r.snapshot() != before {
			r.t.Fatal("a deposed controller's write was applied")
		}
		old.Close()
		r.epoch++
		r.c = r.startController()
		return fmt.Sprintf("controller epoch %d takes over", r.epoch)
	}
}

func (r *propertyRun) snapshot() string {
	r.store.mu.Lock()
	defer r.store.mu.Unlock()
	return fmt.Sprintf("%v", r.store.state.Metadata.Topics)
}

// check verifies the invariants on the stored state and the view.
func (r *propertyRun) check(history []string) {
	r.store.mu.Lock()
	stored := r.store.state.Metadata.clone()
	r.store.mu.Unlock()
	fail := func(format string, args ...any) {
		r.t.Helper()
		r.t.Fatalf(format+"\nafter:\n%v", append(args, history)...)
	}
	view := r.c.Metadata()
	for name, t := range stored.Topics {
		prev := r.last[t.ID]
		for p, ps := range t.Partitions {
			if len(ps.ISR) == 0 {
				fail("%s-%d: empty ISR", name, p)
			}
			if ps.Leader >= 0 && !slices.Contains(ps.ISR, ps.Leader) {
				fail("%s-%d: leader %d outside the ISR %v", name, p, ps.Leader, ps.ISR)
			}
			if ps.Leader >= 0 && !slices.Contains(r.live, ps.Leader) {
				fail("%s-%d: leader %d is not live (%v)", name, p, ps.Leader, r.live)
			}
			if prev != nil {
				old := prev[p]
				if ps.LeaderEpoch < old.LeaderEpoch || ps.PartitionEpoch < old.PartitionEpoch {
					fail("%s-%d: epochs went back: %+v -> %+v", name, p, old, ps)
				}
				if ps.Leader >= 0 && ps.Leader != old.Leader && !slices.Contains(old.ISR, ps.Leader) && !r.unclean[name] {
					fail("%s-%d: %d leads, not in the ISR %v, unclean election off", name, p, ps.Leader, old.ISR)
				}
			}
			if vt := view.Topics[name]; vt == nil || vt.Partitions[p].Leader != ps.Leader || vt.Partitions[p].LeaderEpoch != ps.LeaderEpoch || !slices.Equal(vt.Partitions[p].ISR, ps.ISR) {
				fail("%s-%d: the controller's view differs from what it stored: %+v", name, p, ps)
			}
		}
		r.last[t.ID] = slices.Clone(t.Partitions)
	}
}

// TestControllerProperties runs thousands of seeded event sequences (broker
// deaths and returns, ISR changes at current and stale epochs, unclean
// election toggles, controller changes with the deposed controller trying
// to write) and checks after every step: leader and partition epochs never
// go back, the ISR is never empty, a leader is live and in the ISR, a leader
// from outside the ISR only with unclean election on, a fenced write is
// never applied, and the view is what was stored.
func TestControllerProperties(t *testing.T) {
	seeds := uint64(2000)
	if testing.Short() {
		seeds = 200
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		r := newPropertyRun(t, seed)
		var history []string
		r.check(history)
		for range 25 {
			history = append(history, r.step())
			r.check(history)
		}
		r.c.Close()
	}
}
