package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// TestAnswersThroughTheEngine: from configuration to metrics, against a
// simulator that answers "Paris" with reasoning and rate-limit headers: a
// canary asserting Paris succeeds, one asserting Lyon ends wrong_answer
// and counts its assertion, the reasoning histograms appear, and the
// target's headroom is exported.
func TestAnswersThroughTheEngine(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase, cfg.Latency.DecodeBase = 2*time.Millisecond, 500*time.Microsecond
	cfg.Output.Answer = "The capital is Paris."
	cfg.Output.ReasoningTokens = 3
	cfg.RateLimit = simulator.RateLimitConfig{RequestsPerMinute: 10000, TokensPerMinute: 1e7}
	sim := simtest.Start(t, cfg)
	c, err := config.Parse([]byte(fmt.Sprintf(`targets:
  - name: sim
    protocol: openai_chat
    url: %s
    model: sim-llm
    probes:
      - name: right
        schedule: {every: 50ms}
        assert: [{contains: Paris}]
      - name: wrong
        schedule: {every: 50ms}
        assert: [{name: lyon, contains: Lyon}, {regex: "capital"}]
workloads:
  default: {max_tokens: 32, temperature: 0, seed: 1}
`, sim.URL)), "test.yml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	pm, answers, limits := collector.NewProbeMetrics(), collector.NewAnswerMetrics(), collector.NewRateLimitMetrics()
	reg.MustRegister(pm, answers, limits)
	e := New(promslog.NewNopLogger(), pm, MetricsSink(answers, limits))
	e.Apply(c)
	time.Sleep(400 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.Stop(ctx)

	value := func(name string, labels ...string) float64 { return mustMetricValue(t, reg, name, labels...) }
	rightOK := value("llm_probe_requests_total", "probe", "right", "outcome", "success")
	rightWrong := value("llm_probe_requests_total", "probe", "right", "outcome", "wrong_answer")
	wrongOK := value("llm_probe_requests_total", "probe", "wrong", "outcome", "success")
	wrong := value("llm_probe_requests_total", "probe", "wrong", "outcome", "wrong_answer")
	if rightOK < 2 || rightWrong != 0 || wrongOK != 0 || wrong < 2 {
		t.Errorf("right: %v success, %v wrong; wrong: %v success, %v wrong", rightOK, rightWrong, wrongOK, wrong)
	}
	if got := value("llm_probe_assertion_failures_total", "probe", "wrong", "assertion", "lyon"); got != wrong {
		t.Errorf("lyon failures %v, wrong answers %v", got, wrong)
	}
	if got := value("llm_probe_assertion_failures_total", "probe", "wrong", "assertion", "regex"); got != 0 {
		t.Errorf("regex failures %v", got)
	}
	if got := value("llm_probe_time_to_first_answer_token_seconds", "probe", "right"); got != rightOK {
		t.Errorf("first answer observations %v, successes %v", got, rightOK)
	}
	if got := value("llm_probe_reasoning_tokens_total", "probe", "right"); got != 3*(rightOK+rightWrong) {
		t.Errorf("reasoning tokens %v for %v answers of 3", got, rightOK)
	}
	if got := value("llm_probe_rate_limit_limit", "target", "sim", "resource", "requests"); got != 10000 {
		t.Errorf("request limit %v", got)
	}
	if n, err := testutil.GatherAndCount(reg, "llm_probe_rate_limit_remaining_ratio"); err != nil || n != 2 {
		t.Errorf("%d headroom series (%v)", n, err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
