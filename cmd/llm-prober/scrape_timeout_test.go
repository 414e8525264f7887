package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/internal/testutil"
)

// stuckConfig probes the simulator from two targets: sim, whose server
// metrics are the simulator's, and stuck, whose server_metrics URL hangs.
func stuckConfig(sim, hung, timeout string) string {
	return fmt.Sprintf(`targets:
  - name: sim
    protocol: openai_chat
    url: %[1]s
    model: sim-llm
    api_key_file: key
    server_metrics: {url: %[1]s/metrics, kind: vllm}
    probes:
      - {name: steady, schedule: {every: 100ms}}
  - name: stuck
    protocol: openai_chat
    url: %[1]s
    model: sim-llm
    api_key_file: key
    server_metrics: {url: %[2]s, kind: vllm, timeout: %[3]s}
    probes:
      - {name: steady, schedule: {every: 100ms}}
workloads:
  default: {max_tokens: 8, ignore_eos: true}
`, sim, hung, timeout)
}

type scrapeResult struct {
	status      int
	contentType string
	body        string
	elapsed     time.Duration
}

// scrapeMetrics GETs /metrics with the given headers, as Prometheus does.
func scrapeMetrics(t *testing.T, td *testDaemon, headers map[string]string) scrapeResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, td.url+"/metrics", nil)
	if err != nil {
		t.Error(err)
		return scrapeResult{}
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return scrapeResult{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Error(err)
	}
	return scrapeResult{resp.StatusCode, resp.Header.Get("Content-Type"), string(b), time.Since(start)}
}

var promScrapeHeader = map[string]string{collector.ScrapeTimeoutHeader: "1"}

// TestScrapeTimeoutHeaderBoundsServerFetches: with Prometheus's
// X-Prometheus-Scrape-Timeout-Seconds: 1, a model server that hangs (5s
// configured timeout) no longer makes the whole scrape time out: the
// scrape ends within the header's bound with llm_server_up 0 for that
// target and everything else present, once.
func TestScrapeTimeoutHeaderBoundsServerFetches(t *testing.T) {
	hung, _ := testutil.HungServer(t) // cleaned up after the daemon: it stops first
	td := startDaemon(t, stuckConfig(startSimulator(t), hung.URL+"/metrics", "5s"))
	// Probe results of both targets, fetched with the header throughout:
	// without it every scrape here would take the 5s timeout.
	testutil.WaitFor(t, "probe results of both targets", waitTimeout, func() bool {
		body := scrapeMetrics(t, td, promScrapeHeader).body
		_, sim := testutil.SampleLine(body, `llm_probe_success{model="sim-llm",probe="steady",target="sim"}`)
		_, stuck := testutil.SampleLine(body, `llm_probe_success{model="sim-llm",probe="steady",target="stuck"}`)
		return sim == 1 && stuck == 1
	})

	r := scrapeMetrics(t, td, promScrapeHeader)
	t.Logf("scrape with %s: 1 against a hung server (5s timeout): %s", collector.ScrapeTimeoutHeader, r.elapsed)
	// The fetches get 0.5s; 3s is generous for a slow, shared machine and
	// still well inside the 5s the configured timeout would take.
	if r.status != http.StatusOK || r.elapsed > 3*time.Second {
		t.Fatalf("scrape: status %d after %s, want 200 within 3s", r.status, r.elapsed)
	}
	for series, want := range map[string]string{
		`llm_server_up{target="stuck"}`:                                    "0",
		`llm_server_up{target="sim"}`:                                      "1",
		`llm_prober_collector_success{collector="server_metrics"}`:         "0",
		`llm_probe_success{model="sim-llm",probe="steady",target="sim"}`:   "1",
		`llm_probe_success{model="sim-llm",probe="steady",target="stuck"}`: "1",
	} {
		if v, n := testutil.SampleLine(r.body, series); n != 1 || v != want {
			t.Errorf("%s = %q (%d times), want %q once", series, v, n, want)
		}
	}
	if v, n := testutil.SampleLine(r.body, `llm_server_scrape_duration_seconds{target="stuck"}`); n != 1 || v == "" {
		t.Errorf("scrape duration of the stuck target: %q (%d times)", v, n)
	}
	// Every family once: the main registry's and the per-scrape one's,
	// merged.
	for _, family := range []string{
		"go_goroutines", "process_cpu_seconds_total", "llm_prober_build_info",
		"llm_prober_collector_success", "llm_prober_config_last_reload_successful",
		"promhttp_metric_handler_errors_total", "llm_probe_success", "llm_server_up",
	} {
		if n := strings.Count(r.body, "# TYPE "+family+" "); n != 1 {
			t.Errorf("family %s appears %d times, want 1", family, n)
		}
	}
	promtoolCheckMetrics(t, r.body)
	// The failure is logged once, with why.
	const logged = "no complete answer within 500ms, the deadline of the scrape that asked (shorter than the 5s timeout)"
	if n := strings.Count(td.logs.String(), "Scraping model-server metrics failed"); n != 1 || !strings.Contains(td.logs.String(), logged) {
		t.Errorf("%d failure lines, want 1 with %q:\n%s", n, logged, td.logs)
	}

	// Format negotiation is promhttp's, header or not.
	for accept, want := range map[string]string{
		"application/openmetrics-text; version=1.0.0":                                                "application/openmetrics-text",
		"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited": "application/vnd.google.protobuf",
	} {
		r := scrapeMetrics(t, td, map[string]string{collector.ScrapeTimeoutHeader: "1", "Accept": accept})
		if r.status != http.StatusOK || !strings.HasPrefix(r.contentType, want) || r.elapsed > 3*time.Second {
			t.Errorf("Accept %s: status %d, %q after %s", accept, r.status, r.contentType, r.elapsed)
		}
	}

	// Concurrent scrapes, as from two Prometheus servers and a person, each
	// keep their bound.
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			r := scrapeMetrics(t, td, promScrapeHeader)
			if v, n := testutil.SampleLine(r.body, `llm_server_up{target="stuck"}`); r.status != 200 || n != 1 || v != "0" || r.elapsed > 3*time.Second {
				t.Errorf("concurrent scrape: status %d, up %q (%d times) after %s", r.status, v, n, r.elapsed)
			}
		})
	}
	wg.Wait()
}

// TestNoScrapeTimeoutHeaderKeepsConfiguredTimeout: without the header, or
// with one that is not a positive number of seconds, the configured timeout
// bounds the fetch, as before; so does a header allowing more than it.
func TestNoScrapeTimeoutHeaderKeepsConfiguredTimeout(t *testing.T) {
	hung, _ := testutil.HungServer(t) // cleaned up after the daemon: it stops first
	const timeout = 1500 * time.Millisecond
	td := startDaemon(t, stuckConfig(startSimulator(t), hung.URL+"/metrics", "1500ms"))
	var wg sync.WaitGroup
	for _, header := range []string{"", "abc", "0", "-1", "NaN", "10"} {
		wg.Go(func() {
			h := map[string]string{}
			if header != "" {
				h[collector.ScrapeTimeoutHeader] = header
			}
			r := scrapeMetrics(t, td, h)
			// The fetch cannot end before its timeout; the upper bound is
			// generous.
			if r.status != http.StatusOK || r.elapsed < timeout || r.elapsed > timeout+3*time.Second {
				t.Errorf("header %q: status %d after %s, want 200 after the %s timeout", header, r.status, r.elapsed, timeout)
			}
			if v, n := testutil.SampleLine(r.body, `llm_server_up{target="stuck"}`); n != 1 || v != "0" {
				t.Errorf("header %q: up %q (%d times)", header, v, n)
			}
		})
	}
	wg.Wait()
	if !strings.Contains(td.logs.String(), "no complete answer within the 1.5s timeout") {
		t.Errorf("configured timeout not reported:\n%s", td.logs)
	}
}

// TestMetricsMaxRequestsInFlight: the handler built per scrape keeps
// promhttp's limit of 10 scrapes in flight, answered as promhttp does.
func TestMetricsMaxRequestsInFlight(t *testing.T) {
	hung, arrived := testutil.HungServer(t)
	td := startDaemon(t, stuckConfig("http://127.0.0.1:1", hung.URL+"/metrics", "2s"))
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if r := scrapeMetrics(t, td, nil); r.status != http.StatusOK {
				t.Errorf("scrape within the limit: status %d", r.status)
			}
		})
	}
	// All ten hold the hung server, so all ten are in flight.
	testutil.WaitFor(t, "10 scrapes held by the hung server", waitTimeout, func() bool { return arrived.Load() >= 10 })
	r := scrapeMetrics(t, td, promScrapeHeader)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "Limit of concurrent requests reached (10), try again later.") {
		t.Errorf("11th scrape: status %d, body %q", r.status, r.body)
	}
	wg.Wait()
	if r := scrapeMetrics(t, td, promScrapeHeader); r.status != http.StatusOK {
		t.Errorf("scrape after the others ended: status %d", r.status)
	}
}

// TestServerMetricsDescribeWithMainRegistry: the model-server collector,
// gathered beside the main registry rather than in it, still registers in
// it without conflict, and the merged gather lints clean.
func TestServerMetricsDescribeWithMainRegistry(t *testing.T) {
	d := newDaemon(serveOptions{logger: promslog.NewNopLogger()})
	servers := prometheus.NewRegistry()
	servers.MustRegister(d.servers.Within(time.Second))
	problems, err := promtestutil.GatherAndLint(prometheus.Gatherers{d.registry, servers})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	if err := d.registry.Register(d.servers); err != nil {
		t.Errorf("server metrics conflict with the main registry: %v", err)
	}
}
