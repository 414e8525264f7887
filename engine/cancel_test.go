package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// cancelSim is a simulator slow enough that a cut stream is far from its
// end: 2 ms per token, 400 tokens.
func cancelSim(t *testing.T) *simtest.Sim {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase, cfg.Latency.DecodeBase, cfg.Latency.PrefillPerToken, cfg.Latency.Jitter = 5*time.Millisecond, 2*time.Millisecond, 0, 0
	return simtest.Start(t, cfg)
}

// cancelConfig is one target on sim whose requests carry X-Sim-Options
// options, with one cancellation probe, its server_metrics at
// metricsURL.
func cancelConfig(t *testing.T, simURL, metricsURL, options, cancel, schedule string) *config.Config {
	t.Helper()
	c, err := config.Parse(fmt.Appendf(nil, `targets:
  - name: sim
    protocol: openai_chat
    url: %s
    model: sim-llm
    headers: {X-Sim-Options: %q}
    server_metrics: {url: %s, kind: vllm, timeout: 1s}
    probes:
      - name: cut
        schedule: %s
        cancel: %s
workloads:
  default: {max_tokens: 400, ignore_eos: true}
`, simURL, options, metricsURL, schedule, cancel), "test.yml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sendCancel(t *testing.T, c *config.Config) *probe.Result {
	t.Helper()
	p, err := Open(c, c.Targets[0], c.Targets[0].Probes[0], promslog.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	res := p.Send(context.Background()).Result
	if res.Outcome != probe.OutcomeSuccess || res.Cancel == nil {
		t.Fatalf("outcome %s (%v), cancellation %+v", res.Outcome, res.Err, res.Cancel)
	}
	return res
}

// TestCancelReleaseMeasured: against the simulator's ground truth, a
// server that frees the slot 300 ms after noticing the disconnect is
// measured as released after at least those 300 ms and at most the time
// from the cut to the release plus a poll interval (and the scrape); one
// that frees it at once, within a poll interval.
func TestCancelReleaseMeasured(t *testing.T) {
	sim := cancelSim(t)
	const poll = 50 * time.Millisecond
	for _, tc := range []struct {
		option string
		delay  time.Duration
	}{{"disconnect_release=300ms", 300 * time.Millisecond}, {"disconnect_release=0s", 0}} {
		c := cancelConfig(t, sim.URL, sim.URL+"/metrics", tc.option, "{after_tokens: 4, release_timeout: 5s, poll_interval: 50ms}", "{every: 1m}")
		res := sendCancel(t, c)
		cut := res.Cancel
		rec := simtest.GroundTruth(t, sim.URL, res.RequestID)
		if cut.Release != probe.CancelReleased || cut.RunningBefore != 1 || cut.Tokens != 4 || len(res.Chunks) != 4 {
			t.Fatalf("%s: cancellation %+v, %d chunks read", tc.option, *cut, len(res.Chunks))
		}
		if rec.DisconnectUnixNano == 0 || rec.SlotReleasedUnixNano == 0 {
			t.Fatalf("%s: ground truth without disconnect or release: %+v", tc.option, rec)
		}
		truth := time.Duration(rec.SlotReleasedUnixNano - rec.DisconnectUnixNano)
		cutAt := res.Start.Add(cut.At)
		sinceCut := time.Unix(0, rec.SlotReleasedUnixNano).Sub(cutAt)
		t.Logf("%s: measured release %s; ground truth: disconnect→release %s, cut→release %s, %d tokens sent, %d read",
			tc.option, cut.ReleaseAfter, truth, sinceCut, rec.OutputTokens, cut.Tokens)
		if truth < tc.delay || truth > tc.delay+50*time.Millisecond {
			t.Errorf("%s: ground truth release %s after the disconnect, want about %s", tc.option, truth, tc.delay)
		}
		// Slack for the last scrape itself on a busy, race-built machine.
		if cut.ReleaseAfter < truth-5*time.Millisecond || cut.ReleaseAfter > sinceCut+poll+100*time.Millisecond {
			t.Errorf("%s: measured %s, want within [%s, %s + poll %s]", tc.option, cut.ReleaseAfter, truth, sinceCut, poll)
		}
	}
}

// TestCancelLeakAndUnknown: a server that never frees the slot is counted
// leaked after the release timeout (ground truth: the slot is held, and
// freeing it through the simulator's debug endpoint empties the gauge);
// a target whose metrics cannot be read, or lack the running gauge,
// counts unknown, without waiting, saying why.
func TestCancelLeakAndUnknown(t *testing.T) {
	sim := cancelSim(t)
	c := cancelConfig(t, sim.URL, sim.URL+"/metrics", "disconnect_release=leak", "{after_tokens: 2, release_timeout: 400ms, poll_interval: 50ms}", "{every: 1m}")
	began := time.Now()
	res := sendCancel(t, c)
	took := time.Since(began)
	if res.Cancel.Release != probe.CancelLeaked || res.Cancel.RunningBefore != 1 || res.Cancel.Err != nil || took < 400*time.Millisecond || took > 3*time.Second {
		t.Errorf("leak: cancellation %+v after %s", *res.Cancel, took)
	}
	if rec := simtest.GroundTruth(t, sim.URL, res.RequestID); !rec.SlotLeaked || rec.SlotReleasedUnixNano != 0 || rec.DisconnectUnixNano == 0 {
		t.Errorf("leak: ground truth leaked %t, disconnect %d, released %d", rec.SlotLeaked, rec.DisconnectUnixNano, rec.SlotReleasedUnixNano)
	}
	sm := collector.NewServerMetrics(nil)
	sm.SetTargets(c.ServerTargets())
	if v, err := sm.RequestsRunning(context.Background(), "sim"); err != nil || v != 1 {
		t.Errorf("running with the leaked slot: %v (%v), want 1", v, err)
	}
	if n := sim.Server.FreeLeakedSlots(); n != 1 {
		t.Errorf("freed %d leaked slots, want 1", n)
	}
	if v, err := sm.RequestsRunning(context.Background(), "sim"); err != nil || v != 0 {
		t.Errorf("running after freeing: %v (%v), want 0", v, err)
	}
	if rec := simtest.GroundTruth(t, sim.URL, res.RequestID); rec.SlotLeaked || rec.SlotReleasedUnixNano == 0 {
		t.Errorf("freed: ground truth leaked %t, released %d", rec.SlotLeaked, rec.SlotReleasedUnixNano)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String() + "/metrics"
	l.Close()
	c = cancelConfig(t, sim.URL, down, "disconnect_release=0s", "{after_tokens: 2, release_timeout: 5s, poll_interval: 50ms}", "{every: 1m}")
	began = time.Now()
	res = sendCancel(t, c)
	if res.Cancel.Release != probe.CancelReleaseUnknown || res.Cancel.Err == nil || time.Since(began) > 3*time.Second {
		t.Errorf("metrics down: cancellation %+v after %s", *res.Cancel, time.Since(began))
	}
	noGauge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte("vllm:num_requests_waiting{model_name=\"sim-llm\"} 0\n"))
	}))
	defer noGauge.Close()
	c = cancelConfig(t, sim.URL, noGauge.URL+"/metrics", "disconnect_release=0s", "{after_tokens: 2, release_timeout: 5s, poll_interval: 50ms}", "{every: 1m}")
	if res = sendCancel(t, c); res.Cancel.Release != probe.CancelReleaseUnknown || !errors.Is(res.Cancel.Err, collector.ErrNoRunningGauge) {
		t.Errorf("no gauge: cancellation %+v", *res.Cancel)
	}
}

// TestCancelThroughTheEngine: from configuration to metrics: a probe on a
// leaking server counts leaked, one on a healthy server released with
// its release time observed, neither has unknown, and the cut streams
// observe TTFT but no request duration or TPOT.
func TestCancelThroughTheEngine(t *testing.T) {
	leaky, healthy := cancelSim(t), cancelSim(t)
	c := cancelConfig(t, leaky.URL, leaky.URL+"/metrics", "disconnect_release=leak", "{after_tokens: 3, release_timeout: 200ms, poll_interval: 25ms}", "{every: 100ms}")
	h := cancelConfig(t, healthy.URL, healthy.URL+"/metrics", "disconnect_release=20ms", "{after_tokens: 3, release_timeout: 2s, poll_interval: 25ms}", "{every: 100ms}")
	h.Targets[0].Name = "healthy"
	c.Targets = append(c.Targets, h.Targets[0])
	reg := prometheus.NewPedanticRegistry()
	pm, cancels := collector.NewProbeMetrics(), collector.NewCancelMetrics()
	reg.MustRegister(pm, cancels)
	e := New(promslog.NewNopLogger(), pm, CancelSink(cancels))
	e.Apply(c)
	time.Sleep(900 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.Stop(ctx)

	value := func(name string, labels ...string) float64 { return mustMetricValue(t, reg, name, labels...) }
	leaked := value("llm_probe_cancellations_total", "target", "sim", "result", "leaked")
	released := value("llm_probe_cancellations_total", "target", "healthy", "result", "released")
	t.Logf("leaky server: %v leaked; healthy: %v released", leaked, released)
	for target, results := range map[string][2]string{"sim": {"released", "unknown"}, "healthy": {"leaked", "unknown"}} {
		for _, r := range results {
			if v := value("llm_probe_cancellations_total", "target", target, "result", r); v != 0 {
				t.Errorf("%s: %v %s", target, v, r)
			}
		}
	}
	if leaked < 1 || released < 2 {
		t.Errorf("leaked %v, released %v", leaked, released)
	}
	if n := value("llm_probe_cancel_release_seconds", "target", "healthy"); n != released {
		t.Errorf("%v release times observed for %v released", n, released)
	}
	ok := value("llm_probe_requests_total", "target", "healthy", "outcome", "success")
	if n := value("llm_probe_time_to_first_token_seconds", "target", "healthy"); n != ok || ok < released {
		t.Errorf("%v TTFTs for %v successes", n, ok)
	}
	if n := value("llm_probe_request_duration_seconds", "target", "healthy"); n != 0 {
		t.Errorf("%v request durations observed for cut streams", n)
	}
	if n, err := testutil.GatherAndCount(reg, "llm_probe_time_per_output_token_seconds"); err != nil || n != 2 {
		t.Errorf("%d TPOT series (%v)", n, err)
	} else if v := value("llm_probe_time_per_output_token_seconds", "target", "healthy"); v != 0 {
		t.Errorf("%v TPOTs observed for cut streams", v)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
