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
	}
}

func (d *schedDescs) describe(ch chan<- *prometheus.Desc) {
	ch <- d.burstSpread
	ch <- d.outMismatch
	ch <- d.inMismatch
}

// burstSpreadBuckets: goroutines released together start within
// microseconds on an idle machine; milliseconds mean a busy scheduler or
// connection setup, which is exactly what a burst test wants to see.
func burstSpreadBuckets() []float64 {
	return []float64{0.00001, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
}

type schedSeries struct {
	s                       *series
	outMismatch, inMismatch prometheus.Counter

	// The spread histogram is created by the first burst, so probes that
	// never burst do not export an empty one.
	mu      sync.Mutex
	spread  prometheus.Histogram
	spreadW prometheus.Metric
}

func (ss *schedSeries) init(s *series) {
	ss.s = s
	ss.outMismatch, ss.inMismatch = newCounter(), newCounter()
	s.always = append(s.always,
		newLabelled(s.d.sched.outMismatch, ss.outMismatch, s.base...),
		newLabelled(s.d.sched.inMismatch, ss.inMismatch, s.base...))
}

func (ss *schedSeries) collect(ch chan<- prometheus.Metric) {
	ss.mu.Lock()
	w := ss.spreadW
	ss.mu.Unlock()
	if w != nil {
		ch <- w
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
		ss.spread = newHistogram("burst_spread", burstSpreadBuckets())
		ss.spreadW = newLabelled(s.d.sched.burstSpread, ss.spread, s.base...)
	}
	h := ss.spread
	ss.mu.Unlock()
	h.Observe(spread.Seconds())
}

// OutputLengthMismatch counts a request whose output length missed the
// requested max_tokens by more than 10%.
func (m *ProbeMetrics) OutputLengthMismatch(target, probeName string) {
	if s := m.lookup(target, probeName); s != nil {
		s.sched.outMismatch.Inc()
	}
}

// InputLengthMismatch counts a synthetic prompt whose server-side length
// missed its target by more than the tolerance.
func (m *ProbeMetrics) InputLengthMismatch(target, probeName string) {
	if s := m.lookup(target, probeName); s != nil {
		s.sched.inMismatch.Inc()
	}
}
