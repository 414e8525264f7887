package collector

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llm-prober/llm-prober/probe"
)

// AnswerMetrics exports what probes learn about answers beyond their
// latency: which of a probe's assertions failed, and for reasoning models
// when thinking and answering began. It lives beside ProbeMetrics, fed by
// the same results (engine.MetricsSink), so that probes without
// assertions or reasoning carry none of these series.
type AnswerMetrics struct {
	d answerDescs
	probeFamily[*answerSeries]
}

type answerDescs struct {
	assertFailures, firstReasoning, firstAnswer, secondToken, reasoningTokens *prometheus.Desc
}

// NewAnswerMetrics is an empty collector; Add announces each probe.
func NewAnswerMetrics() *AnswerMetrics {
	base := []string{"target", "probe", "model"}
	m := &AnswerMetrics{
		d: answerDescs{
			assertFailures: prometheus.NewDesc("llm_probe_assertion_failures_total",
				"Answers that failed the probe's assertion, by assertion name; the request counts as outcome wrong_answer.",
				append(slices.Clone(base), "assertion"), nil),
			firstReasoning: prometheus.NewDesc("llm_probe_time_to_first_reasoning_token_seconds",
				"Time from the request to the first chunk carrying reasoning (reasoning_content or reasoning), for successful streams of reasoning models.", base, nil),
			firstAnswer: prometheus.NewDesc("llm_probe_time_to_first_answer_token_seconds",
				"Time from the request to the first chunk carrying answer content, for successful streams of reasoning models.", base, nil),
			secondToken: prometheus.NewDesc("llm_probe_time_to_second_token_seconds",
				"Time from the request to the arrival of the second output token, for successful streams of probes that have seen reasoning.", base, nil),
			reasoningTokens: prometheus.NewDesc("llm_probe_reasoning_tokens_total",
				"Reasoning tokens the server reported (usage completion_tokens_details.reasoning_tokens).", base, nil),
		},
	}
	m.descs = []*prometheus.Desc{m.d.assertFailures, m.d.firstReasoning, m.d.firstAnswer, m.d.secondToken, m.d.reasoningTokens}
	return m
}

// AnswerSeries identifies one probe and what it checks.
type AnswerSeries struct {
	Target, Probe, Model string
	// Assertions names the probe's assertions (all counters start at 0).
	Assertions []string
	// Histograms is the target's histogram form (ProbeSeries.Histograms).
	Histograms string
}

type answerSeries struct {
	d        *answerDescs
	spec     AnswerSeries
	labels   probeLabels
	failures map[string]*counter
	always   []prometheus.Metric
	// reasoning is created when the probe first sees a reasoning chunk.
	reasoning lazy[reasoningSeries]
}

type reasoningSeries struct {
	firstReasoning, firstAnswer, secondToken prometheus.Histogram
	tokens                                   *counter
	metrics                                  []prometheus.Metric
}

// Add creates or keeps a probe's series; a changed model, assertion list
// or histogram form replaces them.
func (m *AnswerMetrics) Add(as AnswerSeries) {
	m.put(as.Target, as.Probe, func(old *answerSeries) bool {
		return old.spec.Model == as.Model && slices.Equal(old.spec.Assertions, as.Assertions) &&
			histogramForm(old.spec.Histograms) == histogramForm(as.Histograms)
	}, func() *answerSeries { return m.newSeries(as) })
}

func (m *AnswerMetrics) newSeries(as AnswerSeries) *answerSeries {
	s := &answerSeries{d: &m.d, spec: as, labels: newProbeLabels(as.Target, as.Probe, as.Model), failures: map[string]*counter{}}
	created := timestamppb.Now()
	for _, name := range as.Assertions {
		c := newCounter(m.d.assertFailures, s.labels.with("assertion", strings.ToValidUTF8(name, "\uFFFD")), created)
		s.failures[name] = c
		s.always = append(s.always, c)
	}
	return s
}

// Observe records one result of a probe that was added.
func (m *AnswerMetrics) Observe(target, probeName string, r *probe.Result) {
	if r == nil {
		return
	}
	s, ok := m.get(target, probeName)
	if !ok {
		return
	}
	for _, f := range r.AssertionFailures {
		if c := s.failures[f.Name]; c != nil {
			c.Inc()
		}
	}
	rs := s.reasoning.load()
	if rs == nil {
		if !r.Reasoning.Seen {
			return
		}
		rs = s.reasoning.get(s.newReasoning)
	}
	if r.Reasoning.HasTokens && r.Reasoning.Tokens > 0 {
		rs.tokens.Add(float64(r.Reasoning.Tokens))
	}
	// Latencies of successful streams only, as TTFT (docs/metrics.md 1.3).
	if !r.Streamed || r.Outcome != probe.OutcomeSuccess {
		return
	}
	if d := r.Reasoning.FirstReasoning; d > 0 {
		rs.firstReasoning.Observe(d.Seconds())
	}
	if d := r.Reasoning.FirstAnswer; d > 0 {
		rs.firstAnswer.Observe(d.Seconds())
	}
	if d, ok := r.SecondToken(); ok {
		rs.secondToken.Observe(d.Seconds())
	}
}

func (s *answerSeries) newReasoning() *reasoningSeries {
	d := s.d
	form := histogramForm(s.spec.Histograms)
	rs := &reasoningSeries{
		firstReasoning: newHistogram("first_reasoning", ttftBuckets(), form),
		firstAnswer:    newHistogram("first_answer", ttftBuckets(), form),
		secondToken:    newHistogram("second_token", ttftBuckets(), form),
		tokens:         newCounter(d.reasoningTokens, s.labels, timestamppb.Now()),
	}
	rs.metrics = []prometheus.Metric{
		newLabelled(d.firstReasoning, rs.firstReasoning, s.labels),
		newLabelled(d.firstAnswer, rs.firstAnswer, s.labels),
		newLabelled(d.secondToken, rs.secondToken, s.labels),
		rs.tokens,
	}
	return rs
}

func (s *answerSeries) collect(ch chan<- prometheus.Metric) {
	for _, metric := range s.always {
		ch <- metric
	}
	if rs := s.reasoning.load(); rs != nil {
		for _, metric := range rs.metrics {
			ch <- metric
		}
	}
}

// seriesOutcomes are the outcomes a probe's llm_probe_requests_total
// has: its protocol's, and wrong_answer when the probe asserts.
func seriesOutcomes(ps ProbeSeries) []probe.Outcome {
	out := protocolOutcomes(ps.Protocol)
	if ps.Asserts && !slices.Contains(out, probe.OutcomeWrongAnswer) {
		out = append(slices.Clone(out), probe.OutcomeWrongAnswer)
	}
	return out
}

// baseLabels makes the store sort the probes of the family (ordered).
func (s *answerSeries) baseLabels() probeLabels { return s.labels }
