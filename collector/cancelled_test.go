package collector

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/probe"
)

// A request the prober cancelled (shutdown) is counted, with the tokens
// it cost, under its own outcome; it is no measurement and no verdict on
// the server: no SLO judges it, llm_probe_success and the last-run time
// do not move, and a failure streak neither grows nor ends.
func TestCancelledCountedNotJudged(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", SLO: testSLO, Protocol: probe.ProtocolOpenAIChat})
	reg := newTestRegistry(t, m)
	m.Observe("sim", "p", resultAt(probe.OutcomeTimeout, testStart))
	cancelled := &probe.Result{Start: testStart.Add(time.Second), EndToEnd: 3 * time.Second, Outcome: probe.OutcomeCancelled,
		Streamed: true, TTFT: 50 * time.Millisecond, OutputTokens: 7, InputTokens: 5}
	m.Observe("sim", "p", cancelled)
	const expected = `
# HELP llm_probe_requests_total Probe requests by outcome.
# TYPE llm_probe_requests_total counter
llm_probe_requests_total{model="m",outcome="cancelled",probe="p",target="sim"} 1
llm_probe_requests_total{model="m",outcome="success",probe="p",target="sim"} 0
llm_probe_requests_total{model="m",outcome="timeout",probe="p",target="sim"} 1
# HELP llm_probe_slo_requests_total Probe requests judged against each SLO the probe declares; failed requests, and arrivals skipped because the probe's or its target's max_in_flight was reached, are bad for every SLO; cancelled requests are not judged.
# TYPE llm_probe_slo_requests_total counter
llm_probe_slo_requests_total{model="m",probe="p",result="bad",slo="goodput",target="sim"} 1
llm_probe_slo_requests_total{model="m",probe="p",result="bad",slo="tpot",target="sim"} 1
llm_probe_slo_requests_total{model="m",probe="p",result="bad",slo="ttft",target="sim"} 1
llm_probe_slo_requests_total{model="m",probe="p",result="good",slo="goodput",target="sim"} 0
llm_probe_slo_requests_total{model="m",probe="p",result="good",slo="tpot",target="sim"} 0
llm_probe_slo_requests_total{model="m",probe="p",result="good",slo="ttft",target="sim"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "llm_probe_requests_total", "llm_probe_slo_requests_total"); err != nil {
		t.Error(err)
	}
	g := gaugesOf(t, reg, "llm_probe_success", "llm_probe_last_run_timestamp_seconds", "llm_probe_consecutive_failures", "llm_probe_failing_since_timestamp_seconds")
	if got := g["llm_probe_success"]["p"]; got != 0 {
		t.Errorf("llm_probe_success %v, want the timeout's 0", got)
	}
	if got, want := g["llm_probe_last_run_timestamp_seconds"]["p"], float64(testStart.Unix()); got != want {
		t.Errorf("last run %v, want the timeout's %v", got, want)
	}
	if got := g["llm_probe_consecutive_failures"]["p"]; got != 1 {
		t.Errorf("consecutive failures %v, want the timeout's 1", got)
	}
	if got, want := g["llm_probe_failing_since_timestamp_seconds"]["p"], float64(testStart.Unix()); got != want {
		t.Errorf("failing since %v, want %v", got, want)
	}
	if got := gatherOne(t, reg, "llm_probe_output_tokens_total").GetMetric()[0].GetCounter().GetValue(); got != 7 {
		t.Errorf("output tokens %v, want the cancelled request's 7", got)
	}
}
