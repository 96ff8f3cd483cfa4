package verify

// The topic delete-and-recreate fault.
//
// The main topic's records live for the whole run, and the checker's rules
// for it (lost-write, inconsistent-offsets, unseen-after-healing, ...) rely
// on that. The fault therefore deletes and creates again a topic of its own,
// RecreateTopicName, which raw producers (one per partition) write to and
// one consumer reads. Every value names the incarnation its producer wrote
// it to: "i<k>-<proc>-<seq>". Incarnations makes that label true: a producer
// holds it for a whole send (leader lookup, request, answer) and the
// nemesis holds it exclusively from before the deletion until the new
// incarnation exists, so no send straddles a re-creation. The consumer
// starts a new client whenever the topic was created again, and records the
// incarnation that existed when it did (an assign event); so does the final
// read. check_recreate.go holds the rules.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RecreateTopicName is the topic the recreate fault deletes and creates
// again; RecreatePartitions its partitions (RF 3).
const (
	RecreateTopicName  = "kverify-recreate"
	RecreatePartitions = 2
)

// Incarnations is the re-created topic's current incarnation (1 when
// created by setup), shared by the producers, the consumer and the
// nemesis.
type Incarnations struct {
	Topic      string
	Partitions int32

	// mu is held shared by a producer for a whole send and exclusively by
	// the nemesis while it deletes and creates the topic. It guards n and
	// next.
	mu   sync.RWMutex
	n    int32
	next chan struct{} // closed when incarnation n+1 is created
}

// NewIncarnations starts at incarnation 1.
func NewIncarnations(topic string, partitions int32) *Incarnations {
	return &Incarnations{Topic: topic, Partitions: partitions, n: 1, next: make(chan struct{})}
}

// Current is the current incarnation and a channel closed once the next
// one exists.
func (g *Incarnations) Current() (int32, <-chan struct{}) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.n, g.next
}

// hold keeps the topic from being deleted until release, and returns its
// incarnation. Never call it twice without a release in between: a
// waiting nemesis blocks the second call.
func (g *Incarnations) hold() int32 {
	g.mu.RLock()
	return g.n
}

func (g *Incarnations) release() { g.mu.RUnlock() }

// lockedAdvance moves to the next incarnation; the caller holds mu
// exclusively.
func (g *Incarnations) lockedAdvance() int32 {
	g.n++
	close(g.next)
	g.next = make(chan struct{})
	return g.n
}

// incarnationValue is the value a producer writes in incarnation k.
func incarnationValue(k int32, proc string, seq int64) string {
	return fmt.Sprintf("i%d-%s-%d", k, proc, seq)
}

// incarnationOf parses the incarnation out of an incarnationValue.
func incarnationOf(v string) (int32, bool) {
	rest, ok := strings.CutPrefix(v, "i")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	k, err := strconv.ParseInt(num, 10, 32)
	return int32(k), err == nil
}

// recreate is the RecreateTopic and RecreateTopicPaused fault: it waits for
// the sends in flight to the re-created topic to finish and holds the
// others back; cuts a broker that is not the controller off from the other
// brokers (RecreateTopic: the views the controller sends it are lost, its
// ZooKeeper session lives on) or SIGSTOPs it (RecreateTopicPaused, shorter
// than the session: the views wait in its socket); in either case it stays
// registered and misses what happens meanwhile. It then deletes the topic,
// creates it again with an explicit assignment in which that broker leads
// even partitions and is the last follower of odd ones, lets the workload
// write to the new incarnation, and heals the broker after f.Duration.
func (n *Nemesis) recreate(ctx context.Context, f Fault) {
	g := n.Recreate
	if g == nil {
		n.record(f.Kind, "skip", "no workload on a topic to re-create")
		return
	}
	ctrl, _ := n.ZK.Controller()
	var candidates []*Broker
	for _, b := range n.C.Brokers {
		if b.Alive() && b.ID != ctrl {
			candidates = append(candidates, b)
		}
	}
	if len(candidates) == 0 {
		n.record(f.Kind, "skip", fmt.Sprintf("no live broker other than the controller b%d", ctrl))
		return
	}
	b := candidates[n.intN(len(candidates))]
	var seeds []string
	var followers []int32
	for _, o := range n.C.Brokers {
		if o != b && o.Alive() {
			followers = append(followers, o.ID)
			seeds = append(seeds, o.Addr())
		}
	}
	n.randMu.Lock()
	n.Rand.Shuffle(len(followers), func(i, j int) { followers[i], followers[j] = followers[j], followers[i] })
	n.randMu.Unlock()
	followers = followers[:min(len(followers), 2)]
	assignment := make([][]int32, g.Partitions)
	for p := range assignment {
		if p%2 == 0 {
			assignment[p] = append([]int32{b.ID}, followers...)
		} else {
			assignment[p] = append(append([]int32{}, followers...), b.ID)
		}
	}
	// The admin client never needs the isolated broker: seeds and
	// controller are others.
	cl, err := kgo.NewClient(n.C.ClientOpts(kgo.SeedBrokers(seeds...), kgo.RequestRetries(0))...)
	if err != nil {
		n.record(f.Kind, "skip", err.Error())
		return
	}
	defer cl.Close()

	isolate, heal := fmt.Sprintf("cut b%d <-> all brokers", b.ID), "healed"
	if f.Kind == RecreateTopicPaused {
		isolate, heal = fmt.Sprintf("SIGSTOP b%d", b.ID), "SIGCONT"
	}
	n.record(f.Kind, "start", fmt.Sprintf("%s for %v; meanwhile delete %s and create it again with replicas %v", isolate, f.Duration, g.Topic, assignment))
	g.mu.Lock()
	if f.Kind == RecreateTopicPaused {
		b.Pause()
	} else {
		n.cutFromBrokers(b)
	}
	isolated := time.Now()
	old := g.n
	deleted := deleteTopic(ctx, kadm.NewClient(cl), g.Topic)
	if deleted != nil {
		n.warn(fmt.Sprintf("%s: deleting %s (incarnation %d): %v", f.Kind, g.Topic, old, deleted))
	} else {
		n.record(f.Kind, "delete", fmt.Sprintf("deleted %s (incarnation %d)", g.Topic, old))
		id, err := createTopic(ctx, cl, g.Topic, assignment)
		inc := g.lockedAdvance() // the old incarnation is gone either way
		if err != nil {
			n.warn(fmt.Sprintf("%s: creating %s again: %v", f.Kind, g.Topic, err))
		} else {
			n.Rec.Add(Event{Kind: KindFault, Fault: f.Kind, Phase: "create", Incarnation: inc,
				Detail: fmt.Sprintf("created %s again: incarnation %d, topic id %x, replicas %v", g.Topic, inc, id, assignment)})
			n.logf("fault %-20s %-5s incarnation %d", f.Kind, "create", inc)
		}
	}
	g.mu.Unlock()
	sleepCtx(ctx, f.Duration-time.Since(isolated))
	if f.Kind == RecreateTopicPaused {
		b.Resume()
	} else {
		n.C.HealAll()
	}
	n.record(f.Kind, "end", fmt.Sprintf("%s b%d after %v", heal, b.ID, time.Since(isolated).Round(time.Millisecond)))
}

// deleteTopic deletes topic, retrying for a while; a topic that is not
// there (any more) counts as deleted.
func deleteTopic(ctx context.Context, adm *kadm.Client, topic string) error {
	return waitFor(ctx, 10*time.Second, func() error {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := adm.DeleteTopic(rctx, topic)
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil
		}
		return err
	})
}

// createTopic creates topic with an explicit replica assignment (the first
// replica of each partition leads it), retrying for a while (a deletion may
// still be under way), and returns its topic id (zero if an attempt without
// an answer created it).
func createTopic(ctx context.Context, cl *kgo.Client, topic string, assignment [][]int32) ([16]byte, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 3000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions, rt.ReplicationFactor = -1, -1
	for p, replicas := range assignment {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	req.Topics = append(req.Topics, rt)
	var id [16]byte
	unanswered := false // an earlier attempt may have created it
	err := waitFor(ctx, 10*time.Second, func() error {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		resp, err := req.RequestWith(rctx, cl)
		if err == nil && len(resp.Topics) != 1 {
			err = fmt.Errorf("%d topics in the CreateTopics response", len(resp.Topics))
		}
		if err != nil {
			unanswered = true
			return err
		}
		t := resp.Topics[0]
		id = t.TopicID
		err = kerr.ErrorForCode(t.ErrorCode)
		if unanswered && errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return err
	})
	return id, err
}
