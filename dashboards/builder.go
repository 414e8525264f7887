package dashboards

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// builder lays panels out on Grafana's 24-column grid, left to right and
// top to bottom, and numbers them.
type builder struct {
	d      *Dashboard
	nextID int
	x, y   int
	rowH   int // height of the tallest panel in the current line
}

func newBuilder(uid, title, description string, vars ...Variable) *builder {
	d := &Dashboard{
		UID:           uid,
		Title:         title,
		Description:   description,
		Tags:          []string{"llm-prober", "llm", "inference"},
		Editable:      true,
		GraphTooltip:  1,
		Time:          TimeRange{From: "now-3h", To: "now"},
		Refresh:       "30s",
		SchemaVersion: 39,
		Version:       1,
		Links: []Link{{
			Title: "llm-prober dashboards", Type: "dashboards", Tags: []string{"llm-prober"},
			AsDropdown: true, IncludeVars: true, KeepTime: true,
		}},
		Annotations: Annotations{List: []Annotation{{
			Name:        "llm-prober alerts",
			Datasource:  ds,
			Enable:      true,
			IconColor:   "red",
			Expr:        `ALERTS{alertname=~"LLM.*", alertstate="firing", job=~"$job"}`,
			Step:        "60s",
			TitleFormat: "{{alertname}}",
			TextFormat:  "{{target}} {{probe}} {{instance}}",
			TagKeys:     "severity",
		}}},
		Templating: Templating{List: append([]Variable{datasourceVariable()}, vars...)},
		Timezone:   "browser",
	}
	return &builder{d: d, nextID: 1}
}

func datasourceVariable() Variable {
	return Variable{Name: DatasourceVariable, Label: "Data source", Type: "datasource", Query: "prometheus", Refresh: 1}
}

// queryVariable is a multi-value label_values variable with an All option
// that matches everything, including an empty label (".*").
func queryVariable(name, label, selector string) Variable {
	q := fmt.Sprintf("label_values(%s, %s)", selector, name)
	dsRef := ds
	return Variable{
		Name: name, Label: label, Type: "query", Query: q, Definition: q,
		Datasource: &dsRef, Refresh: 2, Multi: true, IncludeAll: true, AllValue: ".*", Sort: 1,
	}
}

// row starts a new row of panels.
func (b *builder) row(title string) {
	b.newline()
	collapsed := false
	b.d.Panels = append(b.d.Panels, Panel{
		ID: b.id(), Type: "row", Title: title, GridPos: GridPos{H: 1, W: 24, X: 0, Y: b.y},
		Collapsed: &collapsed, Panels: &[]Panel{},
	})
	b.y++
}

func (b *builder) newline() {
	if b.x > 0 {
		b.y += b.rowH
		b.x, b.rowH = 0, 0
	}
}

func (b *builder) id() int {
	id := b.nextID
	b.nextID++
	return id
}

// add places p w columns wide and h high after the previous panel, and
// gives it and its queries an id, refIds and the data source.
func (b *builder) add(w, h int, p Panel) {
	if b.x+w > 24 {
		b.newline()
	}
	p.ID = b.id()
	p.GridPos = GridPos{H: h, W: w, X: b.x, Y: b.y}
	dsRef := ds
	p.Datasource = &dsRef
	for i := range p.Targets {
		p.Targets[i].RefID = string(rune('A' + i))
		p.Targets[i].Datasource = ds
		if !p.Targets[i].Instant {
			p.Targets[i].Range = true
		}
	}
	b.d.Panels = append(b.d.Panels, p)
	b.x += w
	b.rowH = max(b.rowH, h)
}

func (b *builder) dashboard() *Dashboard { return b.d }

// q is a range query.
func q(expr, legend string) Target {
	return Target{Expr: expr, LegendFormat: legend}
}

// instant is an instant query for stat panels.
func instant(expr, legend string) Target {
	return Target{Expr: expr, LegendFormat: legend, Instant: true}
}

func f(v float64) *float64 { return &v }

// timeseries is a line chart; unit is a Grafana unit id.
func timeseries(title, description, unit string, targets ...Target) Panel {
	return Panel{
		Type: "timeseries", Title: title, Description: description, Targets: targets,
		FieldConfig: &FieldConfig{
			Defaults: FieldDefaults{
				Unit:     unit,
				Mappings: []any{},
				Custom: map[string]any{
					"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
					"spanNulls": false, "axisSoftMin": 0,
				},
				Color: map[string]any{"mode": "palette-classic"},
			},
			Overrides: []Override{},
		},
		Options: map[string]any{
			"legend":  map[string]any{"displayMode": "table", "placement": "bottom", "showLegend": true, "calcs": []string{"mean", "max", "lastNotNull"}},
			"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
		},
	}
}

// withMin / withMax / withThresholdLines adjust a timeseries panel.
func withMax(p Panel, v float64) Panel {
	p.FieldConfig.Defaults.Max = f(v)
	return p
}

func withStack(p Panel) Panel {
	p.FieldConfig.Defaults.Custom["stacking"] = map[string]any{"mode": "normal", "group": "A"}
	p.FieldConfig.Defaults.Custom["fillOpacity"] = 60
	return p
}

// withThresholdLines draws dashed lines at the given values (red above the
// last one).
func withThresholdLines(p Panel, values ...float64) Panel {
	steps := []Step{{Color: "green"}}
	colors := []string{"orange", "red"}
	for i, v := range values {
		steps = append(steps, Step{Color: colors[min(i, len(colors)-1)], Value: f(v)})
	}
	p.FieldConfig.Defaults.Thresholds = &Thresholds{Mode: "absolute", Steps: steps}
	p.FieldConfig.Defaults.Custom["thresholdsStyle"] = map[string]any{"mode": "dashed"}
	return p
}

// withRightAxis puts the queries with the given refIds on a right-hand axis
// with their own unit.
func withRightAxis(p Panel, unit string, refIDs ...string) Panel {
	for _, id := range refIDs {
		p.FieldConfig.Overrides = append(p.FieldConfig.Overrides, Override{
			Matcher: Matcher{ID: "byFrameRefID", Options: id},
			Properties: []Property{
				{ID: "custom.axisPlacement", Value: "right"},
				{ID: "unit", Value: unit},
				{ID: "custom.lineStyle", Value: map[string]any{"fill": "dash", "dash": []int{10, 10}}},
			},
		})
	}
	return p
}

// stat shows the last value of each series, coloured by thresholds.
func stat(title, description, unit string, thresholds []Step, targets ...Target) Panel {
	return Panel{
		Type: "stat", Title: title, Description: description, Targets: targets,
		FieldConfig: &FieldConfig{
			Defaults: FieldDefaults{
				Unit:       unit,
				Mappings:   []any{},
				Thresholds: &Thresholds{Mode: "absolute", Steps: thresholds},
				Color:      map[string]any{"mode": "thresholds"},
			},
			Overrides: []Override{},
		},
		Options: map[string]any{
			"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
			"colorMode":     "background",
			"graphMode":     "none",
			"textMode":      "value_and_name",
			"orientation":   "auto",
			"justifyMode":   "auto",
		},
	}
}

// withValueMapping maps exact values to text, e.g. 1 → OK.
func withValueMapping(p Panel, texts map[string]string, colors map[string]string) Panel {
	opts := map[string]any{}
	i := 0
	for _, v := range []string{"0", "1"} {
		if t, ok := texts[v]; ok {
			opts[v] = map[string]any{"text": t, "color": colors[v], "index": i}
			i++
		}
	}
	p.FieldConfig.Defaults.Mappings = []any{map[string]any{"type": "value", "options": opts}}
	return p
}

// sel renders a label selector body from matchers, skipping empty ones.
func sel(matchers ...string) string {
	var ms []string
	for _, m := range matchers {
		if m != "" {
			ms = append(ms, m)
		}
	}
	return strings.Join(ms, ", ")
}

// Matchers of the template variables.
const (
	mJob    = `job=~"$job"`
	mTarget = `target=~"$target"`
	mProbe  = `probe=~"$probe"`
	mModel  = `model=~"$model"`
)

// probeSel selects one probe's series by every template variable.
func probeSel(extra ...string) string {
	return sel(append([]string{mJob, mTarget, mProbe, mModel}, extra...)...)
}

// HistogramOr joins the two forms of a histogram query: the native
// histogram's first, the classic series' after it, each on its own line
// around a top-level "or". Which histogram series Prometheus stores depends
// on how it scrapes (docs/deployment.md, "Histogram modes"): classic only
// (_bucket, _count, _sum: native histograms off), native only (the
// histogram under its own name: 2.x --enable-feature=native-histograms, 3.x
// scrape_native_histograms: true) or both (3.x with
// always_scrape_classic_histograms: true). For a histogram exposed in both
// forms, as the prober's are, exactly one form has data in the first two
// modes; in the third both do and "or" keeps the native result, which has
// the same labels, so no line is drawn twice. A histogram exposed only with
// classic buckets (vLLM's) keeps them in every mode, unless Prometheus 3
// converts it (convert_classic_histograms_to_nhcb), when the native form
// reads it. Within a range "or" is decided per step, so a Prometheus
// switched from one mode to another shows its history unbroken.
//
// Tests split queries at HistogramOr to check each form on its own, so
// the alerting and recording rules write their histogram queries the same
// way (alerts/llm-prober-rules.yml).
const HistogramOr = "\nor\n"

// histogramQuantile is the q-quantile of histogram metric over window,
// grouped by by, in both forms. A probe's classic layout includes its own
// SLO thresholds, so classic buckets are summed only within one probe (by
// includes probe) or for histograms whose layout is fixed; native
// histograms have no such limit.
func histogramQuantile(quantile, metric, selector, by, window string) string {
	return eitherForm(
		fmt.Sprintf("histogram_quantile(%s, sum by (%s) (rate(%s{%s}[%s])))", quantile, by, metric, selector, window),
		fmt.Sprintf("histogram_quantile(%s, sum by (%s, le) (rate(%s_bucket{%s}[%s])))", quantile, by, metric, selector, window))
}

// histogramRate is the number of observations per second of histogram
// metric over window, grouped by by, in both forms: histogram_count of the
// native histogram, or the classic _count series.
func histogramRate(metric, selector, by, window string) string {
	return eitherForm(
		fmt.Sprintf("sum by (%s) (histogram_count(rate(%s{%s}[%s])))", by, metric, selector, window),
		fmt.Sprintf("sum by (%s) (rate(%s_count{%s}[%s]))", by, metric, selector, window))
}

// eitherForm joins the native and the classic form of one histogram query;
// every histogram query of the dashboards is built through it.
func eitherForm(native, classic string) string {
	return native + HistogramOr + classic
}

// quantiles are one histogramQuantile query per quantile over Grafana's
// $__rate_interval, legends "p<percentile> <legendPrefix>".
func quantiles(metric, selector, by, legendPrefix string, qs ...string) []Target {
	var ts []Target
	for _, qq := range qs {
		ts = append(ts, q(histogramQuantile(qq, metric, selector, by, "$__rate_interval"),
			fmt.Sprintf("p%s %s", percentile(qq), legendPrefix)))
	}
	return ts
}

// percentile renders a quantile as a percentile: "0.99" → "99".
func percentile(quantile string) string {
	v, err := strconv.ParseFloat(quantile, 64)
	if err != nil {
		panic(err)
	}
	return strconv.FormatFloat(math.Round(v*1e4)/1e2, 'g', -1, 64)
}
