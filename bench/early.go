package bench

import (
	"slices"
	"time"

	"github.com/llm-prober/llm-prober/probe"
)

// How a capacity-search step may end before its windows do.
const (
	earlyCheckEvery = 250 * time.Millisecond
	// earlyStopDrain bounds the wait for an early-stopped step's
	// in-flight requests; the rest are cancelled.
	earlyStopDrain = time.Second
	// earlyMinRequests: fewer requests say too little to stop on.
	earlyMinRequests = 10
	// earlyZ is the confidence of both early verdicts, in standard
	// deviations: at 4 a stable step is almost never stopped, even with
	// the step judged again every earlyCheckEvery.
	earlyZ = 4
	// earlyMinInflightSamples is how many in-flight samples the slope
	// needs (two seconds' worth).
	earlyMinInflightSamples = 8
)

// earlyStop ends a step: the verdict is already known.
type earlyStop struct{ reason string }

func (e *earlyStop) Error() string { return "stopped early: " + e.reason }

// Reasons for stopping a step early.
const (
	StoppedGoodput       = "goodput"
	StoppedOversaturated = "oversaturated"
)

// earlyStop judges a capacity-search step so far. It stops when the share
// of bad requests is clearly above what the objective allows (the Wilson
// lower bound at earlyZ), or, for open-loop steps, when the load is
// clearly past the knee: TTFT by send time and requests in flight both
// rise with a significant slope (t > earlyZ) and by a margin that matters
// (half their mean over the step so far), as GuideLLM's over-saturation
// constraint does. A closed loop cannot over-saturate: its queue is
// bounded by its users.
func (s *stepRun) earlyStop(now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Before(s.measure) {
		return ""
	}
	t := now.Sub(s.measure).Seconds()
	s.inflightAt = append(s.inflightAt, [2]float64{t, float64(s.inflight)})
	slo := s.o.SLO
	var n, bad int
	var xs, ys []float64
	for _, w := range s.windows {
		for _, r := range w.records {
			n++
			if !slo.good(r.sample) {
				bad++
			}
			if r.outcome == probe.OutcomeSuccess && r.ttft > 0 {
				xs = append(xs, r.start.Sub(s.measure).Seconds())
				ys = append(ys, r.ttft.Seconds())
			}
		}
		for _, k := range w.skipped {
			n += k
			bad += k
		}
	}
	if slo.Set() && n >= earlyMinRequests && wilsonLower(bad, n, earlyZ) > 1-s.o.objective() {
		return StoppedGoodput
	}
	if s.step.Mode == ModeConcurrency || len(xs) < earlyMinRequests || len(s.inflightAt) < earlyMinInflightSamples {
		return ""
	}
	if !rising(xs, ys) {
		return ""
	}
	ts, ns := make([]float64, len(s.inflightAt)), make([]float64, len(s.inflightAt))
	for i, p := range s.inflightAt {
		ts[i], ns[i] = p[0], p[1]
	}
	if !rising(ts, ns) {
		return ""
	}
	return StoppedOversaturated
}

// rising: y grows with x significantly, and over x's range by at least
// half y's mean (a slope that is real but tiny is not saturation).
func rising(xs, ys []float64) bool {
	b, tstat := slope(xs, ys)
	if !(tstat > earlyZ) {
		return false
	}
	var mean float64
	for _, y := range ys {
		mean += y
	}
	mean /= float64(len(ys))
	lo, hi := slices.Min(xs), slices.Max(xs)
	return b*(hi-lo) > 0.5*mean
}
