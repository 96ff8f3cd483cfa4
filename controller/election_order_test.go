package controller

import (
	"context"
	"slices"
	"sync"
	"testing"
)

// When a broker dies, the partitions it led get their new leaders in a
// view published before the one that drops it from the other ISRs (Kafka's
// onReplicasBecomeOffline order): at scale those ISR writes number in the
// thousands, and clients must not wait for them to find the new leaders.
func TestBrokerDeathPublishesLeadersBeforeISRShrinks(t *testing.T) {
	st := &localState{Metadata: &Metadata{ClusterID: "scenario", ControllerID: -1, Topics: map[string]*Topic{}}}
	store := &localStore{state: st}
	for id := int32(1); id <= 3; id++ {
		store.brokers = append(store.brokers, zkBroker(scenarioBroker(id)))
	}
	c := &Cluster{cfg: ClusterConfig{Self: scenarioBroker(1)}, logger: quietLogger(), store: store, seenEpoch: -1,
		stop: make(chan struct{}), done: make(chan struct{})}
	c.view.Store(&Metadata{ClusterID: "scenario", ControllerID: -1, Topics: map[string]*Topic{}})
	var mu sync.Mutex
	var views []*Metadata
	c.Subscribe(func(md *Metadata) {
		mu.Lock()
		defer mu.Unlock()
		views = append(views, md)
	})
	a, err := startActive(context.Background(), context.Background(), c, 0, store.epochZkVersion)
	if err != nil {
		t.Fatal(err)
	}
	c.active = a
	t.Cleanup(c.Close)
	e := &localEnv{store: store, c: c}

	if _, err := c.CreateTopic(CreateTopicRequest{Name: "t", Assignment: [][]int32{{3, 1, 2}, {1, 2, 3}}}, false); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	views = nil
	mu.Unlock()
	e.setLive(t, 1, 2) // broker 3 dies

	mu.Lock()
	defer mu.Unlock()
	led, shrunk := -1, -1
	for i, v := range views {
		tp := v.Topics["t"]
		if tp == nil {
			continue
		}
		if led < 0 && tp.Partitions[0].Leader != 3 {
			led = i
			if !slices.Contains(tp.Partitions[1].ISR, 3) {
				t.Errorf("view %d: t-0's new leader and t-1's ISR shrink (%v) published together", i, tp.Partitions[1].ISR)
			}
		}
		if shrunk < 0 && !slices.Contains(tp.Partitions[1].ISR, 3) {
			shrunk = i
		}
	}
	if led < 0 || shrunk < 0 || shrunk <= led {
		t.Fatalf("views after broker 3's death: new leader of t-0 in view %d, t-1's ISR shrink in view %d (of %d); want the leader first", led, shrunk, len(views))
	}
	last := views[len(views)-1].Topics["t"]
	if last.Partitions[0].Leader != 1 || !slices.Equal(last.Partitions[0].ISR, []int32{1, 2}) || !slices.Equal(last.Partitions[1].ISR, []int32{1, 2}) {
		t.Fatalf("final view: %+v", last.Partitions)
	}
}
