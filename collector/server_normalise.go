package collector

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/llm-prober/llm-prober/probe"
)

// maxServerModels bounds the distinct model label values taken from one
// server: a misbehaving exposition must not explode the prober's series.
const maxServerModels = 256

// serverSample is one normalised series before it becomes a ConstMetric.
type serverSample struct {
	out, extra, model string
	value             float64
	// rule is the index, among its kind's rules, of the row that supplied
	// the value: the fixture test proves every row fires on real bytes.
	rule int
}

// normalisation is what one exposition yields.
type normalisation struct {
	kind    string // the configured kind, or the detected one for auto
	samples []serverSample
	// histograms are the re-exported latency histograms (server_latency.go).
	histograms []serverHistogram
	// droppedModels counts model label values beyond maxServerModels.
	droppedModels int
	// truncatedModels counts the distinct model label values that were
	// cut to probe.MaxModelNameBytes (boundLabelValue).
	truncatedModels int
}

// normaliser applies the rule table; built once, used by every scrape.
type normaliser struct {
	rules  map[string][]serverRule
	hrules map[string][]histogramRule
}

func newNormaliser() *normaliser {
	n := &normaliser{rules: map[string][]serverRule{}, hrules: map[string][]histogramRule{}}
	for _, r := range append(serverRules(), latencyCounterRules()...) {
		n.rules[r.kind] = append(n.rules[r.kind], r)
	}
	for _, r := range latencyHistogramRules() {
		n.hrules[r.kind] = append(n.hrules[r.kind], r)
	}
	return n
}

// normalise parses an exposition and applies the rules of kind (detecting
// it first for auto). An exposition without any series the kind's rules
// read is an error: a wrong URL or kind must not look healthy.
func (n *normaliser) normalise(body []byte, openMetrics bool, kind string) (normalisation, error) {
	fams, err := parseExposition(body, openMetrics)
	if err != nil {
		return normalisation{}, err
	}
	if kind == KindAuto || kind == "" {
		kind = detectKind(fams)
		if kind == "" {
			return normalisation{}, fmt.Errorf("cannot detect the server kind: no metric names start with %s (%d metric families)",
				knownPrefixes(), len(fams))
		}
	}
	res := n.apply(fams, kind)
	if len(res.samples) == 0 && len(res.histograms) == 0 {
		return res, fmt.Errorf("no %s metrics in the exposition (%d metric families); is the kind right?", kind, len(fams))
	}
	return res, nil
}

func knownPrefixes() string {
	var p []string
	for _, d := range detectionPrefixes() {
		p = append(p, d.prefix)
	}
	return strings.Join(p, ", ")
}

// detectKind returns the kind of the first detection prefix any family
// name starts with, "" when none does.
func detectKind(fams map[string]*dto.MetricFamily) string {
	for _, d := range detectionPrefixes() {
		for name := range fams {
			if strings.HasPrefix(name, d.prefix) {
				return d.kind
			}
		}
	}
	return ""
}

// parseExposition parses the text format (OpenMetrics after reducing it to
// the text format).
func parseExposition(body []byte, openMetrics bool) (map[string]*dto.MetricFamily, error) {
	if openMetrics {
		body = openMetricsToText(body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("malformed exposition: %w", err)
	}
	return fams, nil
}

// openMetricsToText reduces OpenMetrics to what the text parser accepts:
// only the value is kept after each series (OpenMetrics timestamps are
// float seconds and exemplars follow " # "), and types the text format
// lacks become untyped. Counters exposed as foo_total under "# TYPE foo
// counter" parse as untyped foo_total, which the rules read by that name.
func openMetricsToText(body []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(body))
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		out.Write(openMetricsLine(line))
		out.WriteByte('\n')
	}
	return out.Bytes()
}

func openMetricsLine(line []byte) []byte {
	if len(line) == 0 {
		return line
	}
	if line[0] == '#' {
		f := bytes.Fields(line)
		if len(f) == 4 && string(f[1]) == "TYPE" {
			switch string(f[3]) {
			case "counter", "gauge", "histogram", "summary", "untyped":
			default:
				return fmt.Appendf(nil, "# TYPE %s untyped", f[2])
			}
		}
		return line
	}
	// The series' name and labels end at the first blank outside braces
	// and quotes; label values may contain blanks, braces and " # ".
	end, inBraces, inQuote := -1, false, false
	for i := 0; i < len(line) && end < 0; i++ {
		c := line[i]
		switch {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case inQuote:
		case c == '{':
			inBraces = true
		case c == '}':
			inBraces = false
		case !inBraces && (c == ' ' || c == '\t'):
			end = i
		}
	}
	if end < 0 {
		return line
	}
	rest := bytes.TrimLeft(line[end:], " \t")
	value := rest
	if i := bytes.IndexAny(rest, " \t"); i >= 0 {
		value = rest[:i]
	}
	return append(append(line[:end:end], ' '), value...)
}

// modelValues is one source's aggregate per model label value.
type modelValues map[string]float64

type accumulator struct {
	v float64
	n int
}

// boundLabelValue holds a label value from a model server to the rule
// configured and discovered model names follow (probe.MaxModelNameBytes):
// valid UTF-8, cut on a rune boundary to at most that many bytes. cut
// says it was shortened. A server may send a megabyte where a name is
// meant, and the prober would re-export it in every series of the target.
func boundLabelValue(s string) (v string, cut bool) {
	v = strings.ToValidUTF8(s, "\uFFFD")
	if len(v) <= probe.MaxModelNameBytes {
		return v, false
	}
	n := probe.MaxModelNameBytes
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return v[:n], true
}

// read aggregates the series of one source per model. A model label value
// over the bound is cut (boundLabelValue) and its cut form noted in cut;
// values alike up to the cut aggregate as one model.
func read(fams map[string]*dto.MetricFamily, src source, modelLabel string, agg aggregation, cut map[string]bool) modelValues {
	acc := map[string]*accumulator{}
	add := func(m *dto.Metric, v float64) {
		if math.IsNaN(v) || !matches(m, src.match) {
			return
		}
		model, wasCut := boundLabelValue(labelValue(m, modelLabel))
		if wasCut {
			cut[model] = true
		}
		a := acc[model]
		if a == nil {
			a = &accumulator{v: v}
			acc[model] = a
		} else {
			switch agg {
			case aggMax:
				a.v = max(a.v, v)
			default:
				a.v += v
			}
		}
		a.n++
	}
	if f := fams[src.metric]; f != nil {
		for _, m := range f.GetMetric() {
			if v, ok := fieldOf(f.GetType(), m, src.field); ok {
				add(m, v)
			}
		}
	} else if src.field != fieldValue {
		// A histogram exposed without its TYPE line parses as separate
		// untyped _sum and _count families.
		suffix := "_sum"
		if src.field == fieldCount {
			suffix = "_count"
		}
		if f := fams[src.metric+suffix]; f != nil {
			for _, m := range f.GetMetric() {
				if v, ok := fieldOf(f.GetType(), m, fieldValue); ok {
					add(m, v)
				}
			}
		}
	}
	out := make(modelValues, len(acc))
	for model, a := range acc {
		if agg == aggAvg {
			a.v /= float64(a.n)
		}
		out[model] = a.v
	}
	return out
}

func fieldOf(t dto.MetricType, m *dto.Metric, f field) (float64, bool) {
	switch f {
	case fieldValue:
		switch t {
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), m.Gauge != nil
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), m.Counter != nil
		case dto.MetricType_UNTYPED:
			return m.GetUntyped().GetValue(), m.Untyped != nil
		}
	case fieldSum:
		switch t {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			return m.GetHistogram().GetSampleSum(), m.Histogram != nil
		case dto.MetricType_SUMMARY:
			return m.GetSummary().GetSampleSum(), m.Summary != nil
		}
	case fieldCount:
		switch t {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			h := m.GetHistogram()
			if h.SampleCountFloat != nil {
				return h.GetSampleCountFloat(), true
			}
			return float64(h.GetSampleCount()), h != nil
		case dto.MetricType_SUMMARY:
			return float64(m.GetSummary().GetSampleCount()), m.Summary != nil
		}
	}
	return 0, false
}

func labelValue(m *dto.Metric, name string) string {
	if name == "" {
		return ""
	}
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func matches(m *dto.Metric, match []labelMatch) bool {
	for _, lm := range match {
		if slices.Contains(lm.values, labelValue(m, lm.name)) == lm.negate {
			return false
		}
	}
	return true
}

// apply runs every rule of kind over the parsed families.
func (n *normaliser) apply(fams map[string]*dto.MetricFamily, kind string) normalisation {
	res := normalisation{kind: kind}
	ml := modelLabel(kind)
	taken := map[string]bool{}
	models := map[string]bool{}
	dropped := map[string]bool{}
	cut := map[string]bool{}
	var excluded map[string]map[string]bool // by unlessPrefix, the models it drops
	for ri, r := range n.rules[kind] {
		vals := make([]modelValues, len(r.sources))
		for i, s := range r.sources {
			vals[i] = read(fams, s, ml, r.agg, cut)
		}
		var drop map[string]bool
		if r.unlessPrefix != "" {
			if excluded == nil {
				excluded = map[string]map[string]bool{}
			}
			if excluded[r.unlessPrefix] == nil {
				excluded[r.unlessPrefix] = modelsWithPrefix(fams, r.unlessPrefix, ml)
			}
			drop = excluded[r.unlessPrefix]
		}
		for model, v := range combined(r.combine, vals) {
			if drop[model] {
				continue
			}
			if r.scale != 0 {
				v *= r.scale
			}
			key := r.out + "\xff" + r.extraValue + "\xff" + model
			if taken[key] {
				continue
			}
			if !admitModel(models, dropped, model) {
				continue
			}
			taken[key] = true
			res.samples = append(res.samples, serverSample{out: r.out, extra: r.extraValue, model: model, value: v, rule: ri})
		}
	}
	res.histograms = n.histograms(fams, kind, ml, models, dropped, cut)
	res.droppedModels = len(dropped)
	res.truncatedModels = len(cut)
	res.samples = pairedPhases(res.samples)
	return res
}

// modelsWithPrefix lists the model label values (bounded as read bounds
// them) of every series in a family whose name starts with prefix.
func modelsWithPrefix(fams map[string]*dto.MetricFamily, prefix, modelLabel string) map[string]bool {
	out := map[string]bool{}
	for name, f := range fams {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			model, _ := boundLabelValue(labelValue(m, modelLabel))
			out[model] = true
		}
	}
	return out
}

// pairedPhases drops a phase's request count where the server exposes no
// seconds for that phase (Triton's success counter stands beside every
// phase, but a backend may not report all of them): a count alone would
// suggest a mean of zero.
func pairedPhases(ss []serverSample) []serverSample {
	seconds := map[string]bool{}
	for _, s := range ss {
		if s.out == serverPhaseSeconds {
			seconds[s.extra+"\xff"+s.model] = true
		}
	}
	out := ss[:0]
	for _, s := range ss {
		if s.out == serverPhaseRequests && !seconds[s.extra+"\xff"+s.model] {
			continue
		}
		out = append(out, s)
	}
	return out
}

func combined(c combine, vals []modelValues) modelValues {
	switch c {
	case combineSum:
		out := modelValues{}
		for _, mv := range vals {
			for m, v := range mv {
				out[m] += v
			}
		}
		return out
	case combineRatio:
		out := modelValues{}
		if len(vals) != 2 {
			return out
		}
		for m, num := range vals[0] {
			if den, ok := vals[1][m]; ok && den > 0 {
				out[m] = num / den
			}
		}
		return out
	case combineSumAll:
		out := modelValues{}
		for m := range vals[0] {
			sum, all := 0.0, true
			for _, mv := range vals {
				v, ok := mv[m]
				all = all && ok
				sum += v
			}
			if all {
				out[m] = sum
			}
		}
		return out
	case combineDifference:
		out := modelValues{}
		for m, v := range vals[0] {
			for _, sub := range vals[1:] {
				v -= sub[m]
			}
			out[m] = max(v, 0)
		}
		return out
	default:
		if len(vals) == 0 {
			return nil
		}
		return vals[0]
	}
}

var errTooLarge = errors.New("exposition too large")

// admitModel reports whether model's series may be exported: it is one
// already exported, or there is room for another of maxServerModels;
// a model refused is remembered in dropped, for the log line.
func admitModel(models, dropped map[string]bool, model string) bool {
	if models[model] {
		return true
	}
	if len(models) >= maxServerModels {
		dropped[model] = true
		return false
	}
	models[model] = true
	return true
}
