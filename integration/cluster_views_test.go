package integration

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The brokers' views of the cluster: what each one's Metadata says about
// brokers, controller and partition leaders, and polls until the running
// brokers agree.

// clusterView is what one broker's Metadata says about the cluster.
type clusterView struct {
	from       int32
	brokers    []string // "id@host:port", sorted
	controller int32
	leaders    map[string][]int32 // topic -> leader per partition
}

func viewOf(from int32, m *kmsg.MetadataResponse) clusterView {
	v := clusterView{from: from, controller: m.ControllerID, leaders: map[string][]int32{}}
	for _, b := range m.Brokers {
		v.brokers = append(v.brokers, fmt.Sprintf("%d@%s:%d", b.NodeID, b.Host, b.Port))
	}
	sort.Strings(v.brokers)
	for _, t := range m.Topics {
		if t.Topic == nil {
			continue
		}
		ls := make([]int32, len(t.Partitions))
		for _, p := range t.Partitions {
			if int(p.Partition) < len(ls) {
				ls[p.Partition] = p.Leader
			}
		}
		v.leaders[*t.Topic] = ls
	}
	return v
}

// key is the view's canonical text: equal keys, equal views.
func (v clusterView) key() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "brokers=%v controller=%d", v.brokers, v.controller)
	names := make([]string, 0, len(v.leaders))
	for n := range v.leaders {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&sb, " %s=%v", n, v.leaders[n])
	}
	return sb.String()
}

func (v clusterView) hasBroker(id int32) bool {
	prefix := strconv.Itoa(int(id)) + "@"
	return slices.ContainsFunc(v.brokers, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// leadCounts counts a topic's partitions per leader.
func (v clusterView) leadCounts(topic string) map[int32]int {
	out := map[int32]int{}
	for _, l := range v.leaders[topic] {
		out[l]++
	}
	return out
}

// views asks every running broker for its view.
func (c *testCluster) views(timeout time.Duration) ([]clusterView, error) {
	var out []clusterView
	for _, id := range c.running() {
		m, err := c.metadataFrom(id, timeout)
		if err != nil {
			return nil, err
		}
		out = append(out, viewOf(id, m))
	}
	return out, nil
}

// agreed returns the running brokers' common view, or an error naming a
// disagreement.
func (c *testCluster) agreed(timeout time.Duration) (clusterView, error) {
	vs, err := c.views(timeout)
	if err != nil {
		return clusterView{}, err
	}
	if len(vs) == 0 {
		return clusterView{}, errors.New("no broker running")
	}
	for _, v := range vs[1:] {
		if v.key() != vs[0].key() {
			return clusterView{}, fmt.Errorf("broker %d sees %s\nbroker %d sees %s", vs[0].from, vs[0].key(), v.from, v.key())
		}
	}
	return vs[0], nil
}

// waitAgreed polls until the running brokers agree on a view with a live
// controller, every running broker listed, and that passes check.
func (c *testCluster) waitAgreed(t testing.TB, within time.Duration, check func(clusterView) error) clusterView {
	t.Helper()
	var got clusterView
	checkFor(t, within, 25*time.Millisecond, func() error {
		v, err := c.agreedSane(check)
		got = v
		return err
	})
	return got
}

// agreedSane returns the running brokers' common view if it is sane and
// passes check (when not nil).
func (c *testCluster) agreedSane(check func(clusterView) error) (clusterView, error) {
	v, err := c.agreed(time.Second)
	if err != nil {
		return clusterView{}, err
	}
	if err := c.sane(v); err != nil {
		return clusterView{}, err
	}
	if check != nil {
		if err := check(v); err != nil {
			return clusterView{}, fmt.Errorf("%w (view: %s)", err, v.key())
		}
	}
	return v, nil
}

// sane checks that v has a controller that is listed and lists every
// running broker.
func (c *testCluster) sane(v clusterView) error {
	if v.controller < 0 || !v.hasBroker(v.controller) {
		return fmt.Errorf("controller %d is not a listed broker (view: %s)", v.controller, v.key())
	}
	for _, id := range c.running() {
		if !v.hasBroker(id) {
			return fmt.Errorf("running broker %d is not listed (view: %s)", id, v.key())
		}
	}
	return nil
}

// allLed is a waitAgreed check: topic has partitions partitions, all led.
func allLed(topic string, partitions int) func(clusterView) error {
	return func(v clusterView) error {
		ls, ok := v.leaders[topic]
		if !ok {
			return fmt.Errorf("topic %s not listed", topic)
		}
		if len(ls) != partitions {
			return fmt.Errorf("topic %s has %d partitions, want %d", topic, len(ls), partitions)
		}
		for p, l := range ls {
			if l < 0 {
				return fmt.Errorf("%s-%d has no leader", topic, p)
			}
		}
		return nil
	}
}
