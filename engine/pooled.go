package engine

import (
	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/probe"
)

// PooledSink feeds the gauges of embedding and rerank probes
// (collector.PooledMetrics) as a sink, so the probe metrics need not know
// about them.
func PooledSink(m *collector.PooledMetrics) Sink { return pooledSink{m} }

type pooledSink struct{ m *collector.PooledMetrics }

func (s pooledSink) Add(i Info)                      { s.m.Add(i.Target, i.Probe, i.Model, i.Protocol) }
func (s pooledSink) Remove(target, probeName string) { s.m.Remove(target, probeName) }
func (s pooledSink) Record(target, probeName string, _ *probe.Request, res *probe.Result) {
	s.m.Observe(target, probeName, res)
}
