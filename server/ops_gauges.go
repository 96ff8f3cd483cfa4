package server

import (
	"context"
	"strconv"
	"time"

	"github.com/kbroker/kbroker/controller"
	"github.com/prometheus/client_golang/prometheus"
)

// opsCollector computes, at scrape time, the gauges operators expect from
// Kafka besides metricsCollector's: partitions and leaders on this
// broker, under-min-ISR partitions, log sizes, consumer group lag, the
// controller's undelivered views and the ZooKeeper client's state.
type opsCollector struct {
	b *Broker

	partitions, leaders, underMinISR      *prometheus.Desc
	logSize, logStart                     *prometheus.Desc
	groupCommitted, groupLag              *prometheus.Desc
	groupMembers, groupLagSum             *prometheus.Desc
	pendingViews                          *prometheus.Desc
	zkLatency, zkSession, zkUp, zkExpires *prometheus.Desc
}

// zooKeeperClient is what a ZooKeeper-backed control plane reports
// (controller.Cluster in cluster mode).
type zooKeeperClient interface {
	ZooKeeperStatus() (controller.ZooKeeperStatus, bool)
	PendingViews() []controller.PendingView
}

func newOpsCollector(b *Broker) *opsCollector {
	tp := []string{"topic", "partition"}
	return &opsCollector{
		b:              b,
		partitions:     prometheus.NewDesc("kbroker_partitions", "Partition replicas on this broker (Kafka's ReplicaManager PartitionCount).", nil, nil),
		leaders:        prometheus.NewDesc("kbroker_leader_partitions", "Partitions this broker leads (Kafka's ReplicaManager LeaderCount).", nil, nil),
		underMinISR:    prometheus.NewDesc("kbroker_under_min_isr_partitions", "Partitions led by this broker whose ISR is smaller than their min.insync.replicas: acks=all produces fail (Kafka's UnderMinIsrPartitionCount).", nil, nil),
		logSize:        prometheus.NewDesc("kbroker_partition_log_size_bytes", "Bytes of each partition's log on this broker (Kafka's Log Size).", tp, nil),
		logStart:       prometheus.NewDesc("kbroker_partition_log_start_offset", "Log start offset of each partition replica on this broker.", tp, nil),
		groupCommitted: prometheus.NewDesc("kbroker_consumer_group_committed_offset", "Committed offset of each group and partition, on the group's coordinator.", []string{"group", "topic", "partition"}, nil),
		groupLag:       prometheus.NewDesc("kbroker_consumer_group_lag", "Records between a group's committed offset and the partition's high watermark, on the group's coordinator (absent when no replica of the partition is on it).", []string{"group", "topic", "partition"}, nil),
		groupLagSum:    prometheus.NewDesc("kbroker_consumer_group_lag_sum", "A group's lag summed over its partitions.", []string{"group"}, nil),
		groupMembers:   prometheus.NewDesc("kbroker_consumer_group_members", "Members of each group this broker coordinates, by state.", []string{"group", "state"}, nil),
		pendingViews:   prometheus.NewDesc("kbroker_controller_pending_views", "On the controller: views (UpdateMetadata) not yet acknowledged by each broker, 0 or 1 (Kafka's ControllerChannelManager QueueSize).", []string{"broker"}, nil),
		zkLatency:      prometheus.NewDesc("kbroker_zookeeper_request_latency_ms", "Latency of ZooKeeper requests (Kafka's ZooKeeperRequestLatencyMs).", nil, nil),
		zkSession:      prometheus.NewDesc("kbroker_zookeeper_session_state", "1 for the ZooKeeper client's current session state (Kafka's SessionState: CONNECTED, CONNECTING, EXPIRED, ...).", []string{"state"}, nil),
		zkUp:           prometheus.NewDesc("kbroker_zookeeper_connected", "1 while the broker has a live ZooKeeper session.", nil, nil),
		zkExpires:      prometheus.NewDesc("kbroker_zookeeper_expires_total", "ZooKeeper sessions of this broker found expired (Kafka's ZooKeeperExpiresPerSec).", nil, nil),
	}
}

func (m *opsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.partitions, m.leaders, m.underMinISR, m.logSize, m.logStart, m.groupCommitted, m.groupLag, m.groupLagSum, m.groupMembers, m.pendingViews, m.zkLatency, m.zkSession, m.zkUp, m.zkExpires} {
		ch <- d
	}
}

func (m *opsCollector) Collect(ch chan<- prometheus.Metric) {
	b := m.b
	md := b.controller.Metadata()
	var partitions, leaders, underMin int
	minISR := map[string]int64{} // by topic, for this scrape
	for _, p := range b.replicas.All() {
		partitions++
		tp := p.TopicPartition()
		labels := partitionLabels(tp.Topic, tp.Partition)
		st := p.ReplicaStatus()
		ch <- prometheus.MustNewConstMetric(m.logSize, prometheus.GaugeValue, float64(p.Log().Size()), labels...)
		ch <- prometheus.MustNewConstMetric(m.logStart, prometheus.GaugeValue, float64(st.LogStartOffset), labels...)
		if !st.IsLeader {
			continue
		}
		leaders++
		n, ok := minISR[tp.Topic]
		if !ok {
			n = m.minISR(md, tp.Topic)
			minISR[tp.Topic] = n
		}
		if int64(len(st.ISR)) < n {
			underMin++
		}
	}
	ch <- prometheus.MustNewConstMetric(m.partitions, prometheus.GaugeValue, float64(partitions))
	ch <- prometheus.MustNewConstMetric(m.leaders, prometheus.GaugeValue, float64(leaders))
	ch <- prometheus.MustNewConstMetric(m.underMinISR, prometheus.GaugeValue, float64(underMin))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, g := range b.groupSummaries(ctx) {
		ch <- prometheus.MustNewConstMetric(m.groupMembers, prometheus.GaugeValue, float64(len(g.Members)), g.Group, g.State)
		var sum int64
		for _, o := range g.Offsets {
			p := strconv.Itoa(int(o.Partition))
			ch <- prometheus.MustNewConstMetric(m.groupCommitted, prometheus.GaugeValue, float64(o.Committed), g.Group, o.Topic, p)
			if o.Lag >= 0 {
				sum += o.Lag
				ch <- prometheus.MustNewConstMetric(m.groupLag, prometheus.GaugeValue, float64(o.Lag), g.Group, o.Topic, p)
			}
		}
		ch <- prometheus.MustNewConstMetric(m.groupLagSum, prometheus.GaugeValue, float64(sum), g.Group)
	}

	zc, ok := b.controller.(zooKeeperClient)
	if !ok {
		return
	}
	for _, pv := range zc.PendingViews() {
		ch <- prometheus.MustNewConstMetric(m.pendingViews, prometheus.GaugeValue, float64(pv.Pending), strconv.Itoa(int(pv.Broker)))
	}
	zs, ok := zc.ZooKeeperStatus()
	if !ok {
		return
	}
	count, sum, buckets := zs.Requests.Snapshot()
	ch <- prometheus.MustNewConstHistogram(m.zkLatency, count, sum, buckets)
	for _, s := range []string{"CONNECTED", "CONNECTING", "EXPIRED", "AUTH_FAILED", "NOT_CONNECTED"} {
		v := 0.0
		if s == zs.SessionState {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(m.zkSession, prometheus.GaugeValue, v, s)
	}
	up := 0.0
	if zs.SessionState == "CONNECTED" {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(m.zkUp, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(m.zkExpires, prometheus.CounterValue, float64(zs.Expiries))
}

// minISR is topic's min.insync.replicas (its override, else the broker's
// default).
func (m *opsCollector) minISR(md *controller.Metadata, topic string) int64 {
	var overrides map[string]string
	if t := md.Topics[topic]; t != nil {
		overrides = t.Configs
	}
	n, err := strconv.ParseInt(m.b.cfg.EffectiveTopicConfig(overrides)["min.insync.replicas"], 10, 64)
	if err != nil {
		return 1
	}
	return n
}
