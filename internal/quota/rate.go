// Package quota is the arithmetic of Kafka's client quotas
// (ClientQuotaManager.scala and the metrics it sits on: Rate,
// SampledStat, Sensor.checkQuotas): a rate kept over a ring of time
// windows, the throttle time a violation earns, and which configured
// quota applies to a user and client id. It holds no clock and no lock:
// callers pass the time in and guard each Rate themselves.
package quota

import (
	"math"
	"time"
)

// Config is how rates are sampled: Kafka's quota.window.num (Samples,
// default 11: ten whole windows and the current one) and
// quota.window.size.seconds (Window, default 1 s).
type Config struct {
	Samples int
	Window  time.Duration
}

// DefaultConfig is Kafka's default sampling.
var DefaultConfig = Config{Samples: 11, Window: time.Second}

func (c Config) windowMs() int64 { return c.Window.Milliseconds() }

// sample is one time window's sum (SampledStat.Sample): started at
// startMs, last written at lastEventMs.
type sample struct {
	value       float64
	events      int64
	startMs     int64
	lastEventMs int64
}

func (s *sample) reset(nowMs int64) { *s = sample{startMs: nowMs, lastEventMs: nowMs} }

// Rate is Kafka's Rate over a WindowedSum (Kafka 3.9): values are summed
// in windows of Config.Window, Config.Samples+1 of them kept in a ring
// (one extra for the window that overlaps the oldest edge), and the rate
// is their total over the time they span, never less than Samples-1
// whole windows, so the first values of a quiet client do not read as a
// burst. The zero Rate is empty and ready; it is not safe for concurrent
// use.
type Rate struct {
	samples []sample
	current int
}

// Record adds value at nowMs (SampledStat.record): into the current
// window, or a new one once the current one is Window old.
func (r *Rate) Record(cfg Config, value float64, nowMs int64) {
	s := r.currentSample(nowMs)
	if nowMs-s.startMs >= cfg.windowMs() {
		s = r.advance(cfg, nowMs)
	}
	s.value += value
	s.events++
	s.lastEventMs = nowMs
}

func (r *Rate) currentSample(nowMs int64) *sample {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{startMs: nowMs, lastEventMs: nowMs})
	}
	return &r.samples[r.current]
}

// advance moves to the next window of the ring, reusing the oldest.
func (r *Rate) advance(cfg Config, nowMs int64) *sample {
	r.current = (r.current + 1) % (cfg.Samples + 1)
	if r.current >= len(r.samples) {
		r.samples = append(r.samples, sample{startMs: nowMs, lastEventMs: nowMs})
	} else {
		r.samples[r.current].reset(nowMs)
	}
	return &r.samples[r.current]
}

// purge empties windows without an event in the last Samples windows
// (SampledStat.purgeObsoleteSamples).
func (r *Rate) purge(cfg Config, nowMs int64) {
	expire := int64(cfg.Samples) * cfg.windowMs()
	for i := range r.samples {
		if nowMs-r.samples[i].lastEventMs >= expire {
			r.samples[i].reset(nowMs)
		}
	}
}

// WindowSize is the span the rate is measured over at nowMs
// (Rate.windowSize): from the start of the oldest window kept, at least
// Samples-1 whole windows, at least 1 ms.
func (r *Rate) WindowSize(cfg Config, nowMs int64) int64 {
	r.purge(cfg, nowMs)
	oldest := nowMs
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{startMs: nowMs, lastEventMs: nowMs})
	}
	for _, s := range r.samples {
		oldest = min(oldest, s.startMs)
	}
	elapsed := nowMs - oldest
	w := cfg.windowMs()
	if full, minFull := elapsed/w, int64(cfg.Samples-1); full < minFull {
		elapsed += (minFull - full) * w
	}
	return max(elapsed, 1)
}

// Measure is the rate at nowMs, per second (Rate.measure).
func (r *Rate) Measure(cfg Config, nowMs int64) float64 {
	r.purge(cfg, nowMs)
	total := 0.0
	for _, s := range r.samples {
		total += s.value
	}
	return total / (float64(r.WindowSize(cfg, nowMs)) / 1000)
}

// ThrottleTime is ClientQuotaManager.throttleTime: how long a client
// observed at rate observed must stay quiet for its rate over windowMs to
// come down to bound. If O is the observed rate, T the bound and W the
// window, a delay X gives O*W/(W+X) = T, so X = (O-T)/T*W; rounded to
// whole milliseconds as Math.round does.
func ThrottleTime(observed, bound float64, windowMs int64) int64 {
	return int64(math.Floor((observed-bound)/bound*float64(windowMs) + 0.5))
}

// RecordAndThrottle records value at nowMs and checks the rate against
// bound, as Sensor.record with its quota does: the value is counted
// either way, and a rate above bound earns ThrottleTime over the window
// the rate was measured on (0 when within bound).
func (r *Rate) RecordAndThrottle(cfg Config, value, bound float64, nowMs int64) int64 {
	r.Record(cfg, value, nowMs)
	observed := r.Measure(cfg, nowMs)
	if observed <= bound {
		return 0
	}
	return ThrottleTime(observed, bound, r.WindowSize(cfg, nowMs))
}

// MaxValueInWindow is ClientQuotaManager.getMaxValueInQuotaWindow: the
// largest value that could be recorded at once without a throttle, had
// nothing been recorded in the windows (bound * (Samples-1) windows).
// Fetches are capped to it, or one large response would earn a throttle
// of many seconds.
func MaxValueInWindow(cfg Config, bound float64) float64 {
	return bound * float64(cfg.Samples-1) * cfg.Window.Seconds()
}
