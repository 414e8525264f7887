package dashboards

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/internal/nvmltest"
	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/mixin"
)

// dcgmOverrides points the mixin's GPU panels and alerts at dcgm-exporter.
const dcgmOverrides = `{_config+:: {gpuSource: 'dcgm', dcgmSelector: 'job="dcgm-exporter"'}}`

// proberFixture is what the prober next to the GPUs exports of itself that
// the GPU row joins on and shows (its TTFT), for one target.
const proberFixture = `# TYPE llm_probe_requests_total counter
llm_probe_requests_total{target="triton",probe="steady",model="ensemble",outcome="success"} 42
# TYPE llm_probe_time_to_first_token_seconds histogram
llm_probe_time_to_first_token_seconds_bucket{target="triton",probe="steady",model="ensemble",le="0.1"} 10
llm_probe_time_to_first_token_seconds_bucket{target="triton",probe="steady",model="ensemble",le="0.5"} 40
llm_probe_time_to_first_token_seconds_bucket{target="triton",probe="steady",model="ensemble",le="+Inf"} 42
llm_probe_time_to_first_token_seconds_sum{target="triton",probe="steady",model="ensemble"} 8.4
llm_probe_time_to_first_token_seconds_count{target="triton",probe="steady",model="ensemble"} 42
`

// The DCGM fixture scraped as dcgm-exporter, and the prober's own series
// with the node label a Kubernetes relabelling adds (docs/deployment.md).
const dcgmPrometheusConfig = `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %s
scrape_configs:
  - job_name: dcgm-exporter
    metrics_path: /dcgm
    static_configs:
      - targets: ['%s']
  - job_name: llm-prober
    metrics_path: /prober
    static_configs:
      - targets: ['%s']
        labels: {node: gpu-node-1}
`

// TestGPUSourcesAgainstPrometheus: with gpuSource 'dcgm', every GPU panel
// query of the serving-stack dashboard returns data from dcgm-exporter's
// real exposition (testdata/dcgm/metrics.prom) in a real Prometheus, in the
// prober's labels and units; the DCGM variant of the GPU alerts loads and
// evaluates without errors, and the fixture's XID 79 fires LLMGPUXIDError.
//
// With the default source (NVML), the same holds for the shipped
// dashboard's GPU queries against what the real GPU collector exports from
// the stub NVML library, beside the DCGM series in the same Prometheus.
func TestGPUSourcesAgainstPrometheus(t *testing.T) {
	prometheusBin := testutil.RequireTool(t, "prometheus", "LLM_PROBER_REQUIRE_PROMTOOL",
		"the DCGM dashboard test needs a real Prometheus (Debian's prometheus package; make test installs it)")
	promtool := testutil.RequirePromtool(t)
	m, err := mixin.Evaluate(dcgmOverrides)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rules, err := m.RulesYAML()
	if err != nil {
		t.Fatal(err)
	}
	rulesPath := filepath.Join(dir, "rules.yml")
	testutil.WriteFile(t, rulesPath, string(rules))
	if out, err := exec.Command(promtool, "check", "rules", rulesPath).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules (gpuSource dcgm): %v\n%s", err, out)
	}
	b, err := json.Marshal(m.Dashboards["llm-prober-serving-stack.json"])
	if err != nil {
		t.Fatal(err)
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	values := map[string]string{"job": ".*", "target": ".*", "probe": ".*", "model": ".*",
		"__rate_interval": "10s", "__interval": "1s", "__range": "1m"}
	var checks [][2]string
	for _, q := range Queries(&d) {
		if strings.Contains(q.Expr, "llm_gpu_") {
			t.Errorf("%s reads the prober's GPU series with gpuSource dcgm: %s", q.Where, q.Expr)
		}
		if !strings.Contains(q.Expr, "DCGM_FI_") {
			continue
		}
		expr, err := Substitute(q.Expr, values)
		if err != nil {
			t.Fatal(err)
		}
		checks = append(checks, [2]string{q.Where, expr})
	}
	if len(checks) < 9 {
		t.Fatalf("only %d DCGM queries in the serving-stack dashboard", len(checks))
	}
	nvmlExposition, nvmlChecks := nvmlSource(t, values)
	checks = append(checks, nvmlChecks...)

	fixture, err := os.ReadFile("testdata/dcgm/metrics.prom")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		switch r.URL.Path {
		case "/dcgm":
			w.Write(fixture)
		case "/prober":
			io.WriteString(w, proberFixture+nvmlExposition)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	target := strings.TrimPrefix(srv.URL, "http://")
	promAddr := testutil.FreeAddr(t)
	cfg := filepath.Join(dir, "prometheus.yml")
	testutil.WriteFile(t, cfg, fmt.Sprintf(dcgmPrometheusConfig, rulesPath, target, target))
	prom := testutil.StartProcess(t, "prometheus", exec.Command(prometheusBin,
		"--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn"))
	prom.WaitReady(t, "http://"+promAddr)
	api := "http://" + promAddr

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var missing []string
	for ctx.Err() == nil {
		missing = missing[:0]
		for _, c := range checks {
			if n, err := finiteSamples(ctx, api, c[1]); err != nil || n == 0 {
				missing = append(missing, fmt.Sprintf("%s: %d values, %v\n  %s", c[0], n, err, c[1]))
			}
		}
		if len(missing) == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d GPU queries without data:\n%s", len(missing), len(checks), strings.Join(missing, "\n"))
	}
	t.Logf("%d GPU panel queries (DCGM and NVML) return data", len(checks))

	// The units and labels are the prober's: bytes, ratios, hertz, and
	// uuid/name/node from UUID/modelName/Hostname.
	for expr, want := range map[string]float64{
		`max(label_join(label_join(label_join(DCGM_FI_DEV_FB_USED{job="dcgm-exporter"} * 1048576, "uuid", "", "UUID"), "name", "", "modelName"), "node", "", "Hostname"))`: 72445 * 1048576,
	} {
		if v, err := oneValue(ctx, api, expr); err != nil || v != want {
			t.Errorf("%s = %v (%v), want %v", expr, v, err, want)
		}
	}
	for _, c := range checks {
		if strings.Contains(c[0], `"GPU utilisation"`) {
			got, err := samples(ctx, api, c[1])
			if err != nil || len(got) != 2 {
				t.Fatalf("GPU utilisation: %v, %v", got, err)
			}
			for _, s := range got {
				if s.Metric["uuid"] == "" || s.Metric["name"] != "NVIDIA H100 80GB HBM3" || s.Metric["node"] != "gpu-node-1" {
					t.Errorf("GPU utilisation series labels %v", s.Metric)
				}
				if v, _ := strconv.ParseFloat(s.Value[1].(string), 64); s.Metric["gpu"] == "0" && v != 0.87 {
					t.Errorf("GPU 0 utilisation %v, want 0.87", v)
				}
			}
		}
	}

	// Every rule evaluates cleanly, and XID 79 (fatal) on GPU 1 fires at once.
	deadline := time.Now().Add(30 * time.Second)
	for {
		bad, fired, err := ruleState(ctx, api)
		if err == nil && len(bad) == 0 && fired["LLMGPUXIDFatal"] == "1/79" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rules with gpuSource dcgm: unhealthy %v, alerts %v, %v", bad, fired, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// nvmlSource is the exposition of the GPU collector reading two stub GPUs
// (one with a process and an XID) and the shipped serving-stack
// dashboard's GPU queries, substituted.
func nvmlSource(t *testing.T, values map[string]string) (string, [][2]string) {
	if !nvmltest.CanLoad {
		t.Log("this build has no NVML: checking the DCGM source only")
		return "", nil
	}
	stub := nvmltest.Build(t)
	stub.Set(t, nvmltest.Devices(2, map[string]string{
		"xid": "0:79", "dev0.procs": "1", "dev0.proc0.pid": "4242", "dev0.proc0.mem": "50000000000",
		"pidname.4242": "tritonserver", "dev0.reasons": "0x4",
	}))
	c := collector.NewGPUCollector(collector.GPUOptions{})
	t.Cleanup(c.Close)
	if err := c.Apply(collector.GPUSettings{Mode: collector.GPUOn, Library: stub.Path}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	var mfs []*dto.MetricFamily
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		if mfs, err = reg.Gather(); err != nil {
			t.Fatal(err)
		}
		if n, _ := promtestutil.GatherAndCount(reg, "llm_gpu_xid_errors_total"); n == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	var checks [][2]string
	for _, q := range Queries(parsed(t)["llm-prober-serving-stack.json"]) {
		if !strings.Contains(q.Expr, "llm_gpu_") {
			continue
		}
		expr, err := Substitute(q.Expr, values)
		if err != nil {
			t.Fatal(err)
		}
		checks = append(checks, [2]string{"NVML " + q.Where, expr})
	}
	if len(checks) < 12 {
		t.Fatalf("only %d NVML GPU queries in the serving-stack dashboard", len(checks))
	}
	return b.String(), checks
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func apiGet(ctx context.Context, api, path string, params url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+path+"?"+params.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Status, Error string
		Data          json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return err
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", path, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}

func samples(ctx context.Context, api, expr string) ([]promSample, error) {
	var data struct {
		ResultType string       `json:"resultType"`
		Result     []promSample `json:"result"`
	}
	if err := apiGet(ctx, api, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %s", data.ResultType)
	}
	return data.Result, nil
}

func finiteSamples(ctx context.Context, api, expr string) (int, error) {
	ss, err := samples(ctx, api, expr)
	n := 0
	for _, s := range ss {
		str, _ := s.Value[1].(string)
		if v, err := strconv.ParseFloat(str, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
			n++
		}
	}
	return n, err
}

func oneValue(ctx context.Context, api, expr string) (float64, error) {
	ss, err := samples(ctx, api, expr)
	if err != nil || len(ss) != 1 {
		return 0, fmt.Errorf("%d samples, %v", len(ss), err)
	}
	str, _ := ss[0].Value[1].(string)
	return strconv.ParseFloat(str, 64)
}

// ruleState lists rules whose last evaluation failed, and per firing alert
// "gpu/err_code".
func ruleState(ctx context.Context, api string) (bad []string, fired map[string]string, err error) {
	var data struct {
		Groups []struct {
			// Interval in seconds: a group evaluated every 5 minutes (the
			// 30-day error budget) may not have run yet within the test.
			Interval float64 `json:"interval"`
			Rules    []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
				Alerts    []struct {
					Labels map[string]string `json:"labels"`
					State  string            `json:"state"`
				} `json:"alerts"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := apiGet(ctx, api, "/api/v1/rules", url.Values{}, &data); err != nil {
		return nil, nil, err
	}
	fired = map[string]string{}
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			if r.Health != "ok" && !(r.Health == "unknown" && g.Interval > 60) {
				bad = append(bad, fmt.Sprintf("%s: %s %s", r.Name, r.Health, r.LastError))
			}
			for _, a := range r.Alerts {
				if a.State == "firing" {
					fired[r.Name] = a.Labels["gpu"] + "/" + a.Labels["err_code"]
				}
			}
		}
	}
	return bad, fired, nil
}
