package engine

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// metricValue is the value of the first series of family name in reg with
// the labels given as name, value pairs: a counter's or gauge's value, a
// histogram's sample count. ok is false when there is no such series.
func metricValue(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) (v float64, ok bool) {
	t.Helper()
	series := testutil.Gather(t, reg).Series(name, labels...)
	if len(series) == 0 {
		return 0, false
	}
	return sampleValue(series[0]), true
}

// mustMetricValue is metricValue that fails the test when there is no
// such series.
func mustMetricValue(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	v, ok := metricValue(t, reg, name, labels...)
	if !ok {
		t.Fatalf("no %s%v", name, labels)
	}
	return v
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetGauge().GetValue()
}
