package collector

import (
	"strings"
	"sync"

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

	mu     sync.RWMutex
	series map[pooledKey]*pooledSeries
}

type pooledKey struct{ target, probe string }

type pooledSeries struct {
	labels []string
	rerank bool
	// set once a successful answer arrived: absent before, as the
	// blackbox-style "last" gauges are.
	mu    sync.Mutex
	set   bool
	value float64
}

// NewPooledMetrics returns an empty collector; probes appear through Add.
func NewPooledMetrics() *PooledMetrics {
	l := []string{"target", "probe", "model"}
	return &PooledMetrics{
		dim: prometheus.NewDesc("llm_probe_embedding_dimension",
			"Dimension of the vectors of the probe's last successful embedding answer.", l, nil),
		results: prometheus.NewDesc("llm_probe_rerank_results",
			"Results of the probe's last successful rerank answer.", l, nil),
		series: map[pooledKey]*pooledSeries{},
	}
}

// Add announces a probe; only embedding and rerank protocols get series.
// A probe that exists with the same model and protocol keeps its value.
func (m *PooledMetrics) Add(target, probeName, model, protocol string) {
	p, ok := probe.LookupProtocol(protocol)
	if !ok || (p.Settings != probe.SettingsEmbedding && p.Settings != probe.SettingsRerank) {
		m.Remove(target, probeName)
		return
	}
	k := pooledKey{target, probeName}
	// Own helpers rather than probe_metrics.go's, so the two files stay
	// independent.
	labels := []string{strings.ToValidUTF8(target, "\uFFFD"), strings.ToValidUTF8(probeName, "\uFFFD"), strings.ToValidUTF8(model, "\uFFFD")}
	rerank := p.Settings == probe.SettingsRerank
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.series[k]; ok && old.rerank == rerank && old.labels[2] == labels[2] {
		return
	}
	m.series[k] = &pooledSeries{labels: labels, rerank: rerank}
}

// Remove drops a probe's series.
func (m *PooledMetrics) Remove(target, probeName string) {
	m.mu.Lock()
	delete(m.series, pooledKey{target, probeName})
	m.mu.Unlock()
}

// Observe takes one result; only successful pooled answers set a value.
func (m *PooledMetrics) Observe(target, probeName string, r *probe.Result) {
	if r == nil || r.Outcome != probe.OutcomeSuccess || r.Pooled == nil {
		return
	}
	m.mu.RLock()
	s := m.series[pooledKey{target, probeName}]
	m.mu.RUnlock()
	if s == nil {
		return
	}
	v := float64(r.Pooled.Dimension)
	if s.rerank {
		v = float64(r.Pooled.Items)
	}
	s.mu.Lock()
	s.set, s.value = true, v
	s.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (m *PooledMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.dim
	ch <- m.results
}

// Collect implements prometheus.Collector.
func (m *PooledMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.RLock()
	all := make([]*pooledSeries, 0, len(m.series))
	for _, s := range m.series {
		all = append(all, s)
	}
	m.mu.RUnlock()
	for _, s := range all {
		s.mu.Lock()
		set, v := s.set, s.value
		s.mu.Unlock()
		if !set {
			continue
		}
		d := m.dim
		if s.rerank {
			d = m.results
		}
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, s.labels...)
	}
}
