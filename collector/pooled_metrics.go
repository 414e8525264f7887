package collector

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/probe"
)

// PooledMetrics are the gauges of embedding and rerank probes, beside the
// probe metrics every protocol has: what the last good answer held. A
// model swapped behind a name shows as a dimension that changes; a
// reranker that truncates as a result count that drops (both also end in
// wrong_answer when the target states what to expect).
type PooledMetrics struct {
	dim, results *prometheus.Desc
	probeFamily[*pooledSeries]
}

// pooledSeries is a probe's one gauge: the dimension of an embedding
// probe, the result count of a rerank probe.
type pooledSeries struct {
	model  string
	rerank bool
	value  *gauge
	// set once a successful answer arrived: absent before, as the
	// blackbox-style "last" gauges are.
	set atomic.Bool
}

// NewPooledMetrics returns an empty collector; probes appear through Add.
func NewPooledMetrics() *PooledMetrics {
	l := []string{"target", "probe", "model"}
	m := &PooledMetrics{
		dim: prometheus.NewDesc("llm_probe_embedding_dimension",
			"Dimension of the vectors of the probe's last successful embedding answer.", l, nil),
		results: prometheus.NewDesc("llm_probe_rerank_results",
			"Results of the probe's last successful rerank answer.", l, nil),
	}
	m.descs = []*prometheus.Desc{m.dim, m.results}
	return m
}

// Add announces a probe; only embedding and rerank protocols get series.
// A probe that exists with the same model and protocol keeps its value.
func (m *PooledMetrics) Add(target, probeName, model, protocol string) {
	p, ok := probe.LookupProtocol(protocol)
	if !ok || (p.Settings != probe.SettingsEmbedding && p.Settings != probe.SettingsRerank) {
		m.Remove(target, probeName)
		return
	}
	rerank := p.Settings == probe.SettingsRerank
	m.put(target, probeName, func(old *pooledSeries) bool {
		return old.rerank == rerank && old.model == model
	}, func() *pooledSeries {
		d := m.dim
		if rerank {
			d = m.results
		}
		return &pooledSeries{model: model, rerank: rerank, value: newGauge(d, newProbeLabels(target, probeName, model))}
	})
}

// Observe takes one result; only successful pooled answers set a value.
func (m *PooledMetrics) Observe(target, probeName string, r *probe.Result) {
	if r == nil || r.Outcome != probe.OutcomeSuccess || r.Pooled == nil {
		return
	}
	s, ok := m.get(target, probeName)
	if !ok {
		return
	}
	v := float64(r.Pooled.Dimension)
	if s.rerank {
		v = float64(r.Pooled.Items)
	}
	s.value.Set(v)
	s.set.Store(true)
}

func (s *pooledSeries) collect(ch chan<- prometheus.Metric) {
	if s.set.Load() {
		ch <- s.value
	}
}
