package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// startSimulator serves a fast simulator on loopback until the test ends:
// 5 ms to the first token, then decodeBase per token.
func startSimulator(t *testing.T, decodeBase time.Duration) string {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase = 5 * time.Millisecond
	cfg.Latency.DecodeBase = decodeBase
	cfg.Latency.DecodePerRunning = 0
	return simtest.Start(t, cfg).URL
}

func simOptions(t *testing.T, url string, maxTokens int, s Settings) (Options, *testutil.SyncBuffer, *testutil.SyncBuffer) {
	t.Helper()
	d, err := probe.NewDriver(probe.ProtocolOpenAIChat, probe.TargetOptions{Name: "sim", URL: url, Model: "sim-llm"}, promslog.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	o, stdout, stderr := fakeOptions(d, s)
	o.Probe.Workload = requests(func() *probe.Request {
		return &probe.Request{Model: "sim-llm", Prompt: "tell me about lighthouses", MaxTokens: maxTokens, IgnoreEOS: true, Stream: true}
	})
	o.Probe.Model = "sim-llm"
	o.Config = ConfigInfo{Target: "sim", Probe: "p", Model: "sim-llm", Endpoint: url}
	return o, stdout, stderr
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// TestStatisticsMatchGroundTruth benches the simulator, exports every
// request, and checks the step's statistics against what the simulator
// recorded per request id: TTFT p50 against the median server-side time
// to the first token's flush, output tokens and token chunks exactly.
func TestStatisticsMatchGroundTruth(t *testing.T) {
	url := startSimulator(t, time.Millisecond)
	o, stdout, _ := simOptions(t, url, 12, Settings{Levels: []float64{2}, Requests: 40})
	o.RequestsPath = filepath.Join(t.TempDir(), "requests.jsonl")
	rep, code := Run(context.Background(), o)
	if code != ExitPass {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	st := rep.Steps[0]
	f, err := os.Open(o.RequestsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var serverTTFT []float64
	var records, tokens, itl int
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r requestRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %d: %v", records+1, err)
		}
		records++
		gt := simtest.GroundTruth(t, url, r.RequestID)
		if r.Outcome != "success" || gt.Outcome != "completed" {
			t.Errorf("%s: outcome %s, simulator %s", r.RequestID, r.Outcome, gt.Outcome)
			continue
		}
		if r.OutputTokens != gt.OutputTokens || r.OutputTokensSource != "server" {
			t.Errorf("%s: %d output tokens (%s), simulator flushed %d", r.RequestID, r.OutputTokens, r.OutputTokensSource, gt.OutputTokens)
		}
		content := 0
		for _, c := range gt.Chunks {
			if c.Content {
				content++
			}
		}
		if len(r.ChunkOffsetsSeconds) != content {
			t.Errorf("%s: %d chunks exported, simulator flushed %d with content", r.RequestID, len(r.ChunkOffsetsSeconds), content)
		}
		if r.TTFTSeconds == nil || r.TPOTSeconds == nil || *r.TTFTSeconds != r.ChunkOffsetsSeconds[0] {
			t.Errorf("%s: ttft %v tpot %v first chunk %v", r.RequestID, r.TTFTSeconds, r.TPOTSeconds, r.ChunkOffsetsSeconds)
		}
		serverTTFT = append(serverTTFT, float64(gt.FirstTokenUnixNano-gt.ReceivedUnixNano)/1e9)
		tokens += gt.OutputTokens
		itl += gt.OutputTokens - 1
	}
	if records != 40 || st.Requests != 40 {
		t.Fatalf("exported %d records, step measured %d; want 40", records, st.Requests)
	}
	if st.OutputTokens != tokens || st.ITL.Count != itl || st.TTFT.Count != 40 || st.TPOT.Count != 40 {
		t.Errorf("step: %d output tokens (simulator %d), %d ITL observations (want %d), TTFT n=%d TPOT n=%d",
			st.OutputTokens, tokens, st.ITL.Count, itl, st.TTFT.Count, st.TPOT.Count)
	}
	med := median(serverTTFT)
	t.Logf("TTFT p50 %.3f ms, simulator median first-token flush %.3f ms", st.TTFT.P50*1e3, med*1e3)
	if d := st.TTFT.P50 - med; d < 0 || d > 0.002 {
		t.Errorf("TTFT p50 %.3f ms is %.3f ms off the simulator's median %.3f ms; want within [0, 2] ms", st.TTFT.P50*1e3, d*1e3, med*1e3)
	}
}

// TestConcurrencySweep runs 1:4:x2 and expects throughput to grow with
// concurrency on a simulator whose latency does not depend on load.
func TestConcurrencySweep(t *testing.T) {
	url := startSimulator(t, 2*time.Millisecond)
	levels, err := ParseSweep(ModeConcurrency, "1:4:x2")
	if err != nil {
		t.Fatal(err)
	}
	o, stdout, _ := simOptions(t, url, 16, Settings{Levels: levels, Duration: time.Second, Warmup: 200 * time.Millisecond})
	rep, code := Run(context.Background(), o)
	if code != ExitPass || len(rep.Steps) != 3 {
		t.Fatalf("exit %d, %d steps\n%s", code, len(rep.Steps), stdout)
	}
	for i, s := range rep.Steps {
		t.Logf("%s: %d requests, %.1f req/s, %d warm-up", s.Label(), s.Requests, s.RequestsPerSecond, s.WarmupRequests)
		if s.ErrorRate != 0 || s.WarmupRequests == 0 {
			t.Errorf("%s: error rate %g, %d warm-up requests", s.Label(), s.ErrorRate, s.WarmupRequests)
		}
		// 1.2x, not the ideal 2x: under -race on a busy 2-core machine
		// the client and simulator share the CPUs, and concurrency 4
		// was seen at 1.29x concurrency 2's rate.
		if i > 0 && s.RequestsPerSecond < 1.2*rep.Steps[i-1].RequestsPerSecond {
			t.Errorf("%s: %.1f req/s, not well above %s's %.1f", s.Label(), s.RequestsPerSecond, rep.Steps[i-1].Label(), rep.Steps[i-1].RequestsPerSecond)
		}
	}
	out := stdout.String()
	for _, want := range []string{"Step 1/3: concurrency 1", "Step 3/3: concurrency 4", "Time to first token (ms)", "Inter token latency (ms)", "Request throughput (per sec)", "Concurrency  Requests", "TTFT p50  TTFT p95  TTFT p99"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}

// TestRateSteps checks open-loop arrivals: a constant rate sends its rate
// times the duration, a Poisson rate within four standard deviations.
func TestRateSteps(t *testing.T) {
	url := startSimulator(t, time.Millisecond)
	for _, tc := range []struct {
		poisson bool
		rate    float64
		tol     float64
	}{
		{false, 25, 1},
		{true, 40, 4 * math.Sqrt(40)},
	} {
		o, stdout, _ := simOptions(t, url, 8, Settings{Mode: ModeRate, Levels: []float64{tc.rate}, Poisson: tc.poisson, Duration: time.Second, Seed: 7})
		rep, code := Run(context.Background(), o)
		if code != ExitPass {
			t.Fatalf("exit %d\n%s", code, stdout)
		}
		s := rep.Steps[0]
		arrivals := float64(s.Requests + s.SkippedTotal)
		t.Logf("%s poisson=%v: %d requests, %d skipped", s.Label(), tc.poisson, s.Requests, s.SkippedTotal)
		if math.Abs(arrivals-tc.rate) > tc.tol {
			t.Errorf("%s poisson=%v: %.0f arrivals in 1 s, want %g ± %.1f", s.Label(), tc.poisson, arrivals, tc.rate, tc.tol)
		}
		if s.Poisson != tc.poisson || s.ErrorRate != 0 {
			t.Errorf("step %+v", s)
		}
	}
}

// An open-loop rate that exceeds --max-in-flight skips arrivals and says so.
func TestRateSkipsBeyondMaxInFlight(t *testing.T) {
	url := startSimulator(t, 5*time.Millisecond)
	o, stdout, _ := simOptions(t, url, 20, Settings{Mode: ModeRate, Levels: []float64{50}, Duration: time.Second, MaxInFlight: 2})
	rep, code := Run(context.Background(), o)
	if code != ExitPass {
		t.Fatalf("exit %d", code)
	}
	s := rep.Steps[0]
	if s.SkippedTotal == 0 || s.Skipped["concurrency_limit"] != s.SkippedTotal {
		t.Errorf("skipped %d %v; want concurrency_limit skips", s.SkippedTotal, s.Skipped)
	}
	if !strings.Contains(stdout.String(), "concurrency_limit") {
		t.Errorf("step table hides the skips:\n%s", stdout)
	}
}

func TestStabilityWindows(t *testing.T) {
	url := startSimulator(t, time.Millisecond)
	o, stdout, stderr := simOptions(t, url, 8, Settings{Levels: []float64{2}, Duration: 250 * time.Millisecond, Stability: 0.5, MaxWindows: 6})
	rep, code := Run(context.Background(), o)
	if code != ExitPass {
		t.Fatalf("exit %d", code)
	}
	s := rep.Steps[0]
	if s.Stable == nil || !*s.Stable || s.ReportedWindows != 3 || len(s.Windows) < 3 {
		t.Fatalf("stable %v, %d windows reported of %d\n%s", s.Stable, s.ReportedWindows, len(s.Windows), stdout)
	}
	var n int
	for _, w := range s.Windows[len(s.Windows)-3:] {
		n += w.Requests
	}
	if s.Requests != n {
		t.Errorf("step has %d requests, its last three windows %d", s.Requests, n)
	}

	// Windows cannot agree within a millionth: three windows, then a warning.
	o, stdout, _ = simOptions(t, url, 8, Settings{Levels: []float64{2}, Duration: 200 * time.Millisecond, Stability: 1e-6, MaxWindows: 3})
	o.Stderr = stderr
	rep, code = Run(context.Background(), o)
	if code != ExitPass {
		t.Fatalf("exit %d", code)
	}
	s = rep.Steps[0]
	if s.Stable == nil || *s.Stable || len(s.Windows) != 3 {
		t.Errorf("stable %v after %d windows", s.Stable, len(s.Windows))
	}
	if !strings.Contains(stderr.String(), "did not stabilise within 3 windows") || !strings.Contains(stdout.String(), "NOT STABLE") || !strings.Contains(stdout.String(), "2 (unstable)") {
		t.Errorf("unstable step not flagged:\n%s\n%s", stdout, stderr)
	}
}
