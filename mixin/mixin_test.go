package mixin

import (
	"bytes"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"

	"github.com/llm-prober/llm-prober/dashboards"
)

var (
	defaultOnce  sync.Once
	defaultMixin *Mixin
	defaultErr   error
)

// evaluate evaluates the mixin with overrides; the defaults ("") once.
func evaluate(t *testing.T, overrides string) *Mixin {
	t.Helper()
	if overrides == "" {
		defaultOnce.Do(func() { defaultMixin, defaultErr = Evaluate("") })
		if defaultErr != nil {
			t.Fatal(defaultErr)
		}
		return defaultMixin
	}
	m, err := Evaluate(overrides)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGeneratedFilesUpToDate: the committed dashboards, rules file and
// deploy/ copies are exactly what the mixin gives.
func TestGeneratedFilesUpToDate(t *testing.T) {
	files, err := evaluate(t, "").Files()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(name)))
		if err != nil {
			t.Errorf("%s: %v (run `make mixin`)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the mixin's output: run `make mixin` (and edit mixin/, not the generated file)", name)
		}
	}
	onDisk, err := filepath.Glob(filepath.Join("..", DashboardsDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range onDisk {
		if _, ok := files[path.Join(DashboardsDir, filepath.Base(p))]; !ok {
			t.Errorf("%s is not produced by the mixin: add it to grafanaDashboards or remove it", p)
		}
	}
	if len(onDisk) < 2 {
		t.Errorf("only %d dashboards on disk", len(onDisk))
	}
}

// TestHistogramOr: the jsonnet's histogramOr is the string Go tests split
// two-form queries at.
func TestHistogramOr(t *testing.T) {
	out, err := EvaluateSnippet(`(import 'lib/promql.libsonnet').histogramOr`)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got != dashboards.HistogramOr {
		t.Errorf("histogramOr = %q, dashboards.HistogramOr = %q", got, dashboards.HistogramOr)
	}
}

func TestPromQLHelpers(t *testing.T) {
	for snippet, want := range map[string]string{
		`p.number(0.95)`:        `"0.95"`,
		`p.number(14.4)`:        `"14.4"`,
		`p.number(85)`:          `"85"`,
		`p.durationText('10m')`: `"10 minutes"`,
		`p.durationText('1h')`:  `"an hour"`,
		`p.durationText('1w')`:  `"a week"`,
		`p.sortDurations(['1d', '5m', '1h', '5m', '30m'])`: `["5m","30m","1h","1d"]`,
		`p.series('x', ['', 'a="b"', ''])`:                 `"x{a=\"b\"}"`,
		`p.series('x', [''])`:                              `"x"`,
		`p.histogramRate('h', ['a="b"'], 'a', '1m')`:       `"sum by (a) (histogram_count(rate(h{a=\"b\"}[1m])))\nor\nsum by (a) (rate(h_count{a=\"b\"}[1m]))"`,
	} {
		out, err := EvaluateSnippet(`local p = import 'lib/promql.libsonnet'; ` + snippet)
		if err != nil {
			t.Errorf("%s: %v", snippet, err)
			continue
		}
		var got, w any
		_ = json.Unmarshal([]byte(out), &got)
		_ = json.Unmarshal([]byte(want), &w)
		if g, _ := json.Marshal(got); string(g) != mustJSON(t, w) {
			t.Errorf("%s = %s, want %s", snippet, out, want)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type rule struct {
	Record, Alert, Expr string
	Labels              map[string]string
	Annotations         map[string]string
}

func rulesOf(t *testing.T, m *Mixin) []rule {
	t.Helper()
	b, err := m.RulesYAML()
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string
			Rules []rule
		}
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var rs []rule
	for _, g := range f.Groups {
		rs = append(rs, g.Rules...)
	}
	return rs
}

// selectors returns every vector selector of expr, by metric name.
func selectors(t *testing.T, expr string) map[string][][]*labels.Matcher {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Fatalf("%v: %s", err, expr)
	}
	out := map[string][][]*labels.Matcher{}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out[vs.Name] = append(out[vs.Name], vs.LabelMatchers)
		}
		return nil
	})
	return out
}

func hasMatcher(ms []*labels.Matcher, want string) bool {
	return slices.ContainsFunc(ms, func(m *labels.Matcher) bool { return m.String() == want })
}

// TestOverrides: the mixin's _config reaches every selector and threshold
// it names, in the rules and the dashboards.
func TestOverrides(t *testing.T) {
	m := evaluate(t, `{_config+:: {
		proberSelector: 'job="llm-prober"',
		proberJobSelector: 'job="llm-prober"',
		vllmSelector: 'job="vllm"',
		kvCacheSaturatedRatio: 0.9,
		tlsCertExpiryDays: 7,
		ttftRegressionFactor: 2,
		pageSeverity: 'critical',
		dashboardUIDPrefix: 'llm',
		dashboardTags: ['llm-prober', 'team-a'],
		sloBurnRateAlerts+: {
			LLMProbeSLOErrorBudgetBurnSlow+: {
				conditions+: [{ long: '12h', short: '1h', factor: 2 }],
			},
		},
	}}`)

	// Rules read the series they record (level:metric:operations) as they
	// recorded them, from selected series; dashboards select those too.
	checkSelector := func(where, name string, ms []*labels.Matcher) {
		dashboard := !strings.HasPrefix(where, "rule ")
		switch {
		case strings.Contains(name, ":") && !strings.HasPrefix(name, "vllm:") && !(dashboard && strings.HasPrefix(name, "target_probe:")):
		case name == "up" || strings.HasPrefix(name, "llm_") || strings.HasPrefix(name, "target_probe:"):
			if !hasMatcher(ms, `job="llm-prober"`) {
				t.Errorf("%s: %s selector %v lacks job=\"llm-prober\"", where, name, ms)
			}
		case strings.HasPrefix(name, "vllm:"):
			if !hasMatcher(ms, `job="vllm"`) {
				t.Errorf("%s: %s selector %v lacks job=\"vllm\"", where, name, ms)
			}
		}
	}
	byName := map[string]rule{}
	for _, r := range rulesOf(t, m) {
		byName[r.Record+r.Alert] = r
		for name, sels := range selectors(t, r.Expr) {
			for _, ms := range sels {
				checkSelector("rule "+r.Record+r.Alert, name, ms)
			}
		}
	}
	for name, want := range map[string]string{
		"LLMServerKVCacheSaturated":      "> 0.9",
		"LLMProbeTLSCertExpiringSoon":    "< 7 * 86400",
		"LLMProbeTTFTRegressed":          "> 2 *",
		"LLMProbeSLOErrorBudgetBurnSlow": "target_probe:llm_probe_slo_errors:ratio_rate12h > on (job, target, probe, model, slo) clamp_max(2 * target_probe:llm_probe_slo_error_budget:ratio, 0.125)",
	} {
		if !strings.Contains(byName[name].Expr, want) {
			t.Errorf("%s: expr lacks %q: %s", name, want, byName[name].Expr)
		}
	}
	if got := byName["LLMProberDown"].Labels["severity"]; got != "critical" {
		t.Errorf("LLMProberDown severity %q, want the overridden pageSeverity", got)
	}
	// The added burn-rate condition's windows are recorded.
	for _, rec := range []string{"target_probe:llm_probe_slo_errors:ratio_rate12h", "target_probe:llm_probe_slo_errors:ratio_rate1h", "target_probe:llm_probe_slo_requests:increase12h"} {
		if _, ok := byName[rec]; !ok {
			t.Errorf("no recording rule %s for the added condition", rec)
		}
	}

	values := map[string]string{"job": ".*", "target": ".*", "probe": ".*", "model": ".*", "__rate_interval": "1m", "__range": "1h"}
	for name, d := range m.Dashboards {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var dash dashboards.Dashboard
		if err := json.Unmarshal(b, &dash); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(dash.UID, "llm-") || !slices.Equal(dash.Tags, []string{"llm-prober", "team-a"}) {
			t.Errorf("%s: uid %q tags %v: overrides not applied", name, dash.UID, dash.Tags)
		}
		for _, q := range dashboards.Queries(&dash) {
			if q.Kind == "annotation" {
				continue
			}
			expr, err := dashboards.Substitute(q.Expr, values)
			if err != nil {
				t.Fatal(err)
			}
			for metric, sels := range selectors(t, expr) {
				for _, ms := range sels {
					checkSelector(name+" "+q.Where, metric, ms)
				}
			}
		}
	}
}

// TestBadConfig: a burn-rate panel window the rules do not record is an
// error, not a blank panel.
func TestBadConfig(t *testing.T) {
	_, err := Evaluate(`{_config+:: {dashboardBurnRatePanels: [{title: 'x', windows: ['7m'], alert: 'LLMProbeSLOErrorBudgetBurnFast'}]}}`)
	if err == nil || !strings.Contains(err.Error(), "window 7m is not recorded") {
		t.Errorf("err = %v, want the unrecorded window named", err)
	}
}

// TestUsersManifest: the rules as a user's jsonnet writes them with
// std.manifestYamlDoc (README.md) are the generated file's rules, comments
// aside.
func TestUsersManifest(t *testing.T) {
	out, err := EvaluateSnippet(`
local m = import 'mixin.libsonnet';
std.manifestYamlDoc({ groups: m.prometheusRules.groups + m.prometheusAlerts.groups })`)
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	rules, err := evaluate(t, "").RulesYAML()
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := yaml.Unmarshal([]byte(doc), &got); err != nil {
		t.Fatalf("std.manifestYamlDoc output: %v", err)
	}
	if err := yaml.Unmarshal(rules, &want); err != nil {
		t.Fatal(err)
	}
	if mustJSON(t, got) != mustJSON(t, want) {
		t.Error("std.manifestYamlDoc of the mixin's groups differs from the generated rules file")
	}
}
