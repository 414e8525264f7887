package multitarget

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/probe"
)

// The gauges of one /probe answer. They describe the one probe just run,
// as blackbox_exporter's probe_* gauges do; the daemon's histograms
// accumulate across probes and keep their own names, so a job scraping
// /probe and one scraping /metrics never share a name with two types.
var (
	descSuccess = prometheus.NewDesc("llm_probe_success",
		"Whether the probe succeeded (1) or not (0).", []string{"probe", "model"}, nil)
	descOutcome = prometheus.NewDesc("llm_probe_outcome",
		"The probe's outcome: 1 for the outcome it had.", []string{"probe", "model", "outcome"}, nil)
	descTTFT = prometheus.NewDesc("llm_probe_last_time_to_first_token_seconds",
		"Time to first token of the probe (streamed probes that produced a token).", []string{"probe", "model"}, nil)
	descTPOT = prometheus.NewDesc("llm_probe_last_time_per_output_token_seconds",
		"Time per output token of the probe after the first, (e2e - TTFT) / (tokens - 1).", []string{"probe", "model"}, nil)
	descE2E = prometheus.NewDesc("llm_probe_last_request_duration_seconds",
		"End-to-end duration of the probe's request.", []string{"probe", "model"}, nil)
	descOutTokens = prometheus.NewDesc("llm_probe_last_output_tokens",
		"Output tokens of the probe's answer.", []string{"probe", "model"}, nil)
	descInTokens = prometheus.NewDesc("llm_probe_last_input_tokens",
		"Input tokens of the probe's request, where the server reported them.", []string{"probe", "model"}, nil)
	descPhase = prometheus.NewDesc("llm_probe_last_phase_duration_seconds",
		"Duration of each phase of the probe's request that happened.", []string{"probe", "model", "phase"}, nil)
	// The server's load report in the answer (probe.ServerLoad), named as
	// the daemon's per-probe gauges.
	descLoadWaiting = prometheus.NewDesc("llm_probe_server_load_requests_waiting",
		"Requests waiting in the server's queue, as the server reported them in its answer to the probe (endpoint-load-metrics).", []string{"probe", "model"}, nil)
	descLoadRunning = prometheus.NewDesc("llm_probe_server_load_requests_running",
		"Requests the server was processing, as it reported them in its answer to the probe (endpoint-load-metrics).", []string{"probe", "model"}, nil)
	descLoadKVCache = prometheus.NewDesc("llm_probe_server_load_kv_cache_usage_ratio",
		"Fraction of the server's KV cache in use (0 to 1), as it reported it in its answer to the probe (endpoint-load-metrics).", []string{"probe", "model"}, nil)
	descStatus = prometheus.NewDesc("llm_probe_last_http_status_code",
		"HTTP status code of the probe's response (0 for none or gRPC).", []string{"probe", "model"}, nil)
)

// resultCollector exposes one result. Only what the result has is
// exposed: a failed probe has no TTFT, rather than a TTFT of 0.
type resultCollector struct {
	res          *probe.Result
	probe, model string
}

func (c resultCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSuccess, descOutcome, descTTFT, descTPOT, descE2E, descOutTokens, descInTokens, descPhase, descStatus, descLoadWaiting, descLoadRunning, descLoadKVCache} {
		ch <- d
	}
}

func (c resultCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.res
	gauge := func(d *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{c.probe, c.model}, extra...)...)
	}
	ok := r.Outcome == probe.OutcomeSuccess
	gauge(descSuccess, b2f(ok))
	for _, o := range probe.Outcomes() {
		gauge(descOutcome, b2f(o == r.Outcome), string(o))
	}
	gauge(descStatus, float64(r.StatusCode))
	if r.EndToEnd > 0 {
		gauge(descE2E, r.EndToEnd.Seconds())
	}
	if ok && r.Streamed && r.TTFT > 0 {
		gauge(descTTFT, r.TTFT.Seconds())
	}
	if tpot, has := r.TPOT(); ok && has {
		gauge(descTPOT, tpot.Seconds())
	}
	if r.OutputTokensSource != probe.TokenSourceNone {
		gauge(descOutTokens, float64(r.OutputTokens))
	}
	if r.InputTokensSource != probe.TokenSourceNone {
		gauge(descInTokens, float64(r.InputTokens))
	}
	ph := r.Phases
	for _, p := range []struct {
		name string
		has  bool
		d    time.Duration
	}{
		{"dns", ph.HasDNS, ph.DNS}, {"connect", ph.HasConnect, ph.Connect}, {"tls", ph.HasTLS, ph.TLS},
		{"write", ph.HasWrite, ph.Write}, {"first_byte", ph.HasFirstByte, ph.FirstByte},
	} {
		if p.has {
			gauge(descPhase, p.d.Seconds(), p.name)
		}
	}
	if l := r.ServerLoad; l != nil {
		if l.HasWaiting {
			gauge(descLoadWaiting, l.Waiting)
		}
		if l.HasRunning {
			gauge(descLoadRunning, l.Running)
		}
		if l.HasKVCache {
			gauge(descLoadKVCache, l.KVCacheUsage)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
