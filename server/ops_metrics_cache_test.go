package server

import (
	"testing"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// The per-topic counters, looked up through the cache, are the vectors'
// own children, and only the series used exist (a topic produced to but
// never fetched has no bytes-out series), as without the cache.
func TestOpsMetricsCachedChildren(t *testing.T) {
	m := newOpsMetrics()
	batches := [][]byte{make([]byte, 100)}
	headers := []recordbatch.Header{{RecordCount: 3}}
	for range 2 {
		m.produced("a", batches, headers)
	}
	m.produced("b", batches, headers)
	m.fetched("b", 70, false)
	m.fetched("b", 5, true) // a follower: replication bytes, not the topic's
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"bytes in a", counterValue(t, m.bytesIn.WithLabelValues("a")), 200},
		{"messages in a", counterValue(t, m.messagesIn.WithLabelValues("a")), 6},
		{"bytes in b", counterValue(t, m.bytesIn.WithLabelValues("b")), 100},
		{"bytes out b", counterValue(t, m.bytesOut.WithLabelValues("b")), 70},
		{"replication bytes out", counterValue(t, m.replicationBytesOut), 5},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	ch := make(chan prometheus.Metric, 10)
	m.bytesOut.Collect(ch)
	close(ch)
	if n := len(ch); n != 1 {
		t.Errorf("%d bytes-out series, want 1 (topic b only)", n)
	}
}
