package simulator

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// vLLM's default bucket boundaries (V1), so dashboards built for vLLM
// read the simulator's histograms the same way.
var (
	vllmTTFTBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	vllmITLBuckets  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	vllmE2EBuckets  = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// Finished reasons as vLLM labels them.
const (
	finishStop   = "stop"
	finishLength = "length"
	finishAbort  = "abort"
	finishError  = "error"
)

// serverMetrics are the engine's metrics under vLLM's names. The label
// values are fixed at construction: vLLM V1 labels everything with the
// first served model name and the engine (data-parallel) index.
type serverMetrics struct {
	ttft, itl, legacyTPOT, reqTPOT, e2e    prometheus.Observer
	queue, prefill, decode, inference      prometheus.Observer
	promptTokensHist, generationTokensHist prometheus.Observer
	promptTokens, generationTokens         prometheus.Counter
	success                                *prometheus.CounterVec
	model                                  string
}

// engineCollector reads the engine's gauges at scrape time so they are
// always consistent with each other.
type engineCollector struct {
	e                           *engine
	labels                      []string
	running, waiting, kv, oldKV *prometheus.Desc
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.running
	ch <- c.waiting
	ch <- c.kv
	if c.oldKV != nil {
		ch <- c.oldKV
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.e.state()
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(st.running), c.labels...)
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(st.waiting), c.labels...)
	ch <- prometheus.MustNewConstMetric(c.kv, prometheus.GaugeValue, st.kvUsage, c.labels...)
	if c.oldKV != nil {
		ch <- prometheus.MustNewConstMetric(c.oldKV, prometheus.GaugeValue, st.kvUsage, c.labels...)
	}
}

func newServerMetrics(reg prometheus.Registerer, e *engine, model string, maxModelLen int, legacy bool) *serverMetrics {
	labelNames := []string{"model_name", "engine"}
	labels := prometheus.Labels{"model_name": model, "engine": "0"}

	hist := func(name, help string, buckets []float64) prometheus.Observer {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labelNames)
		reg.MustRegister(h)
		return h.With(labels)
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labelNames)
		reg.MustRegister(c)
		return c.With(labels)
	}

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
	}
	if legacy {
		m.legacyTPOT = hist("vllm:time_per_output_token_seconds",
			"Histogram of time per output token in seconds. DEPRECATED: use vllm:inter_token_latency_seconds.", vllmITLBuckets)
	}
	m.success = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vllm:request_success_total",
		Help: "Count of successfully processed requests.",
	}, append(labelNames, "finished_reason"))
	reg.MustRegister(m.success)
	for _, r := range []string{finishStop, finishLength, finishAbort, finishError} {
		m.success.With(prometheus.Labels{"model_name": model, "engine": "0", "finished_reason": r})
	}

	gauge := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labelNames, nil)
	}
	ec := &engineCollector{
		e:       e,
		labels:  []string{model, "0"},
		running: gauge("vllm:num_requests_running", "Number of requests in model execution batches."),
		waiting: gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed."),
		kv:      gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
	}
	if legacy {
		ec.oldKV = gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: use vllm:kv_cache_usage_perc.")
	}
	reg.MustRegister(ec)
	m.model = model
	return m
}

func (m *serverMetrics) finished(reason string) {
	m.success.WithLabelValues(m.model, "0", reason).Inc()
}

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
