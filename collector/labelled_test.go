package collector

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llm-prober/llm-prober/probe"
)

// The counter and gauge series add as client_golang's do: integers
// exactly, fractions beside them, and a counter refuses to go down.
func TestCounterGauge(t *testing.T) {
	desc := prometheus.NewDesc("c_total", "c", []string{"target", "probe", "model"}, nil)
	created := timestamppb.New(testStart)
	labels := newProbeLabels("t", "p", "m")
	c := newCounter(desc, labels, created)
	c.Inc()
	c.Add(2)
	c.Add(0.5)
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		t.Fatal(err)
	}
	if got := out.GetCounter().GetValue(); got != 3.5 {
		t.Errorf("counter %v, want 3.5", got)
	}
	if got := out.GetCounter().GetCreatedTimestamp().AsTime(); !got.Equal(testStart) {
		t.Errorf("created %v, want %v", got, testStart)
	}
	if len(out.Label) != 3 || out.Label[0].GetName() != "model" || out.Label[2].GetValue() != "t" {
		t.Errorf("labels %v", out.Label)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Add(-1) did not panic")
			}
		}()
		c.Add(-1)
	}()

	g := newGauge(desc, labels)
	g.Set(2)
	g.Add(-0.5)
	out = dto.Metric{}
	if err := g.Write(&out); err != nil {
		t.Fatal(err)
	}
	if got := out.GetGauge().GetValue(); got != 1.5 {
		t.Errorf("gauge %v, want 1.5", got)
	}

	cg := newConstGauge(desc, labels, 0.99)
	out = dto.Metric{}
	if err := cg.Write(&out); err != nil {
		t.Fatal(err)
	}
	if got := out.GetGauge().GetValue(); got != 0.99 {
		t.Errorf("const gauge %v, want 0.99", got)
	}
}

// Extra labels are merged in name order, and pairs from closed sets are
// shared across probes while base pairs belong to one probe.
func TestProbeLabelsWith(t *testing.T) {
	a, b := newProbeLabels("t", "p", "m"), newProbeLabels("t", "q", "m")
	la := a.with("slo", "ttft", "result", "good")
	var names []string
	for _, p := range la {
		names = append(names, p.GetName())
	}
	if want := []string{"model", "probe", "result", "slo", "target"}; !slices.Equal(names, want) {
		t.Errorf("names %v, want %v", names, want)
	}
	lb := b.with("slo", "ttft", "result", "good")
	if la[2] != lb[2] || la[3] != lb[3] {
		t.Error("closed-set pairs are not shared across probes")
	}
	if la[1] != a[1] || lb[1] != b[1] {
		t.Error("base pairs are not shared across a probe's series")
	}
	if got := a.with("reason", "free text"); got[2].GetValue() != "free text" {
		t.Errorf("open value %v", got)
	}
}

// Every counter has a created timestamp, as client_golang's counters do:
// the probe's creation for those made with it, their own for later ones.
func TestCountersCreatedTimestamp(t *testing.T) {
	m := NewProbeMetrics()
	before := time.Now()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", SLO: testSLO})
	reg := newTestRegistry(t, m)
	m.Skipped("sim", "p", "new-reason")
	r := streamedSuccess()
	r.Retry = &probe.Retry{Reason: probe.RetryEOF}
	m.Observe("sim", "p", r)
	// Counters made by their first use: a failure outcome, a mismatch.
	m.Observe("sim", "p", &probe.Result{Outcome: probe.OutcomeTimeout})
	m.OutputLengthMismatch("sim", "p")
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range fams {
		for _, metric := range f.GetMetric() {
			if c := metric.GetCounter(); c != nil {
				n++
				if ct := c.GetCreatedTimestamp(); ct == nil || ct.AsTime().Before(before) || ct.AsTime().After(time.Now()) {
					t.Errorf("%s %v: created %v", f.GetName(), metric.GetLabel(), ct)
				}
			}
		}
	}
	if n < 15 {
		t.Errorf("only %d counters", n)
	}
}
