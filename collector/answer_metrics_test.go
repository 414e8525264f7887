package collector

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/probe"
)

// TestWrongAnswerSeries: wrong_answer exists, at 0, only for probes that
// assert; a wrong answer is bad for goodput.
func TestWrongAnswerSeries(t *testing.T) {
	m := NewProbeMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	slo := SLO{TTFT: time.Second, Objective: 0.99}
	m.Add(ProbeSeries{Target: "t", Probe: "canary", Model: "m", Protocol: probe.ProtocolOpenAIChat, Asserts: true, SLO: slo})
	m.Add(ProbeSeries{Target: "t", Probe: "plain", Model: "m", Protocol: probe.ProtocolOpenAIChat, SLO: slo})
	m.Observe("t", "canary", &probe.Result{Outcome: probe.OutcomeWrongAnswer, Streamed: true, TTFT: time.Millisecond,
		Chunks: []probe.Chunk{{At: time.Millisecond, Tokens: 1}}, EndToEnd: 2 * time.Millisecond, Err: errors.New("assertion failed")})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var wrong []string
	goodputBad := 0.0
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range mt.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			switch {
			case mf.GetName() == "llm_probe_requests_total" && labels["outcome"] == "wrong_answer":
				wrong = append(wrong, labels["probe"])
				if labels["probe"] == "canary" && mt.GetCounter().GetValue() != 1 {
					t.Errorf("canary wrong_answer = %v", mt.GetCounter().GetValue())
				}
			case mf.GetName() == "llm_probe_slo_requests_total" && labels["probe"] == "canary" && labels["slo"] == "goodput" && labels["result"] == "bad":
				goodputBad = mt.GetCounter().GetValue()
			}
		}
	}
	if strings.Join(wrong, ",") != "canary" {
		t.Errorf("wrong_answer series for %v, want the asserting probe only", wrong)
	}
	if goodputBad != 1 {
		t.Errorf("goodput bad = %v, want 1", goodputBad)
	}
}

func TestAnswerMetrics(t *testing.T) {
	m := NewAnswerMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	m.Add(AnswerSeries{Target: "t", Probe: "canary", Model: "m", Assertions: []string{"contains", "schema"}, Histograms: HistogramsClassic})
	m.Add(AnswerSeries{Target: "t", Probe: "plain", Model: "m", Histograms: HistogramsClassic})
	m.Observe("t", "canary", &probe.Result{Outcome: probe.OutcomeWrongAnswer,
		AssertionFailures: []probe.AssertionFailure{{Name: "schema"}, {Name: "unknown"}}})
	// No reasoning yet: no reasoning series for anyone.
	if n := testutil.CollectAndCount(m, "llm_probe_time_to_first_answer_token_seconds"); n != 0 {
		t.Fatalf("%d reasoning series before any reasoning", n)
	}
	m.Observe("t", "plain", &probe.Result{Outcome: probe.OutcomeSuccess, Streamed: true,
		TTFT: 100 * time.Millisecond, Chunks: []probe.Chunk{{At: 100 * time.Millisecond, Tokens: 1}, {At: 2 * time.Second, Tokens: 1}},
		Reasoning: probe.Reasoning{Seen: true, FirstReasoning: 100 * time.Millisecond, FirstAnswer: 2 * time.Second, Tokens: 40, HasTokens: true}})
	m.Observe("t", "plain", &probe.Result{Outcome: probe.OutcomeTimeout, Streamed: true,
		Reasoning: probe.Reasoning{Seen: true, FirstReasoning: time.Second, Tokens: 5, HasTokens: true}})
	if err := testutil.CollectAndCompare(m, strings.NewReader(`
# HELP llm_probe_assertion_failures_total Answers that failed the probe's assertion, by assertion name; the request counts as outcome wrong_answer.
# TYPE llm_probe_assertion_failures_total counter
llm_probe_assertion_failures_total{assertion="contains",model="m",probe="canary",target="t"} 0
llm_probe_assertion_failures_total{assertion="schema",model="m",probe="canary",target="t"} 1
# HELP llm_probe_reasoning_tokens_total Reasoning tokens the server reported (usage completion_tokens_details.reasoning_tokens).
# TYPE llm_probe_reasoning_tokens_total counter
llm_probe_reasoning_tokens_total{model="m",probe="plain",target="t"} 45
`), "llm_probe_assertion_failures_total", "llm_probe_reasoning_tokens_total"); err != nil {
		t.Error(err)
	}
	for name, sum := range map[string]float64{
		"llm_probe_time_to_first_reasoning_token_seconds": 0.1,
		"llm_probe_time_to_first_answer_token_seconds":    2,
		"llm_probe_time_to_second_token_seconds":          2,
	} {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == name {
				h := mf.GetMetric()[0].GetHistogram()
				if h.GetSampleCount() != 1 || h.GetSampleSum() != sum {
					t.Errorf("%s: count %d sum %v, want 1 observation of %v (successes only)", name, h.GetSampleCount(), h.GetSampleSum(), sum)
				}
			}
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	m.Remove("t", "plain")
	if n := testutil.CollectAndCount(m, "llm_probe_reasoning_tokens_total"); n != 0 {
		t.Errorf("%d series left after Remove", n)
	}
}
