package collector

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// labelled presents a label-less metric (its own lock-free counter, gauge or
// histogram) under a shared descriptor with variable labels. That is what lets
// every probe have its own histogram bucket layout while ProbeMetrics stays a
// checked collector: Describe sends one fixed descriptor per metric name, and
// the registry verifies each emitted series against it. A HistogramVec cannot
// do this because all its children share one bucket layout, and ConstLabels
// would give each probe its own descriptor, unknown at registration time.
type labelled struct {
	desc   *prometheus.Desc
	metric prometheus.Metric
	// labels are built once by prometheus.MakeLabelPairs (sorted, as the
	// exposition requires) and shared by every Write, as client_golang's own
	// metrics share theirs; nobody mutates them.
	labels []*dto.LabelPair
}

func newLabelled(desc *prometheus.Desc, metric prometheus.Metric, labelValues ...string) *labelled {
	return &labelled{desc: desc, metric: metric, labels: prometheus.MakeLabelPairs(desc, labelValues)}
}

func (l *labelled) Desc() *prometheus.Desc { return l.desc }

func (l *labelled) Write(out *dto.Metric) error {
	if err := l.metric.Write(out); err != nil {
		return err
	}
	out.Label = l.labels
	return nil
}
