package backtest

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llm-prober/llm-prober/probe"
)

// FaultKind is what goes wrong with a probe's server.
type FaultKind int

// Fault kinds.
const (
	// FaultDown: connection refused; every request fails at once.
	FaultDown FaultKind = iota
	// FaultHung: every request times out after the probe's timeout; with
	// one request in flight at most, arrivals meanwhile are skipped with
	// reason concurrency_limit.
	FaultHung
	// FaultSlow: every TTFT is multiplied by Factor.
	FaultSlow
	// FaultTrickle: each request, with probability Prob, has a TTFT of
	// three times the SLO threshold.
	FaultTrickle
	// FaultOutliers: the first Count requests sent at or after From have a
	// TTFT of ten times the SLO threshold (capped below the timeout).
	FaultOutliers
)

// Fault is one fault over [From, To), times relative to the run's incident
// time.
type Fault struct {
	Kind     FaultKind
	From, To time.Duration
	Factor   float64
	Prob     float64
	Count    int
}

// ProbeSpec is one simulated probe: a constant schedule at Interval with a
// random phase, against the healthy server plus Faults.
type ProbeSpec struct {
	Target, Probe, Model string
	Interval             time.Duration
	SLO                  SLO
	Seed                 uint64
	// New: the probe is created at the incident time (a config reload
	// adding it), not present from the start.
	New bool
	// Removed: the probe is removed (a reload) at RemovedAt.
	Removed   bool
	RemovedAt time.Duration
	Faults    []Fault
	// Module: the probe's target was discovered by this module (fleet
	// discovery), so the prober exports
	// llm_prober_discovered_target_info{target, module} while it exists.
	Module string
}

// Names of the series the simulated prober exports per probe
// (collector/probe_metrics.go, collector/schedule_metrics.go and the
// streak and schedule gauges of issue 26), and Prometheus' up.
const (
	mRequests        = "llm_probe_requests_total"
	mSLORequests     = "llm_probe_slo_requests_total"
	mObjective       = "llm_probe_slo_objective_ratio"
	mSuccess         = "llm_probe_success"
	mLastRun         = "llm_probe_last_run_timestamp_seconds"
	mScheduled       = "llm_probe_scheduled_total"
	mSkipped         = "llm_probe_skipped_total"
	mInFlight        = "llm_probe_in_flight_requests"
	mConsecutive     = "llm_probe_consecutive_failures"
	mFailingSince    = "llm_probe_failing_since_timestamp_seconds"
	mPlannedInterval = "llm_probe_planned_interval_seconds"
	mTTFTBucket      = "llm_probe_time_to_first_token_seconds_bucket"
	mTTFTSum         = "llm_probe_time_to_first_token_seconds_sum"
	mTTFTCount       = "llm_probe_time_to_first_token_seconds_count"
	mUp              = "up"
	// mDiscoveredInfo is discovery.Manager's, one series per discovered
	// target (not per probe), carrying the module that made it.
	mDiscoveredInfo = "llm_prober_discovered_target_info"
)

// rawNames are every metric name a simulated scrape can carry.
func rawNames() []string {
	return []string{mRequests, mSLORequests, mObjective, mSuccess, mLastRun, mScheduled, mSkipped, mInFlight,
		mConsecutive, mFailingSince, mPlannedInterval, mTTFTBucket, mTTFTSum, mTTFTCount, mUp, mDiscoveredInfo}
}

// ttftBuckets are collector/buckets.go's ttftBuckets; the probe's TTFT
// threshold is added to them as the collector's withThresholds does.
func ttftBuckets() []float64 {
	return []float64{0.005, 0.01, 0.02, 0.04, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

// skipReasons are collector's initialSkipReasons, in its order.
func skipReasons() []string {
	return []string{"concurrency_limit", "overdue", "target_concurrency_limit"}
}

var sloNames = [3]string{"ttft", "tpot", "goodput"}

// outcomes are those an openai chat probe exports (its protocol's).
func outcomes() []string {
	p, ok := probe.LookupProtocol(probe.ProtocolOpenAIChat)
	if !ok {
		panic("no openai chat protocol")
	}
	out := make([]string, len(p.Outcomes))
	for i, o := range p.Outcomes {
		out[i] = string(o)
	}
	return out
}

// request is a sent request until it ends.
type request struct {
	arrival, end int64 // ms
	outcome      int   // index into outcomes
	ttft, tpot   float64
}

// probeSim is one probe's state: the scheduler, the request in flight
// and everything the collector would export.
type probeSim struct {
	spec     *ProbeSpec
	srv      *Server
	rng      *rand.Rand
	t0       int64 // incident time, ms
	interval int64

	// active: the probe exists in the running prober.
	active   bool
	next     int64
	inflight bool
	req      request
	outliers []int // requests left per FaultOutliers fault

	requests               []float64
	slo                    [3][2]float64 // sloNames x good, bad
	scheduled              float64
	skipped                [3]float64
	ran                    bool
	success, lastRun       float64
	consecutive, failingAt float64
	bounds                 []float64
	buckets                []float64 // per bound, not cumulative; +Inf last
	ttftSum, ttftCount     float64

	success0, timeout, connErr, http5xx int
}

func newProbeSim(spec *ProbeSpec, srv *Server, t0 int64) *probeSim {
	outs := outcomes()
	p := &probeSim{
		spec:     spec,
		srv:      srv,
		rng:      rand.New(rand.NewPCG(spec.Seed, spec.Seed^0x9e3779b97f4a7c15)),
		t0:       t0,
		interval: spec.Interval.Milliseconds(),
		requests: make([]float64, len(outs)),
		success0: slices.Index(outs, "success"),
		timeout:  slices.Index(outs, "timeout"),
		connErr:  slices.Index(outs, "connect_error"),
		http5xx:  slices.Index(outs, "http_5xx"),
	}
	p.bounds = ttftBuckets()
	if thr := spec.SLO.TTFT.Seconds(); thr > 0 && !slices.Contains(p.bounds, thr) {
		p.bounds = append(p.bounds, thr)
		slices.Sort(p.bounds)
	}
	p.buckets = make([]float64, len(p.bounds)+1)
	p.outliers = make([]int, len(spec.Faults))
	for i, f := range spec.Faults {
		p.outliers[i] = f.Count
	}
	return p
}

// start (re)starts the probe at t with every series at zero, as a new
// probe or a restarted prober has it; the first arrival falls within
// firstWithin of t.
func (p *probeSim) start(t, firstWithin int64) {
	p.active = true
	p.inflight = false
	clear(p.requests)
	p.slo = [3][2]float64{}
	p.scheduled = 0
	p.skipped = [3]float64{}
	p.ran = false
	p.success, p.lastRun = 0, 0
	p.consecutive, p.failingAt = 0, 0
	clear(p.buckets)
	p.ttftSum, p.ttftCount = 0, 0
	p.next = t + p.rng.Int64N(max(firstWithin, 1))
}

// stop ends the probe (removed, or its prober went down); a request in
// flight is lost.
func (p *probeSim) stop() {
	p.active = false
	p.inflight = false
}

// advance runs the schedule and ends requests up to and including t.
func (p *probeSim) advance(t int64) {
	if !p.active {
		return
	}
	for {
		if p.inflight && p.req.end <= t && p.req.end <= p.next {
			p.complete()
			continue
		}
		if p.next <= t {
			p.arrive(p.next)
			p.next += p.interval
			continue
		}
		return
	}
}

func (p *probeSim) fault(kind FaultKind, at int64) (int, *Fault) {
	rel := time.Duration(at-p.t0) * time.Millisecond
	for i := range p.spec.Faults {
		f := &p.spec.Faults[i]
		if f.Kind == kind && rel >= f.From && rel < f.To {
			return i, f
		}
	}
	return -1, nil
}

// streak adds a failed or skipped arrival to the failure streak. As in
// collector's streak, the streak starts at its earliest arrival: a request
// that times out is counted after the arrivals skipped meanwhile.
func (p *probeSim) streak(arrival int64) {
	if t := float64(arrival) / 1000; p.consecutive == 0 || t < p.failingAt {
		p.failingAt = t
	}
	p.consecutive++
}

func (p *probeSim) arrive(a int64) {
	p.scheduled++
	if p.inflight {
		// Skipped with reason concurrency_limit: bad for every SLO, and
		// part of the failure streak (issue 26's exporter design).
		p.skipped[0]++
		for i := range p.slo {
			p.slo[i][1]++
		}
		p.streak(a)
		return
	}
	timeout := p.srv.Timeout.Milliseconds()
	r := request{arrival: a}
	switch {
	case p.has(FaultDown, a):
		r.outcome, r.end = p.connErr, a+2
	case p.has(FaultHung, a):
		// The timeout fires a little after the deadline, so an arrival
		// falling due exactly then still finds the request in flight.
		r.outcome, r.end = p.timeout, a+timeout+5
	case p.rng.Float64() < p.srv.ErrorRate:
		r.outcome, r.end = p.http5xx, a+50
	default:
		thr := p.spec.SLO.TTFT.Seconds()
		ttft := p.srv.ttft(p.rng)
		if _, f := p.fault(FaultSlow, a); f != nil {
			ttft *= f.Factor
		}
		if _, f := p.fault(FaultTrickle, a); f != nil && p.rng.Float64() < f.Prob {
			ttft = 3 * thr
		}
		if i, f := p.fault(FaultOutliers, a); f != nil && p.outliers[i] > 0 {
			p.outliers[i]--
			ttft = min(10*thr, 0.8*p.srv.Timeout.Seconds())
		}
		tpot := p.srv.tpot(p.rng)
		dur := ttft + tpot*float64(p.srv.OutputTokens-1)
		r.outcome, r.ttft, r.tpot = p.success0, ttft, tpot
		r.end = a + int64(math.Ceil(dur*1000))
		if r.end-a >= timeout {
			r.outcome, r.end = p.timeout, a+timeout+5
		}
	}
	p.inflight = true
	p.req = r
}

func (p *probeSim) has(kind FaultKind, at int64) bool {
	_, f := p.fault(kind, at)
	return f != nil
}

// complete ends the request in flight as the collector's observe does.
func (p *probeSim) complete() {
	r := p.req
	p.inflight = false
	p.requests[r.outcome]++
	ok := r.outcome == p.success0
	if ok {
		i, _ := slices.BinarySearch(p.bounds, r.ttft)
		p.buckets[i]++
		p.ttftSum += r.ttft
		p.ttftCount++
	}
	// countSLOs: a failure is bad for every SLO.
	ttftOK := ok && r.ttft <= p.spec.SLO.TTFT.Seconds()
	tpotOK := ok && r.tpot <= p.spec.SLO.TPOT.Seconds()
	for i, good := range [3]bool{ttftOK, tpotOK, ttftOK && tpotOK} {
		if good {
			p.slo[i][0]++
		} else {
			p.slo[i][1]++
		}
	}
	p.ran = true
	p.lastRun = float64(r.arrival) / 1000
	if ok {
		p.success = 1
		p.consecutive, p.failingAt = 0, 0
	} else {
		p.success = 0
		p.streak(r.arrival)
	}
}

// formatLe formats a bucket bound as Prometheus 3 stores classic le labels.
func formatLe(b float64) string {
	if math.IsInf(b, 1) {
		return "+Inf"
	}
	s := strconv.FormatFloat(b, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}
