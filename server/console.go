package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/console"
	"github.com/kbroker/kbroker/replica"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// consoleSource builds the console's snapshots from what this broker
// holds: the controller's view (brokers, leaders, ISRs), its own replicas
// (offsets, and follower lag where it leads), the groups it coordinates
// and its traffic counters.
type consoleSource struct {
	b *Broker

	// mu guards last and version.
	mu      sync.Mutex
	last    *controller.Metadata
	version uint64 // bumped whenever the view (its pointer) changes
}

// Snapshot implements console.Source.
func (s *consoleSource) Snapshot(ctx context.Context) console.Snapshot {
	b := s.b
	md := b.controller.Metadata()
	s.mu.Lock()
	if md != s.last {
		s.last = md
		s.version++
	}
	version := s.version
	s.mu.Unlock()

	snap := console.Snapshot{Time: time.Now(), Self: b.cfg.BrokerID, ClusterID: md.ClusterID, ControllerID: md.ControllerID, ViewVersion: version}
	alive := map[int32]bool{}
	for _, br := range md.Brokers {
		alive[br.ID] = true
		cb := console.Broker{ID: br.ID, Rack: br.Rack, Alive: true, Controller: br.ID == md.ControllerID}
		for _, e := range br.Endpoints {
			cb.Endpoints = append(cb.Endpoints, fmt.Sprintf("%s://%s:%d", e.Listener, e.Host, e.Port))
		}
		snap.Brokers = append(snap.Brokers, cb)
	}
	dead := map[int32]bool{}
	names := make([]string, 0, len(md.Topics))
	for name := range md.Topics {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t := md.Topics[name]
		ct := console.Topic{Name: name, Internal: isInternalTopic(name), Partitions: make([]console.Partition, len(t.Partitions))}
		for i, ps := range t.Partitions {
			cp := console.Partition{Partition: int32(i), Leader: ps.Leader, LeaderEpoch: ps.LeaderEpoch,
				Replicas: ps.Replicas, ISR: ps.ISR, LogStartOffset: -1, HighWatermark: -1, LogEndOffset: -1}
			for _, r := range ps.Replicas {
				if !alive[r] {
					cp.Offline = append(cp.Offline, r)
					dead[r] = true
				}
			}
			if p, ok := b.replicas.Get(replica.TopicPartition{Topic: name, Partition: int32(i)}); ok {
				rs := p.ReplicaStatus()
				cp.LogStartOffset, cp.HighWatermark, cp.LogEndOffset = rs.LogStartOffset, rs.HighWatermark, rs.LogEndOffset
				cp.LocalRole = "follower"
				if rs.IsLeader {
					cp.LocalRole = "leader"
					cp.FollowerLag = rs.FollowerLag
				}
			}
			ct.Partitions[i] = cp
		}
		snap.Topics = append(snap.Topics, ct)
	}
	for id := range dead {
		snap.Brokers = append(snap.Brokers, console.Broker{ID: id})
	}
	slices.SortFunc(snap.Brokers, func(x, y console.Broker) int { return int(x.ID - y.ID) })

	for _, g := range b.groupSummaries(ctx) {
		cg := console.Group{Name: g.Group, State: g.State, ProtocolType: g.ProtocolType, Protocol: g.Protocol}
		for _, m := range g.Members {
			cg.Members = append(cg.Members, console.Member{ID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assigned: m.Assigned})
		}
		for _, o := range g.Offsets {
			cg.Offsets = append(cg.Offsets, console.GroupOffset{Topic: o.Topic, Partition: o.Partition, Committed: o.Committed, End: o.End, Lag: o.Lag})
			if o.Lag > 0 {
				cg.Lag += o.Lag
			}
		}
		snap.Groups = append(snap.Groups, cg)
	}
	snap.Stats = b.ops.consoleStats()
	return snap
}

// consoleStats sums this broker's traffic counters for the sparklines.
func (m *opsMetrics) consoleStats() console.Stats {
	if m == nil {
		return console.Stats{}
	}
	var st console.Stats
	st.BytesIn = sumCounters(m.bytesIn)
	st.BytesOut = sumCounters(m.bytesOut)
	st.MessagesIn = sumCounters(m.messagesIn)
	ch := make(chan prometheus.Metric, 64)
	go func() {
		m.total.Collect(ch)
		close(ch)
	}()
	for metric := range ch {
		var d dto.Metric
		if metric.Write(&d) == nil && d.Histogram != nil {
			st.Requests += float64(d.Histogram.GetSampleCount())
			st.RequestTimeMs += d.Histogram.GetSampleSum()
		}
	}
	return st
}

func sumCounters(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var sum float64
	for metric := range ch {
		var d dto.Metric
		if metric.Write(&d) == nil && d.Counter != nil {
			sum += d.Counter.GetValue()
		}
	}
	return sum
}

// mountConsole serves the live console on mux (the metrics address) and
// runs its hub until ctx ends; the returned func waits for the hub to
// stop (it reads the replicas, which close after it).
func (b *Broker) mountConsole(ctx context.Context, mux *http.ServeMux) (wait func()) {
	hub := console.NewHub(&consoleSource{b: b}, b.logger.With("component", "console"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		hub.Run(ctx)
	}()
	mux.Handle("/", console.Handler(hub))
	return func() { <-done }
}
