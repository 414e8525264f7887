package simulator

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Bucket boundaries of trtllm-serve's request histograms
// (tensorrt_llm/metrics/collector.py, adapted from vLLM's).
var (
	trtllmPhaseBuckets   = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	trtllmPrefillBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
)

// newTRTLLMMetrics uses trtllm-serve's names (TensorRT-LLM's own OpenAI
// server, served at /prometheus/metrics), labelled model_name and
// engine_type. trtllm-serve records a request only when it finished with
// a reason (stop, length or timeout): a request cut by an error or a
// cancellation has none and is counted nowhere, hence reasonedOnly.
func newTRTLLMMetrics(reg prometheus.Registerer, e *engine, model string) *serverMetrics {
	v := labelledVecs{reg: reg, names: []string{"model_name", "engine_type"}, values: []string{model, "trtllm"}}
	hist, counter, labelNames, labelValues := v.hist, v.counter, v.names, v.values
	m := &serverMetrics{
		ttft:    hist("trtllm_time_to_first_token_seconds", "Histogram of time to first token in seconds.", vllmTTFTBuckets),
		itl:     sink{},
		reqTPOT: hist("trtllm_time_per_output_token_seconds", "Histogram of time per output token in seconds.", vllmITLBuckets),
		e2e:     hist("trtllm_e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", trtllmPhaseBuckets),
		queue:   hist("trtllm_request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", trtllmPhaseBuckets),
		prefill: hist("trtllm_request_prefill_time_seconds",
			"Histogram of prefill (context) phase duration in seconds (first_token_time - first_scheduled_time).", trtllmPrefillBuckets),
		decode: hist("trtllm_request_decode_time_seconds",
			"Histogram of decode (generation) phase duration in seconds (last_token_time - first_token_time).", trtllmPhaseBuckets),
		inference: hist("trtllm_request_inference_time_seconds",
			"Histogram of total inference duration in seconds (last_token_time - first_scheduled_time).", trtllmPhaseBuckets),
		promptTokensHist:     sink{},
		generationTokensHist: sink{},
		promptTokens:         counter("trtllm_prompt_tokens_total", "Cumulative number of prompt (input) tokens processed."),
		generationTokens:     counter("trtllm_generation_tokens_total", "Cumulative number of generation (output) tokens produced."),
		// The queries are the prompt tokens; trtllm-serve exports only the
		// cached ones.
		prefixQueries: sinkCounter(),
		prefixHits: counter("trtllm_prompt_cached_tokens_total",
			"Process-lifetime total prompt tokens served from KV cache. Resets only when the serving process restarts, not when the KV cache is flushed or evicted."),
		reasonedOnly: true,
	}
	success := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trtllm_request_success_total",
		Help: "Count of successfully processed requests.",
	}, append(labelNames, "finished_reason"))
	reg.MustRegister(success)
	m.onFinish = func(reason string) { success.WithLabelValues(model, "trtllm", reason).Inc() }

	gauge := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, labelNames, nil) }
	capacity := float64(e.sched.KVCacheCapacityTokens)
	// trtllm-serve's tokens_per_block default.
	const tokensPerBlock = 32
	g := &gaugeSet{e: e}
	g.add(gauge("trtllm_num_requests_running", "Number of active requests"),
		func(st engineState) float64 { return float64(st.running) }, labelValues...)
	g.add(gauge("trtllm_num_requests_waiting", "Number of queued requests"),
		func(st engineState) float64 { return float64(st.waiting) }, labelValues...)
	g.add(gauge("trtllm_num_scheduled_requests", "Number of scheduled requests"),
		func(st engineState) float64 { return float64(st.running) }, labelValues...)
	g.add(gauge("trtllm_kv_cache_utilization", "KV cache utilization"),
		func(st engineState) float64 { return st.kvUsage }, labelValues...)
	g.add(gauge("trtllm_kv_cache_max_blocks", "Maximum number of KV cache blocks"),
		func(engineState) float64 { return capacity / tokensPerBlock }, labelValues...)
	g.add(gauge("trtllm_kv_cache_used_blocks", "Number of used KV cache blocks"),
		func(st engineState) float64 { return kvUsedTokens(e, st) / tokensPerBlock }, labelValues...)
	reg.MustRegister(g)
	return m
}
