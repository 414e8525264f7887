package collector

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Server kinds whose /metrics the prober normalises; serverKinds
// describes each.
const (
	KindAuto     = "auto"
	KindVLLM     = "vllm"
	KindTriton   = "triton"
	KindTGI      = "tgi"
	KindSGLang   = "sglang"
	KindLlamaCPP = "llamacpp"
	KindTRTLLM   = "trtllm"
)

// Normalised metric names.
const (
	serverRequestsWaiting   = "llm_server_requests_waiting"
	serverWaitingByReason   = "llm_server_requests_waiting_by_reason"
	serverRequestsFinished  = "llm_server_requests_finished_total"
	serverRequestsRunning   = "llm_server_requests_running"
	serverKVCacheUsage      = "llm_server_kv_cache_usage_ratio"
	serverBatchSize         = "llm_server_batch_size"
	serverRequestsTotal     = "llm_server_requests_total"
	serverPromptTokens      = "llm_server_prompt_tokens_total"
	serverGenerationTokens  = "llm_server_generation_tokens_total"
	serverPhaseSeconds      = "llm_server_phase_seconds_total"
	serverPhaseRequests     = "llm_server_phase_requests_total"
	serverPrefixQueries     = "llm_server_prefix_cache_queries_total"
	serverPrefixHits        = "llm_server_prefix_cache_hits_total"
	serverUp                = "llm_server_up"
	serverScrapeDuration    = "llm_server_scrape_duration_seconds"
	serverLabelsTruncated   = "llm_server_label_values_truncated"
	resultSuccess           = "success"
	resultFailure           = "failure"
	phaseQueue              = "queue"
	phaseCompute            = "compute"
	phasePrefill            = "prefill"
	phaseDecode             = "decode"
	phaseE2E                = "e2e"
	phaseComputeInput       = "compute_input"
	phaseComputeInfer       = "compute_infer"
	phaseComputeOutput      = "compute_output"
	microseconds            = 1e-6
	labelResult, labelPhase = "result", "phase"
	labelReason             = "reason"
	// reasonAll stands for every finished request where the server
	// counts them without a reason (SGLang).
	reasonAll = "all"
)

// serverOutput describes one normalised metric. Every series carries
// target, server and model (empty when the server has no model label)
// plus the extra label, if any, that the rules fill in.
type serverOutput struct {
	name, help string
	typ        prometheus.ValueType
	extra      string
}

func serverOutputs() []serverOutput {
	return []serverOutput{
		{serverRequestsWaiting, "Requests queued in the model server, not yet scheduled.", prometheus.GaugeValue, ""},
		{serverWaitingByReason, "Queued requests by why they wait, where the server splits its queue (vLLM: capacity, deferred); they add up to llm_server_requests_waiting.", prometheus.GaugeValue, labelReason},
		{serverRequestsRunning, "Requests the model server is processing (in the running batch).", prometheus.GaugeValue, ""},
		{serverKVCacheUsage, "Fraction of the model server's KV cache in use (0..1).", prometheus.GaugeValue, ""},
		{serverBatchSize, "Requests in the model server's current batch, where it reports one.", prometheus.GaugeValue, ""},
		{serverRequestsTotal, "Requests the model server finished, by result as the server counts it.", prometheus.CounterValue, labelResult},
		{serverRequestsFinished, "Requests the model server finished, by the finish reason it records (all where it records none).", prometheus.CounterValue, labelReason},
		{serverPromptTokens, "Prompt (input) tokens the model server processed.", prometheus.CounterValue, ""},
		{serverGenerationTokens, "Tokens the model server generated.", prometheus.CounterValue, ""},
		{serverPhaseSeconds, "Seconds requests spent in a server-side phase, summed over requests; divide by llm_server_phase_requests_total for the mean.", prometheus.CounterValue, labelPhase},
		{serverPhaseRequests, "Requests counted in llm_server_phase_seconds_total for the same phase.", prometheus.CounterValue, labelPhase},
		{serverPrefixQueries, "Prompt tokens the model server looked up in its prefix cache.", prometheus.CounterValue, ""},
		{serverPrefixHits, "Prompt tokens the model server found in its prefix cache (of llm_server_prefix_cache_queries_total).", prometheus.CounterValue, ""},
	}
}

// aggregation combines the matching series of one model into one value.
type aggregation int

const (
	aggSum aggregation = iota
	aggMax
	aggAvg
)

func (a aggregation) String() string {
	return [...]string{"sum", "max", "avg"}[a]
}

// field selects what a source reads from a series.
type field int

const (
	fieldValue field = iota // gauge, counter or untyped value
	fieldSum                // a histogram's or summary's _sum
	fieldCount              // a histogram's or summary's _count
)

// labelMatch keeps a series when its label is one of values (or, negated,
// none of them). "" stands for an absent label, as in PromQL.
type labelMatch struct {
	name   string
	values []string
	negate bool
}

func eq(name string, values ...string) labelMatch { return labelMatch{name: name, values: values} }
func ne(name string, values ...string) labelMatch {
	return labelMatch{name: name, values: values, negate: true}
}

// source is one metric of the server's exposition and the series of it
// that count.
type source struct {
	metric string
	field  field
	match  []labelMatch
}

// combine says how a rule turns its sources into one value.
type combine int

const (
	combineOne        combine = iota // sources[0]
	combineSum                       // sources[0] + sources[1] + …
	combineRatio                     // sources[0] / sources[1], only when sources[1] > 0
	combineDifference                // sources[0] − sources[1] − …, at least 0; missing subtrahends count as 0
	combineSumAll                    // sources[0] + sources[1] + …, only for models every source has
)

func (c combine) String() string {
	return [...]string{"", "sum of", "ratio of", "difference of", "sum (all present) of"}[c]
}

// serverRule is one row of the normalisation table. Rules producing the same
// output series (name, extra label value, model) are alternatives in table
// order: the first whose sources have data for that model wins. That is
// how renames across server versions, and derived fallbacks such as KV
// usage from blocks, coexist without double counting.
type serverRule struct {
	kind       string
	out        string
	extraValue string // value of the output's extra label (result, phase)
	sources    []source
	combine    combine
	agg        aggregation
	scale      float64 // multiplies the result when non-zero (units)
	note       string  // why, for docs and readers of the table
	// unlessPrefix, when set, drops the rule for every model that has a
	// series in a family whose name starts with it: the source is known
	// to be wrong for such a model (Triton's pending count beside the
	// vLLM backend's vllm:* series).
	unlessPrefix string
}

// ServerKind describes one kind of model server whose /metrics are
// normalised. ServerKindTable is the one list of kinds: config validation,
// the normaliser, detection for auto and the docs test read it.
type ServerKind struct {
	// Name is the value of server_metrics.kind and of the server label.
	Name string
	// ModelLabel is the label the server puts the model name in; "" when
	// it has none (one server, one model).
	ModelLabel string
	// Detect are the metric-name prefixes that identify the kind for auto.
	Detect []string
	// detectRank orders detection, lowest first: Triton before vLLM,
	// because Triton's vLLM backend also exposes vllm:* names beside
	// nv_inference_*.
	detectRank int
}

// serverKinds is the table, in the order messages and docs list kinds.
// Auto is the only row without rules: it stands for detection.
var serverKinds = []ServerKind{
	{Name: KindAuto},
	{Name: KindVLLM, ModelLabel: "model_name", Detect: []string{"vllm:"}, detectRank: 4},
	{Name: KindTriton, ModelLabel: "model", Detect: []string{"nv_inference_", "nv_trt_llm_", "nv_llm_"}, detectRank: 0},
	{Name: KindTGI, Detect: []string{"tgi_"}, detectRank: 2},
	{Name: KindSGLang, ModelLabel: "model_name", Detect: []string{"sglang:"}, detectRank: 1},
	{Name: KindLlamaCPP, Detect: []string{"llamacpp:"}, detectRank: 3},
	{Name: KindTRTLLM, ModelLabel: "model_name", Detect: []string{"trtllm_"}, detectRank: 5},
}

// ServerKindTable returns the server-kind table (a copy), auto first.
func ServerKindTable() []ServerKind {
	out := slices.Clone(serverKinds)
	for i := range out {
		out[i].Detect = slices.Clone(out[i].Detect)
	}
	return out
}

// ServerKinds lists the accepted values of server_metrics.kind, auto first.
func ServerKinds() []string {
	names := make([]string, len(serverKinds))
	for i, k := range serverKinds {
		names[i] = k.Name
	}
	return names
}

// modelLabel is the label kind puts the model name in; "" when the kind
// has none.
func modelLabel(kind string) string {
	for _, k := range serverKinds {
		if k.Name == kind {
			return k.ModelLabel
		}
	}
	return ""
}

type detection struct{ prefix, kind string }

// detectionPrefixes decide kind auto, in detection order.
var detectionPrefixes = sync.OnceValue(func() []detection {
	kinds := slices.Clone(serverKinds)
	slices.SortStableFunc(kinds, func(a, b ServerKind) int { return a.detectRank - b.detectRank })
	var d []detection
	for _, k := range kinds {
		for _, p := range k.Detect {
			d = append(d, detection{p, k.Name})
		}
	}
	return d
})

// serverRules is the normalisation table. Keep docs/metrics.md in step.
func serverRules() []serverRule {
	one := func(metric string, m ...labelMatch) []source { return []source{{metric: metric, match: m}} }
	hsum := func(metric string, m ...labelMatch) source { return source{metric: metric, field: fieldSum, match: m} }
	hcount := func(metric string, m ...labelMatch) source {
		return source{metric: metric, field: fieldCount, match: m}
	}

	var r []serverRule
	add := func(rules ...serverRule) { r = append(r, rules...) }
	// phase adds the seconds and request-count rows of a histogram whose
	// _sum is seconds and _count the requests observed.
	phase := func(kind, name, metric string, m ...labelMatch) {
		add(serverRule{kind: kind, out: serverPhaseSeconds, extraValue: name, sources: []source{hsum(metric, m...)}},
			serverRule{kind: kind, out: serverPhaseRequests, extraValue: name, sources: []source{hcount(metric, m...)}})
	}

	// vLLM: labels model_name and, in V1, engine (data-parallel rank).
	// Counts are summed over engines; KV usage is the fullest engine's,
	// since that is where requests stall.
	//
	// finished_reason (vllm/v1/metrics/loggers.py) is stop, length, abort,
	// error or repetition. repetition is a request vLLM cut because its
	// output kept repeating itself: a complete, well-formed answer whose
	// latencies are real, so it counts as a success here, as the prober's
	// own probe outcome does (llm_probe_finish_reasons_total), and it is
	// its own reason in requests_finished_total, never folded away.
	vllmFailed := []string{"abort", "error"}
	add(
		serverRule{kind: KindVLLM, out: serverRequestsWaiting, sources: one("vllm:num_requests_waiting"), note: "includes deferred requests where the server defers"},
		serverRule{kind: KindVLLM, out: serverWaitingByReason, extraValue: "capacity",
			sources: one("vllm:num_requests_waiting_by_reason", eq("reason", "capacity")), note: "waiting for KV cache or batch room"},
		serverRule{kind: KindVLLM, out: serverWaitingByReason, extraValue: "deferred",
			sources: one("vllm:num_requests_waiting_by_reason", eq("reason", "deferred")), note: "held back by the scheduler's own policy"},
		serverRule{kind: KindVLLM, out: serverRequestsRunning, sources: one("vllm:num_requests_running")},
		serverRule{kind: KindVLLM, out: serverKVCacheUsage, sources: one("vllm:kv_cache_usage_perc"), agg: aggMax, note: "vLLM ≥ 0.9.2"},
		serverRule{kind: KindVLLM, out: serverKVCacheUsage, sources: one("vllm:gpu_cache_usage_perc"), agg: aggMax, note: "old name, vLLM ≤ 0.11"},
		serverRule{kind: KindVLLM, out: serverRequestsTotal, extraValue: resultSuccess,
			sources: one("vllm:request_success_total", ne("finished_reason", vllmFailed...)), note: "stop, length, repetition (every finished_reason but abort, error)"},
		serverRule{kind: KindVLLM, out: serverRequestsTotal, extraValue: resultFailure,
			sources: one("vllm:request_success_total", eq("finished_reason", vllmFailed...)), note: "abort, error"},
	)
	for _, reason := range []string{"stop", "length", "abort", "error", "repetition"} {
		add(serverRule{kind: KindVLLM, out: serverRequestsFinished, extraValue: reason,
			sources: one("vllm:request_success_total", eq("finished_reason", reason))})
	}
	add(
		serverRule{kind: KindVLLM, out: serverPromptTokens, sources: one("vllm:prompt_tokens_total")},
		serverRule{kind: KindVLLM, out: serverGenerationTokens, sources: one("vllm:generation_tokens_total")},
		serverRule{kind: KindVLLM, out: serverPrefixQueries, sources: one("vllm:prefix_cache_queries_total"), note: "tokens; vLLM ≥ 0.9.2"},
		serverRule{kind: KindVLLM, out: serverPrefixQueries, sources: one("vllm:gpu_prefix_cache_queries_total"), note: "old name, vLLM V1 before 0.9.2"},
		serverRule{kind: KindVLLM, out: serverPrefixHits, sources: one("vllm:prefix_cache_hits_total"), note: "tokens; vLLM ≥ 0.9.2"},
		serverRule{kind: KindVLLM, out: serverPrefixHits, sources: one("vllm:gpu_prefix_cache_hits_total"), note: "old name, vLLM V1 before 0.9.2"},
	)
	phase(KindVLLM, phaseQueue, "vllm:request_queue_time_seconds")
	phase(KindVLLM, phaseCompute, "vllm:request_inference_time_seconds")
	phase(KindVLLM, phasePrefill, "vllm:request_prefill_time_seconds")
	phase(KindVLLM, phaseDecode, "vllm:request_decode_time_seconds")
	phase(KindVLLM, phaseE2E, "vllm:e2e_request_latency_seconds")

	// Triton: labels model and version (summed over versions). The
	// TensorRT-LLM backend's own gauges come first, Triton core's
	// per-model ones are the fallback for other backends.
	trtReq := func(typ string) []source { return one("nv_trt_llm_request_metrics", eq("request_type", typ)) }
	kvBlocks := func(typ string) source {
		return source{metric: "nv_trt_llm_kv_cache_block_metrics", match: []labelMatch{eq("kv_cache_block_type", typ)}}
	}
	add(
		serverRule{kind: KindTriton, out: serverRequestsWaiting, sources: trtReq("waiting")},
		// The vLLM backend's execute() hands requests to vLLM's engine
		// and returns at once, so Triton's pending count stays near 0
		// while vLLM's own queue grows, and the backend exports no queue
		// gauge: for a model with vllm:* series the queue is unknown.
		serverRule{kind: KindTriton, out: serverRequestsWaiting, sources: one("nv_inference_pending_request_count"), unlessPrefix: "vllm:",
			note: "queued in Triton; not for a model with vllm:* series (vLLM backend)"},
		serverRule{kind: KindTriton, out: serverRequestsRunning, sources: trtReq("active")},
		serverRule{kind: KindTriton, out: serverBatchSize, sources: trtReq("scheduled")},
		serverRule{kind: KindTriton, out: serverKVCacheUsage, sources: []source{kvBlocks("fraction")}, agg: aggMax},
		serverRule{kind: KindTriton, out: serverKVCacheUsage, sources: []source{kvBlocks("used"), kvBlocks("max")},
			combine: combineRatio, note: "releases without the fraction series"},
		serverRule{kind: KindTriton, out: serverRequestsTotal, extraValue: resultSuccess, sources: one("nv_inference_request_success")},
		serverRule{kind: KindTriton, out: serverRequestsTotal, extraValue: resultFailure, sources: one("nv_inference_request_failure"), note: "every reason"},
		serverRule{kind: KindTriton, out: serverPromptTokens, sources: []source{hsum("nv_llm_input_token_len")}},
		serverRule{kind: KindTriton, out: serverPromptTokens, sources: one("vllm:prompt_tokens_total"), note: "vLLM backend with REPORT_CUSTOM_METRICS"},
		serverRule{kind: KindTriton, out: serverGenerationTokens, sources: []source{hsum("nv_llm_output_token_len")}},
		serverRule{kind: KindTriton, out: serverGenerationTokens, sources: one("vllm:generation_tokens_total"), note: "vLLM backend with REPORT_CUSTOM_METRICS"},
	)
	// Triton accumulates durations of successful requests only, so the
	// request count beside every phase is nv_inference_request_success.
	tritonPhase := func(name string, metrics ...string) {
		srcs := make([]source, len(metrics))
		for i, m := range metrics {
			srcs[i] = source{metric: m}
		}
		c := combineOne
		if len(srcs) > 1 {
			c = combineSum
		}
		add(serverRule{kind: KindTriton, out: serverPhaseSeconds, extraValue: name, sources: srcs, combine: c, scale: microseconds},
			serverRule{kind: KindTriton, out: serverPhaseRequests, extraValue: name, sources: one("nv_inference_request_success")})
	}
	tritonPhase(phaseQueue, "nv_inference_queue_duration_us")
	tritonPhase(phaseCompute, "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us", "nv_inference_compute_output_duration_us")
	tritonPhase(phaseComputeInput, "nv_inference_compute_input_duration_us")
	tritonPhase(phaseComputeInfer, "nv_inference_compute_infer_duration_us")
	tritonPhase(phaseComputeOutput, "nv_inference_compute_output_duration_us")
	tritonPhase(phaseE2E, "nv_inference_request_duration_us")

	// TGI: no labels. Counters are registered without _total and
	// metrics-exporter-prometheus 0.15.3 renders them so (recorder.rs
	// :118-126); the _total rows are a fallback for other exporters.
	add(
		serverRule{kind: KindTGI, out: serverRequestsWaiting, sources: one("tgi_queue_size")},
		serverRule{kind: KindTGI, out: serverRequestsRunning, sources: one("tgi_batch_current_size")},
		serverRule{kind: KindTGI, out: serverBatchSize, sources: one("tgi_batch_current_size")},
		serverRule{kind: KindTGI, out: serverKVCacheUsage,
			sources: []source{{metric: "tgi_batch_current_max_tokens"}, {metric: "tgi_batch_max_total_tokens"}},
			combine: combineRatio, note: "tokens the current batch reserves of the KV token budget"},
		serverRule{kind: KindTGI, out: serverRequestsTotal, extraValue: resultSuccess, sources: one("tgi_request_success")},
		serverRule{kind: KindTGI, out: serverRequestsTotal, extraValue: resultSuccess, sources: one("tgi_request_success_total")},
		serverRule{kind: KindTGI, out: serverRequestsTotal, extraValue: resultFailure, sources: one("tgi_request_failure"), note: "every err"},
		serverRule{kind: KindTGI, out: serverRequestsTotal, extraValue: resultFailure, sources: one("tgi_request_failure_total")},
		serverRule{kind: KindTGI, out: serverPromptTokens, sources: []source{hsum("tgi_request_input_length")}},
		serverRule{kind: KindTGI, out: serverGenerationTokens, sources: []source{hsum("tgi_request_generated_tokens")}},
	)
	phase(KindTGI, phaseQueue, "tgi_request_queue_duration")
	phase(KindTGI, phaseCompute, "tgi_request_inference_duration")
	phase(KindTGI, phaseE2E, "tgi_request_duration")

	// SGLang: labels model_name, engine_type and, on scheduler gauges,
	// tp_rank/pp_rank/moe_ep_rank (dp_rank with data parallelism). Every
	// rank of a TP/PP group reports the same queue, so only rank 0 is
	// read; data-parallel ranks are summed.
	rank0 := []labelMatch{eq("tp_rank", "", "0"), eq("pp_rank", "", "0")}
	add(
		serverRule{kind: KindSGLang, out: serverRequestsWaiting, sources: one("sglang:num_queue_reqs", rank0...)},
		serverRule{kind: KindSGLang, out: serverRequestsRunning, sources: one("sglang:num_running_reqs", rank0...)},
		serverRule{kind: KindSGLang, out: serverKVCacheUsage, sources: one("sglang:token_usage", rank0...), agg: aggMax},
		serverRule{kind: KindSGLang, out: serverKVCacheUsage,
			sources: []source{{metric: "sglang:num_used_tokens", match: rank0}, {metric: "sglang:max_total_num_tokens", match: rank0}},
			combine: combineRatio},
		// SGLang has no success counter: num_requests_total counts every
		// request that finished (collector.py observe_one_finished_request),
		// and num_aborted_requests_total every abort_request() call —
		// client disconnects, and one per abort_all — so neither their
		// difference nor the abort count is a request result. requests_total
		// is left out; the finished count is exported as it is.
		serverRule{kind: KindSGLang, out: serverRequestsFinished, extraValue: reasonAll, sources: one("sglang:num_requests_total"), note: "no finish reason recorded"},
		serverRule{kind: KindSGLang, out: serverPromptTokens, sources: one("sglang:prompt_tokens_total")},
		serverRule{kind: KindSGLang, out: serverGenerationTokens, sources: one("sglang:generation_tokens_total")},
		// SGLang counts prompt tokens and the cached part of them; every
		// prompt is matched against its radix cache, so the prompt tokens
		// are the queries. Its cache_hit_rate gauge is not a counter and
		// is left out.
		serverRule{kind: KindSGLang, out: serverPrefixQueries, sources: one("sglang:prompt_tokens_total"), note: "every prompt token is looked up in the radix cache"},
		serverRule{kind: KindSGLang, out: serverPrefixHits, sources: one("sglang:cached_tokens_total")},
	)
	phase(KindSGLang, phaseQueue, "sglang:queue_time_seconds")
	phase(KindSGLang, phaseE2E, "sglang:e2e_request_latency_seconds")

	// llama.cpp: no labels, no histograms, no request counter; its
	// prefill and decode seconds are exported without a request count.
	// Since PR #26920 prompt_tokens_total leaves out the prompt tokens
	// served from the cache and prompt_tokens_cached_total counts them;
	// adding them back makes prompt_tokens mean all prompt tokens, as on
	// vLLM and SGLang. Builds without the cached counter have no prefix
	// cache series.
	llamaPrompt := []source{{metric: "llamacpp:prompt_tokens_total"}, {metric: "llamacpp:prompt_tokens_cached_total"}}
	add(
		serverRule{kind: KindLlamaCPP, out: serverRequestsWaiting, sources: one("llamacpp:requests_deferred")},
		serverRule{kind: KindLlamaCPP, out: serverRequestsRunning, sources: one("llamacpp:requests_processing")},
		serverRule{kind: KindLlamaCPP, out: serverKVCacheUsage, sources: one("llamacpp:kv_cache_usage_ratio"), note: "builds before PR #13660 only"},
		serverRule{kind: KindLlamaCPP, out: serverPromptTokens, sources: llamaPrompt, combine: combineSum, note: "the cached counter counts 0 where absent"},
		serverRule{kind: KindLlamaCPP, out: serverGenerationTokens, sources: one("llamacpp:tokens_predicted_total")},
		serverRule{kind: KindLlamaCPP, out: serverPrefixQueries, sources: llamaPrompt, combine: combineSumAll, note: "builds with the cached counter"},
		serverRule{kind: KindLlamaCPP, out: serverPrefixHits, sources: one("llamacpp:prompt_tokens_cached_total")},
		serverRule{kind: KindLlamaCPP, out: serverPhaseSeconds, extraValue: phasePrefill, sources: one("llamacpp:prompt_seconds_total")},
		serverRule{kind: KindLlamaCPP, out: serverPhaseSeconds, extraValue: phaseDecode, sources: one("llamacpp:tokens_predicted_seconds_total")},
	)

	// trtllm-serve (tensorrt_llm/metrics/collector.py): labels model_name
	// and engine_type, served at /prometheus/metrics (its /metrics is JSON
	// iteration statistics). Iteration gauges need enable_iter_perf_stats,
	// request counters return_perf_metrics. finished_reason is stop,
	// length or timeout (executor/result.py); cancelled requests carry no
	// reason and are not counted.
	add(
		serverRule{kind: KindTRTLLM, out: serverRequestsWaiting, sources: one("trtllm_num_requests_waiting")},
		// Another line of collector.py (a 2026 copy read for issue 28; its
		// commit is not pinned) names the same two gauges
		// trtllm_server_queue_length (numQueuedRequests) and
		// trtllm_num_active_requests (numActiveRequests).
		serverRule{kind: KindTRTLLM, out: serverRequestsWaiting, sources: one("trtllm_server_queue_length"), note: "other collector.py line: numQueuedRequests"},
		serverRule{kind: KindTRTLLM, out: serverRequestsRunning, sources: one("trtllm_num_requests_running")},
		serverRule{kind: KindTRTLLM, out: serverRequestsRunning, sources: one("trtllm_num_active_requests"), note: "other collector.py line: numActiveRequests"},
		serverRule{kind: KindTRTLLM, out: serverBatchSize, sources: one("trtllm_num_scheduled_requests")},
		serverRule{kind: KindTRTLLM, out: serverKVCacheUsage, sources: one("trtllm_kv_cache_utilization"), agg: aggMax},
		serverRule{kind: KindTRTLLM, out: serverKVCacheUsage,
			sources: []source{{metric: "trtllm_kv_cache_used_blocks"}, {metric: "trtllm_kv_cache_max_blocks"}},
			combine: combineRatio, note: "blocks, where the utilization gauge is missing"},
		serverRule{kind: KindTRTLLM, out: serverRequestsTotal, extraValue: resultSuccess,
			sources: one("trtllm_request_success_total", ne("finished_reason", "timeout")), note: "stop, length"},
		serverRule{kind: KindTRTLLM, out: serverRequestsTotal, extraValue: resultFailure,
			sources: one("trtllm_request_success_total", eq("finished_reason", "timeout"))},
	)
	for _, reason := range []string{"stop", "length", "timeout"} {
		add(serverRule{kind: KindTRTLLM, out: serverRequestsFinished, extraValue: reason,
			sources: one("trtllm_request_success_total", eq("finished_reason", reason))})
	}
	add(
		serverRule{kind: KindTRTLLM, out: serverPromptTokens, sources: one("trtllm_prompt_tokens_total")},
		serverRule{kind: KindTRTLLM, out: serverGenerationTokens, sources: one("trtllm_generation_tokens_total")},
		serverRule{kind: KindTRTLLM, out: serverPrefixQueries, sources: one("trtllm_prompt_tokens_total"), note: "every prompt token is looked up for block reuse"},
		serverRule{kind: KindTRTLLM, out: serverPrefixHits, sources: one("trtllm_prompt_cached_tokens_total")},
	)
	phase(KindTRTLLM, phaseQueue, "trtllm_request_queue_time_seconds")
	phase(KindTRTLLM, phaseCompute, "trtllm_request_inference_time_seconds")
	phase(KindTRTLLM, phasePrefill, "trtllm_request_prefill_time_seconds")
	phase(KindTRTLLM, phaseDecode, "trtllm_request_decode_time_seconds")
	phase(KindTRTLLM, phaseE2E, "trtllm_e2e_request_latency_seconds")
	return r
}
