//go:build unix

package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/dashboards"
	"github.com/llm-prober/llm-prober/internal/testutil"
)

// A histogram mode is one way Prometheus stores histograms
// (docs/deployment.md, "Histogram modes"). The prober exposes each
// histogram in both forms, classic buckets and native; vLLM exposes only
// classic buckets. What a mode stores of each:
//
//	mode         Prometheus                                   prober's   vLLM's
//	classic      2.42, defaults                               classic    classic
//	native       2.42 --enable-feature=native-histograms      native     classic
//	both         3.x scrape_native_histograms +               both       classic
//	             always_scrape_classic_histograms
//	native-nhcb  3.x scrape_native_histograms +               native     native (NHCB)
//	             convert_classic_histograms_to_nhcb
type histogramMode struct {
	name string
	// prometheus3: the mode needs Prometheus 3 (LLM_PROBER_PROMETHEUS3);
	// else Debian's 2.42 on PATH.
	prometheus3 bool
	flags       []string
	global      string // more lines of the global config block
	// Which forms are stored of a histogram exposed in both forms (the
	// prober's) and of one exposed with classic buckets only (vLLM's).
	both, classicOnly forms
}

type forms struct{ native, classic bool }

var histogramModes = []histogramMode{
	{
		name: "classic",
		both: forms{classic: true}, classicOnly: forms{classic: true},
	},
	{
		name:  "native",
		flags: []string{"--enable-feature=native-histograms"},
		both:  forms{native: true}, classicOnly: forms{classic: true},
	},
	{
		name:        "both",
		prometheus3: true,
		global:      "  scrape_native_histograms: true\n  always_scrape_classic_histograms: true\n",
		both:        forms{native: true, classic: true}, classicOnly: forms{classic: true},
	},
	{
		name:        "native-nhcb",
		prometheus3: true,
		global:      "  scrape_native_histograms: true\n  convert_classic_histograms_to_nhcb: true\n",
		both:        forms{native: true}, classicOnly: forms{native: true},
	},
}

// modeValues are the dashboards' template variables in this test: every
// job, target, probe and model, windows long enough to hold the whole run.
var modeValues = map[string]string{
	"job": ".*", "target": ".*", "probe": ".*", "model": ".*",
	"__rate_interval": "1m", "__interval": "1s", "__range": "1m",
}

// modeDeadline bounds one mode once its Prometheus is up; a mode takes
// about 10 s.
const modeDeadline = 90 * time.Second

// TestHistogramModes runs every panel query of every dashboard and every
// rule of alerts/llm-prober-rules.yml against real Prometheus in each
// histogram mode, scraping the prober and a vLLM-named simulator directly
// (for vLLM's own vllm:* series): every query and every recording rule has
// data in every mode, and each form of a query that has two (native, then
// classic; dashboards.HistogramOr) has data exactly where the mode stores
// that form. The modes share the simulators and the prober and run side by
// side, each with its own Prometheus.
//
// The 3.x modes need Prometheus 3 (make test builds it: `make prometheus3`,
// scripts/ensure-go-tool.sh) at $LLM_PROBER_PROMETHEUS3; without it
// they skip, unless LLM_PROBER_REQUIRE_PROMETHEUS3 is set.
func TestHistogramModes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	prometheus2 := requirePrometheus(t, "the histogram-mode test")
	prometheus3, why3 := findPrometheus3(t)
	root := testutil.RepoRoot(t)
	testutil.RecordInputs(t, ".yml", ".yaml", ".json")
	bin := testutil.BuildBinary(t)
	start := time.Now()

	// Two fast simulators, one per metric naming the dashboards read, and
	// the prober probing each every 200 ms.
	// The SGLang-named one is for the servers' own TTFT beside the
	// prober's (checkServerTTFT); the vLLM-named one counts speculative
	// decoding for the serving-stack's acceptance panel.
	simVLLM, simTriton, simSGLang, proberAddr := testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	for addr, naming := range map[string]string{simVLLM: "vllm", simTriton: "triton", simSGLang: "sglang"} {
		p := testutil.StartProcess(t, "simulate-"+naming, exec.Command(bin, "simulate", "--log.level=warn",
			"--listen", addr, "--grpc-listen=", "--metrics.naming", naming, "--metrics.spec-decode-tokens=3",
			"--latency.ttft-base=5ms", "--latency.decode-base=2ms", "--rate-limit.requests-per-minute=100000"))
		p.WaitHTTP(t, "http://"+addr+"/health")
	}
	cfgDir := t.TempDir()
	cfg := filepath.Join(cfgDir, "llm-prober.yml")
	// The fleet-outlier rule reads targets made by discovery: a module
	// whose file_sd list holds the vLLM-named simulator.
	sdFile := filepath.Join(cfgDir, "fleet.json")
	testutil.WriteFile(t, sdFile, fmt.Sprintf(`[{"targets": [%q]}]`, simVLLM))
	testutil.WriteFile(t, cfg, fmt.Sprintf(modesProberConfig, simVLLM, simVLLM, simTriton, simTriton, simSGLang, simSGLang, simVLLM, simVLLM, simVLLM, simVLLM, simVLLM)+
		fmt.Sprintf(modesFleetConfig, sdFile))
	prober := testutil.StartProcess(t, "llm-prober", exec.Command(bin,
		"--config.file="+cfg, "--web.listen-address="+proberAddr, "--log.level=warn"))
	prober.WaitReady(t, "http://"+proberAddr)

	rules := fastRules(t, filepath.Join(root, "alerts", "llm-prober-rules.yml"))
	queries := dashboardQueries(t, root)
	t.Logf("prober and simulators up after %s; %d dashboard queries, %d rules",
		time.Since(start).Round(time.Millisecond), len(queries), len(readRules(t, rules)))

	for _, mode := range histogramModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			promBin := prometheus2
			if mode.prometheus3 {
				if prometheus3 == "" {
					t.Skip(why3)
				}
				promBin = prometheus3
			}
			runMode(t, mode, promBin, rules, queries, proberAddr, simVLLM)
		})
	}
}

// findPrometheus3 returns the Prometheus 3 binary named by
// LLM_PROBER_PROMETHEUS3, or "" and why not. With
// LLM_PROBER_REQUIRE_PROMETHEUS3 set a missing binary fails the test.
func findPrometheus3(t *testing.T) (path, why string) {
	t.Helper()
	path = os.Getenv("LLM_PROBER_PROMETHEUS3")
	switch info, err := os.Stat(path); {
	case path == "":
		why = "LLM_PROBER_PROMETHEUS3 is not set"
	case err != nil:
		why = err.Error()
	case info.IsDir() || info.Mode()&0o111 == 0:
		why = path + " is not an executable file"
	default:
		return path, ""
	}
	why = "Prometheus 3 modes skipped: " + why + "; `make prometheus3` (scripts/ensure-go-tool.sh) builds it and make test sets LLM_PROBER_PROMETHEUS3"
	if os.Getenv("LLM_PROBER_REQUIRE_PROMETHEUS3") != "" {
		t.Fatalf("LLM_PROBER_REQUIRE_PROMETHEUS3 is set but %s", why)
	}
	return "", why
}

// modesProberConfig: a probe every 200 ms on each simulator, each with its
// server metrics, SLOs so that the SLO rules have input.
const modesProberConfig = `targets:
  - name: sim-vllm
    protocol: openai_chat
    url: http://%s
    model: sim-llm
    server_metrics: {url: http://%s/metrics, kind: vllm, timeout: 500ms}
    probes:
      - name: fast
        workload: short
        schedule: {every: 200ms}
        slo: {ttft: 250ms, tpot: 50ms, objective: 0.99}
      # Cold and warm TTFT for the prefix-cache panels and alert.
      - name: prefix
        workload: short
        schedule: {every: 1s}
        shared_prefix: {tokens: 64, requests: 2}
  - name: sim-triton
    protocol: openai_chat
    url: http://%s
    model: sim-llm
    server_metrics: {url: http://%s/metrics, kind: triton, timeout: 500ms}
    probes:
      - name: fast
        workload: short
        schedule: {every: 200ms}
        slo: {ttft: 250ms, tpot: 50ms, objective: 0.99}
  - name: sim-sglang
    protocol: openai_chat
    url: http://%s
    model: sim-llm
    server_metrics: {url: http://%s/metrics, kind: sglang, timeout: 500ms}
    probes:
      - name: fast
        workload: short
        schedule: {every: 200ms}
  # Every model the vLLM-named simulator lists (the discovery panels).
  - name: sim-models
    protocol: openai_chat
    url: http://%s
    discover_models: {max_models: 5}
    probes:
      - name: fast
        workload: short
        schedule: {every: 1s}
` + panelTargets + `workloads:
  short:
    prompts:
      inline: ["Name three prime numbers."]
    max_tokens: 6
    ignore_eos: true
gpus:
  enabled: false
`

// modesFleetConfig: a module and a file_sd source (%s: its file), so
// that the fleet-outlier recording rule has a discovered target to read.
const modesFleetConfig = `modules:
  sim-fleet:
    protocol: openai_chat
    model: sim-llm
    allowed_targets: 'http://127\.0\.0\.1:[0-9]+'
    probes:
      - {name: fast, workload: short, schedule: {every: 200ms}}
target_discovery:
  - module: sim-fleet
    file_sd_configs:
      - {files: [%s], refresh_interval: 1s}
`

// modesPrometheusConfig: 1 s scrapes and rule evaluations; the prober, and
// the vLLM-named simulator as Prometheus scrapes vLLM itself.
const modesPrometheusConfig = `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
%srule_files:
  - %s
scrape_configs:
  - job_name: llm-prober
    static_configs:
      - targets: ['%s']
  - job_name: vllm
    static_configs:
      - targets: ['%s']
`

// fastRules writes a copy of the rules file whose groups are evaluated
// every second (the SLO recording group ships with 30s), so that a mode's
// run takes seconds; the rules themselves are unchanged.
func fastRules(t *testing.T, path string) string {
	t.Helper()
	return rulesWithIntervals(t, path, func(time.Duration) time.Duration { return time.Second })
}

// cappedRules writes a copy of the rules file whose groups with an
// interval over max are evaluated every max instead (the 30-day error
// budget group ships with 5m, longer than an end-to-end run); the rules
// themselves and the other groups are unchanged.
func cappedRules(t *testing.T, path string, max time.Duration) string {
	t.Helper()
	return rulesWithIntervals(t, path, func(d time.Duration) time.Duration { return min(d, max) })
}

// rulesWithIntervals writes a copy of the rules file with each group's
// interval, where it sets one, replaced by interval(it).
func rulesWithIntervals(t *testing.T, path string, interval func(time.Duration) time.Duration) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []map[string]any `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, g := range doc.Groups {
		v, ok := g["interval"]
		if !ok {
			continue
		}
		d, err := model.ParseDuration(fmt.Sprint(v))
		if err != nil {
			t.Fatalf("group %v: interval %v: %v", g["name"], v, err)
		}
		g["interval"] = model.Duration(interval(time.Duration(d))).String()
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(t.TempDir(), "llm-prober-rules.yml")
	testutil.WriteFile(t, copied, string(out))
	return copied
}

type rule struct {
	Record string `yaml:"record"`
	Alert  string `yaml:"alert"`
	Expr   string `yaml:"expr"`
}

func readRules(t *testing.T, path string) []rule {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var rs []rule
	for _, g := range doc.Groups {
		rs = append(rs, g.Rules...)
	}
	return rs
}

// modeQuery is one query that must have data in every mode; native and
// classic are its two forms when it has them.
type modeQuery struct {
	where, expr     string
	native, classic string
	// histogram is what the forms read; classicOnly: exposed with classic
	// buckets only (vLLM's); summary: one of the prober's summary
	// histograms (collector/families.go), exposed without classic buckets.
	histogram   string
	classicOnly bool
	summary     bool
}

var classicSeriesRE = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)_(?:bucket|count|sum)\s*[{\[]`)

// newModeQuery splits expr at dashboards.HistogramOr into its native and
// classic forms, when it has them.
func newModeQuery(t *testing.T, where, expr string) modeQuery {
	t.Helper()
	q := modeQuery{where: where, expr: expr}
	native, classic, ok := strings.Cut(expr, dashboards.HistogramOr)
	if !ok {
		return q
	}
	m := classicSeriesRE.FindStringSubmatch(classic)
	if m == nil || strings.Count(native, "(") != strings.Count(native, ")") {
		t.Fatalf("%s: %q splits into forms that are not a native and a classic query: %s", where, dashboards.HistogramOr, expr)
	}
	q.native, q.classic, q.histogram = native, classic, m[1]
	// vLLM's own histograms, and the servers' histograms the prober
	// re-exports with their buckets (llm_server_*), are classic only.
	q.classicOnly = strings.HasPrefix(m[1], "vllm:") || strings.HasPrefix(m[1], "llm_server_")
	for _, name := range collector.MetricFamilies() {
		q.summary = q.summary || name == m[1]
	}
	return q
}

// dashboardQueries are the panel and variable queries of every dashboard
// with the template variables substituted. Exempt: GPU panels (no GPU
// here) and the queries of ALERTS, the alert annotations and the
// firing-alerts panel (no alert need fire in this test; TestEndToEnd
// checks them once one does).
func dashboardQueries(t *testing.T, root string) []modeQuery {
	t.Helper()
	var qs []modeQuery
	names := []string{}
	ds := readDashboards(t, root)
	for name := range ds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, q := range dashboards.Queries(ds[name]) {
			if q.ReadsAlerts() || strings.Contains(q.Expr, "llm_gpu_") {
				continue
			}
			expr, err := dashboards.Substitute(q.Expr, modeValues)
			if err != nil {
				t.Fatalf("%s %s: %v", name, q.Where, err)
			}
			qs = append(qs, newModeQuery(t, name+" "+q.Where, expr))
		}
	}
	return qs
}

// ruleQueries: every recording rule's series, each recording rule's
// expression (split into its forms where it has two), and the alerts that
// read histograms made to fire on any data: LLMProbeTTFTRegressed compares
// the last hour with a week ago, which a test of seconds cannot have, so it
// is evaluated against the same hour at a factor that always holds; the
// prefix-cache alert with thresholds that hold on any data.
func ruleQueries(t *testing.T, rules []rule) []modeQuery {
	t.Helper()
	var qs []modeQuery
	for _, r := range rules {
		switch {
		case r.Record != "":
			qs = append(qs, modeQuery{where: "recorded series " + r.Record, expr: r.Record})
			if strings.Contains(r.Expr, dashboards.HistogramOr) {
				qs = append(qs, newModeQuery(t, "recording rule "+r.Record, r.Expr))
			}
		case r.Alert == "LLMProbeTTFTRegressed":
			// Both the last hour's and the recent window's quantile are
			// compared with a week ago's: each made to hold (≥ 0×).
			expr := strings.ReplaceAll(r.Expr, " offset 1w", "")
			expr = strings.ReplaceAll(expr, "> 1.5 *", ">= 0 *")
			if strings.Count(r.Expr, " offset 1w") != 4 || strings.Count(r.Expr, "> 1.5 *") != 2 {
				t.Fatalf("LLMProbeTTFTRegressed changed shape (want four \" offset 1w\" and two \"> 1.5 *\"); update this test: %s", r.Expr)
			}
			qs = append(qs, modeQuery{where: "alert " + r.Alert + " (a week ago → now, 1.5x → 0x)", expr: expr})
		case r.Alert == "LLMProbePrefixCacheNotHitting":
			// The simulator here has no prefix cache, so the ratio is about
			// 1 already; the guard's 3 cold requests in 30m are not yet
			// there after seconds: both thresholds made to hold on any data.
			expr := strings.Replace(strings.Replace(r.Expr, "\n> 0.8\n", "\n>= 0\n", 1), "\n>= 3\n", "\n>= 0\n", 1)
			if strings.Count(expr, "\n>= 0\n") != 2 {
				t.Fatalf("LLMProbePrefixCacheNotHitting changed shape (want \"> 0.8\" and \">= 3\" on lines of their own); update this test: %s", r.Expr)
			}
			qs = append(qs, modeQuery{where: "alert " + r.Alert + " (0.8 → 0, 3 cold requests → 0)", expr: expr})
		case classicSeriesRE.MatchString(r.Expr):
			t.Fatalf("alert %s reads histograms but this test does not evaluate it: add it to ruleQueries", r.Alert)
		}
	}
	return qs
}

// pollFunc polls check every interval until it reports done, failing the
// test at the mode's deadline with check's last explanation.
type pollFunc func(what string, interval time.Duration, check func() (bool, string))

func runMode(t *testing.T, mode histogramMode, promBin, rulesPath string, dashQueries []modeQuery, proberAddr, simVLLM string) {
	start := time.Now()
	dir := t.TempDir()
	promAddr := testutil.FreeAddr(t)
	cfg := filepath.Join(dir, "prometheus.yml")
	testutil.WriteFile(t, cfg, fmt.Sprintf(modesPrometheusConfig, mode.global, rulesPath, proberAddr, simVLLM))
	args := append([]string{
		"--config.file=" + cfg,
		"--storage.tsdb.path=" + filepath.Join(dir, "tsdb"),
		"--web.listen-address=" + promAddr,
		"--log.level=warn",
	}, mode.flags...)
	prom := testutil.StartProcess(t, "prometheus-"+mode.name, exec.Command(promBin, args...))
	prom.WaitReady(t, "http://"+promAddr)
	api := &promAPI{base: "http://" + promAddr}
	// The queries' own bound outlives the polls', so that the last round
	// of a poll that fails reports the queries' results, not the timeout.
	deadline := time.Now().Add(modeDeadline)
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(30*time.Second))
	defer cancel()
	poll := func(what string, interval time.Duration, check func() (bool, string)) {
		t.Helper()
		testutil.Poll(t, what, time.Until(deadline), interval, check)
	}
	t.Logf("%s ready after %s", promBin, time.Since(start).Round(time.Millisecond))

	rules := readRules(t, rulesPath)
	checkStoredForms(ctx, t, api, mode, poll)
	checkRuleHealth(ctx, t, api, len(rules), poll)

	queries := append(append([]modeQuery{}, dashQueries...), ruleQueries(t, rules)...)
	poll("every query with data, each form where "+mode.name+" stores it", time.Second, func() (bool, string) {
		var bad []string
		for _, q := range queries {
			bad = append(bad, checkModeQuery(ctx, api, mode, q)...)
		}
		return len(bad) == 0, fmt.Sprintf("%d problems:\n%s", len(bad), strings.Join(bad, "\n"))
	})
	checkServerTTFT(ctx, t, api, poll)
	split := 0
	for _, q := range queries {
		if q.histogram != "" {
			split++
		}
	}
	t.Logf("mode %s: %d queries with data (%d of them checked form by form) after %s",
		mode.name, len(queries), split, time.Since(start).Round(time.Millisecond))
}

// checkModeQuery returns what is wrong with q in mode: no data, or a form
// with data the mode does not store, or without data it does.
func checkModeQuery(ctx context.Context, api *promAPI, mode histogramMode, q modeQuery) []string {
	var bad []string
	if n, err := api.finite(ctx, q.expr); err != nil {
		bad = append(bad, fmt.Sprintf("%s: %v", q.where, err))
	} else if n == 0 {
		bad = append(bad, fmt.Sprintf("%s: no data: %s", q.where, q.expr))
	}
	if q.histogram == "" {
		return bad
	}
	want := mode.both
	if q.classicOnly {
		want = mode.classicOnly
	}
	for _, f := range []struct {
		name, expr string
		stored     bool
	}{{"native", q.native, want.native}, {"classic", q.classic, want.classic}} {
		if q.summary && f.name == "classic" && want.native && want.classic {
			// A summary histogram has no classic bucket, and Prometheus
			// 3 then stores its _sum and _count beside the native
			// histogram only while the exposition carries a +Inf bucket,
			// which client_golang adds to carry an exemplar. The query
			// has data either way (checked above): its native form.
			continue
		}
		n, err := api.finite(ctx, f.expr)
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s: %s form: %v", q.where, f.name, err))
		case f.stored && n == 0:
			bad = append(bad, fmt.Sprintf("%s: %s form without data, but %s stores %s's %s form: %s", q.where, f.name, mode.name, q.histogram, f.name, f.expr))
		case !f.stored && n > 0:
			bad = append(bad, fmt.Sprintf("%s: %s form with data, but %s should not store %s's %s form: %s", q.where, f.name, mode.name, q.histogram, f.name, f.expr))
		}
	}
	return bad
}

// checkStoredForms: the mode stores what the table on histogramMode says,
// seen on the prober's TTFT histogram and on vLLM's.
func checkStoredForms(ctx context.Context, t *testing.T, api *promAPI, mode histogramMode, poll pollFunc) {
	t.Helper()
	series := func(name string) string {
		return fmt.Sprintf(`count({__name__=%q})`, name)
	}
	type check struct {
		name   string
		stored bool
	}
	var checks []check
	for _, h := range []struct {
		name string
		want forms
	}{
		{"llm_probe_time_to_first_token_seconds", mode.both},
		{"vllm:time_to_first_token_seconds", mode.classicOnly},
	} {
		checks = append(checks,
			check{h.name, h.want.native},
			check{h.name + "_bucket", h.want.classic},
			check{h.name + "_count", h.want.classic})
	}
	poll("the series "+mode.name+" stores", 500*time.Millisecond, func() (bool, string) {
		var missing, extra []string
		for _, c := range checks {
			n, err := api.count(ctx, series(c.name))
			switch {
			case err != nil:
				missing = append(missing, fmt.Sprintf("%s (%v)", c.name, err))
			case c.stored && n == 0:
				missing = append(missing, c.name)
			case !c.stored && n > 0:
				extra = append(extra, c.name)
			}
		}
		// Absent series are only telling once the present ones are in.
		if len(missing) > 0 {
			return false, "missing: " + strings.Join(missing, ", ")
		}
		if len(extra) > 0 {
			t.Fatalf("%s stores series it should not: %s", mode.name, strings.Join(extra, ", "))
		}
		return true, ""
	})
}

// checkRuleHealth: every rule of the rules file (want of them) is loaded
// and evaluates without error.
func checkRuleHealth(ctx context.Context, t *testing.T, api *promAPI, want int, poll pollFunc) {
	t.Helper()
	poll("every rule evaluated without error", 500*time.Millisecond, func() (bool, string) {
		var resp struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		}
		if err := api.get(ctx, "/api/v1/rules", nil, &resp); err != nil {
			return false, err.Error()
		}
		var pending []string
		n := 0
		for _, g := range resp.Groups {
			for _, r := range g.Rules {
				n++
				switch r.Health {
				case "ok":
				case "err":
					t.Fatalf("rule %s of group %s: %s", r.Name, g.Name, r.LastError)
				default:
					pending = append(pending, r.Name+" "+r.Health)
				}
			}
		}
		if n != want {
			t.Fatalf("Prometheus loaded %d rules, the file has %d", n, want)
		}
		return len(pending) == 0, "not evaluated yet: " + strings.Join(pending, ", ")
	})
}

// checkServerTTFT: for each server kind with a TTFT histogram the
// simulator speaks (vLLM, SGLang, Triton), the server's own mean TTFT,
// re-exported by the prober, sits beside the prober's and below it: the
// server's clock starts after the request reached it and stops at the
// token it produced, the prober's spans the whole exchange. 20 ms of
// slack: sim-vllm's server mean also covers the other targets' requests.
func checkServerTTFT(ctx context.Context, t *testing.T, api *promAPI, poll pollFunc) {
	t.Helper()
	for _, target := range []string{"sim-vllm", "sim-sglang", "sim-triton"} {
		var client, server, gap float64
		poll(target+"'s client and server TTFT and the gap", time.Second, func() (bool, string) {
			var err error
			sel := fmt.Sprintf(`{target=%q}`, target)
			if client, err = api.value(ctx, "target:llm_probe_time_to_first_token_seconds:mean5m"+sel); err != nil {
				return false, "client mean: " + err.Error()
			}
			if server, err = api.value(ctx, "target:llm_server_time_to_first_token_seconds:mean5m"+sel); err != nil {
				return false, "server mean: " + err.Error()
			}
			if gap, err = api.value(ctx, "target:llm_ttft_gap_seconds:mean5m"+sel); err != nil {
				return false, "gap: " + err.Error()
			}
			return true, ""
		})
		if !(server > 0 && server <= client+0.02) || math.Abs(gap-(client-server)) > 1e-3 {
			t.Errorf("%s: client TTFT mean %.4fs, server %.4fs, gap %.4fs: want 0 < server <= client (+20ms) and gap = client - server", target, client, server, gap)
		}
		t.Logf("%s: TTFT mean client %.2f ms, server %.2f ms, gap %.2f ms", target, client*1e3, server*1e3, gap*1e3)
	}
}
