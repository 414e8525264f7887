package collector

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/probe"
)

// TestCancelMetrics: every result starts at zero for an added probe; a
// released cut observes its release time, leaked and unknown ones count
// only; uncut results and unknown probes change nothing; Remove drops the
// series.
func TestCancelMetrics(t *testing.T) {
	m := NewCancelMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	m.Add(CancelSeries{Target: "t", Probe: "p", Model: "m", Histograms: HistogramsClassic})
	for _, r := range []*probe.Result{
		{Cancel: &probe.Cancellation{Release: probe.CancelReleased, ReleaseAfter: 300 * time.Millisecond}},
		{Cancel: &probe.Cancellation{Release: probe.CancelReleased, ReleaseAfter: 20 * time.Millisecond}},
		{Cancel: &probe.Cancellation{Release: probe.CancelLeaked}},
		{Cancel: &probe.Cancellation{Release: probe.CancelReleaseUnknown}},
		{Cancel: &probe.Cancellation{}}, // not measured
		{},                              // not cut
		nil,
	} {
		m.Observe("t", "p", r)
	}
	m.Observe("other", "p", &probe.Result{Cancel: &probe.Cancellation{Release: probe.CancelLeaked}})
	want := `
# HELP llm_probe_cancellations_total Streams the probe cut on purpose, by whether the server freed the slot within cancel.release_timeout (released), did not (leaked), or its metrics could not tell (unknown).
# TYPE llm_probe_cancellations_total counter
llm_probe_cancellations_total{model="m",probe="p",result="leaked",target="t"} 1
llm_probe_cancellations_total{model="m",probe="p",result="released",target="t"} 2
llm_probe_cancellations_total{model="m",probe="p",result="unknown",target="t"} 1
# HELP llm_probe_cancel_release_seconds Time from the probe cutting its stream to the first reading of the target's llm_server_requests_running below its value before the cut (resolution: the probe's cancel.poll_interval).
# TYPE llm_probe_cancel_release_seconds histogram
llm_probe_cancel_release_seconds_bucket{model="m",probe="p",target="t",le="0.05"} 1
llm_probe_cancel_release_seconds_bucket{model="m",probe="p",target="t",le="0.1"} 1
llm_probe_cancel_release_seconds_bucket{model="m",probe="p",target="t",le="0.25"} 1
llm_probe_cancel_release_seconds_bucket{model="m",probe="p",target="t",le="0.5"} 2
llm_probe_cancel_release_seconds_bucket{model="m",probe="p",target="t",le="1"} 2
llm_probe_cancel_release_seconds_bucket{model="m",probe="p",target="t",le="2.5"} 2
llm_probe_cancel_release_seconds_bucket{model="m",probe="p",target="t",le="5"} 2
llm_probe_cancel_release_seconds_bucket{model="m",probe="p",target="t",le="10"} 2
llm_probe_cancel_release_seconds_bucket{model="m",probe="p",target="t",le="30"} 2
llm_probe_cancel_release_seconds_bucket{model="m",probe="p",target="t",le="60"} 2
llm_probe_cancel_release_seconds_bucket{model="m",probe="p",target="t",le="+Inf"} 2
llm_probe_cancel_release_seconds_sum{model="m",probe="p",target="t"} 0.32
llm_probe_cancel_release_seconds_count{model="m",probe="p",target="t"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	// Adding the same probe again keeps its counts.
	m.Add(CancelSeries{Target: "t", Probe: "p", Model: "m", Histograms: HistogramsClassic})
	if n := testutil.CollectAndCount(m); n != 4 {
		t.Errorf("%d series after re-adding, want 4", n)
	}
	m.Remove("t", "p")
	if n := testutil.CollectAndCount(m); n != 0 {
		t.Errorf("%d series after Remove", n)
	}
}

// TestRequestsRunning: one target is scraped now and its running gauge
// summed over models; a target without the gauge, an unknown target, a
// failing server and a passed deadline are errors.
func TestRequestsRunning(t *testing.T) {
	body := "vllm:num_requests_running{model_name=\"a\"} 2\nvllm:num_requests_running{model_name=\"b\"} 1\nvllm:num_requests_waiting{model_name=\"a\"} 4\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write([]byte(body))
		case "/other":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write([]byte("vllm:num_requests_waiting{model_name=\"a\"} 4\n"))
		default:
			http.Error(w, "no", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	c := NewServerMetrics(nil)
	defer c.Close()
	c.SetTargets([]ServerTarget{
		{Name: "ok", URL: srv.URL + "/metrics", Kind: KindVLLM, Timeout: time.Second},
		{Name: "nogauge", URL: srv.URL + "/other", Kind: KindVLLM, Timeout: time.Second},
		{Name: "broken", URL: srv.URL + "/broken", Kind: KindVLLM, Timeout: time.Second},
	})
	ctx := context.Background()
	if v, err := c.RequestsRunning(ctx, "ok"); err != nil || v != 3 {
		t.Errorf("ok: %v %v, want 3", v, err)
	}
	if _, err := c.RequestsRunning(ctx, "nogauge"); !errors.Is(err, ErrNoRunningGauge) {
		t.Errorf("no gauge: %v", err)
	}
	for _, name := range []string{"broken", "unknown"} {
		if _, err := c.RequestsRunning(ctx, name); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	past, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	if _, err := c.RequestsRunning(past, "ok"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("past deadline: %v", err)
	}
}
