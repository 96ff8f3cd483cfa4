package server

import "github.com/prometheus/client_golang/prometheus"

// logDirMetrics exposes the state of the log dirs, as Kafka's LogManager
// gauges OfflineLogDirectoryCount and LogDirectoryOffline (per dir) and
// ReplicaManager's OfflineReplicaCount.
type logDirMetrics struct {
	b               *Broker
	offlineDirs     *prometheus.Desc
	dirOffline      *prometheus.Desc
	offlineReplicas *prometheus.Desc
}

func newLogDirMetrics(b *Broker) *logDirMetrics {
	return &logDirMetrics{
		b:               b,
		offlineDirs:     prometheus.NewDesc("kbroker_offline_log_dirs", "Log dirs of this broker taken offline by an I/O error (Kafka's OfflineLogDirectoryCount).", nil, nil),
		dirOffline:      prometheus.NewDesc("kbroker_log_dir_offline", "1 if the log dir is offline, else 0 (Kafka's LogDirectoryOffline).", []string{"log_dir"}, nil),
		offlineReplicas: prometheus.NewDesc("kbroker_offline_replicas", "Replicas on this broker in offline log dirs (Kafka's OfflineReplicaCount).", nil, nil),
	}
}

func (m *logDirMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.offlineDirs
	ch <- m.dirOffline
	ch <- m.offlineReplicas
}

func (m *logDirMetrics) Collect(ch chan<- prometheus.Metric) {
	offline := map[string]bool{}
	for _, d := range m.b.replicas.OfflineLogDirs() {
		offline[d] = true
	}
	for _, d := range m.b.replicas.LogDirs() {
		v := 0.0
		if offline[d] {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(m.dirOffline, prometheus.GaugeValue, v, d)
	}
	ch <- prometheus.MustNewConstMetric(m.offlineDirs, prometheus.GaugeValue, float64(len(offline)))
	ch <- prometheus.MustNewConstMetric(m.offlineReplicas, prometheus.GaugeValue, float64(len(m.b.replicas.OfflineReplicas())))
}
