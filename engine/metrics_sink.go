package engine

import (
	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/probe"
)

// MetricsSink feeds the collectors beside ProbeMetrics, which export what
// some probes see and others never do (assertion failures, reasoning,
// rate-limit headers), from the same results.
func MetricsSink(answers *collector.AnswerMetrics, rateLimits *collector.RateLimitMetrics) Sink {
	return metricsSink{answers, rateLimits}
}

type metricsSink struct {
	answers    *collector.AnswerMetrics
	rateLimits *collector.RateLimitMetrics
}

func (s metricsSink) Add(i Info) {
	s.answers.Add(collector.AnswerSeries{Target: i.Target, Probe: i.Probe, Model: i.Model, Assertions: i.Assertions, Histograms: i.Histograms})
	s.rateLimits.Add(i.Target, i.Probe)
}

func (s metricsSink) Remove(target, probeName string) {
	s.answers.Remove(target, probeName)
	s.rateLimits.Remove(target, probeName)
}

func (s metricsSink) Record(target, probeName string, _ *probe.Request, res *probe.Result) {
	s.answers.Observe(target, probeName, res)
	s.rateLimits.Observe(target, res)
}
