package collector

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestScheduleMetrics(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "burst", Model: "m"})
	reg := newTestRegistry(t, m)
	names := []string{"llm_probe_burst_spread_seconds", "llm_probe_output_length_mismatch_total", "llm_probe_input_length_mismatch_total"}

	// Before any burst: mismatch counters at zero, no spread histogram.
	if n, err := testutil.GatherAndCount(reg, names[0]); err != nil || n != 0 {
		t.Errorf("spread histogram exported before any burst (%d, %v)", n, err)
	}
	m.ObserveBurstSpread("sim", "burst", 300*time.Microsecond)
	m.ObserveBurstSpread("sim", "burst", 2*time.Millisecond)
	m.OutputLengthMismatch("sim", "burst")
	m.InputLengthMismatch("sim", "burst")
	m.InputLengthMismatch("sim", "burst")
	m.ObserveBurstSpread("sim", "gone", time.Second) // unknown probe: dropped

	expected := `
# HELP llm_probe_burst_spread_seconds Per burst, the time between the first and the last of its requests actually being sent; the requests were planned for the same instant.
# TYPE llm_probe_burst_spread_seconds histogram
llm_probe_burst_spread_seconds_bucket{model="m",probe="burst",target="sim",le="1e-05"} 0
llm_probe_burst_spread_seconds_bucket{model="m",probe="burst",target="sim",le="0.0001"} 0
llm_probe_burst_spread_seconds_bucket{model="m",probe="burst",target="sim",le="0.00025"} 0
llm_probe_burst_spread_seconds_bucket{model="m",probe="burst",target="sim",le="0.0005"} 1
llm_probe_burst_spread_seconds_bucket{model="m",probe="burst",target="sim",le="0.001"} 1
llm_probe_burst_spread_seconds_bucket{model="m",probe="burst",target="sim",le="0.0025"} 2
llm_probe_burst_spread_seconds_bucket{model="m",probe="burst",target="sim",le="0.005"} 2
llm_probe_burst_spread_seconds_bucket{model="m",probe="burst",target="sim",le="0.01"} 2
llm_probe_burst_spread_seconds_bucket{model="m",probe="burst",target="sim",le="0.025"} 2
llm_probe_burst_spread_seconds_bucket{model="m",probe="burst",target="sim",le="0.05"} 2
llm_probe_burst_spread_seconds_bucket{model="m",probe="burst",target="sim",le="0.1"} 2
llm_probe_burst_spread_seconds_bucket{model="m",probe="burst",target="sim",le="0.25"} 2
llm_probe_burst_spread_seconds_bucket{model="m",probe="burst",target="sim",le="0.5"} 2
llm_probe_burst_spread_seconds_bucket{model="m",probe="burst",target="sim",le="1"} 2
llm_probe_burst_spread_seconds_bucket{model="m",probe="burst",target="sim",le="+Inf"} 2
llm_probe_burst_spread_seconds_sum{model="m",probe="burst",target="sim"} 0.0023
llm_probe_burst_spread_seconds_count{model="m",probe="burst",target="sim"} 2
# HELP llm_probe_input_length_mismatch_total Successful requests with a synthetic prompt whose server-counted prompt tokens differ from the target length by more than 10% (plus 32 tokens of chat template).
# TYPE llm_probe_input_length_mismatch_total counter
llm_probe_input_length_mismatch_total{model="m",probe="burst",target="sim"} 2
# HELP llm_probe_output_length_mismatch_total Successful requests whose output tokens differ from the requested max_tokens by more than 10%.
# TYPE llm_probe_output_length_mismatch_total counter
llm_probe_output_length_mismatch_total{model="m",probe="burst",target="sim"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), names...); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.GatherAndLint(reg, names...); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	m.Remove("sim", "burst")
	if n, _ := testutil.GatherAndCount(reg, names...); n != 0 {
		t.Errorf("%d series left after Remove", n)
	}
}
