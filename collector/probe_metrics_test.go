package collector

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"go.uber.org/goleak"

	"github.com/llm-prober/llm-prober/probe"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var (
	testStart = time.Unix(1700000000, 0)
	testSLO   = SLO{TTFT: 300 * time.Millisecond, TPOT: 30 * time.Millisecond, Objective: 0.99}
)

func newTestRegistry(t testing.TB, m *ProbeMetrics) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatalf("register: %v", err)
	}
	return reg
}

// streamedSuccess: TTFT 200 ms, 11 tokens in 500 ms, so TPOT is exactly the
// 30 ms threshold (good, and in the le="0.03" bucket) and 22 tokens/s. Three
// chunks after the first give ITL 20 ms, then 40 ms / 2 tokens = 2 × 20 ms.
func streamedSuccess() *probe.Result {
	return &probe.Result{
		RequestID:  "req-1",
		Start:      testStart,
		StatusCode: 200,
		Phases: probe.Phases{
			DNS: 1 * time.Millisecond, HasDNS: true,
			Connect: 2 * time.Millisecond, HasConnect: true,
			Write: 100 * time.Microsecond, HasWrite: true,
			FirstByte: 150 * time.Millisecond, HasFirstByte: true,
		},
		Streamed:           true,
		TTFT:               200 * time.Millisecond,
		Chunks:             []probe.Chunk{{At: 200 * time.Millisecond, Tokens: 1}, {At: 220 * time.Millisecond, Tokens: 1}, {At: 260 * time.Millisecond, Tokens: 2}},
		EndToEnd:           500 * time.Millisecond,
		InputTokens:        10,
		InputTokensSource:  probe.TokenSourceServer,
		OutputTokens:       11,
		OutputTokensSource: probe.TokenSourceServer,
		FinishReason:       "length",
		Outcome:            probe.OutcomeSuccess,
	}
}

func TestExposition(t *testing.T) {
	m := NewProbeMetrics()
	m.now = func() time.Time { return testStart.Add(45 * time.Second) }
	m.Add(ProbeSeries{Target: "sim", Probe: "steady", Model: "m", SLO: testSLO, Protocol: probe.ProtocolOpenAIChat,
		PlannedInterval: 15 * time.Second})
	reg := newTestRegistry(t, m)

	m.Observe("sim", "steady", streamedSuccess())
	// A 5xx: counted, bad for every SLO, connect phase observed, no latency.
	m.Observe("sim", "steady", &probe.Result{
		RequestID: "req-2", Start: testStart.Add(15 * time.Second), StatusCode: 503,
		Phases:      probe.Phases{Connect: 3 * time.Millisecond, HasConnect: true},
		EndToEnd:    10 * time.Millisecond,
		InputTokens: 10, Outcome: probe.OutcomeHTTP5xx, Err: errors.New("503"),
	})
	// A one-token answer over the TTFT threshold: TTFT bad, TPOT good
	// (nothing to decode), goodput bad.
	m.Observe("sim", "steady", &probe.Result{
		RequestID: "req-3", Start: testStart.Add(30 * time.Second), StatusCode: 200,
		Streamed:    true,
		TTFT:        400 * time.Millisecond,
		Chunks:      []probe.Chunk{{At: 400 * time.Millisecond, Tokens: 1}},
		EndToEnd:    400 * time.Millisecond,
		InputTokens: 10, OutputTokens: 1, Outcome: probe.OutcomeSuccess,
	})
	m.ObserveScheduleLag("sim", "steady", 2*time.Millisecond)
	// A skip while the probe's request was held: bad for every SLO, and
	// the start of a failure streak.
	m.Skipped("sim", "steady", SkipReasonConcurrencyLimit)

	expected := `
# HELP llm_probe_consecutive_failures Arrivals since the probe's last successful run that failed (any outcome but success, wrong_answer and cancelled) or were skipped with reason concurrency_limit or target_concurrency_limit; overdue skips and cancelled requests do not count.
# TYPE llm_probe_consecutive_failures gauge
llm_probe_consecutive_failures{model="m",probe="steady",target="sim"} 1
# HELP llm_probe_failing_since_timestamp_seconds Unix time of the first arrival of the current failure streak (llm_probe_consecutive_failures); 0 while there is none.
# TYPE llm_probe_failing_since_timestamp_seconds gauge
llm_probe_failing_since_timestamp_seconds{model="m",probe="steady",target="sim"} 1.700000045e+09
# HELP llm_probe_input_tokens_total Input (prompt) tokens of probe requests, as counted by the server where it reports them.
# TYPE llm_probe_input_tokens_total counter
llm_probe_input_tokens_total{model="m",probe="steady",target="sim"} 30
# HELP llm_probe_inter_token_latency_seconds Gap between consecutive output chunks divided by the tokens of the later chunk, observed once per token, for successful streamed requests.
# TYPE llm_probe_inter_token_latency_seconds histogram
llm_probe_inter_token_latency_seconds_bucket{model="m",probe="steady",target="sim",le="+Inf"} 3
llm_probe_inter_token_latency_seconds_sum{model="m",probe="steady",target="sim"} 0.06
llm_probe_inter_token_latency_seconds_count{model="m",probe="steady",target="sim"} 3
# HELP llm_probe_last_run_timestamp_seconds Unix time at which the last probe request started.
# TYPE llm_probe_last_run_timestamp_seconds gauge
llm_probe_last_run_timestamp_seconds{model="m",probe="steady",target="sim"} 1.70000003e+09
# HELP llm_probe_output_tokens_per_second Per request output tokens / end-to-end latency, for successful requests.
# TYPE llm_probe_output_tokens_per_second histogram
llm_probe_output_tokens_per_second_bucket{model="m",probe="steady",target="sim",le="+Inf"} 2
llm_probe_output_tokens_per_second_sum{model="m",probe="steady",target="sim"} 24.5
llm_probe_output_tokens_per_second_count{model="m",probe="steady",target="sim"} 2
# HELP llm_probe_output_tokens_total Output tokens received by probe requests, the server's count where it reports one, else counted from chunks.
# TYPE llm_probe_output_tokens_total counter
llm_probe_output_tokens_total{model="m",probe="steady",target="sim"} 12
# HELP llm_probe_phase_duration_seconds Duration of a connection phase of the probe request, for every request in which that phase happened.
# TYPE llm_probe_phase_duration_seconds histogram
llm_probe_phase_duration_seconds_bucket{model="m",phase="connect",probe="steady",target="sim",le="+Inf"} 2
llm_probe_phase_duration_seconds_sum{model="m",phase="connect",probe="steady",target="sim"} 0.005
llm_probe_phase_duration_seconds_count{model="m",phase="connect",probe="steady",target="sim"} 2
llm_probe_phase_duration_seconds_bucket{model="m",phase="dns",probe="steady",target="sim",le="+Inf"} 1
llm_probe_phase_duration_seconds_sum{model="m",phase="dns",probe="steady",target="sim"} 0.001
llm_probe_phase_duration_seconds_count{model="m",phase="dns",probe="steady",target="sim"} 1
llm_probe_phase_duration_seconds_bucket{model="m",phase="first_byte",probe="steady",target="sim",le="+Inf"} 1
llm_probe_phase_duration_seconds_sum{model="m",phase="first_byte",probe="steady",target="sim"} 0.15
llm_probe_phase_duration_seconds_count{model="m",phase="first_byte",probe="steady",target="sim"} 1
llm_probe_phase_duration_seconds_bucket{model="m",phase="write",probe="steady",target="sim",le="+Inf"} 1
llm_probe_phase_duration_seconds_sum{model="m",phase="write",probe="steady",target="sim"} 0.0001
llm_probe_phase_duration_seconds_count{model="m",phase="write",probe="steady",target="sim"} 1
# HELP llm_probe_planned_interval_seconds The longest gap the probe's schedule plans between two arrivals in normal operation; absent for closed loops and probes with active windows.
# TYPE llm_probe_planned_interval_seconds gauge
llm_probe_planned_interval_seconds{model="m",probe="steady",target="sim"} 15
# HELP llm_probe_request_duration_seconds Time from just before the request is written to the last byte of the final event, for successful requests.
# TYPE llm_probe_request_duration_seconds histogram
llm_probe_request_duration_seconds_bucket{model="m",probe="steady",target="sim",le="+Inf"} 2
llm_probe_request_duration_seconds_sum{model="m",probe="steady",target="sim"} 0.9
llm_probe_request_duration_seconds_count{model="m",probe="steady",target="sim"} 2
# HELP llm_probe_requests_total Probe requests by outcome.
# TYPE llm_probe_requests_total counter
llm_probe_requests_total{model="m",outcome="http_5xx",probe="steady",target="sim"} 1
llm_probe_requests_total{model="m",outcome="success",probe="steady",target="sim"} 2
# HELP llm_probe_schedule_lag_seconds How late the scheduler sent a probe request relative to its planned time.
# TYPE llm_probe_schedule_lag_seconds histogram
llm_probe_schedule_lag_seconds_bucket{model="m",probe="steady",target="sim",le="+Inf"} 1
llm_probe_schedule_lag_seconds_sum{model="m",probe="steady",target="sim"} 0.002
llm_probe_schedule_lag_seconds_count{model="m",probe="steady",target="sim"} 1
# HELP llm_probe_skipped_total Planned probe requests the scheduler did not send, by reason.
# TYPE llm_probe_skipped_total counter
llm_probe_skipped_total{model="m",probe="steady",reason="concurrency_limit",target="sim"} 1
# HELP llm_probe_slo_objective_ratio Target ratio of good requests for each SLO the probe declares, from the configuration.
# TYPE llm_probe_slo_objective_ratio gauge
llm_probe_slo_objective_ratio{model="m",probe="steady",slo="goodput",target="sim"} 0.99
llm_probe_slo_objective_ratio{model="m",probe="steady",slo="tpot",target="sim"} 0.99
llm_probe_slo_objective_ratio{model="m",probe="steady",slo="ttft",target="sim"} 0.99
# HELP llm_probe_slo_requests_total Probe requests judged against each SLO the probe declares; failed requests, and arrivals skipped because the probe's or its target's max_in_flight was reached, are bad for every SLO; cancelled requests are not judged.
# TYPE llm_probe_slo_requests_total counter
llm_probe_slo_requests_total{model="m",probe="steady",result="bad",slo="goodput",target="sim"} 3
llm_probe_slo_requests_total{model="m",probe="steady",result="bad",slo="tpot",target="sim"} 2
llm_probe_slo_requests_total{model="m",probe="steady",result="bad",slo="ttft",target="sim"} 3
llm_probe_slo_requests_total{model="m",probe="steady",result="good",slo="goodput",target="sim"} 1
llm_probe_slo_requests_total{model="m",probe="steady",result="good",slo="tpot",target="sim"} 2
llm_probe_slo_requests_total{model="m",probe="steady",result="good",slo="ttft",target="sim"} 1
# HELP llm_probe_success Whether the last probe request succeeded (1) or not (0).
# TYPE llm_probe_success gauge
llm_probe_success{model="m",probe="steady",target="sim"} 1
# HELP llm_probe_time_per_output_token_seconds Per request (end-to-end - TTFT) / (output tokens - 1), for successful streamed requests with at least two output tokens.
# TYPE llm_probe_time_per_output_token_seconds histogram
llm_probe_time_per_output_token_seconds_bucket{model="m",probe="steady",target="sim",le="+Inf"} 1
llm_probe_time_per_output_token_seconds_sum{model="m",probe="steady",target="sim"} 0.03
llm_probe_time_per_output_token_seconds_count{model="m",probe="steady",target="sim"} 1
# HELP llm_probe_time_to_first_token_seconds Time from just before the request is written to the first chunk with non-empty output, for successful streamed requests.
# TYPE llm_probe_time_to_first_token_seconds histogram
llm_probe_time_to_first_token_seconds_bucket{model="m",probe="steady",target="sim",le="0.01"} 0
llm_probe_time_to_first_token_seconds_bucket{model="m",probe="steady",target="sim",le="0.04"} 0
llm_probe_time_to_first_token_seconds_bucket{model="m",probe="steady",target="sim",le="0.1"} 0
llm_probe_time_to_first_token_seconds_bucket{model="m",probe="steady",target="sim",le="0.25"} 1
llm_probe_time_to_first_token_seconds_bucket{model="m",probe="steady",target="sim",le="0.3"} 1
llm_probe_time_to_first_token_seconds_bucket{model="m",probe="steady",target="sim",le="0.5"} 2
llm_probe_time_to_first_token_seconds_bucket{model="m",probe="steady",target="sim",le="1"} 2
llm_probe_time_to_first_token_seconds_bucket{model="m",probe="steady",target="sim",le="2.5"} 2
llm_probe_time_to_first_token_seconds_bucket{model="m",probe="steady",target="sim",le="5"} 2
llm_probe_time_to_first_token_seconds_bucket{model="m",probe="steady",target="sim",le="10"} 2
llm_probe_time_to_first_token_seconds_bucket{model="m",probe="steady",target="sim",le="+Inf"} 2
llm_probe_time_to_first_token_seconds_sum{model="m",probe="steady",target="sim"} 0.6000000000000001
llm_probe_time_to_first_token_seconds_count{model="m",probe="steady",target="sim"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), allMetricNames()...); err != nil {
		t.Fatal(err)
	}
}

func allMetricNames() []string {
	return []string{
		"llm_probe_time_to_first_token_seconds",
		"llm_probe_time_per_output_token_seconds",
		"llm_probe_inter_token_latency_seconds",
		"llm_probe_request_duration_seconds",
		"llm_probe_output_tokens_per_second",
		"llm_probe_phase_duration_seconds",
		"llm_probe_schedule_lag_seconds",
		"llm_probe_requests_total",
		"llm_probe_input_tokens_total",
		"llm_probe_output_tokens_total",
		"llm_probe_slo_requests_total",
		"llm_probe_skipped_total",
		"llm_probe_success",
		"llm_probe_last_run_timestamp_seconds",
		"llm_probe_slo_objective_ratio",
		"llm_probe_consecutive_failures",
		"llm_probe_failing_since_timestamp_seconds",
		"llm_probe_planned_interval_seconds",
	}
}

// seriesOf returns every gathered series carrying the given label values.
func seriesOf(t *testing.T, reg prometheus.Gatherer, labels map[string]string) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var out []string
	for _, mf := range mfs {
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			out = append(out, fmt.Sprintf("%s%v", mf.GetName(), have))
		}
	}
	return out
}

func TestLint(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "steady", Model: "m", SLO: testSLO})
	m.Add(ProbeSeries{Target: "sim", Probe: "plain", Model: "m"})
	reg := newTestRegistry(t, m)
	m.Observe("sim", "steady", streamedSuccess())
	m.Observe("sim", "plain", streamedSuccess())
	m.Skipped("sim", "plain", "some_new_reason")
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestNoSLODeclared(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "plain", Model: "m"})
	reg := newTestRegistry(t, m)
	m.Observe("sim", "plain", streamedSuccess())
	for _, name := range []string{"llm_probe_slo_requests_total", "llm_probe_slo_objective_ratio"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 0 {
			t.Errorf("%s: %d series (err %v), want none without an SLO", name, n, err)
		}
	}
	// Without thresholds the classic layout is the OTel one.
	mf := gatherOne(t, reg, "llm_probe_time_to_first_token_seconds")
	if got, want := len(mf.GetMetric()[0].GetHistogram().GetBucket()), len(ttftBuckets()); got != want {
		t.Errorf("TTFT buckets: %d, want %d", got, want)
	}
}

// An objective alone declares an availability SLO: goodput = success ratio.
func TestObjectiveOnlyDeclaresGoodput(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", SLO: SLO{Objective: 0.995}})
	reg := newTestRegistry(t, m)
	m.Observe("sim", "p", streamedSuccess())
	m.Observe("sim", "p", &probe.Result{Outcome: probe.OutcomeTimeout})
	const expected = `
# HELP llm_probe_slo_requests_total Probe requests judged against each SLO the probe declares; failed requests, and arrivals skipped because the probe's or its target's max_in_flight was reached, are bad for every SLO; cancelled requests are not judged.
# TYPE llm_probe_slo_requests_total counter
llm_probe_slo_requests_total{model="m",probe="p",result="bad",slo="goodput",target="sim"} 1
llm_probe_slo_requests_total{model="m",probe="p",result="good",slo="goodput",target="sim"} 1
# HELP llm_probe_slo_objective_ratio Target ratio of good requests for each SLO the probe declares, from the configuration.
# TYPE llm_probe_slo_objective_ratio gauge
llm_probe_slo_objective_ratio{model="m",probe="p",slo="goodput",target="sim"} 0.995
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "llm_probe_slo_requests_total", "llm_probe_slo_objective_ratio"); err != nil {
		t.Fatal(err)
	}
}

// A non-streamed answer has no TTFT, TPOT or ITL; its TTFT SLO is judged on
// the end-to-end time, when its first token actually reached the client.
func TestNonStreamed(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", SLO: testSLO})
	reg := newTestRegistry(t, m)
	r := &probe.Result{Start: testStart, EndToEnd: 250 * time.Millisecond, OutputTokens: 20, Outcome: probe.OutcomeSuccess}
	m.Observe("sim", "p", r)
	r.EndToEnd = 350 * time.Millisecond
	m.Observe("sim", "p", r)
	for name, want := range map[string]uint64{
		"llm_probe_time_to_first_token_seconds":   0,
		"llm_probe_time_per_output_token_seconds": 0,
		"llm_probe_inter_token_latency_seconds":   0,
		"llm_probe_request_duration_seconds":      2,
		"llm_probe_output_tokens_per_second":      2,
	} {
		if got := gatherOne(t, reg, name).GetMetric()[0].GetHistogram().GetSampleCount(); got != want {
			t.Errorf("%s count = %d, want %d", name, got, want)
		}
	}
	const expected = `
# HELP llm_probe_slo_requests_total Probe requests judged against each SLO the probe declares; failed requests, and arrivals skipped because the probe's or its target's max_in_flight was reached, are bad for every SLO; cancelled requests are not judged.
# TYPE llm_probe_slo_requests_total counter
llm_probe_slo_requests_total{model="m",probe="p",result="bad",slo="goodput",target="sim"} 1
llm_probe_slo_requests_total{model="m",probe="p",result="bad",slo="tpot",target="sim"} 0
llm_probe_slo_requests_total{model="m",probe="p",result="bad",slo="ttft",target="sim"} 1
llm_probe_slo_requests_total{model="m",probe="p",result="good",slo="goodput",target="sim"} 1
llm_probe_slo_requests_total{model="m",probe="p",result="good",slo="tpot",target="sim"} 2
llm_probe_slo_requests_total{model="m",probe="p",result="good",slo="ttft",target="sim"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "llm_probe_slo_requests_total"); err != nil {
		t.Fatal(err)
	}
}

func TestLastGaugesAbsentBeforeFirstRun(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", Protocol: probe.ProtocolOpenAIChat})
	reg := newTestRegistry(t, m)
	for _, name := range []string{"llm_probe_success", "llm_probe_last_run_timestamp_seconds"} {
		if n, _ := testutil.GatherAndCount(reg, name); n != 0 {
			t.Errorf("%s exported before any probe ran", name)
		}
	}
	// The success counter exists at zero, so the dashboards' variables
	// and rate() work at once; the failure outcomes come with their first
	// request (docs/metrics.md, "Series per probe").
	if n, _ := testutil.GatherAndCount(reg, "llm_probe_requests_total"); n != 1 {
		t.Errorf("requests_total series = %d, want 1", n)
	}
	if got := requestsTotal(t, reg, "success"); got != 0 {
		t.Errorf("success = %v before any run", got)
	}
}

// TestPhasesAppearWhenTheyHappen checks that a phase's histogram is exported
// only from its first observation, and that concurrent first observations
// of a phase all land in one histogram.
func TestPhasesAppearWhenTheyHappen(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m"})
	reg := newTestRegistry(t, m)
	if n, _ := testutil.GatherAndCount(reg, "llm_probe_phase_duration_seconds"); n != 0 {
		t.Errorf("phase series before any probe ran = %d, want 0", n)
	}
	// A probe on a pooled connection: write and first_byte, no dns, connect or tls.
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				m.Observe("sim", "p", &probe.Result{
					Start: testStart, StatusCode: 200, EndToEnd: 10 * time.Millisecond,
					Phases: probe.Phases{
						Write: 100 * time.Microsecond, HasWrite: true,
						FirstByte: 5 * time.Millisecond, HasFirstByte: true,
						ConnectionReused: true,
					},
					Outcome: probe.OutcomeSuccess,
				})
			}
		})
	}
	wg.Wait()
	mf := gatherOne(t, reg, "llm_probe_phase_duration_seconds")
	got := map[string]uint64{}
	for _, s := range mf.GetMetric() {
		for _, lp := range s.GetLabel() {
			if lp.GetName() == "phase" {
				got[lp.GetValue()] = s.GetHistogram().GetSampleCount()
			}
		}
	}
	want := map[string]uint64{"write": workers * each, "first_byte": workers * each}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("phase sample counts = %v, want %v", got, want)
	}
	// A new connection later adds its phases.
	m.Observe("sim", "p", &probe.Result{
		Start: testStart, StatusCode: 200,
		Phases:  probe.Phases{DNS: time.Millisecond, HasDNS: true, Connect: time.Millisecond, HasConnect: true},
		Outcome: probe.OutcomeConnectError,
	})
	if n, _ := testutil.GatherAndCount(reg, "llm_probe_phase_duration_seconds"); n != 4 {
		t.Errorf("phase series after a new connection = %d, want 4 (no tls)", n)
	}
}

func TestRemove(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "gone", Model: "m", SLO: testSLO})
	m.Add(ProbeSeries{Target: "sim", Probe: "kept", Model: "m", SLO: testSLO})
	reg := newTestRegistry(t, m)
	for _, p := range []string{"gone", "kept"} {
		m.Observe("sim", p, streamedSuccess())
		m.ObserveScheduleLag("sim", p, time.Millisecond)
		m.Skipped("sim", p, "custom")
	}
	before := len(seriesOf(t, reg, map[string]string{"probe": "kept"}))
	if n := len(seriesOf(t, reg, map[string]string{"probe": "gone"})); n != before || n == 0 {
		t.Fatalf("setup: gone has %d series, kept %d", n, before)
	}
	m.Remove("sim", "gone")
	if left := seriesOf(t, reg, map[string]string{"probe": "gone"}); len(left) != 0 {
		t.Errorf("series left after Remove: %v", left)
	}
	if n := len(seriesOf(t, reg, map[string]string{"probe": "kept"})); n != before {
		t.Errorf("Remove touched another probe: %d series, want %d", n, before)
	}
	// A result still in flight when its probe was removed is dropped.
	m.Observe("sim", "gone", streamedSuccess())
	if left := seriesOf(t, reg, map[string]string{"probe": "gone"}); len(left) != 0 {
		t.Errorf("Observe after Remove recreated series: %v", left)
	}
}

func TestAddReplaces(t *testing.T) {
	m := NewProbeMetrics()
	ps := ProbeSeries{Target: "sim", Probe: "p", Model: "m", SLO: testSLO}
	m.Add(ps)
	reg := newTestRegistry(t, m)
	m.Observe("sim", "p", streamedSuccess())

	// Same config again (a reload that changed nothing): counters survive.
	m.Add(ps)
	if got := requestsTotal(t, reg, "success"); got != 1 {
		t.Fatalf("identical Add reset counters: success = %v", got)
	}

	// A new TTFT threshold: new bucket layout, old threshold bucket gone.
	ps.SLO.TTFT = 700 * time.Millisecond
	m.Add(ps)
	les := bucketBounds(gatherOne(t, reg, "llm_probe_time_to_first_token_seconds").GetMetric()[0])
	if !les[0.7] || les[0.3] {
		t.Errorf("TTFT bounds after SLO change: %v, want 0.7 and not 0.3", les)
	}
	if got := requestsTotal(t, reg, "success"); got != 0 {
		t.Errorf("replaced series kept old counts: success = %v", got)
	}

	// A new model: no series carry the old one.
	ps.Model = "m2"
	m.Add(ps)
	if old := seriesOf(t, reg, map[string]string{"model": "m"}); len(old) != 0 {
		t.Errorf("series with the old model remain: %v", old)
	}
	if n := len(seriesOf(t, reg, map[string]string{"model": "m2"})); n == 0 {
		t.Errorf("no series with the new model")
	}
}

func requestsTotal(t *testing.T, reg prometheus.Gatherer, outcome string) float64 {
	t.Helper()
	for _, mt := range gatherOne(t, reg, "llm_probe_requests_total").GetMetric() {
		for _, lp := range mt.GetLabel() {
			if lp.GetName() == "outcome" && lp.GetValue() == outcome {
				return mt.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no requests_total{outcome=%q}", outcome)
	return 0
}

func bucketBounds(m *dto.Metric) map[float64]bool {
	out := map[float64]bool{}
	for _, b := range m.GetHistogram().GetBucket() {
		out[b.GetUpperBound()] = true
	}
	return out
}

func gatherOne(t *testing.T, reg prometheus.Gatherer, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	t.Fatalf("metric %s not gathered", name)
	return nil
}

func TestUnknownProbeIgnored(t *testing.T) {
	m := NewProbeMetrics()
	reg := newTestRegistry(t, m)
	m.Observe("nope", "nope", streamedSuccess())
	m.Observe("nope", "nope", nil)
	m.ObserveScheduleLag("nope", "nope", time.Second)
	m.Skipped("nope", "nope", "x")
	m.Remove("nope", "nope")
	m.Add(ProbeSeries{Target: "sim", Probe: "p"})
	m.Observe("sim", "p", nil)
	m.Observe("sim", "other", streamedSuccess())
	if got := seriesOf(t, reg, map[string]string{"target": "nope"}); len(got) != 0 {
		t.Errorf("unknown probe produced series: %v", got)
	}
	if got := requestsTotal(t, reg, "success"); got != 0 {
		t.Errorf("a result for another probe was counted: %v", got)
	}
}

// An outcome outside probe.Outcomes() must not mint a label value.
func TestUnknownOutcome(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m"})
	reg := newTestRegistry(t, m)
	m.Observe("sim", "p", &probe.Result{Outcome: "weird"})
	m.Observe("sim", "p", &probe.Result{})
	// success and wrong_answer (any protocol's outcomes), made with the
	// probe, and protocol_error.
	if n, _ := testutil.GatherAndCount(reg, "llm_probe_requests_total"); n != 3 {
		t.Errorf("requests_total has %d series, want 3", n)
	}
	if got := requestsTotal(t, reg, "protocol_error"); got != 2 {
		t.Errorf("protocol_error = %v, want 2", got)
	}
}

func TestSkippedReasonsBounded(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m"})
	reg := newTestRegistry(t, m)
	for i := range 100 {
		m.Skipped("sim", "p", fmt.Sprintf("reason_%d", i))
	}
	m.Skipped("sim", "p", "\xff bad utf8")
	n, err := testutil.GatherAndCount(reg, "llm_probe_skipped_total")
	if err != nil {
		t.Fatal(err)
	}
	if n > maxSkipReasons+1 {
		t.Errorf("%d skip reasons exported, want at most %d", n, maxSkipReasons+1)
	}
	var total float64
	for _, mt := range gatherOne(t, reg, "llm_probe_skipped_total").GetMetric() {
		total += mt.GetCounter().GetValue()
	}
	if total != 101 {
		t.Errorf("skips counted = %v, want 101 (none lost to the bound)", total)
	}
}

// A skip reason that is not valid UTF-8, given twice, is one series: the
// second skip must find the counter the first made under the repaired
// value, not make a second one with the same labels (a failed scrape).
func TestSkippedReasonInvalidUTF8(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m"})
	reg := newTestRegistry(t, m)
	m.Skipped("sim", "p", "bad\xff")
	m.Skipped("sim", "p", "bad\xff")
	for _, mt := range gatherOne(t, reg, "llm_probe_skipped_total").GetMetric() {
		for _, l := range mt.GetLabel() {
			if l.GetName() == "reason" && l.GetValue() == "bad\uFFFD" && mt.GetCounter().GetValue() != 2 {
				t.Errorf("reason %q counted %v, want 2", l.GetValue(), mt.GetCounter().GetValue())
			}
		}
	}
}

func TestNativeHistogram(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", SLO: testSLO})
	reg := newTestRegistry(t, m)
	m.Observe("sim", "p", streamedSuccess())
	for _, name := range []string{
		"llm_probe_time_to_first_token_seconds",
		"llm_probe_time_per_output_token_seconds",
		"llm_probe_inter_token_latency_seconds",
		"llm_probe_request_duration_seconds",
		"llm_probe_output_tokens_per_second",
	} {
		h := gatherOne(t, reg, name).GetMetric()[0].GetHistogram()
		if h.Schema == nil {
			t.Errorf("%s: no native schema", name)
		}
		// Factor 1.1 is schema 3 (2^(2^-3) ≈ 1.09).
		if h.GetSchema() != 3 {
			t.Errorf("%s: schema %d, want 3", name, h.GetSchema())
		}
		if len(h.GetPositiveSpan()) == 0 || len(h.GetPositiveDelta()) == 0 {
			t.Errorf("%s: no positive spans/deltas", name)
		}
		// Only TTFT has classic buckets beside its native histogram
		// (families.go).
		if got, want := finiteBuckets(h) > 0, name == "llm_probe_time_to_first_token_seconds"; got != want {
			t.Errorf("%s: classic buckets %v, want %v", name, got, want)
		}
	}
}

// finiteBuckets is the number of classic le buckets of h but +Inf (which
// client_golang adds to a native histogram to carry an exemplar).
func finiteBuckets(h *dto.Histogram) int {
	n := 0
	for _, b := range h.GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) {
			n++
		}
	}
	return n
}

func TestExemplars(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m"})
	reg := newTestRegistry(t, m)
	m.Observe("sim", "p", streamedSuccess())
	for _, name := range []string{"llm_probe_time_to_first_token_seconds", "llm_probe_request_duration_seconds"} {
		if id := exemplarID(t, gatherOne(t, reg, name)); id != "req-1" {
			t.Errorf("%s: exemplar request_id %q, want req-1", name, id)
		}
	}

	// Hostile ids must neither panic nor break the 128-rune limit.
	for _, id := range []string{strings.Repeat("é", 300), strings.Repeat("x", 118), "bad\xffutf8"} {
		r := streamedSuccess()
		r.RequestID = id
		r.TTFT = 9 * time.Second // a bucket of its own, so the exemplar is this one
		m.Observe("sim", "p", r)
		got := ""
		for _, b := range gatherOne(t, reg, "llm_probe_time_to_first_token_seconds").GetMetric()[0].GetHistogram().GetBucket() {
			if b.GetUpperBound() == 10 {
				got = b.GetExemplar().GetLabel()[0].GetValue()
			}
		}
		if n := utf8.RuneCountInString(exemplarLabel + got); n > prometheus.ExemplarMaxRunes || !utf8.ValidString(got) || got == "" {
			t.Errorf("id %.20q…: exemplar %q (%d runes)", id, got, n)
		}
	}
}

func exemplarID(t *testing.T, mf *dto.MetricFamily) string {
	t.Helper()
	for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
		if e := b.GetExemplar(); e != nil {
			for _, lp := range e.GetLabel() {
				if lp.GetName() == exemplarLabel {
					return lp.GetValue()
				}
			}
		}
	}
	return ""
}

func TestExemplarValue(t *testing.T) {
	room := prometheus.ExemplarMaxRunes - len(exemplarLabel)
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"abc", "abc"},
		{strings.Repeat("a", room), strings.Repeat("a", room)},
		{strings.Repeat("a", room+1), strings.Repeat("a", room)},
		{strings.Repeat("é", room+1), strings.Repeat("é", room)},
		{"a\xffb", "a\uFFFDb"},
	} {
		if got := exemplarValue(tc.in); got != tc.want {
			t.Errorf("exemplarValue(%.10q…) = %.10q… (len %d), want len %d", tc.in, got, len(got), len(tc.want))
		}
	}
}

func TestConcurrent(t *testing.T) {
	m := NewProbeMetrics()
	reg := newTestRegistry(t, m)
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", SLO: testSLO})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			r := streamedSuccess()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m.Observe("sim", "p", r)
				m.ObserveScheduleLag("sim", "p", time.Millisecond)
				m.Skipped("sim", "p", fmt.Sprintf("r%d", (w+i)%20))
			}
		})
	}
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			slo := testSLO
			slo.TTFT = time.Duration(100+i%5) * time.Millisecond
			m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", SLO: slo})
			m.Add(ProbeSeries{Target: "sim", Probe: "q", Model: "m"})
			m.Remove("sim", "q")
		}
	})
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if _, err := reg.Gather(); err != nil {
			t.Errorf("gather: %v", err)
			break
		}
	}
	close(stop)
	wg.Wait()
}

// TestPromtool checks the text exposition with the real promtool, which the
// e2e setup installs from Debian's prometheus package.
func TestPromtool(t *testing.T) {
	const promtool = "/usr/bin/promtool"
	if _, err := os.Stat(promtool); err != nil {
		t.Skipf("%s not installed (Debian package prometheus; the Makefile installs it): %v", promtool, err)
	}
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "steady", Model: "m", SLO: testSLO})
	reg := newTestRegistry(t, m)
	m.Observe("sim", "steady", streamedSuccess())
	m.ObserveScheduleLag("sim", "steady", time.Millisecond)
	// The server's own timings, and one it sent that was unusable.
	m.Observe("sim", "steady", &probe.Result{Outcome: probe.OutcomeSuccess, ServerTimingsInvalid: 1,
		ServerTimings: []probe.ServerTiming{{Name: "load", Duration: 3 * time.Second}, {Name: "eval", Duration: time.Second}}})
	text, err := testutil.GatherAndFormat(reg, expfmt.TypeTextPlain)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// BenchmarkObserve records a 100-token streamed result (one token per chunk,
// so 99 ITL observations) with an SLO declared: the per-result hot path. The
// no_request_id case shows what the two exemplars cost.
func BenchmarkObserve(b *testing.B) {
	for _, tc := range []struct{ name, id string }{{"request_id", "req-0123456789abcdef"}, {"no_request_id", ""}} {
		b.Run(tc.name, func(b *testing.B) {
			m := NewProbeMetrics()
			m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", SLO: testSLO})
			r := streamedSuccess()
			r.RequestID = tc.id
			r.OutputTokens = 100
			r.Chunks = make([]probe.Chunk, 100)
			for i := range r.Chunks {
				r.Chunks[i] = probe.Chunk{At: r.TTFT + time.Duration(i)*3*time.Millisecond, Tokens: 1}
			}
			r.EndToEnd = r.Chunks[99].At
			b.ReportAllocs()
			for b.Loop() {
				m.Observe("sim", "p", r)
			}
		})
	}
}

// A stream that stalled after its first token: the latency histograms stay
// success-only and every SLO counts it bad.
func TestFailedStreamAfterFirstToken(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", SLO: testSLO})
	reg := newTestRegistry(t, m)
	r := streamedSuccess()
	r.Outcome = probe.OutcomeStreamStalled
	m.Observe("sim", "p", r)
	if got := gatherOne(t, reg, "llm_probe_success").GetMetric()[0].GetGauge().GetValue(); got != 0 {
		t.Errorf("success = %v, want 0", got)
	}
	for _, name := range []string{"llm_probe_time_to_first_token_seconds", "llm_probe_request_duration_seconds", "llm_probe_inter_token_latency_seconds"} {
		if n := gatherOne(t, reg, name).GetMetric()[0].GetHistogram().GetSampleCount(); n != 0 {
			t.Errorf("%s observed a failed request", name)
		}
	}
	for _, mt := range gatherOne(t, reg, "llm_probe_slo_requests_total").GetMetric() {
		want := 0.0
		for _, lp := range mt.GetLabel() {
			if lp.GetName() == "result" && lp.GetValue() == "bad" {
				want = 1
			}
		}
		if mt.GetCounter().GetValue() != want {
			t.Errorf("%v = %v, want %v", mt.GetLabel(), mt.GetCounter().GetValue(), want)
		}
	}
	// Phases and tokens are counted whatever the outcome.
	if got := gatherOne(t, reg, "llm_probe_output_tokens_total").GetMetric()[0].GetCounter().GetValue(); got != 11 {
		t.Errorf("output tokens = %v, want 11", got)
	}
}

// A successful stream that carried no output has no TTFT to observe; for the
// TTFT SLO the user waited the whole request.
func TestStreamWithoutOutput(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", SLO: testSLO})
	reg := newTestRegistry(t, m)
	m.Observe("sim", "p", &probe.Result{Streamed: true, EndToEnd: 450 * time.Millisecond, Outcome: probe.OutcomeSuccess})
	if n := gatherOne(t, reg, "llm_probe_time_to_first_token_seconds").GetMetric()[0].GetHistogram().GetSampleCount(); n != 0 {
		t.Errorf("TTFT observed for a stream without output")
	}
	const expected = `
# HELP llm_probe_slo_requests_total Probe requests judged against each SLO the probe declares; failed requests, and arrivals skipped because the probe's or its target's max_in_flight was reached, are bad for every SLO; cancelled requests are not judged.
# TYPE llm_probe_slo_requests_total counter
llm_probe_slo_requests_total{model="m",probe="p",result="bad",slo="goodput",target="sim"} 1
llm_probe_slo_requests_total{model="m",probe="p",result="bad",slo="tpot",target="sim"} 0
llm_probe_slo_requests_total{model="m",probe="p",result="bad",slo="ttft",target="sim"} 1
llm_probe_slo_requests_total{model="m",probe="p",result="good",slo="goodput",target="sim"} 0
llm_probe_slo_requests_total{model="m",probe="p",result="good",slo="tpot",target="sim"} 1
llm_probe_slo_requests_total{model="m",probe="p",result="good",slo="ttft",target="sim"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "llm_probe_slo_requests_total"); err != nil {
		t.Fatal(err)
	}
}

// A probe exports llm_probe_requests_total only for the outcomes its
// protocol can produce (success and wrong_answer at zero from the start,
// the others from their first request); an outcome the protocol cannot produce is a driver
// bug and counts as protocol_error.
func TestOutcomeSeriesFollowProtocol(t *testing.T) {
	for _, p := range probe.Protocols() {
		t.Run(p.Name, func(t *testing.T) {
			m := NewProbeMetrics()
			m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", Protocol: p.Name})
			reg := newTestRegistry(t, m)
			want := 1 // success, and wrong_answer where the protocol checks answers
			if slices.Contains(p.Outcomes, probe.OutcomeWrongAnswer) {
				want++
			}
			if n, _ := testutil.GatherAndCount(reg, "llm_probe_requests_total"); n != want {
				t.Errorf("requests_total series = %d before any request, want %d", n, want)
			}
			for _, o := range p.Outcomes {
				m.Observe("sim", "p", &probe.Result{Outcome: o})
				if got := requestsTotal(t, reg, string(o)); got != 1 {
					t.Errorf("%s = %v after one, want 1", o, got)
				}
			}
			var foreign probe.Outcome
			for _, o := range probe.Outcomes() {
				if !slices.Contains(p.Outcomes, o) {
					foreign = o
				}
			}
			if foreign == "" {
				t.Fatalf("protocol %s produces every outcome; the test needs one it cannot", p.Name)
			}
			m.Observe("sim", "p", &probe.Result{Outcome: foreign})
			if got := requestsTotal(t, reg, string(probe.OutcomeProtocolError)); got != 2 {
				t.Errorf("%s (not a %s outcome) counted as protocol_error %v times, want 1", foreign, p.Name, got-1)
			}
			if n, _ := testutil.GatherAndCount(reg, "llm_probe_requests_total"); n != len(p.Outcomes) {
				t.Errorf("after a foreign outcome: requests_total series = %d, want %d", n, len(p.Outcomes))
			}
		})
	}
}

// A reload that changes a target's protocol changes its outcome series.
func TestOutcomeSeriesFollowProtocolChange(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", Protocol: probe.ProtocolOpenAIChat})
	reg := newTestRegistry(t, m)
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", Protocol: probe.ProtocolTritonGRPC})
	m.Observe("sim", "p", &probe.Result{Outcome: probe.OutcomeGRPCError})
	if got := requestsTotal(t, reg, string(probe.OutcomeGRPCError)); got != 1 {
		t.Errorf("grpc_error = %v after switching to triton_grpc, want 1", got)
	}
}

// Each histogram form exposes its part only: classic buckets without a
// native histogram, a native histogram without classic buckets, or both.
// The summary histograms (families.go) have no classic buckets in any
// form: only +Inf, _sum and _count in the classic one.
func TestHistogramForms(t *testing.T) {
	for _, form := range append(HistogramForms(), "") {
		t.Run("form="+form, func(t *testing.T) {
			m := NewProbeMetrics()
			m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", SLO: testSLO, Histograms: form})
			reg := newTestRegistry(t, m)
			m.Observe("sim", "p", &probe.Result{Outcome: probe.OutcomeSuccess, Streamed: true, StatusCode: 200,
				TTFT: 30 * time.Millisecond, EndToEnd: 100 * time.Millisecond, OutputTokens: 2,
				Chunks: []probe.Chunk{{At: 30 * time.Millisecond, Tokens: 1}, {At: 60 * time.Millisecond, Tokens: 1}},
				Phases: probe.Phases{Write: time.Millisecond, HasWrite: true}})
			m.ObserveBurstSpread("sim", "p", time.Millisecond)
			wantClassic := form != HistogramsNative
			wantNative := form != HistogramsClassic
			for _, name := range []string{"llm_probe_time_to_first_token_seconds", "llm_probe_burst_spread_seconds"} {
				h := gatherOne(t, reg, name).GetMetric()[0].GetHistogram()
				if got := finiteBuckets(h) > 0; got != wantClassic {
					t.Errorf("%s: classic buckets %v, want %v", name, got, wantClassic)
				}
				if got := h.Schema != nil; got != wantNative {
					t.Errorf("%s: native histogram %v, want %v", name, got, wantNative)
				}
			}
			m.ObserveScheduleLag("sim", "p", time.Millisecond)
			for _, name := range []string{"llm_probe_inter_token_latency_seconds", "llm_probe_time_per_output_token_seconds",
				"llm_probe_request_duration_seconds", "llm_probe_output_tokens_per_second",
				"llm_probe_phase_duration_seconds", "llm_probe_schedule_lag_seconds"} {
				h := gatherOne(t, reg, name).GetMetric()[0].GetHistogram()
				if finiteBuckets(h) != 0 || (h.Schema != nil) != wantNative || h.GetSampleCount() != 1 {
					t.Errorf("%s: %d classic buckets, native %v, count %d; want no classic bucket, native %v, count 1",
						name, finiteBuckets(h), h.Schema != nil, h.GetSampleCount(), wantNative)
				}
			}
		})
	}
}

// Changing a probe's histogram form replaces its series.
func TestHistogramFormChangeReplacesSeries(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m"})
	reg := newTestRegistry(t, m)
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", Histograms: HistogramsBoth})
	m.ObserveScheduleLag("sim", "p", time.Millisecond)
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", Histograms: HistogramsBoth})
	if h := gatherOne(t, reg, "llm_probe_schedule_lag_seconds").GetMetric()[0].GetHistogram(); h.GetSampleCount() != 1 {
		t.Errorf("an unchanged form (empty = both) reset the series: count %d", h.GetSampleCount())
	}
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", Histograms: HistogramsClassic})
	if h := gatherOne(t, reg, "llm_probe_schedule_lag_seconds").GetMetric()[0].GetHistogram(); h.GetSampleCount() != 0 || h.Schema != nil {
		t.Errorf("switching to classic kept the series: count %d, native %v", h.GetSampleCount(), h.Schema != nil)
	}
}
