package dashboards

import "fmt"

// gpuOfTargets keeps GPU series of the prober instances that probe the
// selected targets: with a sidecar, the GPUs of the selected server's pod.
// throttlingReasons are the clock throttle reasons that cost performance
// (gpu_idle, application and display clock settings and sync boost do not
// point at a problem); the LLMGPUThrottled alert uses them without
// sw_power_cap.
const throttlingReasons = "sw_power_cap|hw_slowdown|sw_thermal_slowdown|hw_thermal_slowdown|hw_power_brake_slowdown"

const gpuOfTargets = "\nand on (job, instance)\nllm_probe_requests_total{job=~\"$job\", target=~\"$target\"}"

func servingStack() *Dashboard {
	b := newBuilder("llm-prober-serving-stack", "LLM prober / Serving stack",
		"The model server's queue, batch, KV cache and server-side time breakdown, and its GPUs, on one time axis with the TTFT the prober measures. Server metrics are the normalised llm_server_* (scraped through the prober); GPU metrics come from NVML on the prober's host (sidecar deployment).",
		probeVariables()...)
	ps := probeSel()
	// Server series carry the server's own model label (e.g. Triton's
	// tensorrt_llm model beside an ensemble), so they are selected by
	// target only.
	ss := sel(mJob, mTarget)
	gs := sel(mJob)
	// vLLM's own series, from Prometheus scraping vLLM directly: another
	// job, no target label; the served model name is the probes' model.
	vllmSel := `model_name=~"$model"`

	b.row("What users feel")
	b.add(24, 8, timeseries("TTFT (prober) and requests waiting (server)",
		"TTFT percentiles the prober measured (left axis) beside the server's queue (right axis, dashed): queueing shows up in TTFT first.",
		"s",
		append(quantiles("llm_probe_time_to_first_token_seconds", ps, "target, probe", "{{target}}/{{probe}}", "0.5", "0.95"),
			q(fmt.Sprintf("sum by (target) (llm_server_requests_waiting{%s})", ss), "{{target}} waiting"))...))
	b.d.Panels[len(b.d.Panels)-1] = withRightAxis(b.d.Panels[len(b.d.Panels)-1], "short", "C")
	b.add(24, 8, timeseries("TTFT: the prober's and the server's own",
		"The TTFT the prober measured beside what the server reports of itself. vLLM: p95 of its own vllm:time_to_first_token_seconds and vllm:request_queue_time_seconds, from Prometheus scraping vLLM's /metrics directly, matched to the probes by model name (model_name). Servers that export only totals (Triton's queue duration counter, TGI, SGLang, and vLLM through the prober): the mean queue time per request from llm_server_phase_seconds_total / llm_server_phase_requests_total. The prober's TTFT minus the server's is the network, proxies and the client; a server TTFT that rises with the prober's is the server.",
		"s",
		append(quantiles("llm_probe_time_to_first_token_seconds", ps, "target, probe", "{{target}}/{{probe}}", "0.5", "0.95"),
			q(histogramQuantile("0.95", "vllm:time_to_first_token_seconds", vllmSel, "model_name", "$__rate_interval"),
				"p95 {{model_name}} vLLM TTFT"),
			q(histogramQuantile("0.95", "vllm:request_queue_time_seconds", vllmSel, "model_name", "$__rate_interval"),
				"p95 {{model_name}} vLLM queue"),
			q(fmt.Sprintf("sum by (target) (rate(llm_server_phase_seconds_total{%s}[$__rate_interval]))\n/\nsum by (target) (rate(llm_server_phase_requests_total{%s}[$__rate_interval]))",
				sel(ss, `phase="queue"`), sel(ss, `phase="queue"`)),
				"mean {{target}} server queue"))...))

	b.row("Model server")
	b.add(12, 8, timeseries("Requests waiting and running",
		"llm_server_requests_waiting (queued, not yet scheduled) and llm_server_requests_running (in the running batch).",
		"short",
		q(fmt.Sprintf("llm_server_requests_waiting{%s}", ss), "{{target}} {{model}} waiting"),
		q(fmt.Sprintf("llm_server_requests_running{%s}", ss), "{{target}} {{model}} running")))
	b.add(12, 8, timeseries("Batch size",
		"llm_server_batch_size where the server reports one (Triton TensorRT-LLM scheduled requests, TGI); on vLLM and SGLang the running count is the batch.",
		"short",
		q(fmt.Sprintf("llm_server_batch_size{%s}", ss), "{{target}} {{model}}")))
	b.add(12, 8, withThresholdLines(withMax(timeseries("KV cache usage",
		"Fraction of the KV cache in use. Near 1, new requests wait or running ones are preempted (LLMServerKVCacheSaturated at 0.95).",
		"percentunit",
		q(fmt.Sprintf("llm_server_kv_cache_usage_ratio{%s}", ss), "{{target}} {{model}}")), 1), 0.8, 0.95))
	b.add(12, 8, timeseries("Server time per request by phase",
		"Mean seconds a request spent in each server-side phase: queue, compute (prefill + decode), prefill, decode, e2e; Triton also compute_input / compute_infer / compute_output. Set beside the prober's TTFT and duration.",
		"s",
		q(fmt.Sprintf("sum by (target, phase) (rate(llm_server_phase_seconds_total{%s}[$__rate_interval]))\n/\nsum by (target, phase) (rate(llm_server_phase_requests_total{%s}[$__rate_interval]))", ss, ss),
			"{{target}} {{phase}}")))
	b.add(12, 8, timeseries("Server requests finished",
		"Requests the server finished per second, as the server counts them (all clients, not only the prober).",
		"reqps",
		q(fmt.Sprintf("sum by (target, result) (rate(llm_server_requests_total{%s}[$__rate_interval]))", ss), "{{target}} {{result}}")))
	b.add(12, 8, timeseries("Server tokens per second",
		"Prompt tokens processed and tokens generated by the server, all clients.",
		"suffix: tok/s",
		q(fmt.Sprintf("sum by (target) (rate(llm_server_prompt_tokens_total{%s}[$__rate_interval]))", ss), "{{target}} prompt"),
		q(fmt.Sprintf("sum by (target) (rate(llm_server_generation_tokens_total{%s}[$__rate_interval]))", ss), "{{target}} generation")))
	b.add(12, 6, withValueMapping(stat("Server metrics reachable",
		"llm_server_up: 0 when the prober cannot fetch or understand the server's /metrics (see the prober's log).",
		"", []Step{{Color: "red"}, {Color: "green", Value: f(1)}},
		instant(fmt.Sprintf("max by (target) (llm_server_up{%s})", ss), "{{target}}")),
		map[string]string{"0": "DOWN", "1": "UP"}, map[string]string{"0": "red", "1": "green"}))
	b.add(12, 6, timeseries("Server metrics scrape duration",
		"How long fetching each server's /metrics took.",
		"s",
		q(fmt.Sprintf("llm_server_scrape_duration_seconds{%s}", ss), "{{target}}")))

	b.row("GPUs (NVML, on the prober's host)")
	gpu := func(metric string) string {
		return fmt.Sprintf("%s{%s}%s", metric, gs, gpuOfTargets)
	}
	b.add(12, 8, withMax(timeseries("GPU utilisation",
		"Fraction of time at least one kernel ran (not SM occupancy).",
		"percentunit", q(gpu("llm_gpu_utilization_ratio"), "{{instance}} GPU {{gpu}}")), 1))
	b.add(12, 8, withMax(timeseries("GPU memory bandwidth utilisation",
		"Fraction of time device memory was read or written: decode is usually memory-bound, so this tracks TPOT.",
		"percentunit", q(gpu("llm_gpu_memory_bandwidth_utilization_ratio"), "{{instance}} GPU {{gpu}}")), 1))
	b.add(12, 8, timeseries("GPU memory",
		"Used and total device memory. vLLM and TensorRT-LLM reserve most of it for the KV cache at start.",
		"bytes",
		q(gpu("llm_gpu_memory_used_bytes"), "{{instance}} GPU {{gpu}} used"),
		q(gpu("llm_gpu_memory_total_bytes"), "{{instance}} GPU {{gpu}} total")))
	b.add(12, 8, timeseries("GPU power",
		"Board power draw and the enforced limit.",
		"watt",
		q(gpu("llm_gpu_power_watts"), "{{instance}} GPU {{gpu}}"),
		q(gpu("llm_gpu_power_limit_watts"), "{{instance}} GPU {{gpu}} limit")))
	b.add(8, 8, withThresholdLines(timeseries("GPU temperature",
		"Die temperature; LLMGPUHot fires above 85 °C.",
		"celsius", q(gpu("llm_gpu_temperature_celsius"), "{{instance}} GPU {{gpu}}")), 80, 85))
	b.add(8, 8, timeseries("GPU SM clock",
		"Current SM clock; drops with throttling.",
		"hertz", q(gpu("llm_gpu_sm_clock_hertz"), "{{instance}} GPU {{gpu}}")))
	b.add(8, 8, withStack(timeseries("GPU clock throttle reasons",
		"Reasons NVML reports for holding clocks down, excluding gpu_idle (normal) and application/display settings. LLMGPUThrottled fires when a thermal or hardware reason persists; sw_power_cap alone is normal for a busy GPU.",
		"short",
		q(fmt.Sprintf(`max by (job, instance, gpu, reason) (llm_gpu_clock_throttle_reason{%s, reason=~"%s"})%s`, gs, throttlingReasons, gpuOfTargets),
			"{{instance}} GPU {{gpu}} {{reason}}"))))
	b.add(24, 6, timeseries("GPU energy",
		"Energy the GPUs used per second (watts, from the energy counter), to set beside tokens per second.",
		"watt",
		q(fmt.Sprintf("rate(llm_gpu_energy_joules_total{%s}[$__rate_interval])%s", gs, gpuOfTargets), "{{instance}} GPU {{gpu}}")))
	return b.dashboard()
}
