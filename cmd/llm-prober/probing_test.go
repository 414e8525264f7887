package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

func startSimulator(t *testing.T) string {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase = 5 * time.Millisecond
	cfg.Latency.DecodeBase = time.Millisecond
	return simtest.Start(t, cfg).URL
}

func simConfig(url string, probes ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "targets:\n  - name: sim\n    protocol: openai_chat\n    url: %s\n    model: sim-llm\n    api_key_file: key\n    probes:\n", url)
	for _, p := range probes {
		fmt.Fprintf(&b, "      - {name: %s, schedule: {every: 100ms}, slo: {ttft: 250ms, tpot: 20ms}}\n", p)
	}
	b.WriteString("workloads:\n  default: {max_tokens: 8, ignore_eos: true}\n")
	return b.String()
}

// seriesValue is the value of the series written exactly as series in a
// text exposition.
func seriesValue(body, series string) (float64, bool) {
	s, n := testutil.SampleLine(body, series)
	if n == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.Fields(s)[0], 64)
	return v, err == nil
}

// TestDaemonProbesSimulator is `make run` in a test: the daemon probes the
// simulator, TTFT buckets fill, the TTFT threshold bucket exists, /metrics stays
// valid for promtool, and a reload that drops a probe drops its series.
func TestDaemonProbesSimulator(t *testing.T) {
	url := startSimulator(t)
	td := startDaemon(t, simConfig(url, "steady", "extra"))
	countPrefix := `llm_probe_time_to_first_token_seconds_count{model="sim-llm",probe="steady",target="sim"}`
	testutil.WaitFor(t, "3 TTFT observations of sim/steady", waitTimeout, func() bool {
		_, _, body := get(t, "GET", td.url+"/metrics")
		v, ok := seriesValue(body, countPrefix)
		return ok && v >= 3
	})
	_, _, body := get(t, "GET", td.url+"/metrics")
	for _, want := range []string{
		`llm_probe_time_to_first_token_seconds_bucket{model="sim-llm",probe="steady",target="sim",le="0.25"}`,
		`llm_probe_time_per_output_token_seconds_count{model="sim-llm",probe="steady",target="sim"}`,
		`llm_probe_requests_total{model="sim-llm",outcome="success",probe="steady",target="sim"}`,
		`llm_probe_inter_token_latency_seconds_count{model="sim-llm",probe="steady",target="sim"}`,
		`llm_probe_success{model="sim-llm",probe="steady",target="sim"} 1`,
		`llm_probe_slo_requests_total{model="sim-llm",probe="steady",result="good",slo="goodput",target="sim"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	promtoolCheckMetrics(t, body)

	testutil.WriteFile(t, td.cfgPath, simConfig(url, "steady"))
	if status, _, out := get(t, "POST", td.url+"/-/reload"); status != 200 {
		t.Fatalf("reload: %d %s", status, out)
	}
	_, _, body = get(t, "GET", td.url+"/metrics")
	if strings.Contains(body, `probe="extra"`) {
		t.Error("series of a removed probe still exported after reload")
	}
	if !strings.Contains(body, `probe="steady"`) {
		t.Error("series of a kept probe lost on reload")
	}
	before, _ := seriesValue(body, countPrefix)
	testutil.WaitFor(t, "a new TTFT observation of sim/steady after the reload", waitTimeout, func() bool {
		_, _, body := get(t, "GET", td.url+"/metrics")
		v, _ := seriesValue(body, countPrefix)
		return v > before
	})
}

func TestProbeSubcommand(t *testing.T) {
	url := startSimulator(t)
	cfgPath := testutil.WriteConfig(t, simConfig(url, "steady"), map[string]string{"key": plantedAPIKey + "\n"})
	var stdout, stderr testutil.SyncBuffer
	code := run(context.Background(), []string{"probe", "--config.file", cfgPath, "--target", "sim"}, &stdout, &stderr)
	out := stdout.String()
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr.String())
	}
	for _, want := range []string{"sim / steady", "success", "ttft", "tpot", "itl", "output tokens", "server"} {
		if !strings.Contains(out, want) {
			t.Errorf("breakdown lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+stderr.String(), "sk-planted") {
		t.Error("probe output leaks the API key")
	}
	code = run(context.Background(), []string{"probe", "--config.file", cfgPath, "--target", "nope"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), `no target "nope"`) {
		t.Errorf("unknown target: exit %d, stderr %s", code, stderr.String())
	}
}
