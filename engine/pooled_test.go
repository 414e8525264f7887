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
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// TestPooledProbes: embedding and rerank probes run on their schedules
// against the simulator; the request counter, the duration histogram,
// the input-token counter and the pooled gauges carry what the simulator
// answered (its dimension, the documents' count), and a NaN answer is
// counted as wrong_answer.
func TestPooledProbes(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase = 5 * time.Millisecond
	sim := simtest.Start(t, cfg)
	text := fmt.Sprintf(`targets:
  - name: embed
    protocol: openai_embeddings
    url: %[1]s
    model: sim-llm
    embedding: {dimension: %[2]d, inputs: 2}
    probes: [{name: p, schedule: {every: 50ms}}]
  - name: broken
    protocol: tei_embed
    url: %[1]s
    model: sim-llm
    headers: {%[3]s: nan}
    probes: [{name: p, schedule: {every: 50ms}}]
  - name: rank
    protocol: tei_rerank
    url: %[1]s
    model: sim-llm
    rerank: {documents: [lighthouse keeper, bread, revenue, keeper], expect_top: 0}
    probes: [{name: p, schedule: {every: 50ms}}]
`, sim.URL, simulator.DefaultEmbeddingDimension, simulator.HeaderPooledFault)
	logger := promslog.NewNopLogger()
	pm, pooled := collector.NewProbeMetrics(), collector.NewPooledMetrics()
	reg := prometheus.NewRegistry()
	reg.MustRegister(pm, pooled)
	e := New(logger, pm, PooledSink(pooled))
	e.Apply(parseConfig(t, text))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		e.Stop(ctx)
	}()
	testutil.WaitFor(t, "every probe answered", 10*time.Second, func() bool {
		f := testutil.Gather(t, reg)
		return f.Sum("llm_probe_requests_total", "target", "embed", "outcome", "success") > 0 &&
			f.Sum("llm_probe_requests_total", "target", "rank", "outcome", "success") > 0 &&
			f.Sum("llm_probe_requests_total", "target", "broken", "outcome", "wrong_answer") > 0
	})
	f := testutil.Gather(t, reg)
	if v := f.Sum("llm_probe_embedding_dimension", "target", "embed"); v != simulator.DefaultEmbeddingDimension {
		t.Errorf("dimension gauge %v", v)
	}
	if v := f.Sum("llm_probe_rerank_results", "target", "rank"); v != 4 {
		t.Errorf("rerank results gauge %v, want 4", v)
	}
	if len(f.Series("llm_probe_embedding_dimension", "target", "broken")) != 0 {
		t.Error("a probe without a good answer has a dimension")
	}
	// Input tokens: "sim-llm"'s default prompt is 8 words, two inputs of
	// it numbered "1. " and "2. ": the simulator counts 18.
	succ := f.Sum("llm_probe_requests_total", "target", "embed", "outcome", "success")
	if in := f.Sum("llm_probe_input_tokens_total", "target", "embed"); in < 18*succ {
		t.Errorf("input tokens %v for %v successes", in, succ)
	}
	if h := f.Series("llm_probe_request_duration_seconds", "target", "embed"); len(h) != 1 || h[0].GetHistogram().GetSampleCount() == 0 {
		t.Error("no request durations observed")
	}
	if h := f.Series("llm_probe_time_to_first_token_seconds", "target", "embed"); len(h) == 1 && h[0].GetHistogram().GetSampleCount() != 0 {
		t.Error("TTFT observed for an answer that does not stream")
	}
}
