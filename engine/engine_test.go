package engine

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
	"github.com/llm-prober/llm-prober/workload"
)

// These tests run the real wiring (config → engine → schedule runner →
// driver → metrics) against the simulator on the real clock. The quick
// versions run in `make test` with generous bounds; the long ones print the
// figures and run by hand:
//
//	LLM_PROBER_LOAD=60s go test ./engine -run TestRealClockRate -v
//	LLM_PROBER_SOAK=10m go test ./engine -run TestSoakEveryScheduleKind -v -timeout 20m

// runProber applies cfgText to a fresh engine for d, then stops it.
func runProber(t *testing.T, cfgText string, d time.Duration, every time.Duration, tick func(elapsed time.Duration)) *prometheus.Registry {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgText), "test.yml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	pm := collector.NewProbeMetrics()
	reg.MustRegister(pm)
	e := New(promslog.NewNopLogger(), pm)
	e.Apply(cfg)
	start := time.Now()
	for elapsed := time.Duration(0); elapsed < d; elapsed = time.Since(start) {
		time.Sleep(min(every, d-elapsed))
		if tick != nil {
			tick(time.Since(start))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.Stop(ctx)
	return reg
}

// fastSimulatorURL serves a fast simulator on loopback until the test ends.
func fastSimulatorURL(t *testing.T) string {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase = 5 * time.Millisecond
	cfg.Latency.DecodeBase = time.Millisecond
	return simtest.Start(t, cfg).URL
}

// family returns the metrics of one family with the given probe label.
// nativeQuantile estimates a quantile from the native part of a histogram
// (schema 3: within about 4.5%), finer than the classic buckets.
func nativeQuantile(h *dto.Histogram, q float64) float64 {
	target := q * float64(h.GetSampleCount())
	cum := float64(h.GetZeroCount())
	if cum >= target {
		return h.GetZeroThreshold()
	}
	base := math.Pow(2, math.Pow(2, -float64(h.GetSchema())))
	var idx int32
	var count int64
	deltas := h.GetPositiveDelta()
	di := 0
	for si, span := range h.GetPositiveSpan() {
		if si == 0 {
			idx = span.GetOffset()
		} else {
			idx += span.GetOffset()
		}
		for range span.GetLength() {
			count += deltas[di]
			di++
			cum += float64(count)
			if cum >= target {
				return math.Pow(base, float64(idx))
			}
			idx++
		}
	}
	return math.NaN()
}

func histogramOf(t *testing.T, reg *prometheus.Registry, name, probeName string) *dto.Histogram {
	t.Helper()
	ms := testutil.Gather(t, reg).Series(name, "probe", probeName)
	if len(ms) != 1 {
		t.Fatalf("%d series of %s for probe %s, want 1", len(ms), name, probeName)
	}
	return ms[0].GetHistogram()
}

func envDuration(t *testing.T, name string) (time.Duration, bool) {
	v := os.Getenv(name)
	if v == "" {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d, true
}

// TestRealClockRate sends an open-loop rate and bursts at the simulator and
// reports the achieved rate, the schedule lag and the burst spread. Quick
// version: 50/s for 3 s, asserted loosely; LLM_PROBER_LOAD=60s runs 200/s.
func TestRealClockRate(t *testing.T) {
	d, long := envDuration(t, "LLM_PROBER_LOAD")
	rate, burst := 50, 10
	if long {
		rate, burst = 200, 50
	} else {
		d = 3 * time.Second
	}
	url := fastSimulatorURL(t)
	cfg := fmt.Sprintf(`targets:
  - name: sim
    protocol: openai_chat
    url: %s
    model: sim-llm
    probes:
      - {name: rate, schedule: {rate: %d/s}}
      - {name: burst, schedule: {burst: %d, period: 1s}}
workloads:
  default: {max_tokens: 8, ignore_eos: true}
`, url, rate, burst)
	reg := runProber(t, cfg, d, time.Second, nil)

	metrics := testutil.Gather(t, reg)
	ok := metrics.Sum("llm_probe_requests_total", "probe", "rate", "outcome", "success")
	all := metrics.Sum("llm_probe_requests_total", "probe", "rate")
	skipped := testutil.Gather(t, reg).Sum("llm_probe_skipped_total", "probe", "rate")
	lag := histogramOf(t, reg, "llm_probe_schedule_lag_seconds", "rate")
	spread := histogramOf(t, reg, "llm_probe_burst_spread_seconds", "burst")
	burstLag := histogramOf(t, reg, "llm_probe_schedule_lag_seconds", "burst")
	achieved := all / d.Seconds()
	t.Logf("rate %d/s for %s: sent %.0f (%.1f/s, %.1f%% of planned), success %.0f, skipped %.0f; lag p50 %.3gms p99 %.3gms p99.9 %.3gms",
		rate, d, all, achieved, 100*achieved/float64(rate), ok, skipped,
		1e3*nativeQuantile(lag, 0.5), 1e3*nativeQuantile(lag, 0.99), 1e3*nativeQuantile(lag, 0.999))
	t.Logf("bursts of %d: %d bursts, spread p50 %.3gms p99 %.3gms, mean %.3gms; burst lag p99 %.3gms",
		burst, spread.GetSampleCount(), 1e3*nativeQuantile(spread, 0.5), 1e3*nativeQuantile(spread, 0.99),
		1e3*spread.GetSampleSum()/float64(max(spread.GetSampleCount(), 1)), 1e3*nativeQuantile(burstLag, 0.99))
	// Generous bounds: a loaded 2-core CI machine under -race must pass.
	if achieved < 0.5*float64(rate) {
		t.Errorf("achieved %.1f/s of %d/s", achieved, rate)
	}
	if ok < 0.9*all {
		t.Errorf("only %.0f of %.0f requests succeeded", ok, all)
	}
	if spread.GetSampleCount() == 0 {
		t.Error("no burst spread recorded")
	}
}

// soakConfig uses every schedule kind at once.
func soakConfig(url string) string {
	return fmt.Sprintf(`targets:
  - name: sim
    protocol: openai_chat
    url: %[1]s
    model: sim-llm
    max_in_flight: 64
    probes:
      - {name: every, schedule: {every: 200ms, jitter: 50ms}}
      - {name: rate, schedule: {rate: 20/s}}
      - {name: poisson, workload: synthetic, schedule: {rate: 10/s, distribution: poisson}}
      - {name: closed, schedule: {concurrency: 2}}
      - {name: burst, schedule: {burst: 8, period: 2s}}
      - {name: cron-burst, schedule: {burst: 4, cron: "* * * * *"}}
      - name: stages
        workload: chat
        schedule:
          stages: [{rate: 5/s, duration: 2s}, {concurrency: 2, duration: 2s}]
          repeat: true
      - {name: windowed, schedule: {rate: 5/s, active: "*/2 * * * *"}}
  - name: sim-completions
    protocol: openai_completions
    url: %[1]s
    model: sim-llm
    max_in_flight: 4
    probes:
      - {name: burst, schedule: {burst: 8, period: 1s}}
workloads:
  default: {max_tokens: {distribution: uniform, mean: 8, range: 0.5}, ignore_eos: true}
  synthetic:
    prompts: {synthetic: {input_tokens: {mean: 64, stddev: 8}}, seed: 1}
    max_tokens: {distribution: exponential, mean: 8, cap: 32}
    ignore_eos: true
  chat:
    prompts:
      system: Be brief.
      inline: [Hi, {messages: [{role: user, content: Hi}, {role: assistant, content: Hello}, {role: user, content: Bye}]}]
      selection: random
    max_tokens: 6
`, url)
}

// rssKiB is this process's resident set in KiB, -1 where it cannot be read.
func rssKiB() int64 {
	b, err := testutil.RSS(os.Getpid())
	if err != nil {
		return -1
	}
	return b >> 10
}

// TestSoakEveryScheduleKind runs every schedule kind at once; goleak in
// TestMain checks that stopping leaves no goroutine behind. Quick version:
// 5 s; LLM_PROBER_SOAK=10m runs long and reports RSS every 30 s.
func TestSoakEveryScheduleKind(t *testing.T) {
	d, long := envDuration(t, "LLM_PROBER_SOAK")
	every := 30 * time.Second
	if !long {
		d, every = 5*time.Second, time.Second
	}
	url := fastSimulatorURL(t)
	var rss []int64
	reg := runProber(t, soakConfig(url), d, every, func(elapsed time.Duration) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		rss = append(rss, rssKiB())
		if long {
			t.Logf("%6s  rss %6d KiB  heap_inuse %6d KiB  goroutines %d", elapsed.Round(time.Second), rss[len(rss)-1], ms.HeapInuse>>10, runtime.NumGoroutine())
		}
	})
	for _, probeName := range []string{"every", "rate", "poisson", "closed", "burst", "stages"} {
		if n := testutil.Gather(t, reg).Sum("llm_probe_requests_total", "probe", probeName, "outcome", "success"); n == 0 {
			t.Errorf("probe %s: no successful request", probeName)
		}
	}
	// The simulator counts one token per word and honours ignore_eos, so
	// synthetic prompts and forced lengths must both come out as asked.
	for _, name := range []string{"llm_probe_input_length_mismatch_total", "llm_probe_output_length_mismatch_total"} {
		if n := testutil.Gather(t, reg).Sum(name, "probe", "poisson"); n != 0 {
			t.Errorf("%s{probe=\"poisson\"} = %v, want 0", name, n)
		}
	}
	if long {
		t.Logf("RSS first %d KiB, last %d KiB, max %d KiB", rss[0], rss[len(rss)-1], maxOf(rss))
		for _, p := range []string{"every", "rate", "poisson", "closed", "burst", "cron-burst", "stages", "windowed"} {
			t.Logf("%-10s success %.0f skipped %.0f", p,
				testutil.Gather(t, reg).Sum("llm_probe_requests_total", "probe", p, "outcome", "success"),
				testutil.Gather(t, reg).Sum("llm_probe_skipped_total", "probe", p))
		}
	}
}

func maxOf(v []int64) int64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func TestCheckLengths(t *testing.T) {
	reg := prometheus.NewRegistry()
	pm := collector.NewProbeMetrics()
	reg.MustRegister(pm)
	pm.Add(collector.ProbeSeries{Target: "t", Probe: "p", Model: "m"})
	var logs bytes.Buffer
	logger := promslog.New(&promslog.Config{Writer: &logs})
	c := &lengthCheck{metrics: pm, target: "t", probe: "p", logger: logger}
	draw := workload.Draw{Request: &probe.Request{MaxTokens: 100}, InputTokens: 500}
	for _, r := range []*probe.Result{
		{OutputTokens: 100, InputTokens: 540, InputTokensSource: probe.TokenSourceServer}, // within 10% (+32)
		{OutputTokens: 89, InputTokens: 590, InputTokensSource: probe.TokenSourceServer},  // both off
		{OutputTokens: 111, InputTokens: 10, InputTokensSource: probe.TokenSourceNone},    // output off; no server count
		// A cancellation probe's cut stream: short on purpose, not counted.
		{OutputTokens: 8, Cancel: &probe.Cancellation{AfterTokens: 8, Tokens: 8}},
	} {
		c.check(Sent{Draw: draw, Result: r})
	}
	out := testutil.Gather(t, reg).Sum("llm_probe_output_length_mismatch_total", "probe", "p")
	in := testutil.Gather(t, reg).Sum("llm_probe_input_length_mismatch_total", "probe", "p")
	if out != 2 || in != 1 {
		t.Errorf("mismatches: output %v, input %v; want 2 and 1", out, in)
	}
	if n := strings.Count(logs.String(), "Output length differs"); n != 1 {
		t.Errorf("output mismatch logged %d times, want once per probe", n)
	}
}
