package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/simulator"
)

// TestKeepAliveClosingServer runs the daemon's engine, back to back at
// concurrency 1 and 8, against a simulator that closes every connection
// after a streamed answer although its head allowed keep-alive (as
// llama.cpp's llama-server does). Every one of at least 1,000 probes per
// level must succeed: the stale pooled connections are retried on new
// ones, and counted.
func TestKeepAliveClosingServer(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase = time.Millisecond
	cfg.Latency.DecodeBase = 100 * time.Microsecond
	cfg.Latency.DecodePerRunning = 0
	cfg.Faults.CloseAfterStream = true
	s := startSimulator(t, cfg)
	for _, concurrency := range []int{1, 8} {
		t.Run(fmt.Sprint("concurrency-", concurrency), func(t *testing.T) {
			text := fmt.Sprintf(`targets:
  - name: llamacpp-like
    protocol: openai_chat
    url: %s
    model: sim-llm
    probes:
      - {name: back-to-back, schedule: {concurrency: %d}}
workloads:
  default: {max_tokens: 4, ignore_eos: true}
`, s.url, concurrency)
			c, err := config.Parse([]byte(text), "keepalive.yml", t.TempDir(), func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			pm := collector.NewProbeMetrics()
			reg.MustRegister(pm)
			e := engine.New(promslog.NewNopLogger(), pm)
			e.Apply(c)
			const want = 1000
			deadline := time.Now().Add(2 * time.Minute)
			for testutil.Gather(t, reg).Sum("llm_probe_requests_total") < want {
				if time.Now().After(deadline) {
					t.Fatalf("fewer than %d probes in 2 minutes", want)
				}
				time.Sleep(50 * time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			e.Stop(ctx)
			metrics := testutil.Gather(t, reg)
			total := metrics.Sum("llm_probe_requests_total")
			ok := metrics.Sum("llm_probe_requests_total", "outcome", "success")
			retries := metrics.Sum("llm_probe_connection_retries_total")
			t.Logf("%v probes, %v successes, %v retried on a new connection", total, ok, retries)
			if ok != total {
				t.Errorf("%v of %v probes failed against a healthy server that closes kept-alive connections", total-ok, total)
			}
			if retries == 0 {
				t.Error("no probe was retried: the simulator did not close pooled connections under them, so this test proves nothing")
			}
		})
	}
}
