package bench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// kneeConfig is a simulator with a sharp, cheap knee: 8 slots, 8-token
// answers, about 13.9 requests/s (docs/simulator.md#capacity). Long token
// steps and few chunks per second keep the knee where the formula puts
// it on a loaded 2-core CI machine under -race: with 10 ms steps, CPU
// starvation there slowed the simulated server itself by 15%.
func kneeConfig() simulator.Config {
	cfg := simulator.DefaultConfig()
	cfg.Latency = simulator.LatencyConfig{TTFTBase: 100 * time.Millisecond, DecodeBase: 40 * time.Millisecond, DecodePerRunning: 4 * time.Millisecond, Jitter: 0.02}
	cfg.Scheduler.MaxRunning = 8
	cfg.Output.RoleChunk = simulator.RoleChunkOff
	return cfg
}

const kneeOutput = 8

func kneeOptions(t *testing.T, s Settings) (Options, *simulator.Capacity) {
	t.Helper()
	cfg := kneeConfig()
	want, err := cfg.Capacity(4, kneeOutput)
	if err != nil {
		t.Fatal(err)
	}
	return kneeOptionsAt(t, simtest.Start(t, cfg).URL, s), &want
}

// kneeOptionsAt benches the knee simulator already serving at url.
func kneeOptionsAt(t *testing.T, url string, s Settings) Options {
	t.Helper()
	d, err := probe.NewDriver(probe.ProtocolOpenAIChat, probe.TargetOptions{Name: "sim", URL: url, Model: "sim-llm"}, promslog.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	o, _, _ := fakeOptions(d, s)
	o.Probe.Workload = requests(func() *probe.Request {
		return &probe.Request{Model: "sim-llm", Prompt: "tell me about lighthouses", MaxTokens: kneeOutput, IgnoreEOS: true, Stream: true}
	})
	o.Probe.Model = "sim-llm"
	return o
}

// TestCapacitySearchFindsKnee: an open-loop search with a TTFT SLO well
// above the prefill time lands within 10% of the analytic capacity. Below
// the knee nothing queues, so TTFT is the prefill; above it the queue and
// TTFT grow until the step stops early.
func TestCapacitySearchFindsKnee(t *testing.T) {
	slo, _ := ParseSLO([]string{"ttft<500ms"})
	o, want := kneeOptions(t, Settings{
		Mode: ModeRate, SLO: slo, Objective: 0.95,
		Duration: 1500 * time.Millisecond, Warmup: time.Second, Stability: 0.2, MaxWindows: 4,
		Search: &Search{Start: 4, Min: 1, Max: 200, Precision: 0.05, Trials: 1, Budget: 3 * time.Minute},
	})
	began := time.Now()
	rep, code := Run(context.Background(), o)
	stdout := o.Stdout.(interface{ String() string }).String()
	if code != ExitPass {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, o.Stderr.(interface{ String() string }).String())
	}
	got := rep.Capacity.Capacity
	t.Logf("capacity %.2f/s, analytic %.2f/s (%+.1f%%), %d steps in %s", got, want.RequestsPerSecond,
		(got/want.RequestsPerSecond-1)*100, len(rep.Steps), time.Since(began).Round(time.Second))
	if math.Abs(got/want.RequestsPerSecond-1) > 0.10 {
		t.Errorf("capacity %.2f/s is not within 10%% of the analytic %.2f/s\n%s", got, want.RequestsPerSecond, stdout)
	}
	// The bar is five minutes of wall time; the budget (3 min)
	// already ends a search, so this fails only if the budget is broken.
	if took := time.Since(began); took > 5*time.Minute {
		t.Errorf("the search took %s, over five minutes", took.Round(time.Second))
	}
	if rep.Capacity.Upper == nil || *rep.Capacity.Upper <= got {
		t.Errorf("bracket [%g, %v] does not bound the capacity", rep.Capacity.Lower, rep.Capacity.Upper)
	}
	early := 0
	for _, s := range rep.Steps {
		if s.StoppedEarly != "" {
			early++
		}
	}
	if early == 0 {
		t.Errorf("no step past the knee stopped early\n%s", stdout)
	}
	if !strings.Contains(stdout, "Capacity (goodput ≥ 95% with ttft<500ms)") {
		t.Errorf("no capacity line:\n%s", stdout)
	}
}

// An SLO below what an idle server can do: the search goes down to its
// floor, says why nothing passed, and exits 1.
func TestCapacitySearchNoLevelMeetsSLO(t *testing.T) {
	slo, _ := ParseSLO([]string{"ttft<1ms"})
	o, _ := kneeOptions(t, Settings{
		Mode: ModeConcurrency, SLO: slo, Duration: 300 * time.Millisecond,
		Search: &Search{Start: 4, Min: 1, Max: 8, Precision: 0.05, Trials: 1},
	})
	rep, code := Run(context.Background(), o)
	stderr := o.Stderr.(interface{ String() string }).String()
	if code != ExitFail {
		t.Fatalf("exit %d, want %d", code, ExitFail)
	}
	if !strings.Contains(stderr, "no level met the goodput objective 99% for SLO ttft<1ms; at concurrency 1, the lowest level tried, goodput was 0.0%") {
		t.Errorf("message:\n%s", stderr)
	}
	if n := len(rep.Steps); n != 3 {
		t.Errorf("%d steps, want 3 (4, 2, 1)", n)
	}
}

// TestQuickSweepTopReachesCapacity: the quick sweep's maximum-throughput
// step at concurrency 64 reads the simulator's analytic capacity. Over
// the send span plus the drain (64 queued requests, 4.6 s at 13.9/s) the
// same step read about 57% of it with 6 s windows, and the sweep's rates
// stopped well short of the knee. Completions arrive in batches of 8
// every 576 ms, so a 6 s window counts 10 or 11 of them: 96% to 106%.
func TestQuickSweepTopReachesCapacity(t *testing.T) {
	o, want := kneeOptions(t, Settings{
		Mode: ModeRate, QuickSweep: 1, SweepConcurrency: 64,
		Duration: 6 * time.Second, Warmup: time.Second,
	})
	rep, code := Run(context.Background(), o)
	stdout := o.Stdout.(interface{ String() string }).String()
	if code != ExitPass || len(rep.Steps) != 3 {
		t.Fatalf("exit %d, %d steps\n%s\n%s", code, len(rep.Steps), stdout, o.Stderr.(interface{ String() string }).String())
	}
	top := rep.Steps[1]
	got, x := top.RequestsPerSecond, want.RequestsPerSecond
	spanRate := float64(top.Successes) / top.MeasurementSeconds
	t.Logf("top %.2f/s over the completion window, %.2f/s over the span with the drain; analytic %.2f/s", got, spanRate, x)
	if top.Phase != phaseThroughput || top.Completions == nil {
		t.Fatalf("step 2 is %q with completion window %v", top.Phase, top.Completions)
	}
	if got < 0.9*x || got > 1.15*x {
		t.Errorf("maximum-throughput step read %.2f/s, %.0f%% of the analytic capacity %.2f/s; want 90%% to 115%%\n%s", got, got/x*100, x, stdout)
	}
	if !strings.Contains(stdout, "completed in the 6.00 s measurement window") {
		t.Errorf("the step's table does not say how its throughput was measured\n%s", stdout)
	}
	lo := rep.Steps[0].RequestsPerSecond
	if sweep := rep.Steps[2]; math.Abs(sweep.Level-(lo+got)/2) > 1e-6*sweep.Level {
		t.Errorf("sweep rate %g, want halfway between %g and %g", sweep.Level, lo, got)
	}
}
