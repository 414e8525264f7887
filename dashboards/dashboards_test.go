package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// checkValues are the template variable values the PromQL checks use:
// everything selected, Grafana's default-ish intervals.
var checkValues = map[string]string{
	"job": ".*", "target": ".*", "probe": ".*", "model": ".*",
	"__rate_interval": "1m", "__interval": "15s", "__range": "3h",
}

// onDisk reads every dashboard JSON file of this directory.
func onDisk(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no dashboards (*.json) found")
	}
	files := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = b
	}
	return files
}

// TestStructure checks the files as Grafana will read them, through a
// generic decode so that hand edits are checked too.
func TestStructure(t *testing.T) {
	uids := map[string]string{}
	for name, b := range onDisk(t) {
		t.Run(name, func(t *testing.T) {
			var d map[string]any
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			if _, ok := d["__inputs"]; ok {
				t.Error("__inputs present: file provisioning does not resolve it; use the datasource variable")
			}
			uid, _ := d["uid"].(string)
			if uid == "" || len(uid) > 40 {
				t.Errorf("uid %q: want a stable uid of 1..40 characters", uid)
			}
			if other, dup := uids[uid]; dup {
				t.Errorf("uid %q also used by %s", uid, other)
			}
			uids[uid] = name
			if title, _ := d["title"].(string); title == "" {
				t.Error("no title")
			}
			if tags, _ := d["tags"].([]any); len(tags) == 0 || tags[0] != "llm-prober" {
				t.Errorf("tags %v: want llm-prober first", tags)
			}
			if id := d["id"]; id != nil {
				t.Errorf("id %v: want null so that importing does not overwrite another dashboard", id)
			}

			// Template variables.
			vars := map[string]map[string]any{}
			for _, v := range asList(t, d["templating"].(map[string]any)["list"]) {
				vars[v["name"].(string)] = v
			}
			if v := vars[DatasourceVariable]; v == nil || v["type"] != "datasource" || v["query"] != "prometheus" {
				t.Errorf("datasource variable: %v; want type datasource, query prometheus", v)
			}
			for _, name := range []string{"job", "target", "probe", "model"} {
				v := vars[name]
				if v == nil {
					t.Errorf("template variable %s missing", name)
					continue
				}
				query, _ := v["query"].(string)
				if _, ok := LabelValuesSelector(query); v["type"] != "query" || !ok || !strings.HasSuffix(query, ", "+name+")") {
					t.Errorf("variable %s: type %v query %q; want a label_values(…, %s) query", name, v["type"], query, name)
				}
				if v["includeAll"] != true || v["allValue"] != ".*" {
					t.Errorf("variable %s: want includeAll with allValue .* (an empty model label must match)", name)
				}
			}

			// Every data source reference anywhere is the variable.
			walkJSON(d, "", func(path string, key string, val any) {
				if key != "datasource" {
					return
				}
				ref, ok := val.(map[string]any)
				if !ok || ref["uid"] != "${datasource}" || ref["type"] != "prometheus" {
					t.Errorf("%s: datasource %v; want {type: prometheus, uid: ${datasource}}", path, val)
				}
			})

			// Panels.
			ids := map[float64]string{}
			type cell struct{ x, y int }
			used := map[cell]string{}
			for _, p := range asList(t, d["panels"]) {
				title, _ := p["title"].(string)
				id, _ := p["id"].(float64)
				if id == 0 {
					t.Errorf("panel %q has no id", title)
				}
				if other, dup := ids[id]; dup {
					t.Errorf("panel id %v used by %q and %q", id, other, title)
				}
				ids[id] = title
				if title == "" {
					t.Errorf("panel %v has no title", id)
				}
				g := p["gridPos"].(map[string]any)
				x, y, w, h := int(g["x"].(float64)), int(g["y"].(float64)), int(g["w"].(float64)), int(g["h"].(float64))
				if w < 1 || h < 1 || x < 0 || x+w > 24 {
					t.Errorf("panel %q: gridPos %v outside the 24-column grid", title, g)
				}
				for i := x; i < x+w; i++ {
					for j := y; j < y+h; j++ {
						if other, ok := used[cell{i, j}]; ok {
							t.Errorf("panel %q overlaps %q", title, other)
							i, j = x+w, y+h
						}
						used[cell{i, j}] = title
					}
				}
				if p["type"] == "row" {
					continue
				}
				if _, ok := p["datasource"]; !ok {
					t.Errorf("panel %q has no datasource (want ${datasource})", title)
				}
				if desc, _ := p["description"].(string); desc == "" {
					t.Errorf("panel %q has no description", title)
				}
				targets := asList(t, p["targets"])
				if len(targets) == 0 {
					t.Errorf("panel %q has no queries", title)
				}
				refs := map[string]bool{}
				for _, tg := range targets {
					if expr, _ := tg["expr"].(string); strings.TrimSpace(expr) == "" {
						t.Errorf("panel %q: empty expr", title)
					}
					if _, ok := tg["datasource"]; !ok {
						t.Errorf("panel %q: query %v has no datasource", title, tg["refId"])
					}
					ref, _ := tg["refId"].(string)
					if ref == "" || refs[ref] {
						t.Errorf("panel %q: refId %q empty or repeated", title, ref)
					}
					refs[ref] = true
				}
			}
		})
	}
}

func asList(t *testing.T, v any) []map[string]any {
	t.Helper()
	raw, _ := v.([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, e := range raw {
		m, ok := e.(map[string]any)
		if !ok {
			t.Fatalf("want a list of objects, got %T", e)
		}
		out = append(out, m)
	}
	return out
}

func walkJSON(v any, path string, fn func(path, key string, val any)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			fn(path+"."+k, k, e)
			walkJSON(e, path+"."+k, fn)
		}
	case []any:
		for i, e := range v {
			walkJSON(e, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	}
}

// parsed decodes the on-disk dashboards.
func parsed(t *testing.T) map[string]*Dashboard {
	t.Helper()
	out := map[string]*Dashboard{}
	for name, b := range onDisk(t) {
		var d Dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = &d
	}
	return out
}

var metricRE = regexp.MustCompile(`\b(?:llm_[a-z0-9_]+|target_probe:[a-z0-9_:]+)`)

// TestMetricNamesExist catches typos: every llm_* name a query uses is
// documented in docs/metrics.md, and every recording rule it uses is
// defined in alerts/llm-prober-rules.yml.
func TestMetricNamesExist(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile("../alerts/llm-prober-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range parsed(t) {
		for _, qq := range Queries(d) {
			for _, m := range metricRE.FindAllString(qq.Expr, -1) {
				if strings.Contains(m, ":") {
					if !bytes.Contains(rules, []byte("record: "+m+"\n")) {
						t.Errorf("%s %s: recording rule %s is not in alerts/llm-prober-rules.yml", name, qq.Where, m)
					}
					continue
				}
				base := m
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if b, ok := strings.CutSuffix(m, suffix); ok && bytes.Contains(doc, []byte("`"+b+"`")) {
						base = b
					}
				}
				if !bytes.Contains(doc, []byte("`"+base+"`")) {
					t.Errorf("%s %s: metric %s is not documented in docs/metrics.md", name, qq.Where, m)
				}
			}
		}
	}
}

// TestQueriesPromtool checks every PromQL expression (panels, variable
// selectors, annotations) with `promtool check rules`, after substituting
// the template variables, by writing them as recording rules.
func TestQueriesPromtool(t *testing.T) {
	promtool := testutil.RequirePromtool(t)
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rs []rule
	var where []string
	names := make([]string, 0)
	ds := parsed(t)
	for name := range ds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, qq := range Queries(ds[name]) {
			expr, err := Substitute(qq.Expr, checkValues)
			if err != nil {
				t.Errorf("%s %s: %v", name, qq.Where, err)
				continue
			}
			if strings.Contains(expr, "$") {
				t.Errorf("%s %s: unsubstituted $ left in %q", name, qq.Where, expr)
			}
			rs = append(rs, rule{Record: fmt.Sprintf("dashboard_query_%d", len(rs)), Expr: expr})
			where = append(where, name+" "+qq.Where)
		}
	}
	if len(rs) < 20 {
		t.Fatalf("only %d queries found", len(rs))
	}
	file := map[string]any{"groups": []map[string]any{{"name": "dashboards", "rules": rs}}}
	b, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	if err != nil {
		// promtool names the failing rule by index; map it back.
		msg := string(out)
		for i := len(where) - 1; i >= 0; i-- {
			msg = strings.ReplaceAll(msg, fmt.Sprintf("dashboard_query_%d", i), where[i])
		}
		t.Fatalf("promtool check rules: %v\n%s", err, msg)
	}
	t.Logf("promtool checked %d queries", len(rs))
}

func TestSubstitute(t *testing.T) {
	got, err := Substitute(`rate(x{job=~"$job", a=~"${target}", b="${probe:regex}"}[$__rate_interval])`, checkValues)
	if err != nil {
		t.Fatal(err)
	}
	if want := `rate(x{job=~".*", a=~".*", b=".*"}[1m])`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if _, err := Substitute(`x[$nope]`, checkValues); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown variable: err = %v", err)
	}
}

var orRE = regexp.MustCompile(`\bor\b`)

var classicSeriesRE = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)_(bucket|count|sum)\s*[{\[]`)

// classicHistograms returns the histograms expr reads through classic
// series (_bucket, _count, _sum; the project has no summaries).
func classicHistograms(expr string) []string {
	var names []string
	for _, m := range classicSeriesRE.FindAllStringSubmatch(expr, -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	return names
}

// readsNative reports whether expr selects the native histogram name.
func readsNative(expr, name string) bool {
	return regexp.MustCompile(regexp.QuoteMeta(name) + `\s*[{\[]`).MatchString(expr)
}

// TestHistogramQueriesEveryMode: a query that reads a histogram's classic
// series also reads its native histogram, or it goes blank where
// Prometheus stores only the native one (docs/deployment.md, "Histogram
// modes"). Dashboard queries have exactly the shape the mixin's eitherForm
// writes (mixin/lib/promql.libsonnet):
// native form, HistogramOr, classic form. test/e2e's TestHistogramModes runs
// them all against real Prometheus in each mode.
func TestHistogramQueriesEveryMode(t *testing.T) {
	n := 0
	for name, d := range parsed(t) {
		for _, qq := range Queries(d) {
			hs := classicHistograms(qq.Expr)
			if len(hs) == 0 {
				continue
			}
			n++
			native, classic, ok := strings.Cut(qq.Expr, HistogramOr)
			if !ok || strings.Contains(classic, HistogramOr) {
				t.Errorf("%s %s: reads classic series of %v but is not one native form %q one classic form: %s", name, qq.Where, hs, HistogramOr, qq.Expr)
				continue
			}
			for _, h := range hs {
				if !readsNative(native, h) || slices.Contains(classicHistograms(native), h) {
					t.Errorf("%s %s: the native form does not read %s natively (or reads its classic series): %s", name, qq.Where, h, native)
				}
				if readsNative(classic, h) {
					t.Errorf("%s %s: the classic form reads %s natively: %s", name, qq.Where, h, classic)
				}
			}
		}
	}
	if n < 15 {
		t.Errorf("only %d dashboard queries read histograms", n)
	}

	b, err := os.ReadFile("../alerts/llm-prober-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Record, Alert, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, h := range classicHistograms(r.Expr) {
				if !readsNative(r.Expr, h) || !orRE.MatchString(r.Expr) {
					t.Errorf("rule %s%s reads the classic series of %s without its native histogram beside them (… or …): %s", r.Record, r.Alert, h, r.Expr)
				}
			}
		}
	}
}

func TestReadsAlerts(t *testing.T) {
	for expr, want := range map[string]bool{
		`ALERTS{alertstate="firing"}`:                               true,
		`count by (alertname) (ALERTS {job=~"$job"})`:               true,
		`ALERTS_FOR_STATE{alertname="x"}`:                           true,
		`llm_probe_success{target=~"$target"}`:                      false,
		`sum(rate(MY_ALERTS_total{job=~"$job"}[$__rate_interval]))`: false,
	} {
		if got := (Query{Expr: expr}).ReadsAlerts(); got != want {
			t.Errorf("ReadsAlerts(%s) = %v, want %v", expr, got, want)
		}
	}
}
