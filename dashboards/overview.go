package dashboards

import "fmt"

// probeVariables are the job → target → probe → model chain, each
// narrowed by the ones before it. llm_probe_requests_total exists, at
// zero, from the moment a probe is configured.
func probeVariables() []Variable {
	return []Variable{
		queryVariable("job", "Job", `llm_probe_requests_total`),
		queryVariable("target", "Target", `llm_probe_requests_total{job=~"$job"}`),
		queryVariable("probe", "Probe", `llm_probe_requests_total{job=~"$job", target=~"$target"}`),
		queryVariable("model", "Model", `llm_probe_requests_total{job=~"$job", target=~"$target", probe=~"$probe"}`),
	}
}

// burnRate is the error ratio of an SLO over window divided by its error
// budget, from the recording rules in alerts/llm-prober-rules.yml.
func burnRate(window string) Target {
	return q(fmt.Sprintf(
		"target_probe:llm_probe_slo_errors:ratio_rate%s{%s}\n/ on (job, target, probe, model, slo)\ntarget_probe:llm_probe_slo_error_budget:ratio",
		window, probeSel()), "{{target}}/{{probe}} {{slo}} "+window)
}

func overview() *Dashboard {
	b := newBuilder("llm-prober-overview", "LLM prober / Overview",
		"What users of the probed LLM servers feel: SLO attainment and error-budget burn, TTFT / TPOT / ITL / latency percentiles, throughput, outcomes, connection phases and whether the prober keeps its schedule.",
		probeVariables()...)
	ps := probeSel()

	b.row("SLOs")
	b.add(8, 8, stat("SLO attainment over the dashboard range",
		"Share of requests that were good for each declared SLO (ttft, tpot, goodput) over the selected time range, from llm_probe_slo_requests_total. Failed requests count as bad. Compare with the objective beside it.",
		"percentunit", []Step{{Color: "red"}, {Color: "orange", Value: f(0.95)}, {Color: "green", Value: f(0.99)}},
		instant(fmt.Sprintf(
			"sum by (target, probe, slo) (increase(llm_probe_slo_requests_total{%s}[$__range]))\n/\nsum by (target, probe, slo) (increase(llm_probe_slo_requests_total{%s}[$__range]))",
			probeSel(`result="good"`), ps), "{{target}}/{{probe}} {{slo}}"),
	))
	b.add(4, 8, stat("Objective",
		"The objective each probe declares (slo.objective), exported as llm_probe_slo_objective_ratio.",
		"percentunit", []Step{{Color: "blue"}},
		instant(fmt.Sprintf("max by (target, probe, slo) (llm_probe_slo_objective_ratio{%s})", ps), "{{target}}/{{probe}} {{slo}}"),
	))
	b.add(12, 8, withThresholdLines(timeseries("Error budget burn rate, fast windows (5m, 1h)",
		"Error ratio divided by the error budget (1 − objective), from the recording rules. 1 spends the budget exactly in 30 days; the page alert needs 14.4 over both 1h and 5m, or 6 over 6h and 30m.",
		"x", burnRate("5m"), burnRate("1h")), 6, 14.4))
	b.add(12, 8, withThresholdLines(timeseries("Error budget burn rate, slow windows (6h, 1d, 3d)",
		"As the fast windows; the ticket alert needs 3 over 1d and 2h, or 1 over 3d and 6h.",
		"x", burnRate("6h"), burnRate("1d"), burnRate("3d")), 1, 3))
	b.add(12, 8, withStack(timeseries("SLO judgements by result",
		"Requests judged good or bad per SLO, per second.",
		"reqps",
		q(fmt.Sprintf("sum by (target, probe, slo, result) (rate(llm_probe_slo_requests_total{%s}[$__rate_interval]))", ps),
			"{{target}}/{{probe}} {{slo}} {{result}}"))))

	b.row("Latency (successful streamed requests)")
	byProbe := "target, probe"
	b.add(12, 9, timeseries("Time to first token",
		"From just before the request is written to the first chunk carrying output (docs/metrics.md). Percentiles per probe, from the native histogram where Prometheus stores one, else from the classic buckets (each probe's include its SLO threshold).",
		"s", quantiles("llm_probe_time_to_first_token_seconds", ps, byProbe, "{{target}}/{{probe}}", "0.5", "0.9", "0.99")...))
	b.add(12, 9, timeseries("Time per output token",
		"(end-to-end − TTFT) / (output tokens − 1), per request.",
		"s", quantiles("llm_probe_time_per_output_token_seconds", ps, byProbe, "{{target}}/{{probe}}", "0.5", "0.9", "0.99")...))
	b.add(12, 9, timeseries("Inter-token latency",
		"Each gap between output chunks divided by the tokens of the later chunk, one observation per token: stalls stay visible.",
		"s", quantiles("llm_probe_inter_token_latency_seconds", ps, byProbe, "{{target}}/{{probe}}", "0.5", "0.9", "0.99")...))
	b.add(12, 9, timeseries("Request duration (end to end)",
		"From request start to the last byte of the final event, successful requests.",
		"s", quantiles("llm_probe_request_duration_seconds", ps, byProbe, "{{target}}/{{probe}}", "0.5", "0.9", "0.99")...))

	b.row("Throughput and outcomes")
	b.add(8, 8, timeseries("Output tokens per second (sum)",
		"Output tokens the probes received per second, all outcomes (llm_probe_output_tokens_total).",
		"suffix: tok/s",
		q(fmt.Sprintf("sum by (target, probe) (rate(llm_probe_output_tokens_total{%s}[$__rate_interval]))", ps), "{{target}}/{{probe}} output"),
		q(fmt.Sprintf("sum by (target, probe) (rate(llm_probe_input_tokens_total{%s}[$__rate_interval]))", ps), "{{target}}/{{probe}} input")))
	b.add(8, 8, timeseries("Tokens per second per request",
		"Output tokens / end-to-end latency of each successful request, as a client experiences it; the low percentile is the slow tail.",
		"suffix: tok/s", quantiles("llm_probe_output_tokens_per_second", ps, byProbe, "{{target}}/{{probe}}", "0.5", "0.1")...))
	b.add(8, 8, withStack(timeseries("Outcomes",
		"Every probe attempt by outcome (docs/metrics.md, Outcomes).",
		"reqps",
		q(fmt.Sprintf("sum by (target, probe, outcome) (rate(llm_probe_requests_total{%s}[$__rate_interval]))", ps), "{{target}}/{{probe}} {{outcome}}"))))
	b.add(12, 6, withValueMapping(stat("Last probe",
		"Whether each probe's last request succeeded (llm_probe_success). Absent until a probe has run once.",
		"", []Step{{Color: "red"}, {Color: "green", Value: f(1)}},
		instant(fmt.Sprintf("max by (target, probe) (llm_probe_success{%s})", ps), "{{target}}/{{probe}}")),
		map[string]string{"0": "FAIL", "1": "OK"}, map[string]string{"0": "red", "1": "green"}))
	b.add(12, 6, stat("Time since last probe",
		"Seconds since each probe last sent a request. Far beyond its schedule means the probe stopped (or is outside its active window).",
		"s", []Step{{Color: "green"}, {Color: "orange", Value: f(300)}},
		instant(fmt.Sprintf("time() - max by (target, probe) (llm_probe_last_run_timestamp_seconds{%s})", ps), "{{target}}/{{probe}}")))

	b.row("Connection phases")
	b.add(12, 8, timeseries("Phase duration p95",
		"dns, connect, tls, write (request written) and first_byte (response head), from httptrace, whatever the outcome. A phase that did not happen (connect on a pooled connection) is not observed. Phase buckets are the same for every probe, so they sum across probes.",
		"s", quantiles("llm_probe_phase_duration_seconds", ps, "target, phase", "{{target}} {{phase}}", "0.95")...))
	b.add(12, 8, timeseries("Phases per second",
		"How often each phase happened: connect and tls at the probe rate mean no connection reuse.",
		"ops",
		q(histogramRate("llm_probe_phase_duration_seconds", ps, "target, phase", "$__rate_interval"), "{{target}} {{phase}}")))

	b.row("Schedule health")
	b.add(12, 8, timeseries("Schedule lag",
		"How late requests went out relative to their planned time. Seconds mean an overloaded prober, and its latencies under-sample slow periods.",
		"s", quantiles("llm_probe_schedule_lag_seconds", ps, byProbe, "{{target}}/{{probe}}", "0.99", "0.5")...))
	b.add(12, 8, timeseries("Skipped probes",
		"Planned requests not sent, by reason: concurrency_limit (the probe had max_in_flight in flight), target_concurrency_limit, overdue. Skips mean the probe's rate is too high for its latency.",
		"reqps",
		q(fmt.Sprintf("sum by (target, probe, reason) (rate(llm_probe_skipped_total{%s}[$__rate_interval]))", ps), "{{target}}/{{probe}} {{reason}}")))

	b.row("Prober")
	b.add(8, 6, withValueMapping(stat("Prober up",
		"Whether Prometheus scrapes each prober (up).",
		"", []Step{{Color: "red"}, {Color: "green", Value: f(1)}},
		instant(`up{job=~"$job"}`, "{{instance}}")),
		map[string]string{"0": "DOWN", "1": "UP"}, map[string]string{"0": "red", "1": "green"}))
	b.add(8, 6, withValueMapping(stat("Last configuration reload",
		"llm_prober_config_last_reload_successful: 0 means the file on disk is invalid and the previous configuration is still running.",
		"", []Step{{Color: "red"}, {Color: "green", Value: f(1)}},
		instant(`llm_prober_config_last_reload_successful{job=~"$job"}`, "{{instance}}")),
		map[string]string{"0": "FAILED", "1": "OK"}, map[string]string{"0": "red", "1": "green"}))
	b.add(8, 6, withValueMapping(stat("Scrape-time collectors",
		"llm_prober_collector_success per collector (server_metrics, gpu).",
		"", []Step{{Color: "red"}, {Color: "green", Value: f(1)}},
		instant(`llm_prober_collector_success{job=~"$job"}`, "{{instance}} {{collector}}")),
		map[string]string{"0": "FAILED", "1": "OK"}, map[string]string{"0": "red", "1": "green"}))
	return b.dashboard()
}
