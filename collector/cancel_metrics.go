package collector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llm-prober/llm-prober/probe"
)

// CancelMetrics exports what cancellation probes (probe config cancel:)
// measure: how long the server took to free the slot of a request the
// probe cut, and how each cut ended (released, leaked, unknown). Fed by
// the engine's cancel sink; probes without cancel: have no series.
type CancelMetrics struct {
	release, total *prometheus.Desc
	probeFamily[*cancelSeries]
}

// CancelSeries identifies one cancellation probe.
type CancelSeries struct {
	Target, Probe, Model string
	// Histograms is the target's histogram form (ProbeSeries.Histograms).
	Histograms string
}

type cancelSeries struct {
	spec    CancelSeries
	release prometheus.Histogram
	results map[string]*counter
	metrics []prometheus.Metric
}

// cancelReleaseBuckets: a server that frees the slot at once shows in
// the first bucket (the poll interval bounds the resolution, 250 ms by
// default); tens of seconds is a slot held until some timeout.
func cancelReleaseBuckets() []float64 {
	return []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
}

// NewCancelMetrics is an empty collector; Add announces each probe.
func NewCancelMetrics() *CancelMetrics {
	base := []string{"target", "probe", "model"}
	m := &CancelMetrics{
		release: prometheus.NewDesc("llm_probe_cancel_release_seconds",
			"Time from the probe cutting its stream to the first reading of the target's llm_server_requests_running below its value before the cut (resolution: the probe's cancel.poll_interval).",
			base, nil),
		total: prometheus.NewDesc("llm_probe_cancellations_total",
			"Streams the probe cut on purpose, by whether the server freed the slot within cancel.release_timeout (released), did not (leaked), or its metrics could not tell (unknown).",
			append(base, "result"), nil),
	}
	m.descs = []*prometheus.Desc{m.release, m.total}
	return m
}

// Add creates or keeps a probe's series; a changed model or histogram
// form replaces them. Every result's counter starts at zero, so an
// increase() over the first leak works.
func (m *CancelMetrics) Add(cs CancelSeries) {
	m.put(cs.Target, cs.Probe, func(old *cancelSeries) bool {
		return old.spec.Model == cs.Model && histogramForm(old.spec.Histograms) == histogramForm(cs.Histograms)
	}, func() *cancelSeries { return m.newSeries(cs) })
}

func (m *CancelMetrics) newSeries(cs CancelSeries) *cancelSeries {
	labels := newProbeLabels(cs.Target, cs.Probe, cs.Model)
	s := &cancelSeries{
		spec:    cs,
		release: newHistogram("cancel_release", cancelReleaseBuckets(), histogramForm(cs.Histograms)),
		results: map[string]*counter{},
	}
	s.metrics = append(s.metrics, newLabelled(m.release, s.release, labels))
	created := timestamppb.Now()
	for _, r := range probe.CancelResults() {
		c := newCounter(m.total, labels.with("result", r), created)
		s.results[r] = c
		s.metrics = append(s.metrics, c)
	}
	return s
}

// Observe records the cancellation of one result, if it was cut and its
// release measured.
func (m *CancelMetrics) Observe(target, probeName string, r *probe.Result) {
	if r == nil || r.Cancel == nil || r.Cancel.Release == "" {
		return
	}
	s, ok := m.get(target, probeName)
	if !ok {
		return
	}
	if c := s.results[r.Cancel.Release]; c != nil {
		c.Inc()
	}
	if r.Cancel.Release == probe.CancelReleased {
		s.release.Observe(r.Cancel.ReleaseAfter.Seconds())
	}
}

func (s *cancelSeries) collect(ch chan<- prometheus.Metric) {
	for _, metric := range s.metrics {
		ch <- metric
	}
}

// ErrNoRunningGauge is a model server's exposition without a metric that
// normalises to llm_server_requests_running.
var ErrNoRunningGauge = errors.New("the server's metrics have no running-requests gauge (llm_server_requests_running)")

// RequestsRunning scrapes target's model-server metrics now, within its
// timeout and ctx's deadline, and returns llm_server_requests_running
// summed over the server's models: what a cancellation probe reads before
// and after its cut. It does not touch what /metrics exports.
func (c *ServerMetrics) RequestsRunning(ctx context.Context, target string) (float64, error) {
	c.mu.RLock()
	var t *serverTarget
	for _, st := range c.targets {
		if st.Name == target {
			t = st
			break
		}
	}
	c.mu.RUnlock()
	if t == nil {
		return 0, fmt.Errorf("target %q has no server_metrics", target)
	}
	var limit time.Duration
	if dl, ok := ctx.Deadline(); ok {
		if limit = time.Until(dl); limit <= 0 {
			return 0, context.DeadlineExceeded
		}
	}
	res, err := c.scrape(t, limit)
	if err != nil {
		return 0, err
	}
	sum, found := 0.0, false
	for _, s := range res.samples {
		if s.out == serverRequestsRunning {
			sum += s.value
			found = true
		}
	}
	if !found {
		return 0, ErrNoRunningGauge
	}
	return sum, nil
}
