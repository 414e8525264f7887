package engine

import (
	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/probe"
)

// PrefixSink feeds collector.PrefixMetrics from the runs of session and
// shared_prefix probes; other probes get none of its series.
func PrefixSink(m *collector.PrefixMetrics) SequenceSink { return prefixSink{m} }

type prefixSink struct{ m *collector.PrefixMetrics }

func (s prefixSink) Add(i Info) {
	if i.Sequence {
		s.m.Add(collector.PrefixSeries{Target: i.Target, Probe: i.Probe, Model: i.Model, Mode: i.SequenceMode, Histograms: i.Histograms})
	} else {
		s.m.Remove(i.Target, i.Probe) // a probe that stopped being one
	}
}

func (s prefixSink) Remove(target, probeName string) { s.m.Remove(target, probeName) }

func (prefixSink) Record(string, string, *probe.Request, *probe.Result) {}

func (s prefixSink) RecordSequence(target, probeName string, steps []Step) {
	run := make([]collector.PrefixRequest, len(steps))
	for i, st := range steps {
		run[i] = collector.PrefixRequest{Cache: st.Cache, Result: st.Result}
	}
	s.m.ObserveRun(target, probeName, run)
}
