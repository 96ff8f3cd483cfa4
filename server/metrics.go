package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsCollector computes the broker's gauges at scrape time from the
// replica layer and the cluster view, so nothing is kept twice.
type metricsCollector struct {
	b *Broker

	underReplicated *prometheus.Desc
	offline         *prometheus.Desc
	isrShrinks      *prometheus.Desc
	isrExpands      *prometheus.Desc
	unclean         *prometheus.Desc
	activeCtrl      *prometheus.Desc
	leaderEpoch     *prometheus.Desc
	followerLag     *prometheus.Desc
	highWatermark   *prometheus.Desc
	logEnd          *prometheus.Desc
	connections     *prometheus.Desc
	closedIdle      *prometheus.Desc
	refused         *prometheus.Desc
	requests        *prometheus.Desc
	authOK          *prometheus.Desc
	authFailed      *prometheus.Desc
}

func newMetricsCollector(b *Broker) *metricsCollector {
	tp := []string{"topic", "partition"}
	return &metricsCollector{
		b:               b,
		underReplicated: prometheus.NewDesc("kbroker_under_replicated_partitions", "Partitions led by this broker whose ISR is smaller than their replica set.", nil, nil),
		offline:         prometheus.NewDesc("kbroker_offline_partitions", "Partitions without a leader in this broker's cluster view.", nil, nil),
		isrShrinks:      prometheus.NewDesc("kbroker_isr_shrinks_total", "ISR shrinks of partitions led by this broker.", nil, nil),
		isrExpands:      prometheus.NewDesc("kbroker_isr_expands_total", "ISR expansions of partitions led by this broker.", nil, nil),
		unclean:         prometheus.NewDesc("kbroker_unclean_leader_elections_total", "Leaders elected from outside the ISR while this broker was controller.", nil, nil),
		activeCtrl:      prometheus.NewDesc("kbroker_active_controller", "1 if this broker is the controller.", nil, nil),
		leaderEpoch:     prometheus.NewDesc("kbroker_partition_leader_epoch", "Leader epoch of each partition replica on this broker.", tp, nil),
		followerLag:     prometheus.NewDesc("kbroker_follower_lag_offsets", "On a leader: how many offsets each follower is behind the log end (-1: not fetched yet).", append(tp, "replica"), nil),
		highWatermark:   prometheus.NewDesc("kbroker_partition_high_watermark", "High watermark of each partition replica on this broker.", tp, nil),
		logEnd:          prometheus.NewDesc("kbroker_partition_log_end_offset", "Log end offset of each partition replica on this broker.", tp, nil),
		connections:     prometheus.NewDesc("kbroker_connections", "Open client connections (Kafka's connection-count).", nil, nil),
		closedIdle:      prometheus.NewDesc("kbroker_connections_closed_idle_total", "Connections closed after connections.max.idle.ms without a request.", nil, nil),
		refused:         prometheus.NewDesc("kbroker_connections_refused_total", "Connections closed at once for max.connections.per.ip.", nil, nil),
		authOK:          prometheus.NewDesc("kbroker_successful_authentication_total", "SASL authentications that succeeded, by listener (Kafka's successful-authentication-total).", []string{"listener"}, nil),
		authFailed:      prometheus.NewDesc("kbroker_failed_authentication_total", "SASL authentications that failed, by listener (Kafka's failed-authentication-total).", []string{"listener"}, nil),
		requests:        prometheus.NewDesc("kbroker_requests_total", "Requests received, by listener and Kafka's RequestMetrics request name (FetchConsumer, FetchFollower, Produce, ...).", []string{"listener", "request"}, nil),
	}
}

func (m *metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.underReplicated, m.offline, m.isrShrinks, m.isrExpands, m.unclean, m.activeCtrl, m.leaderEpoch, m.followerLag, m.highWatermark, m.logEnd, m.connections, m.closedIdle, m.refused, m.requests, m.authOK, m.authFailed} {
		ch <- d
	}
}

func (m *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	b := m.b
	md := b.controller.Metadata()
	under := 0
	for _, p := range b.replicas.All() {
		rs := p.ReplicaStatus()
		tp := p.TopicPartition()
		labels := []string{tp.Topic, strconv.Itoa(int(tp.Partition))}
		ch <- prometheus.MustNewConstMetric(m.leaderEpoch, prometheus.GaugeValue, float64(rs.LeaderEpoch), labels...)
		ch <- prometheus.MustNewConstMetric(m.highWatermark, prometheus.GaugeValue, float64(rs.HighWatermark), labels...)
		ch <- prometheus.MustNewConstMetric(m.logEnd, prometheus.GaugeValue, float64(rs.LogEndOffset), labels...)
		if !rs.IsLeader {
			continue
		}
		if t := md.Topics[tp.Topic]; t != nil && int(tp.Partition) < len(t.Partitions) && len(rs.ISR) < len(t.Partitions[tp.Partition].Replicas) {
			under++
		}
		for id, lag := range rs.FollowerLag {
			ch <- prometheus.MustNewConstMetric(m.followerLag, prometheus.GaugeValue, float64(lag), append(labels, strconv.Itoa(int(id)))...)
		}
	}
	offline := 0
	for _, t := range md.Topics {
		for _, ps := range t.Partitions {
			if ps.Leader < 0 {
				offline++
			}
		}
	}
	stats := b.replicas.Stats()
	ch <- prometheus.MustNewConstMetric(m.underReplicated, prometheus.GaugeValue, float64(under))
	ch <- prometheus.MustNewConstMetric(m.offline, prometheus.GaugeValue, float64(offline))
	ch <- prometheus.MustNewConstMetric(m.isrShrinks, prometheus.CounterValue, float64(stats.ISRShrinks.Load()))
	ch <- prometheus.MustNewConstMetric(m.isrExpands, prometheus.CounterValue, float64(stats.ISRExpands.Load()))
	active := 0.0
	if b.controller.IsController() {
		active = 1
	}
	unclean := float64(b.controller.UncleanElectionCount())
	ch <- prometheus.MustNewConstMetric(m.activeCtrl, prometheus.GaugeValue, active)
	ch <- prometheus.MustNewConstMetric(m.unclean, prometheus.CounterValue, unclean)
	b.connsMu.Lock()
	open := len(b.conns)
	b.connsMu.Unlock()
	ch <- prometheus.MustNewConstMetric(m.connections, prometheus.GaugeValue, float64(open))
	ch <- prometheus.MustNewConstMetric(m.closedIdle, prometheus.CounterValue, float64(b.connsClosedIdle.Load()))
	ch <- prometheus.MustNewConstMetric(m.refused, prometheus.CounterValue, float64(b.connsRefused.Load()))
	for _, l := range b.listeners {
		if l.sasl != nil {
			ch <- prometheus.MustNewConstMetric(m.authOK, prometheus.CounterValue, float64(l.authOK.Load()), l.name)
			ch <- prometheus.MustNewConstMetric(m.authFailed, prometheus.CounterValue, float64(l.authFailed.Load()), l.name)
		}
		for name, n := range l.requestCounts() {
			ch <- prometheus.MustNewConstMetric(m.requests, prometheus.CounterValue, float64(n), l.name, name)
		}
	}
}

// serveMetrics serves Prometheus /metrics on addr until ctx ends.
func (b *Broker) serveMetrics(ctx context.Context, ln net.Listener) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newMetricsCollector(b), b.clientQuotas, newLogDirMetrics(b))
	b.registerOpsMetrics(reg) // ops_metrics.go
	reg.MustRegister(newConnMetrics(b))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer b.mountConsole(ctx, mux)() // console.go: the live console on the same address
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		b.logger.Error("metrics endpoint stopped", "err", err)
	}
}
