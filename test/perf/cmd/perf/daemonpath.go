package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/status"
)

// The daemon's path in this process: engine.Engine applied with a
// configuration, its sinks those `llm-prober` serve wires (the status
// history and the per-answer metrics; not the span exporter, which does
// nothing without otlp_traces), so that its CPU per token is measured in
// the same pairs as the harness's direct path and the raw client, and a
// CPU profile of it can be read against theirs. What it costs on top of
// the direct path (prober) is the engine's record path: the extra metric
// calls, the sinks, the history and the log calls.

// countSink counts what the engine recorded, as the direct path's Run
// does: requests, successes, tokens and the last ids.
type countSink struct {
	mu                sync.Mutex
	requests, success int
	tokens            int
	last              idRing
}

func (c *countSink) Add(engine.Info)                 {}
func (c *countSink) Remove(target, probeName string) {}

func (c *countSink) Record(_, _ string, _ *probe.Request, res *probe.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	if res.Outcome == probe.OutcomeSuccess {
		c.success++
		c.tokens += res.OutputTokens
		c.last.add(res.RequestID)
	}
}

// daemonPathConfig is one target with one probe of n concurrent streams.
func daemonPathConfig(simURL string, n, tokens int) (*config.Config, error) {
	y := fmt.Sprintf(`targets:
  - name: %s
    protocol: openai_chat
    url: %s
    model: %s
    timeout: 30s
    max_in_flight: %d
    probes:
      - name: %s
        workload: perf
        schedule: {concurrency: %d, max_in_flight: %d}
        slo: {ttft: 250ms, tpot: 20ms, objective: 0.99}
workloads:
  perf:
    prompts:
      inline: [%q]
    max_tokens: %d
    ignore_eos: true
gpus:
  enabled: "false"
`, perfTarget, simURL, perfModel, max(n, 1), perfProbe, n, max(n, 1), prompt, tokens)
	return config.Parse([]byte(y), "daemon-path.yml", os.TempDir(), func(string) string { return "" })
}

// runDaemonPath runs the engine as the daemon does for d with n streams
// and returns its usage and counts.
func (h *harness) runDaemonPath(ctx context.Context, n int, d time.Duration) (usage, *countSink, error) {
	cfg, err := daemonPathConfig(h.sim.url, n, h.o.outputTokens)
	if err != nil {
		return usage{}, nil, fmt.Errorf("daemon path configuration: %w", err)
	}
	logger := promslog.NewNopLogger()
	reg := prometheus.NewRegistry()
	pm := collector.NewProbeMetrics()
	pooled := collector.NewPooledMetrics()
	answers, rateLimits := collector.NewAnswerMetrics(), collector.NewRateLimitMetrics()
	cancels, prefix := collector.NewCancelMetrics(), collector.NewPrefixMetrics()
	reg.MustRegister(pm, pooled, answers, rateLimits, cancels, prefix)
	count := &countSink{}
	e := engine.New(logger, pm, status.NewHistory(status.DefaultHistoryResults), engine.PooledSink(pooled),
		engine.MetricsSink(answers, rateLimits), engine.CancelSink(cancels), engine.PrefixSink(prefix), count)
	var runErr error
	use := measure(h.sim, func() {
		e.Apply(cfg)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			runErr = ctx.Err()
		}
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e.Stop(sctx)
	})
	return use, count, runErr
}
