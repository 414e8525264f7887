// Package collector turns what the prober measures into Prometheus metrics.
package collector

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llm-prober/llm-prober/probe"
)

// SLO is what a probe promises. A zero threshold or objective is "not set".
type SLO struct {
	// TTFT and TPOT are upper bounds: a request meets them when its value is
	// less than or equal to the threshold, the same comparison Prometheus
	// makes for an le bucket, so counters and histograms agree.
	TTFT, TPOT time.Duration
	// Objective is the target ratio of good requests, e.g. 0.99.
	Objective float64
}

// ProbeSeries identifies one configured probe and what its series carry.
type ProbeSeries struct {
	Target, Probe, Model string
	SLO                  SLO
	// Protocol is the target's protocol (probe.LookupProtocol); its
	// llm_probe_requests_total series are those of the outcomes the
	// protocol can produce. Empty (or unknown) means every outcome.
	Protocol string
	// Histograms is the form of every histogram of the probe: one of
	// HistogramForms(); empty means HistogramsBoth.
	Histograms string
	// Disabled are the families (MetricFamilies) the probe does not
	// export: not built, so they cost no series and no observation.
	Disabled []string
	// Asserts is true when the probe checks its answers, so it can end
	// as wrong_answer whatever its protocol (answer_metrics.go).
	Asserts bool
	// PlannedInterval is the longest gap the probe's schedule plans
	// between arrivals (schedule.Spec.PlannedInterval), exported as
	// llm_probe_planned_interval_seconds; zero when it plans no steady
	// gap, and then not exported. A change keeps the probe's series.
	PlannedInterval time.Duration
}

// Histogram forms (ProbeSeries.Histograms): classic buckets, a native
// histogram, or both at once (the default).
const (
	HistogramsBoth    = "both"
	HistogramsClassic = "classic"
	HistogramsNative  = "native"
)

// HistogramForms lists the accepted values of ProbeSeries.Histograms,
// the default first.
func HistogramForms() []string {
	return []string{HistogramsBoth, HistogramsClassic, HistogramsNative}
}

// Skip reasons the scheduler reports through Skipped. Each counter, like
// any other reason's, is created by its first skip (with its own created
// timestamp, which Prometheus with created-timestamp ingestion reads as a
// zero before it): most probes never skip, and three counters at zero on
// every probe were a tenth of its series budget (docs/metrics.md).
const (
	// SkipReasonConcurrencyLimit: a ticket fell due while the probe already
	// had as many requests in flight as it may.
	SkipReasonConcurrencyLimit = "concurrency_limit"
	// SkipReasonOverdue: a ticket was so late that sending it would distort
	// the arrival process rather than measure it.
	SkipReasonOverdue = "overdue"
	// SkipReasonTargetConcurrencyLimit: a ticket fell due while the probe's
	// target already had as many requests in flight as it may.
	SkipReasonTargetConcurrencyLimit = "target_concurrency_limit"
)

func knownSkipReasons() []string {
	return []string{SkipReasonConcurrencyLimit, SkipReasonOverdue, SkipReasonTargetConcurrencyLimit}
}

// maxSkipReasons bounds the reason label per probe: a caller passing
// free-form text must not be able to explode the series count.
const (
	maxSkipReasons  = 16
	skipReasonOther = "other"
)

// exemplarLabel is the one exemplar label; its value is cut so that name and
// value together stay within client_golang's limit, beyond which it panics.
// The value is the request id, which the probe sends as the W3C trace id
// (probe/tracecontext.go), so Grafana links an exemplar to the server's
// trace of the same request.
const exemplarLabel = "trace_id"

const (
	sloTTFT    = "ttft"
	sloTPOT    = "tpot"
	sloGoodput = "goodput"
)

const (
	phaseDNS = iota
	phaseConnect
	phaseTLS
	phaseWrite
	phaseFirstByte
	numPhases
)

func phaseNames() [numPhases]string {
	return [numPhases]string{"dns", "connect", "tls", "write", "first_byte"}
}

// Native-histogram settings shared by every histogram: factor 1.1 becomes
// schema 3 (quantiles within about ±4.5%); 160 populated buckets span about
// six orders of magnitude at that resolution before the histogram has to
// coarsen; allowing a reset hourly keeps one burst of outliers from costing
// resolution forever.
const (
	nativeBucketFactor    = 1.1
	nativeMaxBucketNumber = 160
	nativeMinReset        = time.Hour
)

// ProbeMetrics holds the metrics of every configured probe. It implements
// prometheus.Collector; Observe and the other recording methods are safe for
// concurrent use with each other and with Collect.
type ProbeMetrics struct {
	d descs
	// now is the time of a skipped arrival (time.Now; tests fix it).
	now func() time.Time

	probeFamily[*series]
}

type descs struct {
	ttft, tpot, itl, duration, tps, phase, lag *prometheus.Desc
	requests, inTokens, outTokens, slo, skip   *prometheus.Desc
	success, lastRun, objective                *prometheus.Desc
	retry, tlsExpiry, finish                   *prometheus.Desc
	serverTiming, serverTimingInvalid          *prometheus.Desc
	usageInvalid                               *prometheus.Desc
	sched                                      schedDescs
	streak                                     streakDescs
	load                                       serverLoadDescs
}

func newDescs() descs {
	base := []string{"target", "probe", "model"}
	with := func(extra ...string) []string {
		return append(append(make([]string, 0, len(base)+len(extra)), base...), extra...)
	}
	st, stInvalid := newServerTimingDescs(base)
	return descs{
		sched:        newSchedDescs(base),
		streak:       newStreakDescs(base),
		load:         newServerLoadDescs(base),
		retry:        newRetryDesc(base),
		finish:       newFinishDesc(base),
		tlsExpiry:    newTLSExpiryDesc(base),
		usageInvalid: newUsageInvalidDesc(base),
		ttft: prometheus.NewDesc("llm_probe_time_to_first_token_seconds",
			"Time from just before the request is written to the first chunk with non-empty output, for successful streamed requests.",
			base, nil),
		tpot: prometheus.NewDesc("llm_probe_time_per_output_token_seconds",
			"Per request (end-to-end - TTFT) / (output tokens - 1), for successful streamed requests with at least two output tokens.",
			base, nil),
		itl: prometheus.NewDesc("llm_probe_inter_token_latency_seconds",
			"Gap between consecutive output chunks divided by the tokens of the later chunk, observed once per token, for successful streamed requests.",
			base, nil),
		duration: prometheus.NewDesc("llm_probe_request_duration_seconds",
			"Time from just before the request is written to the last byte of the final event, for successful requests.",
			base, nil),
		tps: prometheus.NewDesc("llm_probe_output_tokens_per_second",
			"Per request output tokens / end-to-end latency, for successful requests.",
			base, nil),
		phase: prometheus.NewDesc("llm_probe_phase_duration_seconds",
			"Duration of a connection phase of the probe request, for every request in which that phase happened.",
			with("phase"), nil),
		lag: prometheus.NewDesc("llm_probe_schedule_lag_seconds",
			"How late the scheduler sent a probe request relative to its planned time.",
			base, nil),
		requests: prometheus.NewDesc("llm_probe_requests_total",
			"Probe requests by outcome.",
			with("outcome"), nil),
		inTokens: prometheus.NewDesc("llm_probe_input_tokens_total",
			"Input (prompt) tokens of probe requests, as counted by the server where it reports them.",
			base, nil),
		outTokens: prometheus.NewDesc("llm_probe_output_tokens_total",
			"Output tokens received by probe requests, the server's count where it reports one, else counted from chunks.",
			base, nil),
		slo: prometheus.NewDesc("llm_probe_slo_requests_total",
			"Probe requests judged against each SLO the probe declares; failed requests, and arrivals skipped because the probe's or its target's max_in_flight was reached, are bad for every SLO; cancelled requests are not judged.",
			with("slo", "result"), nil),
		skip: prometheus.NewDesc("llm_probe_skipped_total",
			"Planned probe requests the scheduler did not send, by reason.",
			with("reason"), nil),
		success: prometheus.NewDesc("llm_probe_success",
			"Whether the last probe request succeeded (1) or not (0).",
			base, nil),
		lastRun: prometheus.NewDesc("llm_probe_last_run_timestamp_seconds",
			"Unix time at which the last probe request started.",
			base, nil),
		objective: prometheus.NewDesc("llm_probe_slo_objective_ratio",
			"Target ratio of good requests for each SLO the probe declares, from the configuration.",
			with("slo"), nil),
		serverTiming:        st,
		serverTimingInvalid: stInvalid,
	}
}

// NewProbeMetrics returns an empty collector; probes appear through Add.
func NewProbeMetrics() *ProbeMetrics {
	m := &ProbeMetrics{d: newDescs(), now: time.Now}
	m.descs = m.d.list()
	return m
}

// list is every descriptor, for Describe.
func (d *descs) list() []*prometheus.Desc {
	return append([]*prometheus.Desc{
		d.ttft, d.tpot, d.itl, d.duration, d.tps, d.phase, d.lag,
		d.requests, d.inTokens, d.outTokens, d.slo, d.skip,
		d.success, d.lastRun, d.objective, d.retry, d.tlsExpiry,
		d.serverTiming, d.serverTimingInvalid, d.usageInvalid, d.finish,
	}, append(append(d.sched.list(), d.streak.list()...), d.load.list()...)...)
}

// Add creates the series of one probe: its histograms, the success and SLO
// counters at zero, so rate() and increase() of them work before the first
// request; the counters of failures, skips and mismatches come with their
// first count (the series budget, families.go). Adding a probe that exists
// with the same model and SLO keeps its series (a reload that changed
// nothing must not reset counters); a changed model, SLO, protocol,
// histogram form or set of disabled families replaces them, because bucket
// layouts follow the SLO thresholds, the outcome series follow the protocol
// and the families built follow the set. A changed planned interval alone
// only changes its own series.
func (m *ProbeMetrics) Add(ps ProbeSeries) {
	m.put(ps.Target, ps.Probe, func(old *series) bool {
		if old.model != ps.Model || old.slo != ps.SLO || old.protocol != ps.Protocol ||
			old.form != histogramForm(ps.Histograms) || old.asserts != ps.Asserts ||
			old.disabled != newFamilySet(ps.Disabled) {
			return false
		}
		old.streak.setPlanned(ps.PlannedInterval)
		return true
	}, func() *series { return newSeries(&m.d, ps) })
}

// lookup is the probe's series, nil when it is not (or no longer) added.
func (m *ProbeMetrics) lookup(target, probeName string) *series {
	s, _ := m.get(target, probeName)
	return s
}

// Observe records one probe result. Results for probes not (or no longer)
// added are dropped: a request in flight during a reload may finish after its
// probe was removed.
func (m *ProbeMetrics) Observe(target, probeName string, r *probe.Result) {
	if r == nil {
		return
	}
	if s := m.lookup(target, probeName); s != nil {
		s.observe(r)
	}
}

// ObserveScheduleLag records how late the scheduler sent a request.
func (m *ProbeMetrics) ObserveScheduleLag(target, probeName string, lag time.Duration) {
	if s := m.lookup(target, probeName); s != nil {
		observe(s.lag, lag.Seconds())
	}
}

// Skipped counts one planned request the scheduler did not send. A skip
// because the probe's or its target's in-flight requests were all still
// held by the server (concurrency_limit, target_concurrency_limit) is a
// failure of the server as a user arriving then would see it: it extends
// the failure streak and is bad for every SLO the probe declares. Without
// that, a server that hangs every request would show one failure per
// timeout and an SLO that barely moves.
func (m *ProbeMetrics) Skipped(target, probeName, reason string) {
	s := m.lookup(target, probeName)
	if s == nil {
		return
	}
	s.skipCounter(reason).Inc()
	if countsAgainstProbe(reason) {
		s.streak.failures.fail(m.now())
		s.countSkipSLOs()
	}
}

// goodBad is the pair of llm_probe_slo_requests_total series of one SLO; nil
// when the probe does not declare that SLO.
type goodBad struct{ good, bad *counter }

func (g *goodBad) count(good bool) {
	if g == nil {
		return
	}
	if good {
		g.good.Inc()
	} else {
		g.bad.Inc()
	}
}

type series struct {
	d        *descs
	model    string
	slo      SLO
	protocol string
	asserts  bool
	form     string // histogramForm of ProbeSeries.Histograms
	disabled familySet
	// labels are the target, probe and model label pairs, shared by every
	// series of the probe.
	labels probeLabels
	// created is the created timestamp of the counters made with the
	// series, shared by them (counters made later get their own).
	created *timestamppb.Timestamp

	// ttft is nil, like tpot, itl and tps, for a protocol that cannot
	// stream.
	ttft prometheus.Histogram
	// The summary histograms (families.go); nil when switched off.
	tpot, itl, duration, tps, lag prometheus.Histogram
	// phases are created on their first observation (see phase), so that a
	// phase that never happens, such as dns, connect and tls on pooled
	// connections, is not exported as an empty histogram.
	phases [numPhases]lazy[phaseHistogram]
	// retries are indexed like probe.RetryReasons(), created on first use.
	retries [numRetryReasons]lazy[counter]
	// finishes are indexed like finishReasons, created on first use.
	finishes [len(finishReasons)]lazy[counter]
	// The server's own timings (server_timing_metrics.go).
	serverTimingSeries
	// Token counts the probe dropped (usage_metrics.go).
	usageSeries
	// observeITL is built once so that Observe hands InterTokenLatencies a
	// ready func value instead of a fresh closure.
	observeITL func(time.Duration)

	// requests is indexed by outcomeIndex. The outcomes the protocol can
	// produce (outcomeOK) are created on first use, except success and
	// wrong_answer (where the probe asserts or its protocol checks
	// answers), made with the series because the dashboards' variables
	// and the no-success and wrong-answer alerts read them from the start:
	// a failure counter at zero on every probe would cost a series per
	// outcome that most probes never see (docs/metrics.md, "Series per
	// probe").
	requests         [numOutcomes]lazy[counter]
	outcomeOK        [numOutcomes]bool
	inTokens         *counter
	outTokens        *counter
	sloTTFT, sloTPOT *goodBad
	sloGoodput       *goodBad
	success          *gauge
	lastRun          *gauge

	// The "last" gauges are exported only once they hold a measurement: a
	// success of 0 before a cron-scheduled probe first runs would page.
	ran      atomic.Bool
	always   []prometheus.Metric
	skipMu   sync.Mutex
	skipped  map[string]*counter
	skippedW []prometheus.Metric
	sched    schedSeries
	streak   streakSeries
	tls      tlsSeries
	load     serverLoadSeries
}

// histogramForm is form with the default filled in.
func histogramForm(form string) string {
	if form == "" {
		return HistogramsBoth
	}
	return form
}

// newHistogram builds a histogram in form: classic buckets only (no
// native options), a native histogram only (no buckets: client_golang
// then keeps no classic buckets but +Inf), or both.
func newHistogram(name string, buckets []float64, form string) prometheus.Histogram {
	opts := prometheus.HistogramOpts{Name: name, Help: name}
	if form != HistogramsNative {
		opts.Buckets = buckets
	}
	if form != HistogramsClassic {
		opts.NativeHistogramBucketFactor = nativeBucketFactor
		opts.NativeHistogramMaxBucketNumber = nativeMaxBucketNumber
		opts.NativeHistogramMinResetDuration = nativeMinReset
	}
	return prometheus.NewHistogram(opts)
}

// histogram builds one of the series' histograms in the probe's form.
func (s *series) histogram(name string, buckets []float64) prometheus.Histogram {
	return newHistogram(name, buckets, s.form)
}

// counter is a new counter of the probe's: desc's series with the base
// labels and the extra name, value pairs in kv, created with the series.
func (s *series) counter(desc *prometheus.Desc, kv ...string) *counter {
	return newCounter(desc, s.labels.with(kv...), s.created)
}

// lateCounter is a counter created after the series, with its own created
// timestamp.
func (s *series) lateCounter(desc *prometheus.Desc, kv ...string) *counter {
	return newCounter(desc, s.labels.with(kv...), timestamppb.Now())
}

func newSeries(d *descs, ps ProbeSeries) *series {
	slo := ps.SLO
	s := &series{
		d:        d,
		model:    ps.Model,
		slo:      slo,
		protocol: ps.Protocol,
		asserts:  ps.Asserts,
		form:     histogramForm(ps.Histograms),
		labels:   newProbeLabels(ps.Target, ps.Probe, ps.Model),
		created:  timestamppb.Now(),
		skipped:  make(map[string]*counter),
		disabled: newFamilySet(ps.Disabled),
	}
	addHist := func(desc *prometheus.Desc, h prometheus.Metric) {
		s.always = append(s.always, newLabelled(desc, h, s.labels))
	}
	summary := func(family string, desc *prometheus.Desc, name string) prometheus.Histogram {
		if s.disabled.has(family) {
			return nil
		}
		h := newSummaryHistogram(name, s.form)
		addHist(desc, h)
		return h
	}
	addCounter := func(desc *prometheus.Desc, kv ...string) *counter {
		c := s.counter(desc, kv...)
		s.always = append(s.always, c)
		return c
	}

	// A protocol that cannot stream has no first token, no decode
	// phase and, pooling (embeddings, rerank), no output tokens: its
	// histograms of them would stay empty on every probe.
	proto, known := probe.LookupProtocol(ps.Protocol)
	streams := !known || proto.Streams
	if streams {
		s.ttft = s.histogram("ttft", withThresholds(ttftBuckets(), slo.TTFT))
		addHist(d.ttft, s.ttft)
		s.tpot = summary(FamilyTimePerOutputToken, d.tpot, "tpot")
		s.itl = summary(FamilyInterTokenLatency, d.itl, "itl")
		s.tps = summary(FamilyTokensPerSecond, d.tps, "tps")
	}
	s.duration = summary(FamilyRequestDuration, d.duration, "duration")
	s.lag = summary(FamilyScheduleLag, d.lag, "lag")
	if itl := s.itl; itl != nil {
		s.observeITL = func(gap time.Duration) { itl.Observe(gap.Seconds()) }
	}

	for _, o := range seriesOutcomes(ps) {
		i := outcomeIndex(o)
		s.outcomeOK[i] = true
		if o == probe.OutcomeSuccess || o == probe.OutcomeWrongAnswer {
			c := s.counter(d.requests, "outcome", string(o))
			s.requests[i].get(func() *counter { return c })
		}
	}
	s.inTokens = addCounter(d.inTokens)
	s.outTokens = addCounter(d.outTokens)

	declare := func(name string) *goodBad {
		g := &goodBad{
			good: addCounter(d.slo, "slo", name, "result", "good"),
			bad:  addCounter(d.slo, "slo", name, "result", "bad"),
		}
		if slo.Objective > 0 {
			s.always = append(s.always, newConstGauge(d.objective, s.labels.with("slo", name), slo.Objective))
		}
		return g
	}
	if slo.TTFT > 0 {
		s.sloTTFT = declare(sloTTFT)
	}
	if slo.TPOT > 0 {
		s.sloTPOT = declare(sloTPOT)
	}
	if slo.TTFT > 0 || slo.TPOT > 0 || slo.Objective > 0 {
		s.sloGoodput = declare(sloGoodput)
	}

	s.success = newGauge(d.success, s.labels)
	s.lastRun = newGauge(d.lastRun, s.labels)

	s.sched.init(s)
	s.streak.init(s, ps.PlannedInterval)
	s.tls.init(s)
	s.load.init(s)
	return s
}

// validUTF8 repairs label values the config should already have rejected:
// one invalid value would make the registry fail every scrape of the family.
func validUTF8(values ...string) []string {
	for i, v := range values {
		values[i] = strings.ToValidUTF8(v, "\uFFFD")
	}
	return values
}

func (s *series) collect(ch chan<- prometheus.Metric) {
	for _, m := range s.always {
		ch <- m
	}
	if s.ran.Load() {
		ch <- s.success
		ch <- s.lastRun
	}
	for i := range s.requests {
		if c := s.requests[i].load(); c != nil {
			ch <- c
		}
	}
	for i := range s.phases {
		if p := s.phases[i].load(); p != nil {
			ch <- p.w
		}
	}
	s.skipMu.Lock()
	skipped := s.skippedW[:len(s.skippedW):len(s.skippedW)]
	s.skipMu.Unlock()
	for _, m := range skipped {
		ch <- m
	}
	s.sched.collect(ch)
	s.streak.collect(ch)
	collectCounters(ch, s.retries[:])
	collectCounters(ch, s.finishes[:])
	s.tls.collect(ch)
	s.load.collect(ch)
	s.collectServerTimings(ch)
	collectCounters(ch, s.usageInvalid[:])
}

// newSkipCounter must be called with skipMu held or before s is shared.
func (s *series) newSkipCounter(reason string, created *timestamppb.Timestamp) *counter {
	c := newCounter(s.d.skip, s.labels.with("reason", reason), created)
	s.skipped[reason] = c
	s.skippedW = append(s.skippedW, c)
	return c
}

func (s *series) skipCounter(reason string) *counter {
	if reason == "" {
		reason = skipReasonOther
	}
	// Repaired before the lookup, so a reason that is not valid UTF-8
	// finds the counter its first skip made instead of a second one
	// under the same label value, which would fail every scrape.
	reason = strings.ToValidUTF8(reason, "\uFFFD")
	s.skipMu.Lock()
	defer s.skipMu.Unlock()
	if c, ok := s.skipped[reason]; ok {
		return c
	}
	if len(s.skipped) >= maxSkipReasons {
		reason = skipReasonOther
		if c, ok := s.skipped[reason]; ok {
			return c
		}
	}
	return s.newSkipCounter(reason, timestamppb.Now())
}

// numOutcomes is len(probe.Outcomes()); outcomeIndex maps each to its
// index below it.
const numOutcomes = 11

// outcomeIndex maps an outcome to its position in probe.Outcomes(). An outcome
// outside that closed set is a driver bug; it is counted as protocol_error (the
// prober could not classify the exchange) rather than minting a new label
// value or losing the attempt.
func outcomeIndex(o probe.Outcome) int {
	switch o {
	case probe.OutcomeSuccess:
		return 0
	case probe.OutcomeTimeout:
		return 1
	case probe.OutcomeConnectError:
		return 2
	case probe.OutcomeHTTP4xx:
		return 3
	case probe.OutcomeHTTP5xx:
		return 4
	case probe.OutcomeGRPCError:
		return 5
	case probe.OutcomeProtocolError:
		return 6
	case probe.OutcomeStreamStalled:
		return 7
	case probe.OutcomeIncomplete:
		return 8
	case probe.OutcomeWrongAnswer:
		return 9
	case probe.OutcomeCancelled:
		return 10
	}
	return 6
}

// protocolOutcomes are the outcomes a probe of protocol exports: those the
// protocol table says its driver can produce, all of them for an empty or
// unknown protocol (callers that do not say). protocol_error is always among
// them: it is where outcomes the protocol cannot produce are counted.
func protocolOutcomes(protocol string) []probe.Outcome {
	p, ok := probe.LookupProtocol(protocol)
	if !ok || len(p.Outcomes) == 0 {
		return probe.Outcomes()
	}
	if !slices.Contains(p.Outcomes, probe.OutcomeProtocolError) {
		p.Outcomes = append(p.Outcomes, probe.OutcomeProtocolError)
	}
	// Exposition order follows probe.Outcomes(), whatever the table's.
	slices.SortFunc(p.Outcomes, func(a, b probe.Outcome) int { return outcomeIndex(a) - outcomeIndex(b) })
	return p.Outcomes
}

// countOutcome counts one attempt. An outcome the probe's protocol cannot
// produce (a driver bug, like an unknown one) is counted as protocol_error,
// so that no attempt is lost and no series appears that the protocol table
// says cannot exist.
func (s *series) countOutcome(o probe.Outcome) {
	i := outcomeIndex(o)
	if !s.outcomeOK[i] {
		i = outcomeIndex(probe.OutcomeProtocolError)
	}
	s.requests[i].get(func() *counter {
		return s.lateCounter(s.d.requests, "outcome", string(probe.Outcomes()[i]))
	}).Inc()
}

func (s *series) observe(r *probe.Result) {
	ok := r.Outcome == probe.OutcomeSuccess
	isStream := streamed(r)

	s.countOutcome(r.Outcome)
	if r.Retry != nil {
		s.countRetry(r.Retry.Reason)
	}
	s.countFinish(r)
	s.tls.observe(r)
	// The server's load is its own, whatever became of the request.
	s.load.observe(r)
	// Tokens are counted for every outcome: a stream cut short still cost the
	// server the tokens it sent. The probe has dropped implausible counts
	// (probe.Result.UsageInvalid), so none can freeze a counter.
	s.countUsageInvalid(r)
	if r.InputTokens > 0 {
		s.inTokens.Add(float64(r.InputTokens))
	}
	if r.OutputTokens > 0 {
		s.outTokens.Add(float64(r.OutputTokens))
	}
	// Phases describe the network path, which matters most when the request
	// then failed, so they are observed whatever the outcome.
	ph := &r.Phases
	s.observePhase(phaseDNS, ph.HasDNS, ph.DNS)
	s.observePhase(phaseConnect, ph.HasConnect, ph.Connect)
	s.observePhase(phaseTLS, ph.HasTLS, ph.TLS)
	s.observePhase(phaseWrite, ph.HasWrite, ph.Write)
	s.observePhase(phaseFirstByte, ph.HasFirstByte, ph.FirstByte)
	if r.Outcome == probe.OutcomeCancelled {
		// The prober cancelled it (shutdown): no measurement and no
		// verdict on the server, so no SLO, success or streak change.
		return
	}

	if ok {
		var ex prometheus.Labels
		if r.RequestID != "" {
			ex = prometheus.Labels{exemplarLabel: exemplarValue(r.RequestID)}
		}
		if isStream {
			// A stream that ended successfully without output has no first
			// token; its TTFT is not zero but undefined.
			if r.TTFT > 0 && s.ttft != nil {
				observeWithExemplar(s.ttft, r.TTFT.Seconds(), ex)
			}
			if tpot, has := r.TPOT(); has {
				observe(s.tpot, tpot.Seconds())
			}
			if s.observeITL != nil {
				r.InterTokenLatencies(s.observeITL)
			}
		}
		if !r.Cut() && s.duration != nil {
			// A stream the probe cut ends at the cut, not the answer's end.
			observeWithExemplar(s.duration, r.EndToEnd.Seconds(), ex)
		}
		if tps, has := r.OutputTokensPerSecond(); has {
			observe(s.tps, tps)
		}
	}

	s.countSLOs(r, ok, isStream)
	s.observeServerTimings(r, ok)

	if ok {
		s.success.Set(1)
	} else {
		s.success.Set(0)
	}
	start := r.Start
	if start.IsZero() {
		start = time.Now()
	}
	s.streak.failures.observe(r.Outcome, start)
	s.lastRun.Set(float64(start.UnixNano()) / 1e9)
	s.ran.Store(true)
}

// countSLOs judges r against every SLO the probe declares. A failure is bad
// for all of them. A non-streamed answer's first token reaches the client with
// the whole answer, so its TTFT for the SLO is the end-to-end time (so is a
// successful stream that carried no output). TPOT is vacuously met when there
// is no decode phase to measure: one-token and non-streamed answers count as
// good, so short answers are not punished and the TPOT SLO's denominator stays
// equal to the TTFT SLO's.
func (s *series) countSLOs(r *probe.Result, ok, isStream bool) {
	if s.sloGoodput == nil {
		return
	}
	good := ok
	if s.sloTTFT != nil {
		ttft := r.TTFT
		if !isStream || ttft <= 0 {
			ttft = r.EndToEnd
		}
		met := ok && ttft <= s.slo.TTFT
		s.sloTTFT.count(met)
		good = good && met
	}
	if s.sloTPOT != nil {
		met := ok
		if ok && isStream {
			if tpot, has := r.TPOT(); has {
				met = tpot <= s.slo.TPOT
			}
		}
		s.sloTPOT.count(met)
		good = good && met
	}
	s.sloGoodput.count(good)
}

// countSkipSLOs counts an arrival skipped while the probe's or its
// target's requests were all held by the server: bad for every SLO the
// probe declares, as a failed request is.
func (s *series) countSkipSLOs() {
	if s.sloGoodput == nil {
		return
	}
	s.sloTTFT.count(false)
	s.sloTPOT.count(false)
	s.sloGoodput.count(false)
}

// phaseHistogram is one phase's histogram and its labelled wrapper.
type phaseHistogram struct {
	h prometheus.Histogram
	w prometheus.Metric
}

// newPhaseHistogram is h as the series of one value of desc's phase label.
func (s *series) newPhaseHistogram(desc *prometheus.Desc, phase string, h prometheus.Histogram) *phaseHistogram {
	return &phaseHistogram{h: h, w: newLabelled(desc, h, s.labels.with("phase", phase))}
}

// observePhase observes d in phase i's histogram when the phase happened,
// creating the histogram on the phase's first observation. Concurrent
// first observations agree on one histogram through the CompareAndSwap.
func (s *series) observePhase(i int, happened bool, d time.Duration) {
	if !happened || s.disabled.has(FamilyPhases) {
		return
	}
	p := s.phases[i].get(func() *phaseHistogram {
		return s.newPhaseHistogram(s.d.phase, phaseNames()[i], newSummaryHistogram("phase", s.form))
	})
	p.h.Observe(d.Seconds())
}

func observeWithExemplar(h prometheus.Histogram, v float64, ex prometheus.Labels) {
	if ex == nil {
		h.Observe(v)
		return
	}
	h.(prometheus.ExemplarObserver).ObserveWithExemplar(v, ex)
}

// exemplarValue makes a request id safe for ObserveWithExemplar, which panics
// on invalid UTF-8 or on more than ExemplarMaxRunes runes of labels. Request
// ids normally come from the prober itself, but drivers may adopt a server's.
func exemplarValue(id string) string {
	if !utf8.ValidString(id) {
		id = strings.ToValidUTF8(id, "\uFFFD")
	}
	maxRunes := prometheus.ExemplarMaxRunes - utf8.RuneCountInString(exemplarLabel)
	if len(id) <= maxRunes {
		return id // fast path: byte length bounds rune count
	}
	n := 0
	for i := range id {
		if n == maxRunes {
			return id[:i]
		}
		n++
	}
	return id
}

// baseLabels makes the store sort the probes of the family (ordered).
func (s *series) baseLabels() probeLabels { return s.labels }
