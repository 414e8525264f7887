package integration

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
)

// TestAccuracyAgainstGroundTruth compares, over 200 streamed requests, the
// time at which the prober saw the first token and every later token with
// the time the simulator flushed them. The difference is what the prober
// adds to the truth: loopback delivery, scheduling and parsing.
func TestAccuracyAgainstGroundTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("200 requests against the simulator")
	}
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase = 20 * time.Millisecond
	cfg.Latency.DecodeBase = 4 * time.Millisecond
	s := startSimulator(t, cfg)
	for _, protocol := range []string{probe.ProtocolOpenAIChat, probe.ProtocolOpenAICompletions} {
		t.Run(protocol, func(t *testing.T) {
			d := newDriver(t, protocol, probe.TargetOptions{Name: "sim", URL: s.url, Model: "sim-llm"})
			const requests, concurrency = 200, 8
			run := s.compareWithGroundTruth(t, requests, concurrency,
				func() *probe.Result { return probeOnce(d, 16, 20*time.Second) },
				func(res *probe.Result, rec simulator.RequestRecord, _ []int64) {
					if res.OutputTokens != rec.OutputTokens || res.OutputTokensSource != probe.TokenSourceServer {
						t.Errorf("%s: output tokens %d (%s), simulator sent %d", res.RequestID, res.OutputTokens, res.OutputTokensSource, rec.OutputTokens)
					}
				})
			if run.failures > 0 {
				t.Fatalf("%d of %d probes failed", run.failures, requests)
			}
			// 2 ms at the median holds on a loaded 2-core CI machine; the
			// tight figures belong to the benchmark.
			medianWithin(t, "ttft", run.ttft, -0.002, 0.002)
			medianWithin(t, "first token read vs flush", run.first, -0.002, 0.002)
			medianWithin(t, "every token read vs flush", run.token, -0.002, 0.002)
			if run.tokens < requests*16 {
				t.Errorf("compared %d tokens, want at least %d", run.tokens, requests*16)
			}
		})
	}
}

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}
