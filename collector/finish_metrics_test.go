package collector

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/probe"
)

// TestFinishReasonsCounted: one series per reason seen, none before;
// servers' own words fold into the fixed set, and an answer without a
// finish reason is not counted.
func TestFinishReasonsCounted(t *testing.T) {
	pm := NewProbeMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(pm)
	pm.Add(ProbeSeries{Target: "t", Probe: "p", Model: "m"})
	const name = "llm_probe_finish_reasons_total"
	if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 0 {
		t.Fatalf("%d finish series before any answer (err %v), want none", n, err)
	}
	for i := range 3 {
		pm.Observe("t", "p", &probe.Result{Outcome: probe.OutcomeSuccess, FinishReason: "stop"})
		if n, _ := testutil.GatherAndCount(reg, name); n != 1 {
			t.Fatalf("after %d healthy answers %d finish series, want 1", i+1, n)
		}
	}
	for _, fr := range []string{"eos_token", "length", "repetition", "repetition", "tool_calls", "function_call",
		"content_filter", "abort", "a new reason\n", ""} {
		pm.Observe("t", "p", &probe.Result{Outcome: probe.OutcomeSuccess, FinishReason: fr})
	}
	pm.Observe("t", "p", &probe.Result{Outcome: probe.OutcomeIncomplete, FinishReason: "length"})
	want := `
# HELP llm_probe_finish_reasons_total Probe answers by the finish reason the server gave (stop, length, tool_calls, content_filter, repetition, other), whatever the outcome; answers that gave none are not counted.
# TYPE llm_probe_finish_reasons_total counter
llm_probe_finish_reasons_total{model="m",probe="p",reason="content_filter",target="t"} 1
llm_probe_finish_reasons_total{model="m",probe="p",reason="length",target="t"} 2
llm_probe_finish_reasons_total{model="m",probe="p",reason="other",target="t"} 2
llm_probe_finish_reasons_total{model="m",probe="p",reason="repetition",target="t"} 2
llm_probe_finish_reasons_total{model="m",probe="p",reason="stop",target="t"} 4
llm_probe_finish_reasons_total{model="m",probe="p",reason="tool_calls",target="t"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), name); err != nil {
		t.Error(err)
	}
	pm.Remove("t", "p")
	if n, _ := testutil.GatherAndCount(reg, name); n != 0 {
		t.Errorf("%d finish series after the probe was removed", n)
	}
}
