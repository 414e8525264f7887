package collector

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics about how faithfully the probes were shaped: the spread of a
// burst's send times, and requests whose lengths missed what was asked for.
// They live in each probe's series, so a probe removed on reload takes
// them along.

type schedDescs struct {
	burstSpread, outMismatch, inMismatch *prometheus.Desc
	scheduled, inFlight                  *prometheus.Desc
}

func newSchedDescs(base []string) schedDescs {
	return schedDescs{
		burstSpread: prometheus.NewDesc("llm_probe_burst_spread_seconds",
			"Per burst, the time between the first and the last of its requests actually being sent; the requests were planned for the same instant.",
			base, nil),
		outMismatch: prometheus.NewDesc("llm_probe_output_length_mismatch_total",
			"Successful requests whose output tokens differ from the requested max_tokens by more than 10%.",
			base, nil),
		inMismatch: prometheus.NewDesc("llm_probe_input_length_mismatch_total",
			"Successful requests with a synthetic prompt whose server-counted prompt tokens differ from the target length by more than 10% (plus 32 tokens of chat template).",
			base, nil),
		scheduled: prometheus.NewDesc("llm_probe_scheduled_total",
			"Arrivals the probe's schedule produced. Each is either skipped (llm_probe_skipped_total) or sent, and a sent request is counted in llm_probe_requests_total when it ends: scheduled = sum of requests + sum of skipped + in flight.",
			base, nil),
		inFlight: prometheus.NewDesc("llm_probe_in_flight_requests",
			"Requests of the probe sent and not yet ended.",
			base, nil),
	}
}

func (d *schedDescs) list() []*prometheus.Desc {
	return []*prometheus.Desc{d.burstSpread, d.outMismatch, d.inMismatch, d.scheduled, d.inFlight}
}

// burstSpreadBuckets: goroutines released together start within
// microseconds on an idle machine; milliseconds mean a busy scheduler or
// connection setup, which is exactly what a burst test wants to see.
func burstSpreadBuckets() []float64 {
	return []float64{0.00001, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
}

type schedSeries struct {
	s *series
	// The mismatch counters are created by their first mismatch: a
	// workload that forces the length never has one.
	outMismatch, inMismatch lazy[counter]
	scheduled               *counter
	// inFlight is nil when the in_flight family is switched off.
	inFlight *gauge

	// The spread histogram is created by the first burst, so probes that
	// never burst do not export an empty one.
	mu      sync.Mutex
	spread  prometheus.Histogram
	spreadW prometheus.Metric
}

func (ss *schedSeries) init(s *series) {
	ss.s = s
	ss.scheduled = s.counter(s.d.sched.scheduled)
	s.always = append(s.always, ss.scheduled)
	if !s.disabled.has(FamilyInFlight) {
		ss.inFlight = newGauge(s.d.sched.inFlight, s.labels)
		s.always = append(s.always, ss.inFlight)
	}
}

func (ss *schedSeries) collect(ch chan<- prometheus.Metric) {
	ss.mu.Lock()
	w := ss.spreadW
	ss.mu.Unlock()
	if w != nil {
		ch <- w
	}
	for _, l := range []*lazy[counter]{&ss.outMismatch, &ss.inMismatch} {
		if c := l.load(); c != nil {
			ch <- c
		}
	}
}

// ObserveBurstSpread records the send-time spread of one burst.
func (m *ProbeMetrics) ObserveBurstSpread(target, probeName string, spread time.Duration) {
	s := m.lookup(target, probeName)
	if s == nil {
		return
	}
	ss := &s.sched
	ss.mu.Lock()
	if ss.spread == nil {
		ss.spread = s.histogram("burst_spread", burstSpreadBuckets())
		ss.spreadW = newLabelled(s.d.sched.burstSpread, ss.spread, s.labels)
	}
	h := ss.spread
	ss.mu.Unlock()
	h.Observe(spread.Seconds())
}

// OutputLengthMismatch counts a request whose output length missed the
// requested max_tokens by more than 10%.
func (m *ProbeMetrics) OutputLengthMismatch(target, probeName string) {
	if s := m.lookup(target, probeName); s != nil {
		s.sched.outMismatch.get(func() *counter { return s.lateCounter(s.d.sched.outMismatch) }).Inc()
	}
}

// InputLengthMismatch counts a synthetic prompt whose server-side length
// missed its target by more than the tolerance.
func (m *ProbeMetrics) InputLengthMismatch(target, probeName string) {
	if s := m.lookup(target, probeName); s != nil {
		s.sched.inMismatch.get(func() *counter { return s.lateCounter(s.d.sched.inMismatch) }).Inc()
	}
}

// Scheduled counts one arrival of the probe's schedule, sent or skipped.
// With Skipped, Observe and InFlight it makes the accounting checkable:
// every arrival ends up in exactly one of requests, skipped or in flight.
func (m *ProbeMetrics) Scheduled(target, probeName string) {
	if s := m.lookup(target, probeName); s != nil {
		s.sched.scheduled.Inc()
	}
}

// InFlight adds delta (+1 when a request is sent, -1 once its result was
// observed) to the probe's in-flight gauge.
func (m *ProbeMetrics) InFlight(target, probeName string, delta float64) {
	if s := m.lookup(target, probeName); s != nil && s.sched.inFlight != nil {
		s.sched.inFlight.Add(delta)
	}
}
