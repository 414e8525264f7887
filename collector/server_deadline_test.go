package collector

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// withinRegistry is what the daemon builds for one scrape: a registry
// holding only c bounded by limit.
func withinRegistry(t *testing.T, c *ServerMetrics, limit time.Duration) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.Within(limit))
	return reg
}

// TestServerMetricsWithinDeadline: a scrape's deadline shorter than the
// configured timeout ends the fetch of a hung server in time, as a failed
// scrape (up 0), without holding up the healthy target beside it.
func TestServerMetricsWithinDeadline(t *testing.T) {
	hung, _ := testutil.HungServer(t)
	ok := textServer(t, "text/plain; version=0.0.4", func() string { return vllmText })
	c, logs, _ := newTestServerMetrics(t)
	c.SetTargets([]ServerTarget{
		{Name: "hung", URL: hung.URL, Kind: KindAuto, Timeout: 5 * time.Second},
		{Name: "ok", URL: ok.URL, Kind: KindVLLM, Timeout: 5 * time.Second},
	})
	const limit = 200 * time.Millisecond
	reg := withinRegistry(t, c, limit)

	start := time.Now()
	got := gatherValues(t, reg)
	elapsed := time.Since(start)
	// Generous against the 5s timeout: a loaded 2-core machine with -race.
	if elapsed > 3*time.Second {
		t.Errorf("gather took %s with a %s deadline and a 5s timeout", elapsed, limit)
	}
	if elapsed < limit {
		t.Errorf("gather took %s, shorter than the deadline: was the hung server asked?", elapsed)
	}
	wantHungBesideOK(t, got)
	if d := got[`llm_server_scrape_duration_seconds{target="hung"}`]; d < limit.Seconds() || d > 3 {
		t.Errorf("scrape duration of the hung target %vs, want about %s", d, limit)
	}
	const msg = "no complete answer within 200ms, the deadline of the scrape that asked (shorter than the 5s timeout)"
	if n := logs.Count(msg); n != 1 {
		t.Errorf("%d log lines with %q, want 1:\n%s", n, msg, logs)
	}
	var snap ServerSnapshot
	for _, s := range c.Snapshot() {
		if s.Target == "hung" {
			snap = s
		}
	}
	if snap.Up || snap.Err != msg {
		t.Errorf("status page snapshot: up %v, err %q; want down with %q", snap.Up, snap.Err, msg)
	}
	// The wrapper describes what c describes: the exposition stays valid.
	if problems, err := promtestutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestServerMetricsWithinKeepsShorterTimeout: a deadline longer than the
// target's timeout changes nothing, and 0 is no deadline (Collect).
func TestServerMetricsWithinKeepsShorterTimeout(t *testing.T) {
	hung, _ := testutil.HungServer(t)
	c, logs, plain := newTestServerMetrics(t)
	const timeout = 200 * time.Millisecond
	c.SetTargets([]ServerTarget{{Name: "hung", URL: hung.URL, Kind: KindAuto, Timeout: timeout}})
	for _, g := range []prometheus.Gatherer{withinRegistry(t, c, 10*time.Second), withinRegistry(t, c, 0), plain} {
		start := time.Now()
		got := gatherValues(t, g)
		if elapsed := time.Since(start); elapsed > 3*time.Second {
			t.Errorf("gather took %s with a %s timeout", elapsed, timeout)
		}
		if up, ok := got[`llm_server_up{target="hung"}`]; !ok || up != 0 {
			t.Errorf("up = %v (present %v), want 0", up, ok)
		}
	}
	if n := logs.Count("no complete answer within the 200ms timeout"); n != 1 {
		t.Errorf("%d timeout lines, want 1:\n%s", n, logs)
	}
	if strings.Contains(logs.String(), "deadline") {
		t.Errorf("a deadline longer than the timeout was reported:\n%s", logs)
	}
}

// TestServerMetricsTimeoutsLogOnce: a hung server scraped alternately with
// and without a deadline (Prometheus, then the status page) is one error
// for logging, not a change on every scrape; recovery is still logged.
func TestServerMetricsTimeoutsLogOnce(t *testing.T) {
	var (
		mu   sync.Mutex
		hang = true
	)
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := hang
		mu.Unlock()
		if h {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(vllmText))
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) })
	logs := &testutil.SyncBuffer{}
	c := NewServerMetrics(slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(c.Close)
	c.SetTargets([]ServerTarget{{Name: "t", URL: ts.URL, Kind: KindVLLM, Timeout: 300 * time.Millisecond}})
	short := withinRegistry(t, c, 100*time.Millisecond)
	for range 2 {
		gatherValues(t, short)
		c.Refresh()
	}
	if n := logs.Count("Scraping model-server metrics failed"); n != 1 {
		t.Errorf("%d failure lines for one hung server, want 1:\n%s", n, logs)
	}
	mu.Lock()
	hang = false
	mu.Unlock()
	if got := gatherValues(t, short); got[`llm_server_up{target="t"}`] != 1 {
		t.Errorf("recovered server not up: %v", got)
	}
	if n := logs.Count("Scraping model-server metrics works again"); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, logs)
	}
}

// TestServerMetricsConcurrentDeadlines: scrapes with and without deadlines
// at once (Prometheus and other clients) each keep their own bound.
func TestServerMetricsConcurrentDeadlines(t *testing.T) {
	hung, _ := testutil.HungServer(t)
	ok := textServer(t, "text/plain; version=0.0.4", func() string { return vllmText })
	c, _, plain := newTestServerMetrics(t)
	c.SetTargets([]ServerTarget{
		{Name: "hung", URL: hung.URL, Kind: KindAuto, Timeout: 600 * time.Millisecond},
		{Name: "ok", URL: ok.URL, Kind: KindVLLM, Timeout: 5 * time.Second},
	})
	gatherers := []prometheus.Gatherer{plain, withinRegistry(t, c, 100*time.Millisecond), withinRegistry(t, c, 300*time.Millisecond), withinRegistry(t, c, time.Minute)}
	var wg sync.WaitGroup
	for _, g := range gatherers {
		for range 3 {
			wg.Go(func() {
				start := time.Now()
				mfs, err := g.Gather()
				if err != nil || len(mfs) == 0 {
					t.Errorf("gather: %d families, %v", len(mfs), err)
				}
				if elapsed := time.Since(start); elapsed > 3*time.Second {
					t.Errorf("gather took %s", elapsed)
				}
			})
		}
	}
	wg.Wait()
	// The short deadline's scrape is among those the snapshot may hold;
	// each gather's own result is checked through its own registry.
	got := gatherValues(t, gatherers[1])
	if got[`llm_server_up{target="hung"}`] != 0 || got[`llm_server_up{target="ok"}`] != 1 {
		t.Errorf("with a deadline: %v", got)
	}
}
