package server

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/quota"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client quota enforcement, as Kafka's ClientQuotaManager (one per quota
// type: Produce, Fetch, Request) over the quotas in the cluster view:
//
//   - Produce: the request's size in bytes (the frame, as Kafka's
//     request.sizeInBytes) against producer_byte_rate, acks=0 included.
//   - Fetch: a consumer fetch's response size against consumer_byte_rate,
//     decided before the response is assembled; a throttled fetch is
//     answered empty and its bytes are not counted (Kafka's unrecord), and
//     a consumer's fetch is capped to what its quota allows in one window
//     (getMaxValueInQuotaWindow). Follower fetches are never counted.
//   - Request: the time the handler kept the broker busy (its time minus
//     what it parked: a fetch's long poll, a JoinGroup or SyncGroup waiting
//     for the rebalance) as a percentage of one second against
//     request_percentage, its throttle capped to one window (as
//     ClientRequestQuotaManager). Exempt as in Kafka: inter-broker APIs
//     (UpdateMetadata, ControlledShutdown, WriteTxnMarkers, AlterPartition,
//     follower fetches) and acks=0 produces.
//
// Which quota applies and which requests share a rate is internal/quota's
// Resolve (Kafka's precedence, user from the principal's name, the
// request's client id). A request over a quota is answered at once with
// throttle_time_ms, the larger of its throttles, and the connection reads
// nothing more until that time has passed and the answer is written
// (KIP-219: the broker mutes the channel; newer clients also hold back on
// their own). controller_mutation_rate is stored but not enforced.

// quotaKind is one of Kafka's client quota types.
type quotaKind int

const (
	produceQuota quotaKind = iota
	fetchQuota
	requestQuota
	numQuotaKinds
)

// quotaKinds names each kind as Kafka's QuotaType and its config key.
var quotaKinds = [numQuotaKinds]struct{ name, key string }{
	produceQuota: {"Produce", controller.ProducerByteRate},
	fetchQuota:   {"Fetch", controller.ConsumerByteRate},
	requestQuota: {"Request", controller.RequestPercentage},
}

// quotaSensorExpiry is how long a rate nobody recorded into is kept
// (Kafka's InactiveSensorExpirationTimeSeconds).
const quotaSensorExpiry = time.Hour

// quotaSensorKey names one rate: a quota kind and the entity Resolve
// counts the request in.
type quotaSensorKey struct {
	kind   quotaKind
	entity quota.Entity
}

// quotaSensor is one rate and what the metrics report of it.
type quotaSensor struct {
	rate       quota.Rate
	bound      float64
	lastUsed   time.Time
	throttleMs int64 // total throttle time given
	throttled  int64 // responses throttled
}

// clientQuotas holds the rates of the broker's client quotas.
type clientQuotas struct {
	cfg    quota.Config
	logger *slog.Logger
	// configured caches, per view, which kinds have a quota anywhere, so
	// a broker without quotas spends one pointer compare per request.
	configured atomic.Pointer[configuredQuotas]

	// mu guards sensors and lastSweep.
	mu        sync.Mutex
	sensors   map[quotaSensorKey]*quotaSensor
	lastSweep time.Time

	throttleDesc, rateDesc, boundDesc *prometheus.Desc
}

// configuredQuotas says which quota kinds md sets for any entity.
type configuredQuotas struct {
	md    *controller.Metadata
	kinds [numQuotaKinds]bool
}

func newClientQuotas(cfg quota.Config, logger *slog.Logger) *clientQuotas {
	labels := []string{"type", "user", "client_id"}
	return &clientQuotas{cfg: cfg, logger: logger, sensors: map[quotaSensorKey]*quotaSensor{},
		throttleDesc: prometheus.NewDesc("kbroker_client_quota_throttle_time_ms_total", "Throttle time given to clients over a quota, by quota type (Produce, Fetch, Request) and the entity the rate is kept for (Kafka's throttle-time sensor).", labels, nil),
		rateDesc:     prometheus.NewDesc("kbroker_client_quota_rate", "Current rate of each quota entity: bytes/s for Produce and Fetch (Kafka's byte-rate), percent of one thread for Request (request-time).", labels, nil),
		boundDesc:    prometheus.NewDesc("kbroker_client_quota_limit", "The quota each rate is held to (producer_byte_rate, consumer_byte_rate, request_percentage).", labels, nil),
	}
}

// kindsIn reports which quota kinds md configures for any entity.
func (q *clientQuotas) kindsIn(md *controller.Metadata) [numQuotaKinds]bool {
	if c := q.configured.Load(); c != nil && c.md == md {
		return c.kinds
	}
	c := &configuredQuotas{md: md}
	scan := func(configs map[string]map[string]string) {
		for _, cfg := range configs {
			for k := range quotaKinds {
				if _, ok := cfg[quotaKinds[k].key]; ok {
					c.kinds[k] = true
				}
			}
		}
	}
	scan(md.UserConfigs)
	scan(md.ClientConfigs)
	for _, clients := range md.UserClientConfigs {
		scan(clients)
	}
	q.configured.Store(c)
	return c.kinds
}

// principalName is the name part of a principal (User:alice -> alice),
// which Kafka's quotas key users by.
func principalName(principal string) string {
	if _, name, ok := strings.Cut(principal, ":"); ok {
		return name
	}
	return principal
}

// resolve finds the quota of kind for user and clientID in md.
func resolveQuota(md *controller.Metadata, kind quotaKind, user, clientID string) (quota.Entity, float64, bool) {
	key := quotaKinds[kind].key
	return quota.Resolve(user, clientID, func(u, c string) (float64, bool) {
		v, ok := md.EntityConfig(controller.QuotaEntity{User: u, Client: c})[key]
		if !ok {
			return 0, false
		}
		// A value that does not read as a positive number (written by
		// hand) sets no quota, as Kafka's config handler rejects it.
		b, err := strconv.ParseFloat(v, 64)
		if err != nil || !(b > 0) {
			return 0, false
		}
		return b, true
	})
}

// sensorLocked returns the rate for key, made if missing, and sweeps rates
// unused for quotaSensorExpiry (at most once a minute).
func (q *clientQuotas) sensorLocked(key quotaSensorKey, now time.Time) *quotaSensor {
	if now.Sub(q.lastSweep) > time.Minute {
		q.lastSweep = now
		for k, s := range q.sensors {
			if now.Sub(s.lastUsed) > quotaSensorExpiry {
				delete(q.sensors, k)
			}
		}
	}
	s := q.sensors[key]
	if s == nil {
		s = &quotaSensor{}
		q.sensors[key] = s
	}
	s.lastUsed = now
	return s
}

// record counts value into the rate of kind the request falls under and
// returns the throttle that earns (0 within the quota or with none) and
// the rate's key.
func (q *clientQuotas) record(md *controller.Metadata, kind quotaKind, rq *quotaState, value float64, now time.Time) (time.Duration, quotaSensorKey) {
	entity, bound, ok := resolveQuota(md, kind, rq.user, rq.clientID)
	key := quotaSensorKey{kind, entity}
	if !ok {
		return 0, key
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.sensorLocked(key, now)
	s.bound = bound
	ms := s.rate.RecordAndThrottle(q.cfg, value, bound, now.UnixMilli())
	if kind == requestQuota {
		ms = min(ms, q.cfg.Window.Milliseconds())
	}
	return time.Duration(ms) * time.Millisecond, key
}

// noteThrottle counts a throttle given for the rate key.
func (q *clientQuotas) noteThrottle(key quotaSensorKey, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if s := q.sensors[key]; s != nil {
		s.throttleMs += d.Milliseconds()
		s.throttled++
	}
}

// Describe implements prometheus.Collector.
func (q *clientQuotas) Describe(ch chan<- *prometheus.Desc) {
	ch <- q.throttleDesc
	ch <- q.rateDesc
	ch <- q.boundDesc
}

// Collect implements prometheus.Collector: one series of each metric per
// rate kept.
func (q *clientQuotas) Collect(ch chan<- prometheus.Metric) {
	now := time.Now().UnixMilli()
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, s := range q.sensors {
		labels := []string{quotaKinds[k.kind].name, k.entity.User, k.entity.ClientID}
		ch <- prometheus.MustNewConstMetric(q.throttleDesc, prometheus.CounterValue, float64(s.throttleMs), labels...)
		ch <- prometheus.MustNewConstMetric(q.rateDesc, prometheus.GaugeValue, s.rate.Measure(q.cfg, now), labels...)
		ch <- prometheus.MustNewConstMetric(q.boundDesc, prometheus.GaugeValue, s.bound, labels...)
	}
}

// quotaState is one request's quota state, carried in its context so
// the Fetch handler can decide before it answers.
type quotaState struct {
	md       *controller.Metadata
	kinds    [numQuotaKinds]bool
	user     string
	clientID string
	start    time.Time
	park     *quota.ParkClock
	// requestCharged: the request's time was already recorded (a fetch
	// does it before answering).
	requestCharged bool
	// throttle is the largest throttle earned so far, on the rate key.
	throttle time.Duration
	key      quotaSensorKey
}

type requestQuotaKey struct{}

// earn keeps the larger of the request's throttles.
func (rq *quotaState) earn(d time.Duration, key quotaSensorKey) {
	if d > rq.throttle {
		rq.throttle, rq.key = d, key
	}
}

// chargeRequestTime records the request's busy time so far against its
// request quota, once.
func (b *Broker) chargeRequestTime(rq *quotaState, now time.Time) {
	if rq.requestCharged || !rq.kinds[requestQuota] {
		return
	}
	rq.requestCharged = true
	busy := now.Sub(rq.start) - rq.park.Total()
	percent := float64(max(busy, 0)) * 100 / float64(time.Second)
	d, key := b.clientQuotas.record(rq.md, requestQuota, rq, percent, now)
	rq.earn(d, key)
}

// requestQuotaExempt lists the requests Kafka never charges to a request
// quota (sendResponseExemptThrottle): the inter-broker APIs.
func requestQuotaExempt(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.UpdateMetadataRequest, *kmsg.ControlledShutdownRequest, *kmsg.WriteTxnMarkersRequest,
		*kmsg.AlterPartitionRequest, *kmsg.LeaderAndISRRequest, *kmsg.StopReplicaRequest:
		return true
	case *kmsg.FetchRequest:
		return fetchReplicaID(r) >= 0
	case *kmsg.ProduceRequest:
		return r.Acks == 0
	}
	return false
}

// fetchReplicaID is the replica id of a fetch (-1 for consumers).
func fetchReplicaID(r *kmsg.FetchRequest) int32 {
	if r.Version >= 15 {
		return r.ReplicaState.ID
	}
	return r.ReplicaID
}

// handleWithQuotas runs the request's handler and applies the client
// quotas: it records what the request used, sets throttle_time_ms in the
// response when a quota is exceeded and returns until when the connection
// must read nothing more (zero: not throttled). frameSize is the request's
// size in bytes.
func (b *Broker) handleWithQuotas(ctx context.Context, rc *requestContext, req kmsg.Request, frameSize int) (kmsg.Response, time.Time, error) {
	md := b.controller.Metadata()
	kinds := b.clientQuotas.kindsIn(md)
	if kinds == ([numQuotaKinds]bool{}) {
		resp, err := b.handle(ctx, rc, req)
		return resp, time.Time{}, err
	}
	rq := &quotaState{md: md, kinds: kinds, user: principalName(rc.principal), clientID: rc.clientID, start: time.Now()}
	ctx = context.WithValue(ctx, requestQuotaKey{}, rq)
	if kinds[requestQuota] {
		ctx, rq.park = quota.WithParkClock(ctx)
	}
	resp, err := b.handle(ctx, rc, req)
	if err != nil {
		return resp, time.Time{}, err
	}
	now := time.Now()
	if _, ok := req.(*kmsg.ProduceRequest); ok && kinds[produceQuota] {
		d, key := b.clientQuotas.record(md, produceQuota, rq, float64(frameSize), now)
		rq.earn(d, key)
	}
	if !requestQuotaExempt(req) {
		b.chargeRequestTime(rq, now)
	}
	if rq.throttle <= 0 {
		return resp, time.Time{}, nil
	}
	b.clientQuotas.noteThrottle(rq.key, rq.throttle)
	if tr, ok := resp.(kmsg.SetThrottleResponse); ok {
		tr.SetThrottle(int32(rq.throttle.Milliseconds()))
	}
	return resp, now.Add(rq.throttle), nil
}

// fetchResponseOverhead estimates the bytes a partition adds to a Fetch
// response besides its records (index, error, offsets, lengths, tags).
const fetchResponseOverhead = 48

// throttleFetch applies the consumer fetch quota and the request quota to
// a consumer fetch about to be answered with responseBytes, as Kafka's
// handleFetchRequest does before building the response: it returns the
// throttle (0: answer as read); when throttled the caller answers with no
// records, and the bytes are not counted.
func (b *Broker) throttleFetch(ctx context.Context, responseBytes int, now time.Time) time.Duration {
	rq := requestQuotaFrom(ctx)
	if rq == nil {
		return 0
	}
	b.chargeRequestTime(rq, now)
	throttle := rq.throttle
	if rq.kinds[fetchQuota] {
		d, key := b.clientQuotas.record(rq.md, fetchQuota, rq, float64(responseBytes), now)
		rq.earn(d, key)
		throttle = max(throttle, d)
		if throttle > 0 {
			b.clientQuotas.unrecord(key, float64(responseBytes), now)
		}
	}
	return throttle
}

// fetchQuotaMaxBytes caps a consumer fetch's byte budget to what its
// consumer quota allows in one window (getMaxValueInQuotaWindow), so that
// one response cannot earn a throttle of many windows.
func (b *Broker) fetchQuotaMaxBytes(ctx context.Context, maxBytes int) int {
	rq := requestQuotaFrom(ctx)
	if rq == nil || !rq.kinds[fetchQuota] {
		return maxBytes
	}
	if _, bound, ok := resolveQuota(rq.md, fetchQuota, rq.user, rq.clientID); ok {
		return int(min(float64(maxBytes), quota.MaxValueInWindow(b.clientQuotas.cfg, bound)))
	}
	return maxBytes
}

// fetchResponseBytes is the size of a Fetch response about to be
// assembled from targets: the records of the partitions it includes plus
// each one's header.
func fetchResponseBytes(targets []*fetchTarget) int {
	n := 0
	for _, t := range targets {
		if t.include {
			n += t.records.Size() + fetchResponseOverhead
		}
	}
	return n
}

// unrecord takes value back out of a rate (a throttled fetch's bytes, which
// are not sent).
func (q *clientQuotas) unrecord(key quotaSensorKey, value float64, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if s := q.sensors[key]; s != nil {
		s.rate.Record(q.cfg, -value, now.UnixMilli())
	}
}

// requestQuotaFrom is the quota state handleWithQuotas put in ctx (nil:
// no quota is configured).
func requestQuotaFrom(ctx context.Context) *quotaState {
	rq, _ := ctx.Value(requestQuotaKey{}).(*quotaState)
	return rq
}

// waitMuted waits until a throttled connection may read again; false if
// ctx ended first.
func waitMuted(ctx context.Context, until time.Time) bool {
	d := time.Until(until)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// kafkaMessage is an error answered with exactly Kafka's message, its code
// the wrapped kerr.
type kafkaMessage struct {
	code *kerr.Error
	msg  string
}

func (e *kafkaMessage) Error() string { return e.msg }
func (e *kafkaMessage) Unwrap() error { return e.code }

func kafkaErr(code *kerr.Error, format string, args ...any) error {
	return &kafkaMessage{code, fmt.Sprintf(format, args...)}
}
