package status

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/prometheus/common/model"
)

type fakeServers struct {
	snap      []collector.ServerSnapshot
	refreshes atomic.Int64
	at        time.Time
}

func (f *fakeServers) Snapshot() []collector.ServerSnapshot { return f.snap }
func (f *fakeServers) Refresh() {
	f.refreshes.Add(1)
	for i := range f.snap {
		f.snap[i].CollectedAt = f.at
	}
}

type fakeGPUs struct{ snap collector.GPUSnapshot }

func (f *fakeGPUs) Snapshot() collector.GPUSnapshot { return f.snap }
func (f *fakeGPUs) Refresh()                        {}

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture is a config of targets × probes, each probe's history full of
// streamed 100-token results, every tenth a failure with a hostile error.
func fixture(tb testing.TB, targets, probes, results int) (*config.Config, *History) {
	tb.Helper()
	cfg := &config.Config{GPUs: config.GPUs{Enabled: "auto"}}
	h := NewHistory(results)
	for ti := range targets {
		t := &config.Target{Name: fmt.Sprintf("target-%d", ti), Protocol: "openai_chat", URL: fmt.Sprintf("http://10.0.0.%d:8000", ti), Model: "llama",
			ServerMetrics: &config.ServerMetrics{URL: fmt.Sprintf("http://10.0.0.%d:8000/metrics", ti), Kind: "vllm"}}
		for pi := range probes {
			pc := &config.Probe{Name: fmt.Sprintf("probe-%d", pi)}
			t.Probes = append(t.Probes, pc)
			h.Add(engine.Info{Target: t.Name, Probe: pc.Name, Protocol: t.Protocol, Endpoint: t.URL})
			for i := range results {
				r := &probe.Result{RequestID: fmt.Sprintf("%032x", i), Start: now.Add(-time.Duration(results-i) * time.Second), StatusCode: 200,
					Streamed: true, TTFT: time.Duration(20+i%7) * time.Millisecond, Outcome: probe.OutcomeSuccess, FinishReason: "length",
					OutputTokens: 100, OutputTokensSource: probe.TokenSourceServer, InputTokens: 256, InputTokensSource: probe.TokenSourceServer}
				for c := range 100 {
					r.Chunks = append(r.Chunks, probe.Chunk{At: r.TTFT + time.Duration(c)*5*time.Millisecond, Tokens: 1})
				}
				r.EndToEnd = r.Chunks[99].At + time.Millisecond
				if i%10 == 9 {
					r.Outcome, r.StatusCode, r.Chunks = probe.OutcomeHTTP5xx, 503, nil
					r.Err = errors.New(`server said <script>alert("x")</script> & "quotes"`)
				}
				h.Record(t.Name, pc.Name, &probe.Request{Model: "llama", MaxTokens: 100, Stream: true, Prompt: "hi"}, r)
			}
		}
		cfg.Targets = append(cfg.Targets, t)
	}
	return cfg, h
}

func newHandler(tb testing.TB, cfg *config.Config, h *History, servers ServerSource, gpus GPUSource) *Handler {
	tb.Helper()
	hd, err := New(Options{Config: func() *config.Config { return cfg }, History: h, Servers: servers, GPUs: gpus,
		Version: "(version=1.0)", Now: func() time.Time { return now },
		Links: []Link{{Address: "/metrics", Text: "Metrics", Description: "metrics"}}})
	if err != nil {
		tb.Fatal(err)
	}
	return hd
}

func serve(tb testing.TB, hd *Handler, path string) (int, http.Header, string) {
	tb.Helper()
	mux := http.NewServeMux()
	hd.Register(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Header(), string(b)
}

func TestIndexEscapesAndSummarises(t *testing.T) {
	cfg, h := fixture(t, 2, 2, 20)
	servers := &fakeServers{at: now, snap: []collector.ServerSnapshot{
		{Target: "target-0", URL: "http://10.0.0.0:8000/metrics", Kind: "vllm", CollectedAt: now.Add(-time.Second), Up: true,
			Models: []collector.ServerModelSnapshot{{Model: "llama", Waiting: 3, HasWaiting: true, Running: 8, HasRunning: true, KVCacheUsage: 0.5, HasKVCache: true}}},
		{Target: "target-1", Kind: "vllm", CollectedAt: now.Add(-time.Second), Err: "HTTP status 500 <b>"},
	}}
	code, hdr, body := serve(t, newHandler(t, cfg, h, servers, &fakeGPUs{snap: collector.GPUSnapshot{Enabled: "auto"}}), "/")
	if code != 200 || hdr.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(hdr.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("%d %v", code, hdr)
	}
	for _, want := range []string{
		`<h3>target-1</h3>`, `data-probe="probe-1"`, `<a href="/probes/target-0/probe-1">results</a>`,
		// The last result (i=19) failed: its escaped error is shown.
		`<td class="outcome fail">http_5xx</td>`,
		`server said &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &#34;quotes&#34;`,
		`90.0% <span class="muted">(18/20)</span>`,
		`<td class="n">3</td><td class="n">8</td><td class="n">50.0%</td>`,
		`HTTP status 500 &lt;b&gt;`,
		`No GPU metrics (gpus.enabled is auto; NVML is not available on this host).`,
		`(version=1.0)`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/ lacks %s", want)
		}
	}
	if strings.Contains(body, "<script>") {
		t.Error("unescaped server text on /")
	}
	if n := servers.refreshes.Load(); n != 0 {
		t.Errorf("fresh snapshots refreshed %d times", n)
	}
}

func TestIndexRefreshesStaleServers(t *testing.T) {
	cfg, h := fixture(t, 1, 1, 1)
	servers := &fakeServers{at: now, snap: []collector.ServerSnapshot{{Target: "target-0", Kind: "vllm", CollectedAt: now.Add(-2 * time.Minute), Up: true}}}
	hd := newHandler(t, cfg, h, servers, nil)
	serve(t, hd, "/")
	serve(t, hd, "/")
	if n := servers.refreshes.Load(); n != 1 {
		t.Errorf("a stale snapshot refreshed %d times over two loads, want 1", n)
	}
}

func TestProbePage(t *testing.T) {
	cfg, h := fixture(t, 1, 1, 20)
	hd := newHandler(t, cfg, h, nil, nil)
	code, _, body := serve(t, hd, "/probes/target-0/probe-0")
	if code != 200 {
		t.Fatalf("%d", code)
	}
	if n := strings.Count(body, `<tr class="result`); n != 20 {
		t.Errorf("%d result rows, want 20", n)
	}
	// Newest first, the newest failure's log open, the others folded.
	first := strings.Index(body, `<tr class="result`)
	if !strings.Contains(body[first:first+200], "03:04:04.000") {
		t.Errorf("newest result not first: %s", body[first:first+200])
	}
	if strings.Count(body, `<details class="debug-log" open>`) != 1 || strings.Count(body, `<details class="debug-log">`) != 1 {
		t.Error("want the newest failure's debug log open and the other folded")
	}
	for _, want := range []string{
		`Sending openai_chat request to http://10.0.0.0:8000: model=&#34;llama&#34; max_tokens=100 stream=true prompt=2 characters`,
		`Response head: status 503`,
		`<td class="n">100 (server)</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("probe page lacks %s", want)
		}
	}
	if strings.Contains(body, "<script>") {
		t.Error("unescaped server text on the probe page")
	}
}

func TestIndexDrawsCharts(t *testing.T) {
	cfg, h := fixture(t, 1, 2, 20)
	off := false
	cfg.Targets[0].Probes[1].Stream = &off
	cfg.Targets[0].Probes[0].SLO = &config.SLO{TTFT: model.Duration(250 * time.Millisecond)}
	cfg.Targets[0].Probes = append(cfg.Targets[0].Probes, &config.Probe{Name: "fresh"})
	h.Add(engine.Info{Target: "target-0", Probe: "fresh", Protocol: "openai_chat", Endpoint: "http://10.0.0.0:8000"})
	_, hdr, body := serve(t, newHandler(t, cfg, h, nil, nil), "/")
	rows := strings.Split(body, `<tr class="probe`)[1:]
	if len(rows) != 3 {
		t.Fatalf("%d probe rows", len(rows))
	}
	// A streaming probe: TTFT with its SLO, and TPOT; one that does not
	// stream: end-to-end; one without results: none.
	for i, want := range [][]string{
		{`<text x="6" y="18">TTFT</text>`, `<text x="6" y="18">TPOT</text>`, `<path class="slo"`, `<path class="fails"`, `<title>TTFT of the last 20 results (over 19s): 18 successful`},
		{`<text x="6" y="18">end-to-end</text>`},
		{`no results yet`},
	} {
		for _, w := range want {
			if !strings.Contains(rows[i], w) {
				t.Errorf("probe row %d lacks %s", i, w)
			}
		}
	}
	if n := []int{strings.Count(rows[0], `<svg class="spark"`), strings.Count(rows[1], `<svg class="spark"`), strings.Count(rows[2], `<svg class="spark"`)}; n[0] != 2 || n[1] != 1 || n[2] != 0 {
		t.Errorf("charts per probe %v, want 2, 1, 0", n)
	}
	if strings.Contains(body, "<script") || !strings.HasPrefix(hdr.Get("Content-Security-Policy"), "default-src 'none'; style-src 'unsafe-inline';") {
		t.Error("the charts came with a script, or the CSP changed")
	}
}

func TestProbePageWaterfall(t *testing.T) {
	cfg, h := fixture(t, 1, 1, 20)
	hd := newHandler(t, cfg, h, nil, nil)
	id := func(i int) string { return fmt.Sprintf("%032x", i) }
	// By default the newest (i = 19, a failure).
	_, _, body := serve(t, hd, "/probes/target-0/probe-0")
	if !strings.Contains(body, `<h3 id="waterfall">Result of <span title="2026-01-02 03:04:04.000Z">03:04:04.000</span>: <span class="fail">http_5xx</span>, request id <span class="mono">`+id(19)+`</span></h3>`) {
		t.Errorf("the newest result's waterfall is not shown:\n%s", body)
	}
	if strings.Count(body, `<svg class="waterfall"`) != 1 || strings.Count(body, " selected\"") != 1 ||
		!strings.Contains(body, `<tr class="result failrow selected">`) {
		t.Error("want one waterfall and the newest row selected")
	}
	// Every row links to its waterfall.
	for i := range 20 {
		if !strings.Contains(body, `<a href="?result=`+id(i)+`#waterfall"`) {
			t.Errorf("no link to result %d's waterfall", i)
		}
	}
	// ?result= picks one.
	_, _, body = serve(t, hd, "/probes/target-0/probe-0?result="+id(5))
	if !strings.Contains(body, `request id <span class="mono">`+id(5)+`</span></h3>`) ||
		!strings.Contains(body, `<tr class="result selected">`+"\n"+`<td class="n" title="2026-01-02 03:03:50.000Z"><a href="?result=`+id(5)+`#waterfall" aria-current="true">`) {
		t.Errorf("result 5 not chosen:\n%s", body)
	}
	if strings.Contains(body, "no longer kept") {
		t.Error("a kept result said gone")
	}
	// One no longer kept (or never): the newest, saying so, not echoing
	// what was asked.
	for _, q := range []string{"nope", "%3Cscript%3Ealert(1)%3C%2Fscript%3E"} {
		_, _, body = serve(t, hd, "/probes/target-0/probe-0?result="+q)
		if !strings.Contains(body, "The result asked for is no longer kept; this is the newest.") ||
			!strings.Contains(body, `request id <span class="mono">`+id(19)+`</span></h3>`) || strings.Contains(body, "<script>") || strings.Contains(body, "nope") {
			t.Errorf("?result=%s:\n%s", q, body)
		}
	}
	// Without results, no waterfall.
	h2 := NewHistory(5)
	h2.Add(engine.Info{Target: "target-0", Probe: "probe-0"})
	_, _, body = serve(t, newHandler(t, cfg, h2, nil, nil), "/probes/target-0/probe-0")
	if strings.Contains(body, "<svg") || !strings.Contains(body, "No results yet.") {
		t.Errorf("no results:\n%s", body)
	}
}

func TestNotFoundAndDisabledHistory(t *testing.T) {
	cfg, _ := fixture(t, 1, 1, 0)
	hd := newHandler(t, cfg, nil, nil, nil)
	for _, path := range []string{"/probes/target-0/nope", "/probes/nope/probe-0", "/probes/%3Cscript%3E/x", "/elsewhere"} {
		code, _, body := serve(t, hd, path)
		if code != 404 || !strings.Contains(body, `id="not-found"`) || strings.Contains(body, "<script>") {
			t.Errorf("%s: %d\n%s", path, code, body)
		}
	}
	_, _, body := serve(t, hd, "/probes/target-0/probe-0")
	if !strings.Contains(body, "history is disabled (--history.results-per-probe=0)") {
		t.Errorf("disabled history not explained:\n%s", body)
	}
	_, _, body = serve(t, hd, "/")
	if !strings.Contains(body, "no history kept") {
		t.Error("/ does not say no history is kept")
	}
	hd = newHandler(t, nil, nil, nil, nil)
	if _, _, body := serve(t, hd, "/"); !strings.Contains(body, "No valid configuration is loaded yet.") {
		t.Error("no config not explained")
	}
}

// BenchmarkRenderIndex100Probes renders "/" for 10 targets × 10 probes,
// each with a full history of 100 results (the default).
func BenchmarkRenderIndex100Probes(b *testing.B) {
	cfg, h := fixture(b, 10, 10, 100)
	servers := &fakeServers{at: now}
	for _, t := range cfg.Targets {
		servers.snap = append(servers.snap, collector.ServerSnapshot{Target: t.Name, Kind: "vllm", CollectedAt: now, Up: true,
			Models: []collector.ServerModelSnapshot{{Model: "llama", HasWaiting: true, HasRunning: true, HasKVCache: true}}})
	}
	benchPage(b, newHandler(b, cfg, h, servers, &fakeGPUs{snap: collector.GPUSnapshot{Enabled: "auto"}}), "/")
}

// BenchmarkRenderProbePage renders one probe's page with 100 results.
func BenchmarkRenderProbePage(b *testing.B) {
	cfg, h := fixture(b, 1, 1, 100)
	benchPage(b, newHandler(b, cfg, h, nil, nil), "/probes/target-0/probe-0")
}

// benchPage renders path through the handler's routes, reporting the page size.
func benchPage(b *testing.B, hd *Handler, path string) {
	mux := http.NewServeMux()
	hd.Register(mux)
	req := httptest.NewRequest("GET", path, nil)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/page")
}

// TestAlertingVerdict: "/" shows under each schedule how soon the alerts
// fire, marked when a target is missed; the probe page has it in full,
// with the warnings.
func TestAlertingVerdict(t *testing.T) {
	cfg, h := fixture(t, 1, 3, 5)
	probes := cfg.Targets[0].Probes
	probes[0].Schedule = config.Schedule{Every: model.Duration(5 * time.Minute)}
	probes[0].SLO = &config.SLO{TTFT: model.Duration(time.Second), Objective: 0.999}
	probes[0].Timeout = model.Duration(time.Minute)
	probes[1].Schedule = config.Schedule{Every: model.Duration(30 * time.Second)}
	probes[1].SLO = &config.SLO{TTFT: model.Duration(time.Second), Objective: 0.8}
	probes[2].Schedule = config.Schedule{Concurrency: 2}
	hd := newHandler(t, cfg, h, nil, nil)
	_, _, body := serve(t, hd, "/")
	rows := strings.Split(body, `<tr class="probe`)[1:]
	if len(rows) != 3 {
		t.Fatalf("%d probe rows", len(rows))
	}
	for i, want := range []string{
		`<td>every 5m<br><span class="alerting muted" title="a hard outage pages after ~11m (a hung server ~12m); a 2× regression of its 99.9% objective pages after ~16m; a page within 10m needs ≥ 20 requests/hour (has 12)">outage pages ~11m, 2× SLO ~16m</span></td>`,
		`<td>every 30s<br><span class="alerting fail" title="a hard outage pages after ~2m45s; a 2× regression of its 80% objective pages after ~21m; no probe rate pages within 10m at this objective` + "\n" +
			`WARNING: a 2× regression of the 80% objective pages after ~21m, not within 10m; no probe rate gets a page within 10m at this objective">warning: outage pages ~2m45s, 2× SLO ~21m</span></td>`,
		`<td>concurrency 2<br><span class="alerting muted" title="no planned rate (a closed loop runs as fast as the server answers), so when its alerts fire cannot be predicted">alert times unknown: no planned rate</span></td>`,
	} {
		if !strings.Contains(rows[i], want) {
			t.Errorf("probe row %d lacks\n%s\nin\n%s", i, want, rows[i])
		}
	}
	_, _, body = serve(t, hd, "/probes/target-0/probe-1")
	for _, want := range []string{
		`<p class="meta alerting">Alerting: a hard outage pages after ~2m45s; a 2× regression of its 80% objective pages after ~21m; no probe rate pages within 10m at this objective. If it stops running, LLMProbeNotRunning tickets after ~2m15s. <span class="muted">(assuming Prometheus scrapes the prober every 15s and evaluates the rules every 30s; times are worst cases at the planned mean rate.)</span></p>`,
		`<p class="meta fail alerting-warning">Warning: a 2× regression of the 80% objective pages after ~21m, not within 10m; no probe rate gets a page within 10m at this objective.</p>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("probe page lacks\n%s", want)
		}
	}
}
