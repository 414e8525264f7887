package simulator

import (
	"github.com/prometheus/client_golang/prometheus"
)

// SGLang's default bucket boundaries.
var (
	sglangTTFTBuckets  = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	sglangITLBuckets   = []float64{0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0}
	sglangE2EBuckets   = append(append([]float64(nil), sglangTTFTBuckets...), 600, 1200, 1800, 2400)
	sglangQueueBuckets = []float64{0, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 3000}
)

// newSGLangMetrics uses SGLang's names: request metrics from its tokenizer
// manager labelled model_name and engine_type, scheduler gauges also with
// the parallelism ranks of the (single) scheduler.
func newSGLangMetrics(reg prometheus.Registerer, e *engine, model string) *serverMetrics {
	v := labelledVecs{reg: reg, names: []string{"model_name", "engine_type"}, values: []string{model, "unified"}}
	hist, counter, labelNames, labelValues := v.hist, v.counter, v.names, v.values

	requests := counter("sglang:num_requests_total", "Number of requests processed.")
	aborted := counter("sglang:num_aborted_requests_total", "Number of requests aborted.")
	m := &serverMetrics{
		ttft:                 hist("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", sglangTTFTBuckets),
		itl:                  hist("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", sglangITLBuckets),
		reqTPOT:              sink{},
		e2e:                  hist("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", sglangE2EBuckets),
		queue:                hist("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", sglangQueueBuckets),
		prefill:              sink{},
		decode:               sink{},
		inference:            sink{},
		promptTokensHist:     sink{},
		generationTokensHist: sink{},
		promptTokens:         counter("sglang:prompt_tokens_total", "Number of prefill tokens processed."),
		generationTokens:     counter("sglang:generation_tokens_total", "Number of generation tokens processed."),
		// SGLang counts cached prompt tokens; the queries are its
		// prompt_tokens_total, so nothing more is exposed for them.
		prefixQueries: sinkCounter(),
		prefixHits:    counter("sglang:cached_tokens_total", "Number of cached prompt tokens."),
	}
	m.onFinish = func(reason string) {
		requests.Inc()
		if reason == finishAbort || reason == finishError {
			aborted.Inc()
		}
	}

	schedLabels := append(append([]string(nil), labelNames...), "tp_rank", "pp_rank", "moe_ep_rank")
	sched := append(append([]string(nil), labelValues...), "0", "0", "0")
	gauge := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, schedLabels, nil) }
	capacity := float64(e.sched.KVCacheCapacityTokens)
	g := &gaugeSet{e: e}
	g.add(gauge("sglang:num_running_reqs", "The number of running requests."),
		func(st engineState) float64 { return float64(st.running) }, sched...)
	g.add(gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue."),
		func(st engineState) float64 { return float64(st.waiting) }, sched...)
	g.add(gauge("sglang:num_grammar_queue_reqs", "The number of requests in the grammar waiting queue."),
		func(engineState) float64 { return 0 }, sched...)
	g.add(gauge("sglang:token_usage", "The token usage."),
		func(st engineState) float64 { return st.kvUsage }, sched...)
	g.add(gauge("sglang:num_used_tokens", "The number of used tokens."),
		func(st engineState) float64 { return kvUsedTokens(e, st) }, sched...)
	g.add(gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."),
		func(engineState) float64 { return capacity }, sched...)
	g.add(gauge("sglang:cache_hit_rate", "The prefix cache hit rate."),
		func(engineState) float64 { return 0 }, sched...)
	reg.MustRegister(g)
	// A scheduler counter with the ranks' labels; the simulator queues
	// rather than retracts, so it stays at 0.
	retracted := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sglang:num_retracted_requests_total", Help: "The number of retracted requests.",
	}, schedLabels)
	reg.MustRegister(retracted)
	retracted.WithLabelValues(sched...)
	return m
}
