package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// TestSendAtCountsTheTimeoutFromTheRelease: a request prepared ahead of
// its release has the probe's whole timeout from the release on.
func TestSendAtCountsTheTimeoutFromTheRelease(t *testing.T) {
	d := &deadlineDriver{}
	p := &Probe{Target: "t", Name: "p", Model: "m", Timeout: 3 * time.Second, Driver: d, Workload: fixedWorkload{}}
	at := time.Now().Add(time.Hour)
	release := make(chan struct{})
	p.SendAt(context.Background(), release, at)
	if !d.deadline.Equal(at.Add(3 * time.Second)) {
		t.Errorf("deadline %s after the release, want the probe's 3s timeout", d.deadline.Sub(at))
	}
	// A release already due (a late dispatch) counts from now.
	start := time.Now()
	p.SendAt(context.Background(), release, start.Add(-time.Minute))
	if d.deadline.Before(start.Add(3 * time.Second)) {
		t.Errorf("deadline %s after now for a release in the past, want 3s", d.deadline.Sub(start))
	}
}

// TestBurstsThroughTheEngine: bursts larger than the target's
// max_in_flight, prepared and released by the engine against the
// simulator: per burst exactly max_in_flight requests are sent and
// succeed, the rest are skipped, one spread is recorded, and every
// scheduled arrival is accounted for.
func TestBurstsThroughTheEngine(t *testing.T) {
	url := fastSimulatorURL(t)
	cfg := fmt.Sprintf(`targets:
  - name: sim
    protocol: openai_chat
    url: %s
    model: sim-llm
    max_in_flight: 4
    probes:
      - {name: burst, schedule: {burst: 6, period: 1s}}
workloads:
  default: {max_tokens: 4, ignore_eos: true}
`, url)
	reg := runProber(t, cfg, 3500*time.Millisecond, time.Second, nil)
	m := testutil.Gather(t, reg)
	bursts := histogramOf(t, reg, "llm_probe_burst_spread_seconds", "burst").GetSampleCount()
	scheduled := m.Sum("llm_probe_scheduled_total", "probe", "burst")
	requests := m.Sum("llm_probe_requests_total", "probe", "burst")
	ok := m.Sum("llm_probe_requests_total", "probe", "burst", "outcome", "success")
	skipped := m.Sum("llm_probe_skipped_total", "probe", "burst", "reason", "target_concurrency_limit")
	allSkipped := m.Sum("llm_probe_skipped_total", "probe", "burst")
	inFlight := m.Sum("llm_probe_in_flight_requests", "probe", "burst")
	if bursts < 2 {
		t.Fatalf("%d bursts in 3.5s at one per second", bursts)
	}
	b := float64(bursts)
	if requests != 4*b || ok != requests || skipped != 2*b || allSkipped != skipped {
		t.Errorf("%d bursts of 6 at max_in_flight 4: %.0f requests (%.0f ok), %.0f skipped for the target (%.0f in all); want %.0f, all ok, %.0f",
			bursts, requests, ok, skipped, allSkipped, 4*b, 2*b)
	}
	if scheduled != requests+allSkipped || inFlight != 0 {
		t.Errorf("scheduled %.0f = requests %.0f + skipped %.0f + in flight %.0f does not hold", scheduled, requests, allSkipped, inFlight)
	}
}
