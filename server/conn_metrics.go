package server

import "github.com/prometheus/client_golang/prometheus"

// connMetrics shows each listener's connections and Kafka's
// connection-quota figures (socket-server-metrics): connection-count,
// connection-accept-rate per listener and broker-wide, and the
// connections the creation rates delayed with their delay
// (connection-accept-throttle-time, kept as a total here).
type connMetrics struct {
	b            *Broker
	connections  *prometheus.Desc
	acceptRate   *prometheus.Desc
	brokerRate   *prometheus.Desc
	throttled    *prometheus.Desc
	throttleTime *prometheus.Desc
}

func newConnMetrics(b *Broker) *connMetrics {
	l := []string{"listener"}
	return &connMetrics{
		b:            b,
		connections:  prometheus.NewDesc("kbroker_listener_connections", "Open connections by listener (Kafka's connection-count).", l, nil),
		acceptRate:   prometheus.NewDesc("kbroker_connection_accept_rate", "New connections per second by listener, as max.connection.creation.rate measures it (Kafka's connection-accept-rate).", l, nil),
		brokerRate:   prometheus.NewDesc("kbroker_broker_connection_accept_rate", "New connections per second on every listener but the protected inter-broker one (Kafka's broker-connection-accept-rate).", nil, nil),
		throttled:    prometheus.NewDesc("kbroker_connections_throttled_total", "Connections whose acceptance max.connection.creation.rate delayed, by listener.", l, nil),
		throttleTime: prometheus.NewDesc("kbroker_connection_accept_throttle_seconds_total", "Time connections were delayed by max.connection.creation.rate, by listener (Kafka's connection-accept-throttle-time, summed).", l, nil),
	}
}

func (m *connMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.connections, m.acceptRate, m.brokerRate, m.throttled, m.throttleTime} {
		ch <- d
	}
}

func (m *connMetrics) Collect(ch chan<- prometheus.Metric) {
	byListener, brokerRate := m.b.quotas.stats()
	for name, s := range byListener {
		ch <- prometheus.MustNewConstMetric(m.connections, prometheus.GaugeValue, float64(s.connections), name)
		ch <- prometheus.MustNewConstMetric(m.acceptRate, prometheus.GaugeValue, s.acceptRate, name)
		ch <- prometheus.MustNewConstMetric(m.throttled, prometheus.CounterValue, float64(s.throttled), name)
		ch <- prometheus.MustNewConstMetric(m.throttleTime, prometheus.CounterValue, s.throttleTime.Seconds(), name)
	}
	ch <- prometheus.MustNewConstMetric(m.brokerRate, prometheus.GaugeValue, brokerRate)
}
