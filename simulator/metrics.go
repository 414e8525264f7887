package simulator

import (
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric namings the simulator can expose: the same engine state under the
// names each real server uses, so the prober's normalisation can be tested
// against every kind.
const (
	NamingVLLM   = "vllm"
	NamingTriton = "triton"
	NamingTGI    = "tgi"
	NamingSGLang = "sglang"
	NamingTRTLLM = "trtllm"
)

// MetricsNamings lists the accepted metrics.naming values.
func MetricsNamings() []string {
	return []string{NamingVLLM, NamingTriton, NamingTGI, NamingSGLang, NamingTRTLLM}
}

func validNaming(n string) error {
	for _, v := range MetricsNamings() {
		if n == v {
			return nil
		}
	}
	return fmt.Errorf("unknown naming %q; want one of %v", n, MetricsNamings())
}

// vLLM's default bucket boundaries (V1), so dashboards built for vLLM
// read the simulator's histograms the same way.
var (
	vllmTTFTBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	vllmITLBuckets  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	vllmE2EBuckets  = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// Finished reasons as vLLM labels them. The simulator never repeats
// itself, so repetition is only pre-created, at 0, as vLLM does.
const (
	finishStop       = "stop"
	finishLength     = "length"
	finishAbort      = "abort"
	finishError      = "error"
	finishRepetition = "repetition"
)

// serverMetrics is what the request path records into. Every naming fills
// every field: an observation the naming has no metric for goes to a sink,
// so the request path never needs to know which naming is active.
type serverMetrics struct {
	ttft, itl, legacyTPOT, reqTPOT, e2e    prometheus.Observer
	queue, prefill, decode, inference      prometheus.Observer
	promptTokensHist, generationTokensHist prometheus.Observer
	promptTokens, generationTokens         prometheus.Counter
	// prefixQueries and prefixHits count prompt tokens looked up in the
	// prefix cache and found there; nil for namings without them.
	prefixQueries, prefixHits prometheus.Counter
	// onFinish counts one request that left the engine, by vLLM finished
	// reason (stop, length, abort, error).
	onFinish func(reason string)
	// reasonedOnly records a request only when it completed (stop or
	// length): trtllm-serve logs no metrics for a request without a
	// finish reason.
	reasonedOnly bool
	// specDraft and specAccepted count speculative-decoding tokens
	// (metrics_latency.go); nil without speculative decoding.
	specDrafts, specDraft, specAccepted prometheus.Counter
	specTokens                          int
	specAcceptance                      float64
}

// sink swallows observations a naming has no metric for.
type sink struct{}

func (sink) Observe(float64) {}

// sinkCounter is an unregistered counter: it counts, nobody exposes it.
func sinkCounter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "sink"})
}

// scaled converts seconds into the unit a server exposes (µs, ms).
type scaled struct {
	o prometheus.Observer
	f float64
}

func (s scaled) Observe(v float64) { s.o.Observe(v * s.f) }

// adder accumulates observations into a counter, as Triton's cumulative
// duration counters do.
type adder struct{ c prometheus.Counter }

func (a adder) Observe(v float64) {
	if v > 0 {
		a.c.Add(v)
	}
}

// gaugeSet reads the engine's state once per scrape, so every gauge of one
// scrape comes from the same snapshot and they agree with each other.
type gaugeSet struct {
	e      *engine
	gauges []stateGauge
}

type stateGauge struct {
	desc   *prometheus.Desc
	labels []string
	value  func(engineState) float64
}

func (g *gaugeSet) add(desc *prometheus.Desc, value func(engineState) float64, labels ...string) {
	g.gauges = append(g.gauges, stateGauge{desc: desc, labels: labels, value: value})
}

func (g *gaugeSet) Describe(ch chan<- *prometheus.Desc) {
	seen := map[*prometheus.Desc]bool{}
	for _, s := range g.gauges {
		if !seen[s.desc] {
			seen[s.desc] = true
			ch <- s.desc
		}
	}
}

func (g *gaugeSet) Collect(ch chan<- prometheus.Metric) {
	st := g.e.state()
	for _, s := range g.gauges {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, s.value(st), s.labels...)
	}
}

// kvUsedTokens converts the engine's usage ratio back into tokens for the
// namings that expose tokens or blocks rather than a fraction.
func kvUsedTokens(e *engine, st engineState) float64 {
	return math.Round(st.kvUsage * float64(e.sched.KVCacheCapacityTokens))
}

func newServerMetrics(reg prometheus.Registerer, e *engine, model string, maxModelLen int, mc MetricsConfig) *serverMetrics {
	switch mc.Naming {
	case NamingTriton:
		return newTritonMetrics(reg, e, model)
	case NamingTGI:
		return newTGIMetrics(reg, e, maxModelLen)
	case NamingSGLang:
		return newSGLangMetrics(reg, e, model)
	case NamingTRTLLM:
		return newTRTLLMMetrics(reg, e, model)
	default:
		// "" is vLLM too, so a Config built by hand without a naming works.
		m := newVLLMMetrics(reg, e, model, maxModelLen, mc.LegacyNames)
		m.addSpecDecode(reg, model, mc)
		return m
	}
}

// newVLLMMetrics uses vLLM V1's names. The label values are fixed at
// construction: vLLM V1 labels everything with the first served model name
// and the engine (data-parallel) index.
func newVLLMMetrics(reg prometheus.Registerer, e *engine, model string, maxModelLen int, legacy bool) *serverMetrics {
	v := labelledVecs{reg: reg, names: []string{"model_name", "engine"}, values: []string{model, "0"}}
	hist, counter, labelNames := v.hist, v.counter, v.names

	m := &serverMetrics{
		ttft:    hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", vllmTTFTBuckets),
		itl:     hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", vllmITLBuckets),
		reqTPOT: hist("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", vllmITLBuckets),
		e2e:     hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", vllmE2EBuckets),
		queue:   hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", vllmE2EBuckets),
		prefill: hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", vllmE2EBuckets),
		decode:  hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", vllmE2EBuckets),
		inference: hist("vllm:request_inference_time_seconds",
			"Histogram of time spent in RUNNING phase for request.", vllmE2EBuckets),
		promptTokensHist: hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.",
			buckets125(maxModelLen)),
		generationTokensHist: hist("vllm:request_generation_tokens", "Number of generation tokens processed.",
			buckets125(maxModelLen)),
		promptTokens:     counter("vllm:prompt_tokens_total", "Number of prefill tokens processed."),
		generationTokens: counter("vllm:generation_tokens_total", "Number of generation tokens processed."),
		// vLLM ≥ 0.9.2 (vllm/v1/metrics/loggers.py); counted in tokens.
		prefixQueries: counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens."),
		prefixHits:    counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens."),
	}
	// The simulator queues rather than preempts: the counter vLLM always
	// exports stays at 0, which is the truth.
	_ = counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.")
	if legacy {
		m.legacyTPOT = hist("vllm:time_per_output_token_seconds",
			"Histogram of time per output token in seconds. DEPRECATED: use vllm:inter_token_latency_seconds.", vllmITLBuckets)
	}
	success := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vllm:request_success_total",
		Help: "Count of successfully processed requests.",
	}, append(labelNames, "finished_reason"))
	reg.MustRegister(success)
	for _, r := range []string{finishStop, finishLength, finishAbort, finishError, finishRepetition} {
		success.With(prometheus.Labels{"model_name": model, "engine": "0", "finished_reason": r})
	}
	m.onFinish = func(reason string) { success.WithLabelValues(model, "0", reason).Inc() }

	gauge := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labelNames, nil)
	}
	g := &gaugeSet{e: e}
	g.add(gauge("vllm:num_requests_running", "Number of requests in model execution batches."),
		func(st engineState) float64 { return float64(st.running) }, model, "0")
	g.add(gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed."),
		func(st engineState) float64 { return float64(st.waiting) }, model, "0")
	// The simulator defers nothing: every waiting request waits for
	// capacity. vLLM splits its queue by reason since v0.29.
	byReason := prometheus.NewDesc("vllm:num_requests_waiting_by_reason", "Number of requests waiting to be processed, by reason.",
		append(append([]string(nil), labelNames...), "reason"), nil)
	g.add(byReason, func(st engineState) float64 { return float64(st.waiting) }, model, "0", "capacity")
	g.add(byReason, func(engineState) float64 { return 0 }, model, "0", "deferred")
	g.add(gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
		func(st engineState) float64 { return st.kvUsage }, model, "0")
	if legacy {
		g.add(gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: use vllm:kv_cache_usage_perc."),
			func(st engineState) float64 { return st.kvUsage }, model, "0")
	}
	reg.MustRegister(g)
	return m
}

func (m *serverMetrics) finished(reason string) { m.onFinish(reason) }

func (m *serverMetrics) observeITL(d time.Duration) {
	m.itl.Observe(d.Seconds())
	if m.legacyTPOT != nil {
		m.legacyTPOT.Observe(d.Seconds())
	}
}

// buckets125 is vLLM's 1-2-5 series up to max_model_len for token counts.
func buckets125(limit int) []float64 {
	var b []float64
	for m := 1; ; m *= 10 {
		for _, f := range []int{1, 2, 5} {
			if f*m > limit {
				return b
			}
			b = append(b, float64(f*m))
		}
	}
}

// labelledVecs registers the families of one server naming, each with
// the naming's label names, and returns the one child of each that the
// simulator's single model and engine use.
type labelledVecs struct {
	reg           prometheus.Registerer
	names, values []string
}

func (v labelledVecs) hist(name, help string, buckets []float64) prometheus.Observer {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, v.names)
	v.reg.MustRegister(h)
	return h.WithLabelValues(v.values...)
}

func (v labelledVecs) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, v.names)
	v.reg.MustRegister(c)
	return c.WithLabelValues(v.values...)
}
