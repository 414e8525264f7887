package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/shard"
)

var probeSeriesRE = regexp.MustCompile(`(?m)^llm_probe_requests_total\{model="[^"]*",outcome="success",probe="([^"]*)",target="([^"]*)"\}`)

// Two replicas with --shard.count=2 run disjoint sets of probes whose
// union is every probe, and say which shard they are.
func TestShardedReplicasSplitProbes(t *testing.T) {
	sim := startSimulator(t)
	var b strings.Builder
	b.WriteString("targets:\n")
	for i := range 4 {
		fmt.Fprintf(&b, "  - {name: t%d, protocol: openai_chat, url: '%s', model: sim-llm, probes: [{name: a, schedule: {every: 1s}}, {name: b, schedule: {every: 1s}}, {name: c, schedule: {every: 1s}}]}\n", i, sim)
	}
	b.WriteString("workloads:\n  default: {max_tokens: 4}\n")
	seen := map[string]int{}
	for i := range 2 {
		td := startDaemon(t, b.String(), func(o *serveOptions) { o.shard = shard.Shard{Count: 2, Index: i} })
		_, _, body := get(t, "GET", td.url+"/metrics")
		if want := fmt.Sprintf(`llm_prober_shard_info{shard_count="2",shard_index="%d"} 1`, i); !strings.Contains(body, want) {
			t.Errorf("replica %d lacks %s", i, want)
		}
		n := 0
		for _, m := range probeSeriesRE.FindAllStringSubmatch(body, -1) {
			seen[m[2]+"/"+m[1]]++
			n++
		}
		if v, _ := seriesValue(body, "llm_prober_shard_probes"); int(v) != n || n == 0 || n == 12 {
			t.Errorf("replica %d runs %d probes, llm_prober_shard_probes %v; want a share of 12", i, n, v)
		}
	}
	if len(seen) != 12 {
		t.Errorf("the replicas together run %d distinct probes, want 12: %v", len(seen), seen)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s runs on %d replicas", k, n)
		}
	}
}

func TestShardFlags(t *testing.T) {
	var stdout, stderr testutil.SyncBuffer
	code := run(t.Context(), []string{"--shard.count=2", "--shard.index=2"}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--shard.index must be 0 to 1") {
		t.Errorf("exit %d, stderr %s", code, stderr.String())
	}
}

// /probe driven by a real Prometheus scrape configuration with the
// relabelling blackbox_exporter's README shows: one probe per scrape,
// the target's results under its instance label.
func TestProbeEndpointScrapedByPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real Prometheus")
	}
	bin := testutil.RequireTool(t, "prometheus", "LLM_PROBER_REQUIRE_PROMTOOL",
		"make test installs Debian's prometheus package (scripts/ensure-promtool.sh)")
	// A counting proxy in front of the simulator sees every probe.
	simURL, err := url.Parse(startSimulator(t))
	if err != nil {
		t.Fatal(err)
	}
	var probes atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(simURL)
	rp.FlushInterval = -1
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			probes.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()

	td := startDaemon(t, `
modules:
  chat:
    protocol: openai_chat
    model: sim-llm
    allowed_targets: 'http://127\.0\.0\.1:[0-9]+'
    probes: [{name: short, workload: tiny, schedule: {every: 15s}}]
workloads:
  tiny: {max_tokens: 4}
`)
	proberAddr := strings.TrimPrefix(td.url, "http://")
	dir := t.TempDir()
	promCfg := fmt.Sprintf(`
global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: llm
    metrics_path: /probe
    params: {module: [chat]}
    static_configs:
      - targets: ['%s']
    relabel_configs:
      - source_labels: [__address__]
        target_label: __param_target
      - source_labels: [__param_target]
        target_label: instance
      - target_label: __address__
        replacement: '%s'
`, proxy.URL, proberAddr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(promCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := testutil.FreeAddr(t)
	prom := testutil.StartProcess(t, "prometheus", exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr))
	prom.WaitHTTP(t, "http://"+promAddr+"/-/ready")

	query := func(q string) (float64, bool) {
		resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return 0, false
		}
		defer resp.Body.Close()
		var body struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&body) != nil || len(body.Data.Result) != 1 {
			return 0, false
		}
		s, _ := body.Data.Result[0].Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		return v, err == nil
	}
	sel := fmt.Sprintf(`{job="llm",instance=%q}`, proxy.URL)
	testutil.Poll(t, "three successful /probe scrapes", 20*time.Second, 200*time.Millisecond, func() (bool, string) {
		n, _ := query("sum_over_time(llm_probe_success" + sel + "[1m])")
		return n >= 3, fmt.Sprintf("%v successful scrapes", n)
	})
	if v, ok := query("llm_probe_last_time_to_first_token_seconds" + sel); !ok || v <= 0 {
		t.Errorf("TTFT %v (found %v)", v, ok)
	}
	// Every scrape Prometheus made (up's samples) sent one probe; a
	// scrape may be in flight between the two reads.
	scrapes, _ := query("count_over_time(up" + sel + "[5m])")
	if got := probes.Load(); got < int64(scrapes) || got > int64(scrapes)+1 {
		t.Errorf("%d probes for %v scrapes; want one per scrape", got, scrapes)
	}
}
