package collector

import (
	"math"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The servers' own latency, normalised (docs/metrics.md §2, "The server's
// own latency"): their histograms re-exported as const histograms in
// seconds, and the preemption and speculative-decoding counters. Kept out
// of server_table.go so that the histogram path, which the gauge and
// counter rows cannot express, stays in one place.
const (
	serverTTFT            = "llm_server_time_to_first_token_seconds"
	serverITL             = "llm_server_inter_token_latency_seconds"
	serverRequestTPOT     = "llm_server_request_time_per_output_token_seconds"
	serverQueueTime       = "llm_server_queue_time_seconds"
	serverPreemptions     = "llm_server_preemptions_total"
	serverSpecDraftTokens = "llm_server_spec_decode_draft_tokens_total"
	serverSpecAccepted    = "llm_server_spec_decode_accepted_tokens_total"
)

// latencyHistogramOutputs are the normalised histograms; every series
// carries target, server and model, like the other llm_server_* series.
func latencyHistogramOutputs() []serverOutput {
	return []serverOutput{
		{name: serverTTFT, help: "Time to first token as the model server measures it, from the request's arrival in the server to its first output token (all clients)."},
		{name: serverITL, help: "Gaps between consecutive output tokens as the model server measures them, one observation per gap (all clients)."},
		{name: serverRequestTPOT, help: "Mean time per output token of each request as the model server measures it, one observation per request (all clients)."},
		{name: serverQueueTime, help: "Time requests waited in the model server's queue before being scheduled (all clients)."},
	}
}

// latencyCounterOutputs are the counters this file adds to the table.
func latencyCounterOutputs() []serverOutput {
	return []serverOutput{
		{serverPreemptions, "Requests the model server preempted (vLLM) or retracted (SGLang) to free KV cache; they are recomputed or resumed later.", prometheus.CounterValue, ""},
		{serverSpecDraftTokens, "Draft tokens the model server's speculative decoding proposed.", prometheus.CounterValue, ""},
		{serverSpecAccepted, "Draft tokens the model server's speculative decoding accepted (of llm_server_spec_decode_draft_tokens_total).", prometheus.CounterValue, ""},
	}
}

// latencyCounterRules are rows of the normalisation table
// (serverRules) for the counters, with their upstream sources.
func latencyCounterRules() []serverRule {
	one := func(metric string, m ...labelMatch) []source { return []source{{metric: metric, match: m}} }
	rank0 := []labelMatch{eq("tp_rank", "", "0"), eq("pp_rank", "", "0")}
	return []serverRule{
		// vllm-project/vllm vllm/v1/metrics/loggers.py (counter
		// vllm:num_preemptions, exposed with _total by prometheus_client).
		{kind: KindVLLM, out: serverPreemptions, sources: one("vllm:num_preemptions_total")},
		// vllm-project/vllm vllm/v1/spec_decode/metrics.py @016a8587
		// (SpecDecodingProm: vllm:spec_decode_num_draft_tokens and
		// _num_accepted_tokens, per engine; only with a speculative config).
		{kind: KindVLLM, out: serverSpecDraftTokens, sources: one("vllm:spec_decode_num_draft_tokens_total")},
		{kind: KindVLLM, out: serverSpecAccepted, sources: one("vllm:spec_decode_num_accepted_tokens_total")},
		// sgl-project/sglang python/sglang/srt/metrics/collector.py
		// @00ae9c15: a scheduler counter, labelled with the ranks; every
		// rank of a TP/PP group counts the same retractions.
		{kind: KindSGLang, out: serverPreemptions, sources: one("sglang:num_retracted_requests_total", rank0...),
			note: "retraction is SGLang's preemption"},
		// ggml-org/llama.cpp tools/server (PR #26920, model-servers.md §8):
		// llamacpp:spec_decode_num_draft_tokens_total and
		// _num_accepted_tokens_total, unlabelled, on current builds.
		{kind: KindLlamaCPP, out: serverSpecDraftTokens, sources: one("llamacpp:spec_decode_num_draft_tokens_total")},
		{kind: KindLlamaCPP, out: serverSpecAccepted, sources: one("llamacpp:spec_decode_num_accepted_tokens_total")},
		// NVIDIA/TensorRT-LLM tensorrt_llm/metrics/collector.py (the 2026
		// line): per speculative position (token_position), summed here;
		// only with return_perf_metrics.
		{kind: KindTRTLLM, out: serverSpecDraftTokens, sources: one("trtllm_spec_decode_drafted_tokens_total")},
		{kind: KindTRTLLM, out: serverSpecAccepted, sources: one("trtllm_spec_decode_accepted_tokens_total")},
	}
}

// histogramRule re-exports one server histogram. Rules with the same out
// are alternatives in order, as in serverRules: the first with data for a
// model wins, so a renamed metric never counts twice.
type histogramRule struct {
	kind, out, metric string
	match             []labelMatch
	// perSecond is the metric's units per second (1000 for ms); boundaries
	// and sum are divided by it, which keeps 100 ms exactly 0.1 s. 0 is 1.
	perSecond float64
	note      string
}

// latencyHistogramRules is the histogram table. Keep docs/metrics.md in
// step.
func latencyHistogramRules() []histogramRule {
	return []histogramRule{
		// vllm-project/vllm vllm/v1/metrics/loggers.py @a6f0308c
		// (PrometheusStatLogger), labels model_name and engine.
		{kind: KindVLLM, out: serverTTFT, metric: "vllm:time_to_first_token_seconds"},
		{kind: KindVLLM, out: serverITL, metric: "vllm:inter_token_latency_seconds", note: "vLLM ≥ 0.11"},
		{kind: KindVLLM, out: serverITL, metric: "vllm:time_per_output_token_seconds", note: "old name of the same histogram, deprecated 0.11"},
		{kind: KindVLLM, out: serverRequestTPOT, metric: "vllm:request_time_per_output_token_seconds"},
		{kind: KindVLLM, out: serverQueueTime, metric: "vllm:request_queue_time_seconds", note: "first scheduled − queued; preemptions ignored"},

		// sgl-project/sglang python/sglang/srt/metrics/collector.py
		// @00ae9c15 (TokenizerMetricsCollector), labels model_name,
		// engine_type; time_per_output_token_seconds is the old name of
		// the inter-token histogram.
		{kind: KindSGLang, out: serverTTFT, metric: "sglang:time_to_first_token_seconds"},
		{kind: KindSGLang, out: serverITL, metric: "sglang:inter_token_latency_seconds"},
		{kind: KindSGLang, out: serverITL, metric: "sglang:time_per_output_token_seconds", note: "older releases"},
		{kind: KindSGLang, out: serverQueueTime, metric: "sglang:queue_time_seconds"},

		// triton-inference-server/core src/metric_model_reporter.cc
		// (nv_inference_first_response_histogram_ms, milliseconds, opt-in
		// with --metrics-config histogram_latencies=true); labels model,
		// version. Triton's vLLM backend (vllm_backend
		// src/utils/metrics.py, REPORT_CUSTOM_METRICS) exports vLLM's
		// names labelled model and version; Triton's own histogram wins
		// where both exist, as it measures from Triton's arrival.
		{kind: KindTriton, out: serverTTFT, metric: "nv_inference_first_response_histogram_ms", perSecond: 1000,
			note: "opt-in upstream: --metrics-config histogram_latencies=true"},
		{kind: KindTriton, out: serverTTFT, metric: "vllm:time_to_first_token_seconds", note: "vLLM backend with REPORT_CUSTOM_METRICS"},
		{kind: KindTriton, out: serverITL, metric: "vllm:time_per_output_token_seconds", note: "vLLM backend with REPORT_CUSTOM_METRICS"},

		// huggingface/text-generation-inference router/src/server.rs and
		// backends/v3/src/queue.rs: seconds, unlabelled, no TTFT
		// histogram. tgi_request_mean_time_per_token_duration is one
		// observation per request (its mean), so it is the per-request
		// TPOT, not the per-gap ITL.
		// NVIDIA/TensorRT-LLM tensorrt_llm/metrics/collector.py @050f80d
		// and the 2026 line alike: labels model_name, engine_type; filled
		// only with return_perf_metrics. time_per_output_token_seconds is
		// observed once per finished request (its mean), so it is the
		// per-request TPOT.
		{kind: KindTRTLLM, out: serverTTFT, metric: "trtllm_time_to_first_token_seconds"},
		{kind: KindTRTLLM, out: serverRequestTPOT, metric: "trtllm_time_per_output_token_seconds", note: "one observation per request"},
		{kind: KindTRTLLM, out: serverQueueTime, metric: "trtllm_request_queue_time_seconds"},

		{kind: KindTGI, out: serverQueueTime, metric: "tgi_request_queue_duration"},
		{kind: KindTGI, out: serverRequestTPOT, metric: "tgi_request_mean_time_per_token_duration", note: "per-request mean"},

		// llama.cpp exports no latency histograms (only prompt and
		// predicted seconds totals, see server_table.go).
	}
}

// serverHistogram is one normalised histogram of one model.
type serverHistogram struct {
	out, model string
	count      uint64
	sum        float64
	// buckets are cumulative counts by upper bound, +Inf left out.
	buckets map[float64]uint64
}

// histogramParts is one model's series of a source histogram before
// they are merged.
type histogramParts struct {
	count   uint64
	sum     float64
	buckets []map[float64]uint64
}

// readHistogram collects the series of rule's metric per model. A series
// exposed without its TYPE line (untyped _bucket, _sum, _count families)
// is not read: without the type its buckets cannot be told from a gauge.
func readHistogram(fams map[string]*dto.MetricFamily, r histogramRule, modelLabel string, cut map[string]bool) map[string]*histogramParts {
	f := fams[r.metric]
	if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
		return nil
	}
	div := r.perSecond
	if div == 0 {
		div = 1
	}
	out := map[string]*histogramParts{}
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		if h == nil || !matches(m, r.match) || math.IsNaN(h.GetSampleSum()) {
			continue
		}
		bs := map[float64]uint64{}
		for _, b := range h.GetBucket() {
			ub := b.GetUpperBound() / div
			if math.IsNaN(ub) || math.IsInf(ub, 0) {
				continue
			}
			bs[ub] = b.GetCumulativeCount()
		}
		model, wasCut := boundLabelValue(labelValue(m, modelLabel))
		if wasCut {
			cut[model] = true
		}
		p := out[model]
		if p == nil {
			p = &histogramParts{}
			out[model] = p
		}
		p.count += h.GetSampleCount()
		p.sum += h.GetSampleSum() / div
		p.buckets = append(p.buckets, bs)
	}
	return out
}

// merged adds the series of one model (engines, ranks, versions) bucket by
// bucket. Cumulative counts at a boundary every series has add up exactly;
// a boundary that only some series have (a server with per-engine bucket
// overrides) has no exact sum, so it is left out and the merged histogram
// keeps the boundaries all series share. Count and sum are always exact.
func (p *histogramParts) merged(out, model string) serverHistogram {
	h := serverHistogram{out: out, model: model, count: p.count, sum: p.sum, buckets: map[float64]uint64{}}
	for ub, c := range p.buckets[0] {
		h.buckets[ub] = c
	}
	for _, bs := range p.buckets[1:] {
		for ub := range h.buckets {
			c, ok := bs[ub]
			if !ok {
				delete(h.buckets, ub)
				continue
			}
			h.buckets[ub] += c
		}
	}
	return h
}

// histograms applies the histogram rules of kind. models, dropped and cut
// are apply's: a histogram's model counts against maxServerModels like a
// gauge's.
func (n *normaliser) histograms(fams map[string]*dto.MetricFamily, kind, ml string, models, dropped, cut map[string]bool) []serverHistogram {
	var out []serverHistogram
	taken := map[string]bool{}
	for _, r := range n.hrules[kind] {
		parts := readHistogram(fams, r, ml, cut)
		names := make([]string, 0, len(parts))
		for model := range parts {
			names = append(names, model)
		}
		slices.Sort(names)
		for _, model := range names {
			key := r.out + "\xff" + model
			if taken[key] {
				continue
			}
			if !admitModel(models, dropped, model) {
				continue
			}
			taken[key] = true
			out = append(out, parts[model].merged(r.out, model))
		}
	}
	return out
}

// constHistogram is h as a Prometheus metric with labels.
func (h serverHistogram) constHistogram(desc *prometheus.Desc, labels ...string) (prometheus.Metric, error) {
	return prometheus.NewConstHistogram(desc, h.count, h.sum, h.buckets, labels...)
}
