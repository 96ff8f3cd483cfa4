package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/kbroker/kbroker/internal/console"
	"github.com/kbroker/kbroker/internal/kafkaconn"
	"github.com/kbroker/kbroker/replica"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// view returns the controller's view and its version, bumped whenever
// the view (its pointer) changes.
func (s *consoleSource) view() (*controller.Metadata, uint64) {
	md := s.b.controller.Metadata()
	s.mu.Lock()
	defer s.mu.Unlock()
	if md != s.last {
		s.last = md
		s.version++
	}
	return md, s.version
}

// ViewVersion implements console.Source: a pointer comparison.
func (s *consoleSource) ViewVersion() uint64 {
	_, v := s.view()
	return v
}

// Stats implements console.Source.
func (s *consoleSource) Stats() console.Stats { return s.b.ops.consoleStats() }

// eventHistory is the control plane's event history (*controller.Cluster
// has it; a control plane without one gives an empty timeline).
type eventHistory interface {
	Events(after int64) []controller.ClusterEvent
}

// Events implements console.Source: the controller's events as this
// broker holds them (in memory), sequences shifted by one so that zero
// means none.
func (s *consoleSource) Events(after uint64) []console.Event {
	h, ok := s.b.controller.(eventHistory)
	if !ok {
		return nil
	}
	events := h.Events(int64(after) - 1)
	rc := consoleViewer()
	events = slices.DeleteFunc(events, func(e controller.ClusterEvent) bool {
		return e.Topic != "" && !s.b.authorize(rc, kmsg.ACLOperationDescribe, acl.ResourceTopic, e.Topic)
	})
	return consoleEvents(events)
}

// consoleViewer is who the console's read views are for under the
// authorizer: User:ANONYMOUS (the console does not authenticate), from no
// particular host, since one snapshot serves every open page: only ACLs
// for every host ("*") apply. A topic, its partitions and its events, or a
// group, show only where that principal may Describe them, as Metadata and
// ListGroups answer an unauthenticated client.
func consoleViewer() *requestContext {
	return &requestContext{clientID: "kbroker-console", principal: consolePrincipal}
}

// consoleEvents converts controller events for the console.
func consoleEvents(events []controller.ClusterEvent) []console.Event {
	if len(events) == 0 {
		return nil
	}
	out := make([]console.Event, 0, len(events))
	for _, e := range events {
		out = append(out, console.Event{Seq: uint64(e.Seq) + 1, Time: e.Time, Kind: e.Kind, Topic: e.Topic, Partition: e.Partition,
			Broker: e.Broker, Text: e.Text, ControllerEpoch: e.ControllerEpoch, Election: e.Election, OldLeader: e.OldLeader,
			NewLeader: e.NewLeader, LeaderEpoch: e.LeaderEpoch, OldISR: e.OldISR, NewISR: e.NewISR, LeaderLogEnd: e.LeaderLogEnd,
			TruncatedFrom: e.TruncatedFrom, TruncatedTo: e.TruncatedTo, CommittedLost: e.CommittedLost})
	}
	return out
}

// Snapshot implements console.Source. Without full, only the view's part
// (brokers, leaders, replicas, ISRs): no replica offsets, no groups.
func (s *consoleSource) Snapshot(ctx context.Context, full bool) console.Snapshot {
	b := s.b
	md, version := s.view()
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
	rc := consoleViewer()
	visible := func(topic string) bool { return b.authorize(rc, kmsg.ACLOperationDescribe, acl.ResourceTopic, topic) }
	names := make([]string, 0, len(md.Topics))
	for name := range md.Topics {
		if visible(name) {
			names = append(names, name)
		}
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
			if !full {
				ct.Partitions[i] = cp
				continue
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

	if !full {
		return snap
	}
	for _, g := range b.groupSummaries(ctx) {
		if !b.authorize(rc, kmsg.ACLOperationDescribe, acl.ResourceGroup, g.Group) {
			continue
		}
		cg := console.Group{Name: g.Group, State: g.State, ProtocolType: g.ProtocolType, Protocol: g.Protocol}
		for _, m := range g.Members {
			assigned := maps.Clone(m.Assigned)
			maps.DeleteFunc(assigned, func(topic string, _ []int32) bool { return !visible(topic) })
			cg.Members = append(cg.Members, console.Member{ID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assigned: assigned})
		}
		for _, o := range g.Offsets {
			if !visible(o.Topic) {
				continue
			}
			cg.Offsets = append(cg.Offsets, console.GroupOffset{Topic: o.Topic, Partition: o.Partition, Committed: o.Committed, End: o.End, Lag: o.Lag})
			if o.Lag > 0 {
				cg.Lag += o.Lag
			}
		}
		snap.Groups = append(snap.Groups, cg)
	}
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

// listenMetrics listens on the metrics (and console) address. The
// embedded default (config.EmbeddedMetricsAddress) is best effort: when
// its port is taken, by another broker on the machine say, an ephemeral
// loopback port stands in and the startup log says so (and names it).
func (b *Broker) listenMetrics() (net.Listener, error) {
	ln, err := net.Listen("tcp", b.cfg.MetricsAddress)
	if err == nil || b.cfg.MetricsAddress != config.EmbeddedMetricsAddress || b.cfg.ZookeeperConnect != "" {
		return ln, err
	}
	ln, err2 := net.Listen("tcp", "127.0.0.1:0")
	if err2 != nil {
		return nil, err
	}
	b.logger.Warn("the default metrics and console address is taken: serving them on an ephemeral loopback port (set kbroker.metrics.address to choose)",
		"default", config.EmbeddedMetricsAddress, "err", err, "addr", ln.Addr().String())
	return ln, nil
}

// mountConsole serves the live console on mux (the metrics address) and
// runs its hub until ctx ends; the returned func waits for the hub to
// stop (it reads the replicas, which close after it).
func (b *Broker) mountConsole(ctx context.Context, mux *http.ServeMux) (wait func()) {
	logger := b.logger.With("component", "console")
	hub := console.NewHub(&consoleSource{b: b}, logger)
	done := make(chan struct{})
	go func() {
		defer close(done)
		hub.Run(ctx)
	}()
	var opts console.Options
	if b.cfg.ConsoleActionsEnable {
		token := make([]byte, 16)
		rand.Read(token) // crypto/rand never fails (Go 1.24+)
		opts = console.Options{Actions: &consoleActions{b: b, logger: logger}, Token: hex.EncodeToString(token)}
		logger.Info("console actions enabled (kbroker.console.actions.enable): preferred leader election and delete records, from the console's page only", "principal", consolePrincipal)
	}
	mux.Handle("/", console.Handler(hub, opts))
	return func() { <-done }
}

// consolePrincipal is who the console's actions act as under the
// authorizer: the console does not authenticate its users, so they are
// anonymous, from their browser's address. An action is allowed only when
// the ACLs allow User:ANONYMOUS from that host what the Kafka request
// needs (Alter on the cluster for an election, Delete on the topic to
// delete records), as for an unauthenticated client.
const consolePrincipal = "User:ANONYMOUS"

// consoleActionTimeout bounds an action, forwarding included.
const consoleActionTimeout = 15 * time.Second

// consoleActions performs the console's actions through the broker's own
// Kafka request handlers (so their checks, errors and authorization are
// the requests'), forwarding to the controller or the leader as a Kafka
// client would send them there.
type consoleActions struct {
	b      *Broker
	logger *slog.Logger
}

func (a *consoleActions) requestContext(r *http.Request, version int16) *requestContext {
	return &requestContext{clientID: "kbroker-console", version: version, principal: consolePrincipal, remote: r.RemoteAddr}
}

// ElectPreferredLeader implements console.Actions with ElectLeaders v2
// (preferred), forwarded to the controller when this broker is not it.
func (a *consoleActions) ElectPreferredLeader(r *http.Request, act console.ActionRequest) (string, error) {
	ctx, cancel := context.WithTimeout(r.Context(), consoleActionTimeout)
	defer cancel()
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.ElectionType, req.TimeoutMillis = 2, 0, int32(consoleActionTimeout/time.Millisecond)
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = act.Topic, []int32{act.Partition}
	req.Topics = append(req.Topics, rt)
	kresp, err := handleElectLeaders(ctx, a.b, a.requestContext(r, req.Version), req)
	if err != nil {
		return "", fmt.Errorf("preferred election of %s-%d: %w", act.Topic, act.Partition, err)
	}
	resp := kresp.(*kmsg.ElectLeadersResponse)
	via := ""
	if resp.ErrorCode == kerr.NotController.Code {
		// Authorized here (handleElectLeaders checks before electing):
		// the controller runs it, as Kafka clients send it there.
		fwd, ctrl, err := a.b.forwardToController(ctx, "preferred election", req)
		if err != nil {
			return "", err
		}
		resp = fwd.(*kmsg.ElectLeadersResponse)
		via = fmt.Sprintf(" (by controller %d)", ctrl)
	}
	a.logger.Info("console action: preferred leader election", "topic", act.Topic, "partition", act.Partition, "from", r.RemoteAddr, "error_code", resp.ErrorCode)
	if err := electionError(resp, act); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-%d: preferred leader elected%s", act.Topic, act.Partition, via), nil
}

// electionError is the error an ElectLeaders answer gives the partition
// asked about, ErrForbidden-wrapped when the authorizer refused.
func electionError(resp *kmsg.ElectLeadersResponse, act console.ActionRequest) error {
	code, msg := resp.ErrorCode, ""
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic == act.Topic && p.Partition == act.Partition && code == 0 {
				code = p.ErrorCode
				if p.ErrorMessage != nil {
					msg = *p.ErrorMessage
				}
			}
		}
	}
	return actionError(code, msg, fmt.Sprintf("preferred election of %s-%d", act.Topic, act.Partition))
}

func actionError(code int16, msg, what string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	if msg == "" {
		msg = err.Error()
	}
	if errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.TopicAuthorizationFailed) {
		return fmt.Errorf("%w: %s as %s: %s", console.ErrForbidden, what, consolePrincipal, msg)
	}
	return fmt.Errorf("%s: %s", what, msg)
}

// DeleteRecords implements console.Actions with DeleteRecords v2,
// forwarded to the partition's leader when this broker does not lead it.
func (a *consoleActions) DeleteRecords(r *http.Request, act console.ActionRequest) (string, error) {
	ctx, cancel := context.WithTimeout(r.Context(), consoleActionTimeout)
	defer cancel()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version, req.TimeoutMillis = 2, int32(consoleActionTimeout/time.Millisecond)
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = act.Topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = act.Partition, act.Offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	what := fmt.Sprintf("deleting records of %s-%d before %d", act.Topic, act.Partition, act.Offset)
	kresp, err := handleDeleteRecords(ctx, a.b, a.requestContext(r, req.Version), req)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	low, code := deleteRecordsResult(kresp.(*kmsg.DeleteRecordsResponse))
	via := ""
	if code == kerr.NotLeaderForPartition.Code {
		// Authorized here (handleDeleteRecords checks first): the leader
		// deletes, as Kafka clients send it there.
		leader := int32(-1)
		if t := a.b.controller.Metadata().Topics[act.Topic]; t != nil && int(act.Partition) < len(t.Partitions) {
			leader = t.Partitions[act.Partition].Leader
		}
		info, ok := a.b.controller.Metadata().Broker(leader)
		if !ok {
			return "", fmt.Errorf("%s: no live leader", what)
		}
		conn := kafkaconn.New(net.JoinHostPort(info.Host, strconv.Itoa(int(info.Port))), "kbroker-console-"+strconv.Itoa(int(a.b.self.ID))).WithSecurity(a.b.peerSecurity)
		defer conn.Close()
		fwd, err := conn.Request(ctx, req)
		if err != nil {
			return "", fmt.Errorf("%s: forwarding to leader %d: %w", what, leader, err)
		}
		low, code = deleteRecordsResult(fwd.(*kmsg.DeleteRecordsResponse))
		via = fmt.Sprintf(" (by leader %d)", leader)
	}
	a.logger.Info("console action: delete records", "topic", act.Topic, "partition", act.Partition, "offset", act.Offset, "from", r.RemoteAddr, "error_code", code)
	if err := actionError(code, "", what); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-%d: log start offset now %d%s", act.Topic, act.Partition, low, via), nil
}

// deleteRecordsResult is the one partition's new log start and error code.
func deleteRecordsResult(resp *kmsg.DeleteRecordsResponse) (int64, int16) {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			return p.LowWatermark, p.ErrorCode
		}
	}
	return -1, kerr.UnknownServerError.Code
}
