package collector

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llm-prober/llm-prober/probe"
)

// Cache label values of llm_probe_prefix_time_to_first_token_seconds.
const (
	PrefixCold = "cold"
	PrefixWarm = "warm"
)

// PrefixMetrics exports what session and shared_prefix probes measure
// about the server's prefix cache: TTFT of each run's first request (the
// prefix cold) and of its later ones (warm) as separate histograms, the
// last run's warm/cold mean TTFT ratio, and the prompt tokens the server
// said it served from cache. Only probes of those modes have the series
// (engine.PrefixSink feeds it).
type PrefixMetrics struct {
	ttft, ratio, cached *prometheus.Desc
	probeFamily[*prefixSeries]
}

// NewPrefixMetrics is an empty collector; Add announces each probe.
func NewPrefixMetrics() *PrefixMetrics {
	base := []string{"target", "probe", "model"}
	m := &PrefixMetrics{
		ttft: prometheus.NewDesc("llm_probe_prefix_time_to_first_token_seconds",
			"Time to first token of session and shared_prefix probes' successful streams, by prefix cache state: cold for each run's first request, warm for the later ones that resend its prefix; mode is the probe's kind (session turns add new tokens, shared_prefix requests do not).",
			append(base[:3:3], "cache", "mode"), nil),
		ratio: prometheus.NewDesc("llm_probe_prefix_warm_cold_ttft_ratio",
			"Mean TTFT of the warm requests of the probe's last run with both kinds, over its cold request's TTFT; near 1 when the server's prefix cache does not help.",
			base, nil),
		cached: prometheus.NewDesc("llm_probe_cached_input_tokens_total",
			"Prompt tokens the server reported as served from its prefix cache (OpenAI usage prompt_tokens_details.cached_tokens), for session and shared_prefix probes.",
			base, nil),
	}
	m.descs = []*prometheus.Desc{m.ttft, m.ratio, m.cached}
	return m
}

// PrefixSeries identifies one session or shared_prefix probe.
type PrefixSeries struct {
	Target, Probe, Model string
	// Mode is "session" or "shared_prefix" (the mode label).
	Mode string
	// Histograms is the target's histogram form (ProbeSeries.Histograms).
	Histograms string
}

type prefixSeries struct {
	spec       PrefixSeries
	labels     probeLabels
	cold, warm prometheus.Histogram
	cached     *counter
	metrics    []prometheus.Metric
	// ratio is the last run's ratio; NaN, and not exported, until a run
	// had a successful cold and warm request.
	ratio *gauge
}

// PrefixRequest is one request of a run and its cache state.
type PrefixRequest struct {
	Cache  string
	Result *probe.Result
}

// Add creates or keeps a probe's series; a changed model, mode or histogram
// form replaces them.
func (m *PrefixMetrics) Add(ps PrefixSeries) {
	m.put(ps.Target, ps.Probe, func(old *prefixSeries) bool {
		return old.spec.Model == ps.Model && old.spec.Mode == ps.Mode && histogramForm(old.spec.Histograms) == histogramForm(ps.Histograms)
	}, func() *prefixSeries { return m.newSeries(ps) })
}

func (m *PrefixMetrics) newSeries(ps PrefixSeries) *prefixSeries {
	form := histogramForm(ps.Histograms)
	s := &prefixSeries{
		spec:   ps,
		labels: newProbeLabels(ps.Target, ps.Probe, ps.Model),
		cold:   newHistogram("prefix_cold", ttftBuckets(), form),
		warm:   newHistogram("prefix_warm", ttftBuckets(), form),
	}
	s.cached = newCounter(m.cached, s.labels, timestamppb.Now())
	s.ratio = newGauge(m.ratio, s.labels)
	s.ratio.Set(math.NaN())
	s.metrics = []prometheus.Metric{
		newLabelled(m.ttft, s.cold, s.labels.with("cache", PrefixCold, "mode", ps.Mode)),
		newLabelled(m.ttft, s.warm, s.labels.with("cache", PrefixWarm, "mode", ps.Mode)),
		s.cached,
	}
	return s
}

// ObserveRun records one run of a probe that was added: each successful
// stream's TTFT by cache state, the cached tokens the server reported,
// and the run's warm/cold ratio when it has both.
func (m *PrefixMetrics) ObserveRun(target, probeName string, run []PrefixRequest) {
	s, ok := m.get(target, probeName)
	if !ok {
		return
	}
	var cold, warm float64
	var nCold, nWarm int
	for _, r := range run {
		res := r.Result
		if res == nil {
			continue
		}
		if res.HasCachedInputTokens && res.CachedInputTokens > 0 {
			s.cached.Add(float64(res.CachedInputTokens))
		}
		// As TTFT: successful streams with output only (docs/metrics.md).
		if !res.Streamed || res.Outcome != probe.OutcomeSuccess || res.TTFT <= 0 {
			continue
		}
		v := res.TTFT.Seconds()
		if r.Cache == PrefixCold {
			s.cold.Observe(v)
			cold, nCold = cold+v, nCold+1
		} else {
			s.warm.Observe(v)
			warm, nWarm = warm+v, nWarm+1
		}
	}
	if nCold > 0 && nWarm > 0 {
		s.ratio.Set((warm / float64(nWarm)) / (cold / float64(nCold)))
	}
}

// Ratio is a probe's last warm/cold ratio; false before any run had both.
func (m *PrefixMetrics) Ratio(target, probeName string) (float64, bool) {
	s, ok := m.get(target, probeName)
	if !ok {
		return 0, false
	}
	v := s.ratio.get()
	return v, !math.IsNaN(v)
}

func (s *prefixSeries) collect(ch chan<- prometheus.Metric) {
	for _, metric := range s.metrics {
		ch <- metric
	}
	if !math.IsNaN(s.ratio.get()) {
		ch <- s.ratio
	}
}

// baseLabels makes the store sort the probes of the family (ordered).
func (s *prefixSeries) baseLabels() probeLabels { return s.labels }
