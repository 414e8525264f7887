// Package dashboards holds llm-prober's Grafana dashboards and reads their
// queries back for tests (here, and test/e2e's runs against real
// Prometheus).
//
// The JSON files beside this package are generated from the monitoring
// mixin: edit mixin/dashboards/*.libsonnet and run `make mixin`.
// mixin's TestGeneratedFilesUpToDate fails when the files and the mixin
// disagree.
//
// Every dashboard works both imported through the UI and provisioned from
// files: the data source is a template variable of type datasource (no
// __inputs, which file provisioning does not resolve), every panel and
// query refers to it as ${datasource}, and the uid is fixed.
package dashboards

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Dashboard is the subset of Grafana's dashboard model the dashboards use.
type Dashboard struct {
	UID           string       `json:"uid"`
	Title         string       `json:"title"`
	Description   string       `json:"description,omitempty"`
	Tags          []string     `json:"tags"`
	Editable      bool         `json:"editable"`
	GraphTooltip  int          `json:"graphTooltip"` // 1: shared crosshair
	Time          TimeRange    `json:"time"`
	Refresh       string       `json:"refresh"`
	SchemaVersion int          `json:"schemaVersion"`
	Version       int          `json:"version"`
	Links         []Link       `json:"links"`
	Annotations   Annotations  `json:"annotations"`
	Templating    Templating   `json:"templating"`
	Panels        []Panel      `json:"panels"`
	Timepicker    struct{}     `json:"timepicker"`
	Timezone      string       `json:"timezone"`
	WeekStart     string       `json:"weekStart"`
	FiscalYear    int          `json:"fiscalYearStartMonth"`
	LiveNow       bool         `json:"liveNow"`
	ID            *json.Number `json:"id"` // null: Grafana assigns one
}

// TimeRange is the default time range.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Link links dashboards by tag.
type Link struct {
	Title       string   `json:"title"`
	Type        string   `json:"type"`
	Tags        []string `json:"tags"`
	AsDropdown  bool     `json:"asDropdown"`
	IncludeVars bool     `json:"includeVars"`
	KeepTime    bool     `json:"keepTime"`
	TargetBlank bool     `json:"targetBlank"`
}

// Annotations holds annotation queries.
type Annotations struct {
	List []Annotation `json:"list"`
}

// Annotation is a Prometheus annotation query.
type Annotation struct {
	Name        string        `json:"name"`
	Datasource  DatasourceRef `json:"datasource"`
	Enable      bool          `json:"enable"`
	Hide        bool          `json:"hide"`
	IconColor   string        `json:"iconColor"`
	Expr        string        `json:"expr"`
	Step        string        `json:"step"`
	TitleFormat string        `json:"titleFormat"`
	TextFormat  string        `json:"textFormat"`
	TagKeys     string        `json:"tagKeys"`
	UseValueAs  bool          `json:"useValueForTime"`
}

// Templating holds the template variables.
type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a template variable: the datasource variable or a
// label_values query variable.
type Variable struct {
	Name       string         `json:"name"`
	Label      string         `json:"label"`
	Type       string         `json:"type"`
	Query      string         `json:"query"`
	Definition string         `json:"definition,omitempty"`
	Datasource *DatasourceRef `json:"datasource,omitempty"`
	Current    struct{}       `json:"current"`
	Options    []struct{}     `json:"options"`
	Hide       int            `json:"hide"`
	Refresh    int            `json:"refresh"` // 1: on load, 2: on time range change
	Regex      string         `json:"regex"`
	Multi      bool           `json:"multi"`
	IncludeAll bool           `json:"includeAll"`
	AllValue   string         `json:"allValue,omitempty"`
	Sort       int            `json:"sort"`
}

// DatasourceRef points at a data source; always the ${datasource} variable.
type DatasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Panel is a Grafana panel or a row.
type Panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	GridPos     GridPos        `json:"gridPos"`
	Datasource  *DatasourceRef `json:"datasource,omitempty"`
	Targets     []Target       `json:"targets,omitempty"`
	FieldConfig *FieldConfig   `json:"fieldConfig,omitempty"`
	Options     map[string]any `json:"options,omitempty"`
	Collapsed   *bool          `json:"collapsed,omitempty"` // rows only
	Panels      *[]Panel       `json:"panels,omitempty"`    // rows only
}

// GridPos places a panel on the 24-column grid.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Target is one Prometheus query of a panel.
type Target struct {
	RefID        string        `json:"refId"`
	Datasource   DatasourceRef `json:"datasource"`
	Expr         string        `json:"expr"`
	LegendFormat string        `json:"legendFormat"`
	Instant      bool          `json:"instant"`
	Range        bool          `json:"range"`
	Format       string        `json:"format,omitempty"`
}

// FieldConfig sets units, ranges, thresholds and overrides.
type FieldConfig struct {
	Defaults  FieldDefaults `json:"defaults"`
	Overrides []Override    `json:"overrides"`
}

// FieldDefaults are the default field options.
type FieldDefaults struct {
	Unit       string         `json:"unit,omitempty"`
	Min        *float64       `json:"min,omitempty"`
	Max        *float64       `json:"max,omitempty"`
	Decimals   *int           `json:"decimals,omitempty"`
	Thresholds *Thresholds    `json:"thresholds,omitempty"`
	Mappings   []any          `json:"mappings"`
	Custom     map[string]any `json:"custom,omitempty"`
	Color      map[string]any `json:"color,omitempty"`
}

// Thresholds colour a value by steps.
type Thresholds struct {
	Mode  string `json:"mode"`
	Steps []Step `json:"steps"`
}

// Step is one threshold step; Value nil is the base.
type Step struct {
	Color string   `json:"color"`
	Value *float64 `json:"value"`
}

// Override changes field options for matching fields.
type Override struct {
	Matcher    Matcher    `json:"matcher"`
	Properties []Property `json:"properties"`
}

// Matcher selects fields.
type Matcher struct {
	ID      string `json:"id"`
	Options string `json:"options"`
}

// Property is one overridden option.
type Property struct {
	ID    string `json:"id"`
	Value any    `json:"value"`
}

// DatasourceVariable is the name of the datasource template variable.
const DatasourceVariable = "datasource"

// HistogramOr joins the two forms of a histogram query: the native
// histogram's first, the classic series' after it, each on its own line
// around a top-level "or" (docs/deployment.md, "Histogram modes"). The
// mixin writes every top-level two-form query with it (histogramOr in
// mixin/lib/promql.libsonnet, kept equal by mixin's TestHistogramOr), so
// tests split queries at it to check each form on its own.
const HistogramOr = "\nor\n"

// Query is one PromQL expression of a dashboard, with where it comes from.
type Query struct {
	// Where names the panel (or variable, or annotation) and refId.
	Where string
	// Expr is the expression as written in the dashboard, with template
	// variables.
	Expr string
	// Panel is the panel's title ("" for variables and annotations).
	Panel string
	// Kind is "panel", "variable" or "annotation".
	Kind string
}

var alertsRE = regexp.MustCompile(`\bALERTS(?:_FOR_STATE)?\s*[{\[]`)

// ReadsAlerts reports whether the query reads Prometheus' ALERTS series
// (the alert annotation, the firing-alerts panel): it has data only while
// an alert is active, so tests that want data from every query check
// these once an alert fires.
func (q Query) ReadsAlerts() bool { return alertsRE.MatchString(q.Expr) }

// Queries returns every PromQL expression of a parsed dashboard: panel
// targets, the series selectors of label_values() variables, and
// annotation queries.
func Queries(d *Dashboard) []Query {
	var qs []Query
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		if sel, ok := LabelValuesSelector(v.Query); ok {
			qs = append(qs, Query{Where: "variable " + v.Name, Expr: sel, Kind: "variable"})
		} else {
			qs = append(qs, Query{Where: "variable " + v.Name, Expr: v.Query, Kind: "variable"})
		}
	}
	for _, a := range d.Annotations.List {
		qs = append(qs, Query{Where: "annotation " + a.Name, Expr: a.Expr, Kind: "annotation"})
	}
	var walk func(ps []Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				qs = append(qs, Query{Where: fmt.Sprintf("panel %d %q ref %s", p.ID, p.Title, t.RefID), Expr: t.Expr, Panel: p.Title, Kind: "panel"})
			}
			if p.Panels != nil {
				walk(*p.Panels)
			}
		}
	}
	walk(d.Panels)
	return qs
}

var labelValuesRE = regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// LabelValuesSelector returns the series selector of a
// label_values(selector, label) variable query.
func LabelValuesSelector(q string) (string, bool) {
	m := labelValuesRE.FindStringSubmatch(q)
	if m == nil {
		return "", false
	}
	return m[1], true
}

var variableRE = regexp.MustCompile(`\$\{([a-zA-Z0-9_]+)(?::[a-z]+)?\}|\$([a-zA-Z0-9_]+)`)

// Substitute replaces Grafana template variables ($name, ${name},
// ${name:fmt}) in expr with values[name]. It returns an error naming any
// variable without a value.
func Substitute(expr string, values map[string]string) (string, error) {
	var missing []string
	out := variableRE.ReplaceAllStringFunc(expr, func(m string) string {
		sub := variableRE.FindStringSubmatch(m)
		name := sub[1]
		if name == "" {
			name = sub[2]
		}
		v, ok := values[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		return "", fmt.Errorf("no value for template variable(s) %s in %q", strings.Join(missing, ", "), expr)
	}
	return out, nil
}
