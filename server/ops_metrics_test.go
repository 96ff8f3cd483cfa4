package server

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRequestMetricsName(t *testing.T) {
	follower := kmsg.NewPtrFetchRequest()
	follower.ReplicaID = 2
	consumer := kmsg.NewPtrFetchRequest()
	consumer.ReplicaID = -1
	v15 := kmsg.NewPtrFetchRequest()
	v15.Version = 15
	v15.ReplicaID = -1
	v15.ReplicaState.ID = 3
	tests := []struct {
		req  kmsg.Request
		want string
	}{
		{follower, "FetchFollower"},
		{consumer, "FetchConsumer"},
		{v15, "FetchFollower"},
		{kmsg.NewPtrProduceRequest(), "Produce"},
		{kmsg.NewPtrMetadataRequest(), "Metadata"},
	}
	for _, tc := range tests {
		if got := requestMetricsName(tc.req); got != tc.want {
			t.Errorf("requestMetricsName(%T replica %v) = %q, want %q", tc.req, tc.req, got, tc.want)
		}
	}
}

// histSum returns the sum and count of one labelled histogram.
func histSum(t *testing.T, h *prometheus.HistogramVec, label string) (float64, uint64) {
	t.Helper()
	var m dto.Metric
	if err := h.WithLabelValues(label).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
}

func TestRequestTimingStages(t *testing.T) {
	m := newOpsMetrics()
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	timing := &requestTiming{name: "Produce", received: at(0), dequeued: at(2), handled: at(10)}
	// 3 ms of the handler were a long poll: remote, not local.
	addRemoteTime(withRequestTiming(context.Background(), timing), 3*time.Millisecond)
	// The writer picked the response up at 15, its replication wait
	// ended at 40, the write at 41.
	m.finish(timing, at(15), at(40), at(41))
	for _, tc := range []struct {
		name string
		h    *prometheus.HistogramVec
		want float64
	}{
		{"queue", m.requestQueue, 2},
		{"local", m.local, 5},
		{"remote", m.remote, 3 + 25},
		{"response queue", m.responseQueue, 5},
		{"send", m.responseSend, 1},
		{"total", m.total, 41},
	} {
		sum, n := histSum(t, tc.h, "Produce")
		if n != 1 || sum != tc.want {
			t.Errorf("%s: %d observations summing %v ms, want 1 of %v", tc.name, n, sum, tc.want)
		}
	}
	// No timing (raw answers) and no metrics (handler tests) are fine.
	m.finish(nil, t0, t0, t0)
	var none *opsMetrics
	none.finish(timing, t0, t0, t0)
	none.produced("t", nil, nil)
	none.fetched("t", 10, false)
}
