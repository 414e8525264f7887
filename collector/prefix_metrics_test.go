package collector

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/probe"
)

func TestPrefixMetrics(t *testing.T) {
	m := NewPrefixMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	m.Add(PrefixSeries{Target: "t", Probe: "p", Model: "m", Histograms: HistogramsClassic})
	ok := func(ttft time.Duration, cached int) *probe.Result {
		return &probe.Result{Streamed: true, Outcome: probe.OutcomeSuccess, TTFT: ttft, CachedInputTokens: cached, HasCachedInputTokens: true}
	}
	// No ratio before a run with both a cold and a warm success.
	m.ObserveRun("t", "p", []PrefixRequest{{PrefixCold, ok(400*time.Millisecond, 0)}, {PrefixWarm, &probe.Result{Outcome: probe.OutcomeTimeout}}})
	if _, has := m.Ratio("t", "p"); has {
		t.Fatal("ratio without a warm success")
	}
	m.ObserveRun("t", "p", []PrefixRequest{
		{PrefixCold, ok(200*time.Millisecond, 0)},
		{PrefixWarm, ok(25*time.Millisecond, 512)},
		{PrefixWarm, ok(75*time.Millisecond, 512)},
	})
	m.ObserveRun("x", "unknown", []PrefixRequest{{PrefixCold, ok(time.Second, 0)}})
	want := `
# HELP llm_probe_cached_input_tokens_total Prompt tokens the server reported as served from its prefix cache (OpenAI usage prompt_tokens_details.cached_tokens), for session and shared_prefix probes.
# TYPE llm_probe_cached_input_tokens_total counter
llm_probe_cached_input_tokens_total{model="m",probe="p",target="t"} 1024
# HELP llm_probe_prefix_warm_cold_ttft_ratio Mean TTFT of the warm requests of the probe's last run with both kinds, over its cold request's TTFT; near 1 when the server's prefix cache does not help.
# TYPE llm_probe_prefix_warm_cold_ttft_ratio gauge
llm_probe_prefix_warm_cold_ttft_ratio{model="m",probe="p",target="t"} 0.25
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llm_probe_cached_input_tokens_total", "llm_probe_prefix_warm_cold_ttft_ratio"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m, "llm_probe_prefix_time_to_first_token_seconds"); n != 2 {
		t.Errorf("%d TTFT series, want cold and warm", n)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			if h := s.GetHistogram(); h != nil {
				cache := ""
				for _, l := range s.GetLabel() {
					if l.GetName() == "cache" {
						cache = l.GetValue()
					}
				}
				if want := map[string]uint64{PrefixCold: 2, PrefixWarm: 2}[cache]; h.GetSampleCount() != want {
					t.Errorf("cache=%s: %d observations, want %d", cache, h.GetSampleCount(), want)
				}
			}
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	m.Remove("t", "p")
	if n := testutil.CollectAndCount(m); n != 0 {
		t.Errorf("%d series after Remove", n)
	}
}
