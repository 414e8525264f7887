package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/internal/testutil"
)

// hungConfig probes a server that holds every request: held sends every
// `every` with one request in flight at most, so all its arrivals after
// the first are skipped; the others only show their planned intervals.
func hungConfig(url, every string) string {
	return fmt.Sprintf(`targets:
  - name: hung
    protocol: openai_chat
    url: %s
    model: m
    max_in_flight: 8
    probes:
      - {name: held, schedule: {every: %s}, slo: {ttft: 1s, objective: 0.99}}
      - {name: hourly, schedule: {every: 1h, jitter: 30m}}
      - {name: loop, schedule: {concurrency: 1}}
      - {name: office, schedule: {every: 15s, active: "* * * * *"}}
workloads:
  default: {max_tokens: 4}
`, url, every)
}

// TestHeldServerStreak: a server that holds the probe's request makes its
// skipped arrivals a failure streak and bad SLO events, without a single
// result; the planned interval follows the schedule through a reload,
// which keeps the streak.
func TestHeldServerStreak(t *testing.T) {
	hung, _ := testutil.HungServer(t)
	reg := prometheus.NewPedanticRegistry()
	pm := collector.NewProbeMetrics()
	reg.MustRegister(pm)
	e := New(promslog.NewNopLogger(), pm)
	defer func() {
		// The held requests end only when the drain gives up on them.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		e.Stop(ctx)
	}()
	start := time.Now()
	e.Apply(parseConfig(t, hungConfig(hung.URL, "50ms")))

	held := []string{"probe", "held"}
	testutil.WaitFor(t, "three arrivals of held to be skipped", 10*time.Second, func() bool {
		v, _ := metricValue(t, reg, "llm_probe_consecutive_failures", held...)
		return v >= 3
	})
	g := testutil.Gather(t, reg)
	since := sampleValue(g.Series("llm_probe_failing_since_timestamp_seconds", held...)[0])
	if s := time.Unix(0, int64(since*1e9)); s.Before(start.Add(-time.Second)) || s.After(time.Now()) {
		t.Errorf("failing_since %s, want within the test (started %s)", s, start)
	}
	// No request has ended, so the streak and the bad events are the
	// skips; a skip being counted as the scrape runs may be in the skip
	// counter and not yet in the others.
	count := sampleValue(g.Series("llm_probe_consecutive_failures", held...)[0])
	skipped := g.Sum("llm_probe_skipped_total", "probe", "held", "reason", "concurrency_limit")
	if count < skipped-1 || count > skipped {
		t.Errorf("consecutive_failures %v, want the %v concurrency_limit skips", count, skipped)
	}
	if bad := g.Sum("llm_probe_slo_requests_total", "probe", "held", "slo", "ttft", "result", "bad"); bad < skipped-1 || bad > skipped {
		t.Errorf("ttft SLO bad %v, want the %v skips", bad, skipped)
	}
	if good := g.Sum("llm_probe_slo_requests_total", "probe", "held", "slo", "ttft", "result", "good"); good != 0 {
		t.Errorf("ttft SLO good %v, want 0", good)
	}

	planned := func() map[string]float64 {
		out := map[string]float64{}
		for _, m := range testutil.Gather(t, reg).Series("llm_probe_planned_interval_seconds") {
			out[testutil.Label(m, "probe")] = sampleValue(m)
		}
		return out
	}
	if got := planned(); len(got) != 2 || got["held"] != 0.05 || got["hourly"] != 5400 {
		t.Errorf("planned intervals %v, want held 0.05 and hourly 5400 only (loop and office plan no steady gap)", got)
	}

	e.Apply(parseConfig(t, hungConfig(hung.URL, "100ms")))
	if got := planned()["held"]; got != 0.1 {
		t.Errorf("planned interval of held after the reload: %v, want 0.1", got)
	}
	if v := mustMetricValue(t, reg, "llm_probe_consecutive_failures", held...); v < count {
		t.Errorf("consecutive_failures %v after a reload that changed only the schedule, want at least %v", v, count)
	}
}
