package collector

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/probe"
)

// TestServerReportedTimings: a phase appears with its first observation,
// only the bounded set of phases is exported, only successful requests
// count, and an unusable timing is counted, never observed.
func TestServerReportedTimings(t *testing.T) {
	pm := NewProbeMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(pm)
	pm.Add(ProbeSeries{Target: "t", Probe: "p", Model: "m"})
	for _, name := range []string{"llm_probe_server_reported_seconds", "llm_probe_server_timing_invalid_total"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 0 {
			t.Fatalf("%d %s series before any timing (err %v), want none", n, name, err)
		}
	}
	llama := func(prompt, predicted time.Duration, invalid int, outcome probe.Outcome) *probe.Result {
		return &probe.Result{Outcome: outcome, ServerTimingsInvalid: invalid, ServerTimings: []probe.ServerTiming{
			{Name: "prompt", Duration: prompt}, {Name: "prompt_per_token", Duration: time.Millisecond},
			{Name: "predicted", Duration: predicted}, {Name: "predicted_per_token", Duration: 2 * time.Millisecond},
		}}
	}
	pm.Observe("t", "p", llama(30*time.Millisecond, 2*time.Second, 0, probe.OutcomeSuccess))
	pm.Observe("t", "p", llama(50*time.Millisecond, -time.Second, 1, probe.OutcomeSuccess))        // predicted negative: invalid
	pm.Observe("t", "p", llama(time.Hour+time.Nanosecond, 3*time.Second, 0, probe.OutcomeSuccess)) // prompt over an hour: invalid
	pm.Observe("t", "p", llama(time.Hour, 3*time.Second, 2, probe.OutcomeIncomplete))              // failed: nothing
	pm.Observe("t", "p", &probe.Result{Outcome: probe.OutcomeSuccess, ServerTimings: []probe.ServerTiming{{Name: "made_up", Duration: time.Second}}})

	want := `
# HELP llm_probe_server_reported_seconds Duration of a part of the probe request as the server itself reported it (llama.cpp's timings, Ollama's *_duration fields, TGI's x-*-time headers), by the server's own name for it, for successful requests. The server's clock, beside the prober's, never in place of it.
# TYPE llm_probe_server_reported_seconds histogram
` + serverTimingLines("predicted", "5", 2, map[float64]int{2.5: 1, 5: 2}) + serverTimingLines("prompt", "0.08", 2, map[float64]int{0.04: 1, 0.1: 2}) + `# HELP llm_probe_server_timing_invalid_total Timings a server announced for successful probe requests that could not be used, and so were not observed: missing from its timings object, null, not a number, negative or over an hour.
# TYPE llm_probe_server_timing_invalid_total counter
llm_probe_server_timing_invalid_total{model="m",probe="p",target="t"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llm_probe_server_reported_seconds", "llm_probe_server_timing_invalid_total"); err != nil {
		t.Error(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	pm.Remove("t", "p")
	if n, _ := testutil.GatherAndCount(reg, "llm_probe_server_reported_seconds", "llm_probe_server_timing_invalid_total"); n != 0 {
		t.Errorf("%d server timing series after the probe was removed", n)
	}
}

// serverTimingLines renders the classic buckets of one phase from the
// first bucket reaching each count (cumulative counts in between stay).
func serverTimingLines(phase, sum string, count int, firstAt map[float64]int) string {
	var b strings.Builder
	n := 0
	for _, le := range serverTimingBuckets() {
		if c, ok := firstAt[le]; ok {
			n = c
		}
		b.WriteString(`llm_probe_server_reported_seconds_bucket{model="m",phase="` + phase + `",probe="p",target="t",le="` + formatLe(le) + `"} ` + itoa(n) + "\n")
	}
	b.WriteString(`llm_probe_server_reported_seconds_bucket{model="m",phase="` + phase + `",probe="p",target="t",le="+Inf"} ` + itoa(count) + "\n")
	b.WriteString(`llm_probe_server_reported_seconds_sum{model="m",phase="` + phase + `",probe="p",target="t"} ` + sum + "\n")
	b.WriteString(`llm_probe_server_reported_seconds_count{model="m",phase="` + phase + `",probe="p",target="t"} ` + itoa(count) + "\n")
	return b.String()
}

func formatLe(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func itoa(n int) string { return strconv.Itoa(n) }

// TestServerTimingPhasesBounded: every driver's timing names are in the
// exported set, and per-token phases share TPOT's layout.
func TestServerTimingPhasesBounded(t *testing.T) {
	for _, name := range []string{"prompt", "predicted", "load", "prompt_eval", "eval", "total", "validation", "queue", "inference", "time_per_token"} {
		if serverTimingPhase(name) < 0 {
			t.Errorf("phase %q not exported", name)
		}
	}
	for _, name := range []string{"prompt_per_token", "predicted_per_token", "", "x"} {
		if serverTimingPhase(name) >= 0 {
			t.Errorf("phase %q exported", name)
		}
	}
	if got := serverTimingPhaseBuckets("time_per_token"); len(got) != len(tpotBuckets()) {
		t.Errorf("time_per_token buckets %v", got)
	}
	if b := serverTimingBuckets(); b[len(b)-1] != 300 {
		t.Errorf("buckets %v", b)
	}
}
