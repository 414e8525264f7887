package multitarget

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"go.uber.org/goleak"

	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newHandler(t *testing.T, maxConcurrent int) *Handler {
	t.Helper()
	return newHandlerWith(t, maxConcurrent, nil)
}

// newHandlerWith is newHandler registering its metrics with reg.
func newHandlerWith(t *testing.T, maxConcurrent int, reg prometheus.Registerer) *Handler {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yml")
	if err := os.WriteFile(p, []byte(`
modules:
  chat:
    protocol: openai_chat
    model: sim
    allowed_targets: 'http://127\.0\.0\.1:[0-9]+'
    probes: [{name: short, schedule: {every: 15s}, timeout: 10s}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return New(Options{Config: func() *config.Config { return cfg }, Logger: promslog.NewNopLogger(), MaxConcurrent: maxConcurrent, Registerer: reg})
}

func sim(t *testing.T, mutate func(*simulator.Config)) string {
	cfg := simulator.DefaultConfig()
	cfg.ServedModelNames = []string{"sim"}
	cfg.Output.MeanTokens = 8
	cfg.Latency.TTFTBase = 5 * time.Millisecond
	cfg.Latency.DecodeBase = time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	return simtest.Start(t, cfg).URL
}

func get(h http.Handler, query string, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/probe?"+query, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestProbeAnswersGauges(t *testing.T) {
	h := newHandler(t, 4)
	target := sim(t, nil)
	w := get(h, "module=chat&target="+url.QueryEscape(target), nil)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string) float64 {
		mf, ok := fams[name]
		if !ok || len(mf.Metric) == 0 {
			t.Fatalf("no %s in the answer", name)
		}
		return mf.Metric[0].GetGauge().GetValue()
	}
	if v := value("llm_probe_success"); v != 1 {
		t.Errorf("llm_probe_success = %v", v)
	}
	if v := value("llm_probe_last_time_to_first_token_seconds"); v < 0.004 || v > 5 {
		t.Errorf("TTFT %v s", v)
	}
	if v := value("llm_probe_last_output_tokens"); v < 1 {
		t.Errorf("output tokens %v", v)
	}
	for _, name := range []string{"llm_probe_last_request_duration_seconds", "llm_probe_last_time_per_output_token_seconds", "llm_probe_last_phase_duration_seconds"} {
		value(name)
	}
}

func TestProbeRefuses(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	h := newHandlerWith(t, 1, reg)
	long := strings.Repeat("a", 500_000)
	for _, tc := range []struct{ query, want, reason string }{
		{"module=nope&target=http://127.0.0.1:1", "unknown module", ReasonBadRequest},
		{"module=chat&target=http://10.0.0.1:1", "allowed_targets", ReasonNotAllowed},
		{"module=chat&target=http://127.0.0.1:1/../x", "allowed_targets", ReasonNotAllowed},
		{"module=chat&target=" + url.QueryEscape("http://127.0.0.1:1/?x=1"), "query", ReasonNotAllowed},
		{"module=chat", "target parameter", ReasonBadRequest},
		{"target=http://127.0.0.1:1", "module parameter", ReasonBadRequest},
		{"module=chat&target=http://127.0.0.1:1&probe=nope", "no probe", ReasonBadRequest},
		{"module=chat&target=http://10.0.0.1:1/" + long, "allowed_targets", ReasonNotAllowed},
		{"module=" + long + "&target=http://127.0.0.1:1", "unknown module", ReasonBadRequest},
		{"module=chat&target=http://127.0.0.1:1&probe=" + long, "no probe", ReasonBadRequest},
	} {
		before := testutil.ToFloat64(h.rejected.WithLabelValues(tc.reason))
		w := get(h, tc.query, nil)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%.100s: %d %.300q, want 400 with %q", tc.query, w.Code, w.Body, tc.want)
		}
		// A caller's 500 KB comes back as its first 256 bytes and "…".
		if n := w.Body.Len(); n > 1024 {
			t.Errorf("%.100s: an answer of %d bytes", tc.query, n)
		}
		if got := testutil.ToFloat64(h.rejected.WithLabelValues(tc.reason)); got != before+1 {
			t.Errorf("%.100s: rejected_total{reason=%q} went from %v to %v, want +1", tc.query, tc.reason, before, got)
		}
	}
	if n := testutil.CollectAndCount(h.rejected); n != 4 {
		t.Errorf("%d series of rejected_total, want one per reason", n)
	}
}

// The scrape timeout bounds the probe, and the concurrency limit turns
// away what cannot get a slot within SlotWait. The second scrape starts
// once the first holds the only slot, whose probe (0.5 s) lets it go long
// after SlotWait.
func TestProbeBoundedByScrapeTimeout(t *testing.T) {
	h := newHandler(t, 1)
	slow := sim(t, func(c *simulator.Config) { c.Latency.TTFTBase = 5 * time.Second })
	query := "module=chat&target=" + url.QueryEscape(slow)
	var first *httptest.ResponseRecorder
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		first = get(h, query, http.Header{"X-Prometheus-Scrape-Timeout-Seconds": {"1"}})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(h.slots) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	second := get(h, query, http.Header{"X-Prometheus-Scrape-Timeout-Seconds": {"0.8"}})
	<-done
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %s with a 1 s scrape timeout", d)
	}
	if b := first.Body.String(); first.Code != http.StatusOK || !strings.Contains(b, "llm_probe_success{") ||
		!strings.Contains(b, `outcome="timeout",probe="short"} 1`) {
		t.Errorf("the probe holding the slot: %d %s, want 200 and a timed-out probe", first.Code, b)
	}
	if second.Code != http.StatusServiceUnavailable || !strings.Contains(second.Body.String(), "too many /probe requests in flight") {
		t.Errorf("the probe waiting for the slot: %d %s, want 503", second.Code, second.Body)
	}
}

func TestProbeDebug(t *testing.T) {
	h := newHandler(t, 1)
	w := get(h, "module=chat&debug=true&target="+url.QueryEscape(sim(t, nil)), nil)
	body := w.Body.String()
	for _, want := range []string{"Logs for the probe:", "Beginning probe", "Metrics that would have been returned:", "llm_probe_success"} {
		if !strings.Contains(body, want) {
			t.Errorf("debug answer lacks %q:\n%s", want, body)
		}
	}
}

func TestScrapeTimeout(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   time.Duration
	}{
		{"", 10 * time.Second}, {"5", 4500 * time.Millisecond}, {"0.5", 250 * time.Millisecond},
		{"60", 10 * time.Second}, {"NaN", 10 * time.Second}, {"-1", 10 * time.Second},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("X-Prometheus-Scrape-Timeout-Seconds", tc.header)
		}
		if got := scrapeTimeout(h, 10*time.Second); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.header, got, tc.want)
		}
	}
}

// TestProbeDebugServerLoad: a non-streamed probe of a vLLM-like server
// asks for its load; /probe?debug=true logs the report and answers its
// gauges.
func TestProbeDebugServerLoad(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yml")
	if err := os.WriteFile(p, []byte(`
modules:
  chat:
    protocol: openai_chat
    model: sim
    allowed_targets: 'http://127\.0\.0\.1:[0-9]+'
    probes: [{name: unary, stream: false, schedule: {every: 15s}, timeout: 10s}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	h := New(Options{Config: func() *config.Config { return cfg }, Logger: promslog.NewNopLogger(), MaxConcurrent: 1})
	w := get(h, "module=chat&debug=true&target="+url.QueryEscape(sim(t, nil)), nil)
	body := w.Body.String()
	for _, want := range []string{`msg="Server load reported with the answer"`, `load="waiting 0, kv cache`,
		`llm_probe_server_load_requests_waiting{model="sim",probe="unary"} 0`, `llm_probe_server_load_kv_cache_usage_ratio{model="sim",probe="unary"}`} {
		if !strings.Contains(body, want) {
			t.Errorf("debug answer lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "llm_probe_server_load_requests_running") {
		t.Errorf("a running gauge vLLM never reports:\n%s", body)
	}
}
