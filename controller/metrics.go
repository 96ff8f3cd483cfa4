package controller

import (
	"slices"

	"github.com/kbroker/kbroker/controller/zk"
)

// ZooKeeperStatus is what the metrics endpoint shows of this broker's
// ZooKeeper client.
type ZooKeeperStatus struct {
	Requests     *zk.RequestStats
	SessionState string // Kafka's SessionState: CONNECTED, CONNECTING, EXPIRED, ...
	Expiries     int64  // sessions found expired (Kafka's ZooKeeperExpiresPerSec)
}

// ZooKeeperStatus returns the ZooKeeper client's request latencies and
// session state; false on the embedded single node, which has none.
func (c *Cluster) ZooKeeperStatus() (ZooKeeperStatus, bool) {
	s, ok := c.members.(*zk.Store)
	if !ok {
		return ZooKeeperStatus{}, false
	}
	return ZooKeeperStatus{Requests: s.RequestStats(), SessionState: s.SessionState(), Expiries: s.SessionExpiries()}, true
}

// PendingView is one broker's queue of views the controller has still to
// deliver (0 or 1: only the newest view is kept), Kafka's
// ControllerChannelManager QueueSize per broker.
type PendingView struct {
	Broker  int32
	Pending int
}

// PendingViews lists, on the controller, every broker's undelivered views
// (by broker id); nil on another broker.
func (c *Cluster) PendingViews() []PendingView {
	c.activeMu.Lock()
	a := c.active
	c.activeMu.Unlock()
	if a == nil {
		return nil
	}
	a.mu.Lock()
	senders := make([]*viewSender, 0, len(a.senders))
	for _, s := range a.senders {
		senders = append(senders, s)
	}
	a.mu.Unlock()
	out := make([]PendingView, 0, len(senders))
	for _, s := range senders {
		s.mu.Lock()
		n := 0
		if s.latest != nil {
			n = 1
		}
		s.mu.Unlock()
		out = append(out, PendingView{Broker: s.id, Pending: n})
	}
	slices.SortFunc(out, func(x, y PendingView) int { return int(x.Broker - y.Broker) })
	return out
}
