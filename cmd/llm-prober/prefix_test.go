package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// prefixConfig is a shared_prefix probe on a simulator whose prefill
// dominates TTFT and whose prefix cache is on.
func prefixConfig(t *testing.T) string {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase, cfg.Latency.DecodeBase = 2*time.Millisecond, time.Millisecond
	cfg.Latency.PrefillPerToken = 200 * time.Microsecond
	cfg.PrefixCache.Enabled = true
	url := simtest.Start(t, cfg).URL
	return fmt.Sprintf(`targets:
  - name: sim
    protocol: openai_chat
    url: %s
    model: sim-llm
    probes:
      - {name: prefix, workload: short, schedule: {every: 200ms}, shared_prefix: {tokens: 1024, requests: 3}}
workloads:
  short: {prompts: {synthetic: {input_tokens: 16}}, max_tokens: 4, ignore_eos: true}
`, url)
}

// TestProbeSubcommandSequence: llm-prober probe sends one whole run of a
// shared_prefix probe, prints each request with its cache state and the
// cached tokens, and the warm/cold ratio, low with the cache on.
func TestProbeSubcommandSequence(t *testing.T) {
	cfgPath := testutil.WriteConfig(t, prefixConfig(t), nil)
	var stdout, stderr testutil.SyncBuffer
	code := run(context.Background(), []string{"probe", "--config.file", cfgPath, "--target", "sim"}, &stdout, &stderr)
	out := stdout.String()
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr.String())
	}
	for _, want := range []string{"--- request 1 (cold prefix cache)", "--- request 3 (warm prefix cache)", "cached         1024 (server's prefix cache", "the prefix cache helps)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	m := regexp.MustCompile(`warm/cold ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no ratio:\n%s", out)
	}
	if r, _ := strconv.ParseFloat(m[1], 64); r > 0.3 {
		t.Errorf("warm/cold %v with the prefix cache on, want < 0.3", r)
	}
}

// TestDaemonExportsPrefixMetrics: serve registers the prefix metrics and
// feeds them from the engine.
func TestDaemonExportsPrefixMetrics(t *testing.T) {
	td := startDaemon(t, prefixConfig(t))
	ratio := `llm_probe_prefix_warm_cold_ttft_ratio{model="sim-llm",probe="prefix",target="sim"}`
	testutil.WaitFor(t, "a warm/cold ratio", waitTimeout, func() bool {
		_, _, body := get(t, "GET", td.url+"/metrics")
		_, ok := seriesValue(body, ratio)
		return ok
	})
	_, _, body := get(t, "GET", td.url+"/metrics")
	if v, _ := seriesValue(body, ratio); v > 0.3 {
		t.Errorf("ratio %v, want < 0.3", v)
	}
	for _, want := range []string{
		`llm_probe_prefix_time_to_first_token_seconds_count{cache="cold",mode="shared_prefix",model="sim-llm",probe="prefix",target="sim"}`,
		`llm_probe_prefix_time_to_first_token_seconds_count{cache="warm",mode="shared_prefix",model="sim-llm",probe="prefix",target="sim"}`,
		`llm_probe_cached_input_tokens_total{model="sim-llm",probe="prefix",target="sim"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	promtoolCheckMetrics(t, body)
}

// TestWarmColdLine: the verdict follows the ratio (the alert's 0.8), and a
// session run gets none.
func TestWarmColdLine(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		session    bool
		cold, warm time.Duration
		want, not  string
	}{
		{false, 450 * ms, 27 * ms, "warm/cold 0.060 (at most 0.8: the prefix cache helps)", "does not help"},
		{false, 100 * ms, 95 * ms, "warm/cold 0.950 (above 0.8: the prefix cache does not help", "helps)"},
		{true, 100 * ms, 50 * ms, "warm/cold 0.500 (a session: later turns carry more new tokens than turn 1, so this is no verdict", "does not help"},
	} {
		got := warmColdLine(c.session, c.cold, c.warm)
		if !strings.Contains(got, c.want) || strings.Contains(got, c.not) {
			t.Errorf("warmColdLine(%v, %v, %v) = %q, want it to contain %q and not %q", c.session, c.cold, c.warm, got, c.want, c.not)
		}
	}
}
