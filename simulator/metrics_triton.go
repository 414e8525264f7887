package simulator

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
)

// tritonTokensPerBlock is the simulated TensorRT-LLM KV-cache block size.
const tritonTokensPerBlock = 32

// newTritonMetrics uses Triton core's per-model names plus the TensorRT-LLM
// backend's custom gauges. Every series is labelled with the served model
// name and version "1"; a real deployment labels the nv_trt_llm_* series
// with the tensorrt_llm model and the request counters with every model of
// the ensemble.
func newTritonMetrics(reg prometheus.Registerer, e *engine, model string) *serverMetrics {
	const version = "1"
	labelNames := []string{"model", "version"}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labelNames)
		reg.MustRegister(c)
		return c.WithLabelValues(model, version)
	}
	us := func(name, help string) prometheus.Observer {
		return scaled{o: adder{c: counter(name, help)}, f: 1e6}
	}
	tokenHist := func(name, help, metricType string) prometheus.Observer {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: name, Help: help, Buckets: []float64{10, 50, 100, 500, 1000},
		}, append(labelNames, "response_metric_type"))
		reg.MustRegister(h)
		return h.WithLabelValues(model, version, metricType)
	}

	success := counter("nv_inference_request_success", "Number of successful inference requests, all batch sizes")
	failure := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nv_inference_request_failure",
		Help: "Number of failed inference requests, all batch sizes",
	}, append(labelNames, "reason"))
	reg.MustRegister(failure)
	for _, r := range []string{"REJECTED", "CANCELED", "BACKEND", "OTHER"} {
		failure.WithLabelValues(model, version, r)
	}
	count := counter("nv_inference_count", "Number of inferences performed (does not include cached requests)")
	execCount := counter("nv_inference_exec_count", "Number of model executions performed (does not include cached requests)")

	// Triton splits compute into input, infer and output; an LLM spends it
	// all in infer, so input and output stay at zero.
	_ = counter("nv_inference_compute_input_duration_us", "Cumulative compute input duration in microseconds (does not include cached requests)")
	_ = counter("nv_inference_compute_output_duration_us", "Cumulative inference compute output duration in microseconds (does not include cached requests)")

	ttft := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "nv_inference_first_response_histogram_ms",
		Help:    "Duration from request to first response in milliseconds",
		Buckets: []float64{100, 500, 2000, 5000},
	}, labelNames)
	reg.MustRegister(ttft)

	m := &serverMetrics{
		ttft:                 scaled{o: ttft.WithLabelValues(model, version), f: 1e3},
		itl:                  sink{},
		reqTPOT:              sink{},
		e2e:                  us("nv_inference_request_duration_us", "Cumulative inference request duration in microseconds (includes cached requests)"),
		queue:                us("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds (includes cached requests)"),
		prefill:              sink{},
		decode:               sink{},
		inference:            us("nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds (does not include cached requests)"),
		promptTokensHist:     tokenHist("nv_llm_input_token_len", "TRT LLM response metrics", "total_input_tokens"),
		generationTokensHist: tokenHist("nv_llm_output_token_len", "TRT LLM response metrics", "total_output_tokens"),
		promptTokens:         sinkCounter(),
		generationTokens:     sinkCounter(),
	}
	m.onFinish = func(reason string) {
		switch reason {
		case finishAbort:
			failure.WithLabelValues(model, version, "CANCELED").Inc()
		case finishError:
			failure.WithLabelValues(model, version, "BACKEND").Inc()
		default:
			success.Inc()
			count.Inc()
			execCount.Inc()
		}
	}

	g := &gaugeSet{e: e}
	g.add(prometheus.NewDesc("nv_inference_pending_request_count",
		"Instantaneous number of pending requests awaiting execution per-model.", labelNames, nil),
		func(st engineState) float64 { return float64(st.waiting) }, model, version)

	req := prometheus.NewDesc("nv_trt_llm_request_metrics", "TRT LLM request metrics",
		append(labelNames, "request_type"), nil)
	maxRunning := float64(e.sched.MaxRunning)
	for _, r := range []struct {
		typ string
		v   func(engineState) float64
	}{
		{"active", func(st engineState) float64 { return float64(st.running) }},
		{"max", func(engineState) float64 { return maxRunning }},
		{"scheduled", func(st engineState) float64 { return float64(st.running) }},
		{"context", func(engineState) float64 { return 0 }},
		{"waiting", func(st engineState) float64 { return float64(st.waiting) }},
	} {
		g.add(req, r.v, model, version, r.typ)
	}

	kv := prometheus.NewDesc("nv_trt_llm_kv_cache_block_metrics", "TRT LLM KV cache block metrics",
		append(labelNames, "kv_cache_block_type"), nil)
	maxBlocks := math.Ceil(float64(e.sched.KVCacheCapacityTokens) / tritonTokensPerBlock)
	used := func(st engineState) float64 {
		return min(math.Ceil(kvUsedTokens(e, st)/tritonTokensPerBlock), maxBlocks)
	}
	for _, b := range []struct {
		typ string
		v   func(engineState) float64
	}{
		{"max", func(engineState) float64 { return maxBlocks }},
		{"free", func(st engineState) float64 { return maxBlocks - used(st) }},
		{"used", used},
		{"tokens_per", func(engineState) float64 { return tritonTokensPerBlock }},
		{"reused", func(engineState) float64 { return 0 }},
		{"fraction", func(st engineState) float64 { return used(st) / maxBlocks }},
	} {
		g.add(kv, b.v, model, version, b.typ)
	}

	ifb := prometheus.NewDesc("nv_trt_llm_inflight_batcher_metrics", "TRT LLM inflight_batcher-specific metrics",
		append(labelNames, "inflight_batcher_specific_metric"), nil)
	g.add(ifb, func(st engineState) float64 { return float64(st.running) }, model, version, "generation_requests")
	g.add(ifb, func(engineState) float64 { return 0 }, model, version, "total_context_tokens")
	g.add(ifb, func(engineState) float64 { return 0 }, model, version, "paused_requests")
	g.add(ifb, func(engineState) float64 { return 0 }, model, version, "micro_batch_id")
	reg.MustRegister(g)
	return m
}
