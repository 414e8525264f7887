package collector

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

func newTestServerMetrics(t *testing.T) (*ServerMetrics, *testutil.SyncBuffer, *prometheus.Registry) {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	c := NewServerMetrics(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(c.Close)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return c, logs, reg
}

const vllmText = `vllm:num_requests_running{engine="0",model_name="m"} 1
vllm:num_requests_waiting{engine="0",model_name="m"} 0
`

func textServer(t *testing.T, contentType string, body func() string) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		_, _ = io.WriteString(w, body())
	}))
	t.Cleanup(ts.Close)
	return ts
}

// TestServerMetricsTimeout: a server that never answers costs one timeout,
// not more, and does not hold up the healthy target scraped beside it.
func TestServerMetricsTimeout(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hung.Close()
	defer close(release)
	ok := textServer(t, "text/plain; version=0.0.4", func() string { return vllmText })

	c, logs, reg := newTestServerMetrics(t)
	const timeout = 300 * time.Millisecond
	c.SetTargets([]ServerTarget{
		{Name: "hung", URL: hung.URL, Kind: KindAuto, Timeout: timeout},
		{Name: "ok", URL: ok.URL, Kind: KindVLLM, Timeout: 5 * time.Second},
	})
	start := time.Now()
	got := gatherValues(t, reg)
	elapsed := time.Since(start)
	// Generous: a loaded 2-core machine running -race.
	if elapsed > timeout+3*time.Second {
		t.Errorf("gather took %s with a %s timeout", elapsed, timeout)
	}
	if elapsed < timeout {
		t.Errorf("gather took %s, shorter than the timeout: was the hung server asked?", elapsed)
	}
	wantHungBesideOK(t, got)
	if d := got[`llm_server_scrape_duration_seconds{target="hung"}`]; d < timeout.Seconds() {
		t.Errorf("scrape duration of the hung target %v < timeout", d)
	}
	if !strings.Contains(logs.String(), "no complete answer within the 300ms timeout") {
		t.Errorf("log lacks the timeout:\n%s", logs)
	}
}

// TestServerMetricsHugeExposition: 50 MB of valid exposition is refused
// after the bound, with up = 0 and one log line.
func TestServerMetricsHugeExposition(t *testing.T) {
	line := []byte("vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1\n")
	var written atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		for written.Load() < 50<<20 {
			n, err := w.Write(bytes.Repeat(line, 1000))
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer ts.Close()
	c, logs, reg := newTestServerMetrics(t)
	c.SetTargets([]ServerTarget{{Name: "big", URL: ts.URL, Kind: KindAuto, Timeout: 20 * time.Second}})
	for range 2 {
		got := gatherValues(t, reg)
		if got[`llm_server_up{target="big"}`] != 0 {
			t.Fatalf("up = %v for a 50 MB exposition", got[`llm_server_up{target="big"}`])
		}
	}
	if n := logs.Count("more than 16777216 bytes"); n != 1 {
		t.Errorf("%d log lines about the size, want 1:\n%s", n, logs)
	}
}

// countingBody is an endless exposition that counts what was read of it.
type countingBody struct{ read int64 }

func (b *countingBody) Read(p []byte) (int, error) {
	const line = "vllm:num_requests_running 1\n"
	for i := range p {
		p[i] = line[(b.read+int64(i))%int64(len(line))]
	}
	b.read += int64(len(p))
	return len(p), nil
}

func (b *countingBody) Close() error { return nil }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestServerMetricsBoundedRead: the body is read no further than the bound
// (plus one byte to notice it is exceeded).
func TestServerMetricsBoundedRead(t *testing.T) {
	c := NewServerMetrics(nil)
	c.maxBytes = 1 << 20
	body := &countingBody{}
	tr := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Status: "200 OK", Body: body, Header: http.Header{"Content-Type": {"text/plain"}}, Request: r}, nil
	})
	st := &serverTarget{ServerTarget: ServerTarget{Name: "x", URL: "http://example.invalid/metrics", Kind: KindAuto, Timeout: time.Second},
		client: &http.Client{Transport: tr}}
	_, err := c.scrape(st, 0)
	if err == nil || !strings.Contains(err.Error(), "exposition too large: more than 1048576 bytes") {
		t.Fatalf("err = %v", err)
	}
	if body.read > c.maxBytes+1 {
		t.Errorf("read %d bytes with a bound of %d", body.read, c.maxBytes)
	}
}

// TestServerMetricsLogsOncePerChange: a failing target logs once, recovery
// once, auto detection once per change of kind.
func TestServerMetricsLogsOncePerChange(t *testing.T) {
	var mode atomic.Value
	mode.Store("vllm")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		switch mode.Load() {
		case "vllm":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = io.WriteString(w, vllmText)
		case "sglang":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = io.WriteString(w, "sglang:num_running_reqs{model_name=\"m\"} 1\n")
		case "500":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "html":
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html></html>")
		case "garbage":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "{{{ not metrics\n")
		}
	}))
	defer ts.Close()
	c, logs, reg := newTestServerMetrics(t)
	c.SetTargets([]ServerTarget{{Name: "t", URL: ts.URL, Kind: KindAuto, Timeout: 5 * time.Second}})
	scrape := func(n int) map[string]float64 {
		var got map[string]float64
		for range n {
			got = gatherValues(t, reg)
		}
		return got
	}
	steps := []struct {
		mode   string
		up     float64
		logged string
	}{
		{"vllm", 1, "Detected the model-server kind from its metric names\" target=t kind=vllm"},
		{"500", 0, "HTTP status 500 Internal Server Error"},
		{"html", 0, `content type \"text/html\" is not a Prometheus text exposition`},
		{"garbage", 0, "malformed exposition"},
		{"vllm", 1, "Scraping model-server metrics works again"},
		{"sglang", 1, "kind=sglang"},
	}
	for _, s := range steps {
		mode.Store(s.mode)
		got := scrape(3)
		if got[`llm_server_up{target="t"}`] != s.up {
			t.Errorf("%s: up = %v, want %v", s.mode, got[`llm_server_up{target="t"}`], s.up)
		}
		if n := logs.Count(s.logged); n != 1 {
			t.Errorf("%s: %d lines with %q, want 1:\n%s", s.mode, n, s.logged, logs)
		}
	}
	if n := logs.Count("Detected the model-server kind"); n != 2 {
		t.Errorf("%d detection lines, want 2 (vllm, then sglang)", n)
	}
}

func TestServerMetricsSetTargets(t *testing.T) {
	ts := textServer(t, "", func() string { return vllmText })
	c, _, reg := newTestServerMetrics(t)
	c.SetTargets([]ServerTarget{
		{Name: "a", URL: ts.URL, Kind: KindVLLM, Timeout: time.Second},
		{Name: "b", URL: ts.URL, Kind: KindVLLM, Timeout: time.Second},
	})
	first := c.targets[0]
	if n := promtestutil.CollectAndCount(c, serverUp); n != 2 {
		t.Fatalf("%d up series, want 2", n)
	}
	c.SetTargets([]ServerTarget{{Name: "a", URL: ts.URL, Kind: KindVLLM, Timeout: 2 * time.Second}})
	if c.targets[0].client != first.client {
		t.Error("a target whose timeout alone changed lost its connections")
	}
	got := gatherValues(t, reg)
	if _, ok := got[`llm_server_up{target="b"}`]; ok {
		t.Error("removed target still exported")
	}
	if got[`llm_server_up{target="a"}`] != 1 {
		t.Error("target a not up")
	}
	c.SetTargets(nil)
	got = gatherValues(t, reg)
	if got[`llm_prober_collector_success{collector="server_metrics"}`] != 1 || len(got) != 2 {
		t.Errorf("without targets: %v", got)
	}
}

func TestServerMetricsBadTLSConfig(t *testing.T) {
	c, logs, reg := newTestServerMetrics(t)
	st := ServerTarget{Name: "tls", URL: "https://127.0.0.1:1/metrics", Kind: KindAuto, Timeout: time.Second}
	st.TLSConfig.CAFile = "/nonexistent/ca.pem"
	c.SetTargets([]ServerTarget{st})
	got := gatherValues(t, reg)
	if got[`llm_server_up{target="tls"}`] != 0 {
		t.Error("up with an unusable TLS config")
	}
	if !strings.Contains(logs.String(), "Cannot build the HTTP client") {
		t.Errorf("no log line:\n%s", logs)
	}
}

// TestServerMetricsConcurrentScrapes runs scrapes and reconfiguration at
// once, for the race detector.
func TestServerMetricsConcurrentScrapes(t *testing.T) {
	ts := textServer(t, "application/openmetrics-text; version=1.0.0", func() string { return vllmText + "# EOF\n" })
	c, _, reg := newTestServerMetrics(t)
	targets := []ServerTarget{{Name: "a", URL: ts.URL, Kind: KindAuto, Timeout: 5 * time.Second}}
	c.SetTargets(targets)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := reg.Gather(); err != nil {
					t.Error(err)
					return
				}
				if i == 0 {
					c.SetTargets(append(targets, ServerTarget{Name: fmt.Sprint("x", time.Now().UnixNano()%3), URL: ts.URL, Kind: KindVLLM, Timeout: time.Second}))
				}
			}
		})
	}
	wg.Wait()
	got := gatherValues(t, reg)
	if got[`llm_server_up{target="a"}`] != 1 {
		t.Errorf("OpenMetrics target not up: %v", got)
	}
}

// wantHungBesideOK checks a gather of a hung target beside a healthy one:
// the hung one down, the healthy one up with its gauge, the collector failed.
func wantHungBesideOK(t *testing.T, got map[string]float64) {
	t.Helper()
	want := map[string]float64{
		`llm_server_up{target="hung"}`:                                     0,
		`llm_server_up{target="ok"}`:                                       1,
		`llm_server_requests_running{model="m",server="vllm",target="ok"}`: 1,
		`llm_prober_collector_success{collector="server_metrics"}`:         0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}
