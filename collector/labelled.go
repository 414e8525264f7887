package collector

import (
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llm-prober/llm-prober/probe"
)

// A probe's series are exposed under descriptors shared by every probe
// (one per metric name, with the variable labels target, probe, model and
// maybe one or two more), so that ProbeMetrics stays a checked collector
// whose series come and go with the config. Each series writes its own
// dto.Metric from label pairs built once: the probe's three base pairs are
// shared by all its series, and pairs whose value comes from a closed set
// (outcome="success", slo="ttft", ...) by every probe. The label slices and
// pairs are never mutated once built, as client_golang's own metrics never
// mutate theirs; a scrape's dto.Metric only points at them.

// probeLabels are a probe's base label pairs, sorted by name as the
// exposition requires: model, probe, target.
type probeLabels []*dto.LabelPair

// newProbeLabels cleans the values to valid UTF-8, as the exposition
// requires of label values, and builds the pairs.
func newProbeLabels(target, probeName, model string) probeLabels {
	v := validUTF8(target, probeName, model)
	return probeLabels{newLabelPair("model", v[2]), newLabelPair("probe", v[1]), newLabelPair("target", v[0])}
}

func newLabelPair(name, value string) *dto.LabelPair {
	return &dto.LabelPair{Name: &name, Value: &value}
}

// with returns the base pairs and the extra name, value pairs in kv, all
// sorted by name; without extras, the base slice itself. The names must
// be the descriptor's variable labels: the registry checks that only when
// pedantic, as the tests' registries are.
func (p probeLabels) with(kv ...string) []*dto.LabelPair {
	if len(kv) == 0 {
		return p
	}
	out := make([]*dto.LabelPair, 0, len(p)+len(kv)/2)
	out = append(out, p...)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, labelPair(kv[i], kv[i+1]))
	}
	slices.SortFunc(out, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// sharedPairs holds the label pairs whose values come from closed sets,
// shared by every probe; read-only after init.
var sharedPairs = func() map[[2]string]*dto.LabelPair {
	m := map[[2]string]*dto.LabelPair{}
	add := func(name string, values ...string) {
		for _, v := range values {
			m[[2]string{name, v}] = newLabelPair(name, v)
		}
	}
	for _, o := range probe.Outcomes() {
		add("outcome", string(o))
	}
	add("slo", sloTTFT, sloTPOT, sloGoodput)
	add("result", "good", "bad")
	add("reason", knownSkipReasons()...)
	add("reason", skipReasonOther)
	add("reason", probe.RetryReasons()...)
	phases := phaseNames()
	add("phase", phases[:]...)
	add("phase", serverTimingPhases[:]...)
	return m
}()

// labelPair is the shared pair of name and value when there is one, else
// a new one.
func labelPair(name, value string) *dto.LabelPair {
	if p, ok := sharedPairs[[2]string{name, value}]; ok {
		return p
	}
	return newLabelPair(name, value)
}

// labelled presents a label-less histogram under a shared descriptor with
// variable labels. That is what lets every probe have its own histogram
// bucket layout: a HistogramVec cannot, because all its children share one
// bucket layout, and ConstLabels would give each probe its own descriptor,
// unknown at registration time.
type labelled struct {
	desc   *prometheus.Desc
	metric prometheus.Metric
	labels []*dto.LabelPair
}

func newLabelled(desc *prometheus.Desc, metric prometheus.Metric, labels []*dto.LabelPair) *labelled {
	return &labelled{desc: desc, metric: metric, labels: labels}
}

func (l *labelled) Desc() *prometheus.Desc { return l.desc }

func (l *labelled) Write(out *dto.Metric) error {
	if err := l.metric.Write(out); err != nil {
		return err
	}
	out.Label = l.labels
	return nil
}

// counter is one counter series: client_golang's counter (integer
// additions in valInt, the rest in valBits, so that Inc never loses
// precision) without a descriptor of its own, written straight under the
// family's descriptor. created is its creation time, exposed as the
// counter's created timestamp; a probe's counters share one.
type counter struct {
	valBits uint64
	valInt  uint64

	desc    *prometheus.Desc
	labels  []*dto.LabelPair
	created *timestamppb.Timestamp
}

func newCounter(desc *prometheus.Desc, labels []*dto.LabelPair, created *timestamppb.Timestamp) *counter {
	return &counter{desc: desc, labels: labels, created: created}
}

// Inc adds 1.
func (c *counter) Inc() { atomic.AddUint64(&c.valInt, 1) }

// Add adds v, which must not be negative.
func (c *counter) Add(v float64) {
	if v < 0 {
		panic("counter cannot decrease in value")
	}
	if i := uint64(v); float64(i) == v {
		atomic.AddUint64(&c.valInt, i)
		return
	}
	for {
		old := atomic.LoadUint64(&c.valBits)
		if atomic.CompareAndSwapUint64(&c.valBits, old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (c *counter) get() float64 {
	return math.Float64frombits(atomic.LoadUint64(&c.valBits)) + float64(atomic.LoadUint64(&c.valInt))
}

func (c *counter) Desc() *prometheus.Desc { return c.desc }

// counterOut is what a scrape of a counter allocates: the dto.Counter and
// the value it points to, in one allocation instead of two.
type counterOut struct {
	c dto.Counter
	v float64
}

func (c *counter) Write(out *dto.Metric) error {
	o := &counterOut{v: c.get()}
	o.c.Value, o.c.CreatedTimestamp = &o.v, c.created
	out.Label = c.labels
	out.Counter = &o.c
	return nil
}

// gauge is one gauge series, as counter is one counter series.
type gauge struct {
	valBits uint64
	desc    *prometheus.Desc
	labels  []*dto.LabelPair
}

func newGauge(desc *prometheus.Desc, labels []*dto.LabelPair) *gauge {
	return &gauge{desc: desc, labels: labels}
}

// Set sets the value to v.
func (g *gauge) Set(v float64) { atomic.StoreUint64(&g.valBits, math.Float64bits(v)) }

func (g *gauge) get() float64 { return math.Float64frombits(atomic.LoadUint64(&g.valBits)) }

// Add adds v (negative to subtract).
func (g *gauge) Add(v float64) {
	for {
		old := atomic.LoadUint64(&g.valBits)
		if atomic.CompareAndSwapUint64(&g.valBits, old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (g *gauge) Desc() *prometheus.Desc { return g.desc }

// gaugeOut is a gauge's counterOut.
type gaugeOut struct {
	g dto.Gauge
	v float64
}

func (g *gauge) Write(out *dto.Metric) error {
	o := &gaugeOut{v: g.get()}
	o.g.Value = &o.v
	out.Label = g.labels
	out.Gauge = &o.g
	return nil
}

// constGauge is a gauge series whose value never changes (a configured
// objective). Its dto.Gauge is built once and shared by every scrape, as
// client_golang's const metrics share theirs; nobody mutates it.
type constGauge struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	value  *dto.Gauge
}

func newConstGauge(desc *prometheus.Desc, labels []*dto.LabelPair, v float64) *constGauge {
	return &constGauge{desc: desc, labels: labels, value: &dto.Gauge{Value: &v}}
}

func (g *constGauge) Desc() *prometheus.Desc { return g.desc }

func (g *constGauge) Write(out *dto.Metric) error {
	out.Label = g.labels
	out.Gauge = g.value
	return nil
}
