package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	internaltestutil "github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// TestStopCancelsAndRecords: requests still in flight when Stop's drain
// deadline passes are cancelled, each recorded as outcome cancelled, none
// judged by the SLO or counted in the failure streak, and the engine
// says so in one line, not one per request.
func TestStopCancelsAndRecords(t *testing.T) {
	simCfg := simulator.DefaultConfig()
	simCfg.Latency.TTFTBase = 5 * time.Millisecond
	simCfg.Latency.DecodeBase = 50 * time.Millisecond
	simCfg.Latency.DecodePerRunning = 0
	simCfg.Latency.Jitter = 0
	url := simtest.Start(t, simCfg).URL
	const burst = 5
	cfg, err := config.Parse(fmt.Appendf(nil, `targets:
  - name: sim
    protocol: openai_chat
    url: %s
    model: sim-llm
    probes:
      - {name: burst, timeout: 60s, slo: {ttft: 10s}, schedule: {burst: %d, period: 2s, max_in_flight: %[2]d}}
workloads:
  default: {max_tokens: 400, ignore_eos: true}
`, url, burst), "test.yml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	pm := collector.NewProbeMetrics()
	reg.MustRegister(pm)
	logs := &internaltestutil.SyncBuffer{}
	e := New(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), pm)
	e.Apply(cfg)
	// The first burst comes within the 2s period; the next ones find
	// its requests holding every slot and are skipped.
	internaltestutil.WaitFor(t, "the burst in flight", 30*time.Second, func() bool {
		return internaltestutil.Gather(t, reg).Sum("llm_probe_in_flight_requests", "probe", "burst") == burst
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	e.Stop(ctx)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Stop took %s with a 100ms drain", took)
	}
	m := internaltestutil.Gather(t, reg)
	cancelled := m.Sum("llm_probe_requests_total", "probe", "burst", "outcome", "cancelled")
	all := m.Sum("llm_probe_requests_total", "probe", "burst")
	if cancelled != burst || all != burst {
		t.Errorf("%v requests recorded, %v cancelled; want %d, all cancelled", all, cancelled, burst)
	}
	// Only the skips count against the probe.
	skips := m.Sum("llm_probe_skipped_total", "probe", "burst", "reason", "concurrency_limit")
	if n := m.Sum("llm_probe_slo_requests_total", "probe", "burst", "slo", "ttft"); n != skips {
		t.Errorf("%v requests judged by the SLO, want only the %v skips", n, skips)
	}
	if n := m.Sum("llm_probe_consecutive_failures", "probe", "burst"); n != skips {
		t.Errorf("failure streak %v, want only the %v skips", n, skips)
	}
	out := logs.String()
	if n := strings.Count(out, "Cancelled in-flight probes"); n != 1 {
		t.Errorf("summary logged %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, fmt.Sprintf("runs=%d results=%d", burst, burst)) {
		t.Errorf("summary does not count %d runs and results:\n%s", burst, out)
	}
	if strings.Contains(out, "level=WARN msg=\"Probe failing\"") {
		t.Errorf("a cancelled probe logged as failing:\n%s", out)
	}
}
