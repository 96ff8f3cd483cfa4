package server

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbroker/kbroker/recordbatch"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// opsMetrics are the metrics operators know from Kafka that are counted as
// requests flow (request times, bytes and messages per topic); the gauges
// read at scrape time are opsCollector's.
//
// Request times follow Kafka's RequestMetrics: kbroker handles a request
// on its connection's goroutine, so the "queue" is the wait for the
// connection's earlier responses (Kafka's one-request-at-a-time muting),
// "local" the handler, "remote" the purgatory waits (a Fetch's long poll,
// an acks=all Produce's wait for the ISR), "response queue" the wait for
// the connection's writer and "response send" the write.
type opsMetrics struct {
	requestQueue, local, remote, responseQueue, responseSend, total *prometheus.HistogramVec

	bytesIn, messagesIn, bytesOut, bytesRejected *prometheus.CounterVec
	replicationBytesOut                          prometheus.Counter

	// The labelled children in use, looked up once each: a vector's
	// WithLabelValues hashes and UTF-8-checks its label on every call,
	// which cost the produce path about a tenth of its instructions
	// (six request histograms per request, two counters per partition).
	times         labelled[*requestTimes]
	topicIn       labelled[*topicInCounters] // both made on a topic's first produce, as before
	topicBytesOut labelled[prometheus.Counter]
}

// topicInCounters are a topic's produce counters.
type topicInCounters struct{ bytes, messages prometheus.Counter }

// requestTimes are one request name's histograms.
type requestTimes struct {
	queue, local, remote, responseQueue, responseSend, total prometheus.Observer
}

// labelled caches the children of a metric vector by their one label
// value. A child is made on first use, as WithLabelValues makes it, so
// /metrics shows the same series as without the cache.
type labelled[T any] struct {
	mu   sync.RWMutex
	m    map[string]T
	with func(string) T
}

func (l *labelled[T]) get(label string) T {
	l.mu.RLock()
	c, ok := l.m[label]
	l.mu.RUnlock()
	if ok {
		return c
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.m[label]; ok {
		return c
	}
	c = l.with(label)
	if l.m == nil {
		l.m = make(map[string]T)
	}
	l.m[label] = c
	return c
}

// requestTimeBuckets are in milliseconds, as Kafka's *TimeMs histograms.
var requestTimeBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000}

func newOpsMetrics() *opsMetrics {
	hist := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: requestTimeBuckets}, []string{"request"})
	}
	topic := []string{"topic"}
	m := &opsMetrics{
		requestQueue:        hist("kbroker_request_queue_time_ms", "Time a request waited before its handler ran (Kafka's RequestQueueTimeMs), by RequestMetrics name."),
		local:               hist("kbroker_request_local_time_ms", "Time in the request's handler, waits for other brokers excluded (Kafka's LocalTimeMs)."),
		remote:              hist("kbroker_request_remote_time_ms", "Time a request waited in purgatory: a Fetch's long poll, an acks=all Produce's replication wait (Kafka's RemoteTimeMs)."),
		responseQueue:       hist("kbroker_response_queue_time_ms", "Time a complete response waited for the connection's writer (Kafka's ResponseQueueTimeMs)."),
		responseSend:        hist("kbroker_response_send_time_ms", "Time writing the response (Kafka's ResponseSendTimeMs)."),
		total:               hist("kbroker_request_total_time_ms", "Time from a request's arrival to its response written (Kafka's TotalTimeMs); its _count is the request rate's counter."),
		bytesIn:             prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kbroker_topic_bytes_in_total", Help: "Record batch bytes appended from producers, by topic (Kafka's BytesInPerSec)."}, topic),
		messagesIn:          prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kbroker_topic_messages_in_total", Help: "Records appended from producers, by topic (Kafka's MessagesInPerSec)."}, topic),
		bytesOut:            prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kbroker_topic_bytes_out_total", Help: "Record bytes sent to consumers, by topic (Kafka's BytesOutPerSec; followers are counted in kbroker_replication_bytes_out_total)."}, topic),
		bytesRejected:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kbroker_topic_bytes_rejected_total", Help: "Produce data bytes refused because a batch exceeded max.message.bytes, by topic (Kafka's BytesRejectedPerSec)."}, topic),
		replicationBytesOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "kbroker_replication_bytes_out_total", Help: "Record bytes sent to follower replicas (Kafka's ReplicationBytesOutPerSec)."}),
	}
	m.times.with = func(name string) *requestTimes {
		return &requestTimes{
			queue: m.requestQueue.WithLabelValues(name), local: m.local.WithLabelValues(name), remote: m.remote.WithLabelValues(name),
			responseQueue: m.responseQueue.WithLabelValues(name), responseSend: m.responseSend.WithLabelValues(name), total: m.total.WithLabelValues(name),
		}
	}
	m.topicIn.with = func(t string) *topicInCounters {
		return &topicInCounters{bytes: m.bytesIn.WithLabelValues(t), messages: m.messagesIn.WithLabelValues(t)}
	}
	m.topicBytesOut.with = func(t string) prometheus.Counter { return m.bytesOut.WithLabelValues(t) }
	return m
}

// registerOpsMetrics adds the request, traffic and operator gauges to the
// /metrics registry.
func (b *Broker) registerOpsMetrics(reg *prometheus.Registry) {
	m := b.ops
	reg.MustRegister(m.requestQueue, m.local, m.remote, m.responseQueue, m.responseSend, m.total, m.bytesIn, m.messagesIn, m.bytesOut, m.bytesRejected, m.replicationBytesOut)
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kbroker_replication_bytes_in_total",
		Help: "Record bytes this broker's follower replicas fetched from leaders (Kafka's ReplicationBytesInPerSec)."},
		func() float64 { return float64(b.replThrottle.fetchedBytes.Load()) }))
	reg.MustRegister(newOpsCollector(b))
}

// requestMetricsName is Kafka's RequestMetrics name of a request: the API
// name, with Fetch split into FetchConsumer and FetchFollower.
func requestMetricsName(req kmsg.Request) string {
	if f, ok := req.(*kmsg.FetchRequest); ok {
		id := f.ReplicaID
		if f.Version >= 15 {
			id = f.ReplicaState.ID
		}
		if id >= 0 {
			return "FetchFollower"
		}
		return "FetchConsumer"
	}
	return kmsg.NameForKey(req.Key())
}

// requestTiming follows one request through its stages.
type requestTiming struct {
	name     string
	received time.Time // the whole frame read
	dequeued time.Time // its handler starts
	handled  time.Time // its handler returned
	// remoteNs is the purgatory wait inside the handler (a Fetch's long
	// poll), added by the handler through the context.
	remoteNs atomic.Int64
}

type requestTimingKey struct{}

// withRequestTiming gives handlers a place to report purgatory waits.
func withRequestTiming(ctx context.Context, t *requestTiming) context.Context {
	return context.WithValue(ctx, requestTimingKey{}, t)
}

// addRemoteTime counts d of the request's handler as remote time.
func addRemoteTime(ctx context.Context, d time.Duration) {
	if t, ok := ctx.Value(requestTimingKey{}).(*requestTiming); ok {
		t.remoteNs.Add(int64(d))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// finish records a request's times. awaitStart/awaitEnd bound the
// response's replication wait in the writer (equal when there is none);
// written is when its last byte went out (handled for acks=0 produces,
// which get no response).
func (m *opsMetrics) finish(t *requestTiming, awaitStart, awaitEnd, written time.Time) {
	if m == nil || t == nil {
		return
	}
	inHandler := time.Duration(t.remoteNs.Load())
	local := max(t.handled.Sub(t.dequeued)-inHandler, 0)
	remote := inHandler + awaitEnd.Sub(awaitStart)
	h := m.times.get(t.name)
	h.queue.Observe(ms(t.dequeued.Sub(t.received)))
	h.local.Observe(ms(local))
	h.remote.Observe(ms(remote))
	h.responseQueue.Observe(ms(max(awaitStart.Sub(t.handled), 0)))
	h.responseSend.Observe(ms(written.Sub(awaitEnd)))
	h.total.Observe(ms(written.Sub(t.received)))
}

// produced counts batches appended to topic from a producer.
func (m *opsMetrics) produced(topic string, batches [][]byte, headers []recordbatch.Header) {
	if m == nil { // a Broker built by a handler test
		return
	}
	var size, records int
	for i := range batches {
		size += len(batches[i])
		records += int(headers[i].RecordCount)
	}
	in := m.topicIn.get(topic)
	in.bytes.Add(float64(size))
	in.messages.Add(float64(records))
}

// rejected counts a partition's produce data refused for a batch over
// max.message.bytes: all its bytes, as Kafka marks BytesRejectedPerSec
// with the records' size when it throws RecordTooLargeException.
func (m *opsMetrics) rejected(topic string, size int) {
	if m == nil {
		return
	}
	m.bytesRejected.WithLabelValues(topic).Add(float64(size))
}

// fetched counts record bytes of topic answered to a consumer or follower.
func (m *opsMetrics) fetched(topic string, size int, follower bool) {
	if m == nil || size <= 0 {
		return
	}
	if follower {
		m.replicationBytesOut.Add(float64(size))
		return
	}
	m.topicBytesOut.get(topic).Add(float64(size))
}

// partitionLabels are a partition's metric labels.
func partitionLabels(topic string, partition int32) []string {
	return []string{topic, strconv.Itoa(int(partition))}
}
