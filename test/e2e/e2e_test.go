//go:build unix

// Package e2e runs the real binaries together: the simulator, the prober
// and a real Prometheus (Debian's prometheus package) loading
// alerts/llm-prober-rules.yml, and asserts through Prometheus' HTTP API what
// a user of the dashboards and alerts would see.
//
// Two simulators run side by side. "sim-triton" is healthy and exposes
// Triton-named metrics (the naming that covers every normalised
// llm_server_* metric, batch size included); it feeds the latency,
// server-metric and dashboard assertions. "sim-flaky" answers every request
// with HTTP 503 (--fault.error-rate 1) until the test restarts it healthy;
// it drives LLMProbeFailing.
//
// LLMProbeFailing (the real rules file, unmodified) pages once at least two
// arrivals in a row failed and the first of them is 90 s old: with probes
// every second, about 90 s after the flaky target's first probe plus a
// scrape and an evaluation. Its timing at every probe rate is measured by
// the alert backtest (mixin/backtest, docs/alerting.md).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/dashboards"
	"github.com/llm-prober/llm-prober/internal/testutil"
)

const (
	// The healthy simulator's configured TTFT: --latency.ttft-base plus
	// about 20 prompt tokens at the default 50µs prefill per token.
	simTTFTBase = 70 * time.Millisecond
	simTTFT     = simTTFTBase + time.Millisecond
	simDecode   = 8 * time.Millisecond // default --latency.decode-base
	// testDeadline bounds everything after the build; a run takes about
	// 80 s (the alert's 1m "for" dominates).
	testDeadline = 4 * time.Minute
)

// e2eValues are the template variable values of the dashboard queries:
// everything selected, windows short enough for a run of a few minutes.
var e2eValues = map[string]string{
	"job": ".*", "target": ".*", "probe": ".*", "model": ".*",
	"__rate_interval": "20s", "__interval": "2s", "__range": "2m",
}

// requirePrometheus is Debian's prometheus (2.42+) on PATH, which `make
// test` installs (scripts/ensure-promtool.sh) and then requires through
// LLM_PROBER_REQUIRE_PROMTOOL; run by hand without it, test (a phrase such
// as "the end-to-end test") skips, saying how to get it.
func requirePrometheus(t *testing.T, test string) string {
	t.Helper()
	return testutil.RequireTool(t, "prometheus", "LLM_PROBER_REQUIRE_PROMTOOL",
		test+" needs a real Prometheus. Install Debian's prometheus package (apt-get install prometheus, which also gives promtool; `make test` does it through scripts/ensure-promtool.sh) or put a prometheus 2.42+ binary on PATH")
}

func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	// make test installs Debian's prometheus package
	// (scripts/ensure-promtool.sh) and sets LLM_PROBER_REQUIRE_PROMTOOL, so
	// the test skips only when run by hand on a machine without it.
	prometheusBin := requirePrometheus(t, "the end-to-end test")
	root := testutil.RepoRoot(t)
	// Besides the sources (BuildBinary reads those), Prometheus reads the
	// rules and the test the dashboards and docs: go test's cache must
	// know of them.
	testutil.RecordInputs(t, ".yml", ".yaml", ".json", ".md", ".proto")
	dir := t.TempDir()
	// Building has its own bound, outside the test's.
	bin := testutil.BuildBinary(t)

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()

	simA, simB, simC, proberAddr, promAddr := testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	simArgs := []string{"simulate", "--log.level=warn"}
	// The simulator's Triton gRPC API listens on a fixed default port; the
	// test does not use it, so turn it off where the flag exists.
	if help, _ := exec.Command(bin, "simulate", "--help").CombinedOutput(); bytes.Contains(help, []byte("--grpc-listen")) {
		simArgs = append(simArgs, "--grpc-listen=")
	}
	startSim := func(addr string, extra ...string) *testutil.Process {
		args := append(append(append([]string{}, simArgs...), "--listen", addr), extra...)
		p := testutil.StartProcess(t, "simulate-"+addr, exec.Command(bin, args...))
		p.WaitHTTP(t, "http://"+addr+"/health")
		return p
	}
	startSim(simA, "--metrics.naming", "triton",
		"--latency.ttft-base", simTTFTBase.String(), "--latency.jitter", "0.02",
		"--rate-limit.requests-per-minute", "100000")
	flaky := startSim(simB, "--fault.error-rate", "1")
	// A working prefix cache whose prefill dominates TTFT, for the session
	// probe (checkSessionPrefix).
	startSim(simC, "--prefix-cache", "--latency.prefill-per-token", "200us", "--metrics.spec-decode-tokens", "3")

	cfgPath := filepath.Join(dir, "llm-prober.yml")
	testutil.WriteFile(t, cfgPath, fmt.Sprintf(proberConfig, simA, simA, simB, simB, simC, simC, simA, simA, simA, simA, simA))
	prober := testutil.StartProcess(t, "llm-prober", exec.Command(bin,
		"--config.file="+cfgPath, "--web.listen-address="+proberAddr, "--log.level=warn"))
	prober.WaitReady(t, "http://"+proberAddr)

	promCfg := filepath.Join(dir, "prometheus.yml")
	// The shipped rules, with the 30-day budget group (every 5m) evaluated
	// as often as the SLO rules, so that the overview's budget panel has
	// data within the run.
	rulesPath := cappedRules(t, filepath.Join(root, "alerts", "llm-prober-rules.yml"), 30*time.Second)
	testutil.WriteFile(t, promCfg, fmt.Sprintf(prometheusConfig, rulesPath, proberAddr))
	prom := testutil.StartProcess(t, "prometheus", exec.Command(prometheusBin,
		"--config.file="+promCfg,
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr,
		"--log.level=warn"))
	prom.WaitReady(t, "http://"+promAddr)
	api := &promAPI{base: "http://" + promAddr}
	checkRulesLoaded(ctx, t, api)
	t.Logf("everything running after %s", time.Since(start).Round(time.Millisecond))

	// LLMProbeFailing must never fire for the healthy target; every
	// alerts poll below checks that.
	checkAlerts := func() []alert {
		as, err := api.alerts(ctx)
		if err != nil {
			return nil
		}
		for _, a := range as {
			if a.Labels["target"] == "sim-triton" && a.Labels["alertname"] == "LLMProbeFailing" {
				t.Errorf("LLMProbeFailing for the healthy target: %+v", a)
			}
		}
		return as
	}

	t.Run("ttft", func(t *testing.T) { checkLatency(ctx, t, api) })
	t.Run("server metrics", func(t *testing.T) { checkServerMetrics(ctx, t, api, root) })
	t.Run("dashboards", func(t *testing.T) { checkDashboards(ctx, t, api, root) })
	t.Logf("latency, server metrics and dashboards checked after %s", time.Since(start).Round(time.Millisecond))

	// The flaky target has failed since its first probe: LLMProbeFailing
	// fires once its streak is 90 s old.
	var fired alert
	poll(ctx, t, "LLMProbeFailing firing for sim-flaky", 2*time.Second, func() (bool, string) {
		as := checkAlerts()
		for _, a := range as {
			if a.Labels["alertname"] == "LLMProbeFailing" && a.Labels["target"] == "sim-flaky" {
				if a.State == "firing" {
					fired = a
					return true, ""
				}
				return false, "state " + a.State
			}
		}
		return false, fmt.Sprintf("not active; active alerts: %v", alertNames(as))
	})
	t.Logf("LLMProbeFailing fired after %s: %v", time.Since(start).Round(time.Millisecond), fired.Labels)
	for k, want := range map[string]string{"severity": "page", "probe": "steady", "model": "sim-llm", "job": "llm-prober"} {
		if fired.Labels[k] != want {
			t.Errorf("fired alert label %s=%q, want %q", k, fired.Labels[k], want)
		}
	}
	if !strings.HasSuffix(fired.Annotations["runbook_url"], "docs/runbook.md#llmprobefailing") ||
		!strings.Contains(fired.Annotations["description"], "sim-flaky") {
		t.Errorf("fired alert annotations: %v", fired.Annotations)
	}
	// The dashboards' alert annotation and firing-alerts panel see it too.
	t.Run("dashboard alert queries", func(t *testing.T) { checkAlertQueries(ctx, t, api, root) })

	// Restore the flaky simulator: the next success resolves the alert.
	flaky.Stop()
	startSim(simB)
	poll(ctx, t, "LLMProbeFailing for sim-flaky resolved", 2*time.Second, func() (bool, string) {
		for _, a := range checkAlerts() {
			if a.Labels["alertname"] == "LLMProbeFailing" && a.Labels["target"] == "sim-flaky" {
				return false, "still " + a.State
			}
		}
		return true, ""
	})
	if v, err := api.value(ctx, `llm_probe_success{target="sim-flaky"}`); err != nil || v != 1 {
		t.Errorf("llm_probe_success of the restored target = %v (%v), want 1", v, err)
	}
	t.Logf("resolved after %s in total", time.Since(start).Round(time.Millisecond))

	t.Run("session probes and the prefix-cache alert", func(t *testing.T) { checkSessionPrefix(ctx, t, api, rulesPath) })
}

// checkSessionPrefix: a session probe against a working prefix cache has
// a warm/cold TTFT ratio above LLMProbePrefixCacheNotHitting's threshold
// (its warm turns carry more new tokens than turn 1), and the shipped
// alert's condition leaves it out: evaluated as shipped it holds nothing
// for the session probe; with its mode="shared_prefix" matcher turned to
// mode="session" it holds the probe, so the first result is not for want
// of data.
func checkSessionPrefix(ctx context.Context, t *testing.T, api *promAPI, rulesPath string) {
	var expr string
	for _, r := range readRules(t, rulesPath) {
		if r.Alert == "LLMProbePrefixCacheNotHitting" {
			expr = r.Expr
		}
	}
	if strings.Count(expr, `mode="shared_prefix"`) == 0 {
		t.Fatalf("LLMProbePrefixCacheNotHitting does not select mode=\"shared_prefix\": %s", expr)
	}
	asSession := strings.ReplaceAll(expr, `mode="shared_prefix"`, `mode="session"`)
	sel := `probe="conversation"`
	poll(ctx, t, "the session probe's warm/cold ratio above the alert's threshold", time.Second, func() (bool, string) {
		n, err := api.count(ctx, "("+asSession+") and on (target, probe) llm_probe_scheduled_total{"+sel+"}")
		return err == nil && n == 1, fmt.Sprintf("%d series (%v)", n, err)
	})
	v, err := api.value(ctx, "("+asSession+") and on (target, probe) llm_probe_scheduled_total{"+sel+"}")
	t.Logf("session probe against a working prefix cache: warm/cold mean TTFT %.2f", v)
	if err != nil || v <= 0.8 {
		t.Errorf("session warm/cold = %v (%v), want above the alert's 0.8", v, err)
	}
	if n, err := api.count(ctx, "("+expr+") and on (target, probe) llm_probe_scheduled_total{"+sel+"}"); err != nil || n != 0 {
		t.Errorf("the shipped LLMProbePrefixCacheNotHitting condition holds %d series for the session probe (%v), want none", n, err)
	}
}

// panelTargets are the targets both end-to-end configurations add so that
// the overview's wrong-answer, reasoning, rate-limit, prefix-cache and
// cancellation panels have data: the simulator answers "four" where "five" is asserted,
// streams reasoning before the answer, and (started with rate limits)
// sends rate-limit headers with every answer; the cancellation probe cuts
// its streams and watches the simulator free the slots; the skipper's
// arrivals (every 20 ms) come faster than its answers (a short answer
// takes longer), so some are skipped with concurrency_limit and the
// skipped-probes panel has data: llm_probe_skipped_total appears with
// the first skip. Four %s: the simulator.
const panelTargets = `  - name: sim-canary
    protocol: openai_chat
    url: http://%s
    model: sim-llm
    headers: {X-Sim-Answer: four}
    probes:
      - name: canary
        workload: short
        schedule: {every: 1s}
        assert: [{contains: five}]
  - name: sim-reasoning
    protocol: openai_chat
    url: http://%s
    model: sim-llm
    headers: {X-Sim-Options: reasoning_tokens=3}
    probes:
      - name: thinking
        workload: short
        schedule: {every: 1s}
      - name: prefix
        workload: short
        schedule: {every: 1s}
        shared_prefix: {tokens: 64, requests: 2}
  - name: sim-cancel
    protocol: openai_chat
    url: http://%s
    model: sim-llm
    server_metrics: {url: http://%s/metrics, kind: auto, timeout: 2s}
    probes:
      - name: cut
        workload: short
        schedule: {every: 1s}
        cancel: {after_tokens: 2, release_timeout: 5s, poll_interval: 50ms}
      - name: skipper
        workload: short
        schedule: {every: 20ms}
`

// proberConfig probes both simulators every second; the SLO thresholds
// are far above the configured latencies.
const proberConfig = `targets:
  - name: sim-triton
    protocol: openai_chat
    url: http://%s
    model: sim-llm
    timeout: 20s
    stream_idle_timeout: 10s
    server_metrics: {url: http://%s/metrics, kind: auto, timeout: 2s}
    probes:
      - name: steady
        workload: short
        schedule: {every: 1s}
        slo: {ttft: 250ms, tpot: 20ms, objective: 0.99}
  - name: sim-flaky
    protocol: openai_chat
    url: http://%s
    model: sim-llm
    timeout: 20s
    server_metrics: {url: http://%s/metrics, kind: vllm, timeout: 2s}
    probes:
      - name: steady
        workload: short
        schedule: {every: 1s}
        slo: {ttft: 250ms, objective: 0.99}
  # A chat of three turns on a simulator whose prefix cache works: each
  # warm turn carries more new tokens than turn 1, so its warm/cold TTFT
  # ratio is above 1 (checkSessionPrefix).
  - name: sim-session
    protocol: openai_chat
    url: http://%s
    model: sim-llm
    # vLLM-named with speculative decoding: the serving-stack panels of
    # preemptions and spec-decode acceptance.
    server_metrics: {url: http://%s/metrics, kind: vllm, timeout: 2s}
    probes:
      - name: conversation
        workload: short
        schedule: {every: 1s}
        session: {turns: 3}
  # Probes every model simA lists (the dashboards' discovery panels).
  - name: sim-models
    protocol: openai_chat
    url: http://%s
    discover_models: {max_models: 5}
    probes:
      - name: steady
        workload: short
        schedule: {every: 5s}
` + panelTargets + `workloads:
  short:
    prompts:
      inline: ["Explain in two sentences what a KV cache is."]
    max_tokens: 16
    ignore_eos: true
gpus:
  enabled: false
`

// prometheusConfig: 1 s scrape and rule evaluation (the SLO recording
// group keeps its own 30 s interval from the rules file), the real rules.
const prometheusConfig = `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %s
scrape_configs:
  - job_name: llm-prober
    static_configs:
      - targets: ['%s']
`

func checkRulesLoaded(ctx context.Context, t *testing.T, api *promAPI) {
	var resp struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Name     string  `json:"name"`
				Type     string  `json:"type"`
				Duration float64 `json:"duration"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := api.get(ctx, "/api/v1/rules", nil, &resp); err != nil {
		t.Fatalf("rules: %v", err)
	}
	found := false
	for _, g := range resp.Groups {
		for _, r := range g.Rules {
			if r.Name == "LLMProbeFailing" {
				found = true
				if r.Duration != 0 {
					t.Errorf("LLMProbeFailing for = %vs, want none: the streak's age is in the expression", r.Duration)
				}
			}
		}
	}
	if len(resp.Groups) < 5 || !found {
		t.Fatalf("alerts/llm-prober-rules.yml not loaded: %d groups, LLMProbeFailing found %v", len(resp.Groups), found)
	}
}

// checkLatency compares the TTFT and TPOT Prometheus computes from the
// prober's histograms with the simulator's configured latencies.
func checkLatency(ctx context.Context, t *testing.T, api *promAPI) {
	sel := `{target="sim-triton", probe="steady"}`
	poll(ctx, t, "15 TTFT observations", time.Second, func() (bool, string) {
		v, err := api.value(ctx, "sum(llm_probe_time_to_first_token_seconds_count"+sel+")")
		return err == nil && v >= 15, fmt.Sprintf("%v %v", v, err)
	})
	want := simTTFT.Seconds()
	p50, err := api.value(ctx, "histogram_quantile(0.5, sum by (le) (rate(llm_probe_time_to_first_token_seconds_bucket"+sel+"[1m])))")
	if err != nil {
		t.Fatal(err)
	}
	// The classic bucket around 71 ms is (0.04, 0.1] (then 0.25):
	// interpolation within it, and a loaded machine, allow this much.
	if p50 < 0.7*want || p50 > 1.5*want {
		t.Errorf("TTFT p50 = %.4fs, want about %.4fs (0.7x..1.5x)", p50, want)
	}
	mean, err := api.value(ctx, "sum(rate(llm_probe_time_to_first_token_seconds_sum"+sel+"[1m])) / sum(rate(llm_probe_time_to_first_token_seconds_count"+sel+"[1m]))")
	if err != nil {
		t.Fatal(err)
	}
	// The mean is exact (no buckets); the prober cannot see a first token
	// before the simulator sends it, and loopback adds little.
	if mean < 0.95*simTTFTBase.Seconds() || mean > want+0.1 {
		t.Errorf("TTFT mean = %.4fs, want %.4fs..%.4fs", mean, 0.95*simTTFTBase.Seconds(), want+0.1)
	}
	tpot, err := api.value(ctx, "sum(rate(llm_probe_time_per_output_token_seconds_sum"+sel+"[1m])) / sum(rate(llm_probe_time_per_output_token_seconds_count"+sel+"[1m]))")
	if err != nil {
		t.Fatal(err)
	}
	if tpot < 0.9*simDecode.Seconds() || tpot > simDecode.Seconds()+0.03 {
		t.Errorf("TPOT mean = %.4fs, want about %s", tpot, simDecode)
	}
	t.Logf("TTFT p50 %.1f ms, mean %.1f ms (configured %s); TPOT mean %.2f ms", p50*1e3, mean*1e3, simTTFT, tpot*1e3)
}

var serverMetricRE = regexp.MustCompile("`(llm_server_[a-z_]+)`")

// checkServerMetrics: every llm_server_* metric docs/metrics.md documents
// is present for the Triton-named simulator, with its server label.
func checkServerMetrics(ctx context.Context, t *testing.T, api *promAPI, root string) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range serverMetricRE.FindAllStringSubmatch(string(doc), -1) {
		names[m[1]] = true
	}
	if len(names) < 10 {
		t.Fatalf("found only %d llm_server_* names in docs/metrics.md", len(names))
	}
	// Label values that must each be present.
	variants := map[string][]string{
		"llm_server_requests_total":       {`result="success"`, `result="failure"`},
		"llm_server_phase_seconds_total":  {`phase="queue"`, `phase="compute"`, `phase="e2e"`},
		"llm_server_phase_requests_total": {`phase="queue"`, `phase="compute"`, `phase="e2e"`},
	}
	// Triton exports no prefix-cache counters (vLLM and SGLang do).
	// The truncation gauge exists only while a server sends a label value
	// over the bound, which the simulator does not.
	// Nor a queue split by reason or finish reasons (vLLM, SGLang,
	// trtllm-serve only: docs/servers.md). Of the servers' own latency
	// (section 2.2) Triton has only TTFT, a histogram with classic
	// buckets: its _count is queried.
	notTriton := map[string]bool{"llm_server_prefix_cache_queries_total": true, "llm_server_prefix_cache_hits_total": true,
		"llm_server_label_values_truncated": true, "llm_server_requests_waiting_by_reason": true,
		"llm_server_requests_finished_total":     true,
		"llm_server_inter_token_latency_seconds": true, "llm_server_request_time_per_output_token_seconds": true,
		"llm_server_queue_time_seconds": true, "llm_server_preemptions_total": true,
		"llm_server_spec_decode_draft_tokens_total": true, "llm_server_spec_decode_accepted_tokens_total": true}
	var queries []string
	for name := range names {
		if notTriton[name] {
			continue
		}
		if name == "llm_server_time_to_first_token_seconds" {
			name += "_count"
		}
		vs := variants[name]
		if vs == nil {
			vs = []string{""}
		}
		for _, v := range vs {
			queries = append(queries, fmt.Sprintf(`%s{target="sim-triton"%s}`, name, prefixComma(v)))
		}
	}
	sort.Strings(queries)
	poll(ctx, t, "every llm_server_* metric", time.Second, func() (bool, string) {
		var missing []string
		for _, q := range queries {
			if n, err := api.count(ctx, q); err != nil || n == 0 {
				missing = append(missing, q)
			}
		}
		return len(missing) == 0, "missing " + strings.Join(missing, ", ")
	})
	if v, err := api.value(ctx, `llm_server_up{target="sim-triton"}`); err != nil || v != 1 {
		t.Errorf(`llm_server_up = %v (%v), want 1`, v, err)
	}
	if n, err := api.count(ctx, `llm_server_requests_waiting{target="sim-triton", server="triton", model="sim-llm"}`); err != nil || n != 1 {
		t.Errorf(`llm_server_requests_waiting{server="triton", model="sim-llm"}: %d series (%v), want 1 (kind auto should detect Triton)`, n, err)
	}
	if v, err := api.value(ctx, `sum(llm_server_requests_total{target="sim-triton", result="success"})`); err != nil || v < 1 {
		t.Errorf("server success counter = %v (%v), want > 0", v, err)
	}
}

func prefixComma(s string) string {
	if s == "" {
		return ""
	}
	return ", " + s
}

// readDashboards parses the shipped dashboard files.
func readDashboards(t *testing.T, root string) map[string]*dashboards.Dashboard {
	paths, err := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	out := map[string]*dashboards.Dashboard{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboards.Dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[filepath.Base(p)] = &d
	}
	return out
}

// checkDashboards: every panel query and variable selector of every
// dashboard returns at least one finite value. Exempt: GPU panels
// (llm_gpu_*: no GPU and no NVML here), the alert annotation query,
// checked once an alert fires, and queries of vLLM's own series (vllm:*,
// which Prometheus scrapes from vLLM itself; this test scrapes only the
// prober, and TestHistogramModes covers them).
func checkDashboards(ctx context.Context, t *testing.T, api *promAPI, root string) {
	type check struct{ where, expr string }
	var checks []check
	exempt := 0
	for name, d := range readDashboards(t, root) {
		for _, q := range dashboards.Queries(d) {
			if q.ReadsAlerts() || strings.Contains(q.Expr, "llm_gpu_") || strings.Contains(q.Expr, "vllm:") {
				exempt++
				continue
			}
			expr, err := dashboards.Substitute(q.Expr, e2eValues)
			if err != nil {
				t.Errorf("%s %s: %v", name, q.Where, err)
				continue
			}
			checks = append(checks, check{name + " " + q.Where, expr})
		}
	}
	// The SLO recording rules are evaluated every 30 s: allow a few rounds.
	poll(ctx, t, "every dashboard query returning data", 3*time.Second, func() (bool, string) {
		var empty []string
		for _, c := range checks {
			if n, err := api.finite(ctx, c.expr); err != nil || n == 0 {
				empty = append(empty, fmt.Sprintf("%s: %s (%v)", c.where, c.expr, err))
			}
		}
		return len(empty) == 0, fmt.Sprintf("%d of %d without data:\n%s", len(empty), len(checks), strings.Join(empty, "\n"))
	})
	t.Logf("%d dashboard queries return data (%d exempt: GPU panels, vLLM's own series, and the queries of alerts, checked once one fires)", len(checks), exempt)
}

// checkAlertQueries: with an alert firing, every dashboard query of
// ALERTS (the alert annotations, the overview's firing-alerts panel) has
// data.
func checkAlertQueries(ctx context.Context, t *testing.T, api *promAPI, root string) {
	found := 0
	for name, d := range readDashboards(t, root) {
		for _, q := range dashboards.Queries(d) {
			if !q.ReadsAlerts() {
				continue
			}
			found++
			expr, err := dashboards.Substitute(q.Expr, e2eValues)
			if err != nil {
				t.Fatal(err)
			}
			poll(ctx, t, name+" "+q.Where, time.Second, func() (bool, string) {
				n, err := api.count(ctx, expr)
				return err == nil && n > 0, fmt.Sprintf("%s: %d series, %v", expr, n, err)
			})
		}
	}
	// Each dashboard's annotation and the overview's panel.
	if found < 3 {
		t.Errorf("only %d dashboard queries read ALERTS", found)
	}
}

// --- Prometheus HTTP API ---------------------------------------------------

type promAPI struct{ base string }

var httpClient = &http.Client{Timeout: 10 * time.Second}

func (a *promAPI) get(ctx context.Context, path string, params url.Values, out any) error {
	u := a.base + path
	if params != nil {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, b)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", path, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}

type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
	// Histogram is a native histogram sample: [time, {count, sum,
	// buckets}].
	Histogram *[2]json.RawMessage `json:"histogram"`
}

// query runs an instant query and returns the vector's values (a native
// histogram's count).
func (a *promAPI) query(ctx context.Context, expr string) ([]float64, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := a.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	var vals []float64
	switch data.ResultType {
	case "vector":
		var ss []sample
		if err := json.Unmarshal(data.Result, &ss); err != nil {
			return nil, err
		}
		for _, s := range ss {
			str, _ := s.Value[1].(string)
			if s.Histogram != nil {
				// A native histogram (a heatmap query): its count
				// stands for it.
				var h struct {
					Count string `json:"count"`
				}
				if err := json.Unmarshal(s.Histogram[1], &h); err != nil {
					return nil, fmt.Errorf("histogram %s: %w", s.Histogram[1], err)
				}
				str = h.Count
			}
			v, err := strconv.ParseFloat(str, 64)
			if err != nil {
				return nil, fmt.Errorf("value %q: %w", str, err)
			}
			vals = append(vals, v)
		}
	case "scalar":
		var s [2]any
		if err := json.Unmarshal(data.Result, &s); err != nil {
			return nil, err
		}
		str, _ := s[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
	default:
		return nil, fmt.Errorf("unexpected result type %s", data.ResultType)
	}
	return vals, nil
}

func (a *promAPI) count(ctx context.Context, expr string) (int, error) {
	vs, err := a.query(ctx, expr)
	return len(vs), err
}

// finite counts the finite values of a query's result.
func (a *promAPI) finite(ctx context.Context, expr string) (int, error) {
	vs, err := a.query(ctx, expr)
	n := 0
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			n++
		}
	}
	return n, err
}

// value returns the single value of a query.
func (a *promAPI) value(ctx context.Context, expr string) (float64, error) {
	vs, err := a.query(ctx, expr)
	if err != nil {
		return 0, err
	}
	if len(vs) != 1 {
		return 0, fmt.Errorf("%s: %d results, want 1", expr, len(vs))
	}
	return vs[0], nil
}

type alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
}

func (a *promAPI) alerts(ctx context.Context) ([]alert, error) {
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	err := a.get(ctx, "/api/v1/alerts", nil, &data)
	return data.Alerts, err
}

func alertNames(as []alert) []string {
	var names []string
	for _, a := range as {
		names = append(names, a.Labels["alertname"]+"/"+a.Labels["target"]+"/"+a.State)
	}
	return names
}

// poll calls check every interval until it reports true or the test's
// deadline (ctx's) passes; then it fails with check's last explanation.
func poll(ctx context.Context, t *testing.T, what string, interval time.Duration, check func() (bool, string)) {
	t.Helper()
	deadline, _ := ctx.Deadline()
	// Stop polling a little before ctx ends, so that the last check, whose
	// answer the failure shows, runs with a live context: checked at the
	// deadline, every query says "context deadline exceeded" and hides
	// what was missing.
	testutil.Poll(t, what, time.Until(deadline)-15*time.Second, interval, check)
}
