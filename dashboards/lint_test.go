package dashboards

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// The dashboard lint: the rules of Grafana's dashboard-linter
// (github.com/grafana/dashboard-linter, which the module proxy does not
// serve) that fit these dashboards, written here against the Prometheus
// parser. Each rule has a broken fixture in testdata/lint/<rule>.json that
// must fail it and no other rule; testdata/lint/valid.json passes all.
const (
	ruleTemplateDatasource  = "template-datasource-rule"
	rulePanelDatasource     = "panel-datasource-rule"
	ruleTemplateJobInstance = "template-job-instance-rule"
	ruleTargetJobInstance   = "target-job-instance-rule"
	ruleTargetPromQL        = "target-promql-rule"
	ruleTargetRateInterval  = "target-rate-interval-rule"
	ruleTargetCounterAgg    = "target-counter-agg-rule"
	rulePanelUnits          = "panel-units-rule"
	rulePanelTitleDesc      = "panel-title-description-rule"
	rulePanelIDUnique       = "panel-id-unique-rule"
)

var lintRules = []string{
	ruleTemplateDatasource, rulePanelDatasource, ruleTemplateJobInstance, ruleTargetJobInstance,
	ruleTargetPromQL, ruleTargetRateInterval, ruleTargetCounterAgg, rulePanelUnits,
	rulePanelTitleDesc, rulePanelIDUnique,
}

type finding struct{ rule, where, msg string }

func (f finding) String() string { return fmt.Sprintf("%s: %s: %s", f.rule, f.where, f.msg) }

// Grafana's macros become durations no query writes, so that the parsed
// query tells which macro a range came from; $__range_s and friends are
// numbers.
var macroValues = map[string]string{
	"__rate_interval": "7331s",
	"__interval":      "7332s",
	"__range":         "7333s",
	"__range_s":       "7333",
	"__range_ms":      "7333000",
	"__interval_ms":   "7332000",
}

var (
	rateIntervalMagic = 7331 * time.Second
	rangeMagic        = 7333 * time.Second
)

// stringOrVariableRE finds PromQL string literals (left alone: a template
// variable inside one is a label value, "$job") and template variables
// outside them ($name, ${name}, ${name:format}).
var stringOrVariableRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\$\{([a-zA-Z0-9_]+)(?::[a-z]+)?\}|\$([a-zA-Z0-9_]+)`)

// expandMacros replaces the template variables outside string literals
// with values the parser accepts: the macros with the magic durations, any
// other variable with an identifier.
func expandMacros(expr string) string {
	return stringOrVariableRE.ReplaceAllStringFunc(expr, func(m string) string {
		if m[0] == '"' || m[0] == '\'' {
			return m
		}
		sub := stringOrVariableRE.FindStringSubmatch(m)
		name := sub[1] + sub[2]
		if v, ok := macroValues[name]; ok {
			return v
		}
		return "var_" + name
	})
}

func parsePromQL(expr string) (parser.Expr, error) {
	return parser.NewParser(parser.Options{}).ParseExpr(expandMacros(expr))
}

// requiredMatchers: which template variable each selector of a panel query
// must be filtered by, by metric name prefix (first match). job is the
// dashboards' job variable; target is their instance-style variable (the
// probed endpoint), on every series that carries it.
var requiredMatchers = []struct {
	prefix string
	labels map[string]string // label → the variable its matcher uses
}{
	// vLLM's own series come from Prometheus scraping vLLM directly:
	// another job and no target, matched to the probes by model name.
	{"vllm:", map[string]string{"model_name": "model"}},
	{"llm_probe_", map[string]string{"job": "job", "target": "target"}},
	{"llm_server_", map[string]string{"job": "job", "target": "target"}},
	{"target_probe:", map[string]string{"job": "job", "target": "target"}},
	{"", map[string]string{"job": "job"}},
}

// validUnits are Grafana's unit ids
// (packages/grafana-data/src/valueFormats/categories.ts).
var validUnits = strings.Fields(`
none string short percent percentunit humidity dB hex0x hex sci locale pixel
accMS2 accFS2 accG degree radian grad arcmin arcsec areaM2 areaF2 areaMI2
flops mflops gflops tflops pflops eflops zflops yflops
ppm conppb conngm3 conngNm3 conμgm3 conμgNm3 conmgm3 conmgNm3 congm3 congNm3 conmgdL conmmolL
currencyUSD currencyGBP currencyEUR currencyJPY currencyRUB currencyUAH currencyBRL currencyDKK
currencyISK currencyNOK currencySEK currencyCZK currencyCHF currencyPLN currencyBTC currencymBTC
currencyμBTC currencyZAR currencyINR currencyKRW
bits bytes kbytes mbytes gbytes tbytes pbytes decbits decbytes deckbytes decmbytes decgbytes dectbytes decpbytes
pps bps Bps KBs Kbits MBs Mbits GBs Gbits TBs Tbits PBs Pbits binBps binbps KiBs Kibits MiBs Mibits GiBs Gibits TiBs Tibits PiBs Pibits
dateTimeAsIso dateTimeAsIsoNoDateIfToday dateTimeAsUS dateTimeAsUSNoDateIfToday dateTimeAsLocal
dateTimeAsLocalNoDateIfToday dateTimeAsSystem dateTimeFromNow
watt kwatt megwatt gwatt mwatt Wm2 voltamp kvoltamp voltampreact kvoltampreact watth watthperkg kwatth kwattm
amph kamph mamph joule ev amp kamp mamp volt kvolt mvolt dBm ohm kohm Mohm farad µfarad nfarad pfarad ffarad
henry mhenry µhenry lumens
flowgpm flowcms flowcfs flowcfm litreh flowlpm flowmlpm lux forceNm forcekNm forceN forcekN
Hs KHs MHs GHs THs PHs EHs massmg massg masskg masst lengthmm lengthft lengthm lengthkm lengthmi
pressurembar pressurebar pressurekbar pressurepa pressurehpa pressurekpa pressurehg pressurepsi
radbq radci radgy radrad radsv radmsv radusv radrem radexpckg radr radsvh radmsvh radusvh
rotrpm rothz rotrads rotdegs celsius fahrenheit kelvin
hertz ns µs ms s m h d dtdurationms dtdurations dthms dtdhms timeticks clockms clocks
cps ops reqps rps wps iops cpm opm rpm wpm velocityms velocitykmh velocitymph velocityknot
mlitre litre m3 Nm3 dm3 gallons bool bool_yes_no bool_on_off`)

// customUnitPrefixes are Grafana's custom units ("suffix: tok/s").
var customUnitPrefixes = []string{"prefix:", "suffix:", "si:", "count:", "currency:", "time:"}

func validUnit(u string) bool {
	if slices.Contains(validUnits, u) {
		return true
	}
	for _, p := range customUnitPrefixes {
		if rest, ok := strings.CutPrefix(u, p); ok && strings.TrimSpace(rest) != "" {
			return true
		}
	}
	return false
}

// counterNames reads the counters docs/metrics.md declares (rows "| `name`
// | counter |").
func counterNames(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("^\\| `([a-zA-Z_:][a-zA-Z0-9_:]*)` \\| counter \\|")
	out := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]] = true
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d counters found in docs/metrics.md", len(out))
	}
	return out
}

// isCounter: names ending _total, a classic histogram's _count, _sum and
// _bucket series, and the counters docs/metrics.md declares.
func isCounter(name string, counters map[string]bool) bool {
	for _, s := range []string{"_total", "_count", "_sum", "_bucket"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return counters[name]
}

func isDatasourceRef(ref *DatasourceRef) bool {
	return ref != nil && ref.Type == "prometheus" && (ref.UID == "${datasource}" || ref.UID == "$datasource")
}

type linter struct {
	counters map[string]bool
	findings []finding
}

func (l *linter) add(rule, where, format string, args ...any) {
	l.findings = append(l.findings, finding{rule, where, fmt.Sprintf(format, args...)})
}

// lint checks d against every rule.
func lint(d *Dashboard, counters map[string]bool) []finding {
	l := &linter{counters: counters}
	if d.Title == "" || d.Description == "" {
		l.add(rulePanelTitleDesc, "dashboard", "title %q, description %q: want both", d.Title, d.Description)
	}

	// Template variables.
	vars := map[string]Variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v, ok := vars[DatasourceVariable]; !ok {
		l.add(ruleTemplateDatasource, "templating", "no variable %q (type datasource, query prometheus)", DatasourceVariable)
	} else if v.Type != "datasource" || v.Query != "prometheus" {
		l.add(ruleTemplateDatasource, "variable "+v.Name, "type %q query %q, want type datasource, query prometheus", v.Type, v.Query)
	}
	for _, name := range []string{"job", "target"} {
		v, ok := vars[name]
		if _, lv := LabelValuesSelector(v.Query); !ok || v.Type != "query" || !lv || !isDatasourceRef(v.Datasource) || !v.Multi || !v.IncludeAll {
			l.add(ruleTemplateJobInstance, "variable "+name, "want a multi-value query variable %q with All, label_values(…, %s) on ${datasource}", name, name)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		where := "variable " + v.Name
		if !isDatasourceRef(v.Datasource) {
			l.add(rulePanelDatasource, where, "datasource %+v, want {prometheus ${datasource}}", v.Datasource)
		}
		expr := v.Query
		if sel, ok := LabelValuesSelector(v.Query); ok {
			expr = sel
		}
		if _, err := parsePromQL(expr); err != nil {
			l.add(ruleTargetPromQL, where, "%v: %s", err, v.Query)
		}
	}
	for _, a := range d.Annotations.List {
		where := "annotation " + a.Name
		if !isDatasourceRef(&a.Datasource) {
			l.add(rulePanelDatasource, where, "datasource %+v, want {prometheus ${datasource}}", a.Datasource)
		}
		if _, err := parsePromQL(a.Expr); err != nil {
			l.add(ruleTargetPromQL, where, "%v: %s", err, a.Expr)
		}
	}

	// Panels, rows' own panels included.
	ids := map[int]string{}
	var walk func(ps []Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if other, dup := ids[p.ID]; dup || p.ID <= 0 {
				l.add(rulePanelIDUnique, where, "id %d not positive or also used by %q", p.ID, other)
			}
			ids[p.ID] = p.Title
			if p.Title == "" {
				l.add(rulePanelTitleDesc, where, "no title")
			}
			if p.Type == "row" {
				if p.Panels != nil {
					walk(*p.Panels)
				}
				continue
			}
			if p.Description == "" {
				l.add(rulePanelTitleDesc, where, "no description")
			}
			if !isDatasourceRef(p.Datasource) {
				l.add(rulePanelDatasource, where, "datasource %+v, want {prometheus ${datasource}}", p.Datasource)
			}
			l.units(where, p)
			for _, t := range p.Targets {
				l.target(fmt.Sprintf("%s ref %s", where, t.RefID), t)
			}
		}
	}
	walk(d.Panels)
	return l.findings
}

func (l *linter) units(where string, p Panel) {
	if p.FieldConfig == nil || p.FieldConfig.Defaults.Unit == "" {
		l.add(rulePanelUnits, where, "no unit (use \"none\" for a plain number)")
	} else if u := p.FieldConfig.Defaults.Unit; !validUnit(u) {
		l.add(rulePanelUnits, where, "unit %q is no Grafana unit id", u)
	}
	if p.FieldConfig == nil {
		return
	}
	for _, o := range p.FieldConfig.Overrides {
		for _, prop := range o.Properties {
			if u, ok := prop.Value.(string); prop.ID == "unit" && (!ok || !validUnit(u)) {
				l.add(rulePanelUnits, where, "override %s: unit %v is no Grafana unit id", o.Matcher.Options, prop.Value)
			}
		}
	}
}

func (l *linter) target(where string, t Target) {
	if !isDatasourceRef(&t.Datasource) {
		l.add(rulePanelDatasource, where, "datasource %+v, want {prometheus ${datasource}}", t.Datasource)
	}
	expr, err := parsePromQL(t.Expr)
	if err != nil {
		l.add(ruleTargetPromQL, where, "%v: %s", err, t.Expr)
		return
	}
	parser.Inspect(expr, func(n parser.Node, path []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			l.selector(where, n)
			if isCounter(n.Name, l.counters) && !counterUnderRate(n, path) {
				l.add(ruleTargetCounterAgg, where, "counter %s is used raw: put it under rate(), irate() or increase()", n.Name)
			}
		case *parser.Call:
			switch n.Func.Name {
			case "rate", "irate", "increase":
			default:
				return nil
			}
			for _, a := range n.Args {
				ms, ok := a.(*parser.MatrixSelector)
				if !ok {
					continue
				}
				switch {
				case ms.Range == rateIntervalMagic:
				case ms.Range == rangeMagic && t.Instant:
					// An instant query over the dashboard's whole range.
				default:
					l.add(ruleTargetRateInterval, where, "%s() over %s: use [$__rate_interval] (an instant query may use [$__range])", n.Func.Name, rangeText(ms.Range))
				}
			}
		}
		return nil
	})
}

func rangeText(d time.Duration) string {
	for name, v := range macroValues {
		if v == fmt.Sprintf("%ds", int(d.Seconds())) {
			return "$" + name
		}
	}
	return d.String()
}

// selector checks that vs is filtered by the template variables its
// metric requires.
func (l *linter) selector(where string, vs *parser.VectorSelector) {
	for _, r := range requiredMatchers {
		if !strings.HasPrefix(vs.Name, r.prefix) {
			continue
		}
		names := make([]string, 0, len(r.labels))
		for label := range r.labels {
			names = append(names, label)
		}
		sort.Strings(names)
		for _, label := range names {
			v := r.labels[label]
			if !slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool {
				return m.Name == label && (m.Type == labels.MatchRegexp || m.Type == labels.MatchEqual) &&
					(m.Value == "$"+v || m.Value == "${"+v+"}")
			}) {
				l.add(ruleTargetJobInstance, where, "%s is not filtered by %s=~\"$%s\"", vs.String(), label, v)
			}
		}
		return
	}
}

// counterUnderRate: a counter's value is only meaningful as a rate or an
// increase; on the right of "and" or "unless" only its labels count.
func counterUnderRate(vs *parser.VectorSelector, path []parser.Node) bool {
	if len(path) >= 2 {
		if _, ok := path[len(path)-1].(*parser.MatrixSelector); ok {
			if c, ok := path[len(path)-2].(*parser.Call); ok {
				switch c.Func.Name {
				case "rate", "irate", "increase":
					return true
				}
			}
		}
	}
	for i, n := range path {
		b, ok := n.(*parser.BinaryExpr)
		if !ok || (b.Op != parser.LAND && b.Op != parser.LUNLESS) {
			continue
		}
		var child parser.Node = vs
		if i+1 < len(path) {
			child = path[i+1]
		}
		if child == parser.Node(b.RHS) {
			return true
		}
	}
	return false
}

// TestLintDashboards: the shipped dashboards pass every rule.
func TestLintDashboards(t *testing.T) {
	counters := counterNames(t)
	for name, d := range parsed(t) {
		for _, f := range lint(d, counters) {
			t.Errorf("%s: %s", name, f)
		}
	}
}

// TestLintFixtures: each rule's broken fixture fails it, and only it; the
// valid fixture passes every rule. So every rule can fail.
func TestLintFixtures(t *testing.T) {
	counters := counterNames(t)
	paths, err := filepath.Glob(filepath.Join("testdata", "lint", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range paths {
		rule := strings.TrimSuffix(filepath.Base(p), ".json")
		seen[rule] = true
		t.Run(rule, func(t *testing.T) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var d Dashboard
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatal(err)
			}
			fs := lint(&d, counters)
			if rule == "valid" {
				for _, f := range fs {
					t.Errorf("valid fixture: %s", f)
				}
				return
			}
			if !slices.Contains(lintRules, rule) {
				t.Fatalf("fixture for unknown rule %s", rule)
			}
			if len(fs) == 0 {
				t.Errorf("%s passes: the rule does not catch what it is for", p)
			}
			for _, f := range fs {
				if f.rule != rule {
					t.Errorf("fixture of %s breaks another rule: %s", rule, f)
				} else {
					t.Logf("caught: %s", f)
				}
			}
		})
	}
	for _, r := range append([]string{"valid"}, lintRules...) {
		if !seen[r] {
			t.Errorf("no fixture testdata/lint/%s.json", r)
		}
	}
}

func TestExpandMacros(t *testing.T) {
	got := expandMacros(`rate(x{job=~"$job", a='${target}'}[$__rate_interval]) / $__range_s * ${n}`)
	want := `rate(x{job=~"$job", a='${target}'}[7331s]) / 7333 * var_n`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
