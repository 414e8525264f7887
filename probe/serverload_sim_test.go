package probe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// simGauge reads one of the simulator's vLLM gauges.
func simGauge(t *testing.T, sim *simtest.Sim, name string) float64 {
	t.Helper()
	mfs, err := sim.Server.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("the simulator has no %s", name)
	return 0
}

// waitGauge waits until the simulator's gauge reads want.
func waitGauge(t *testing.T, sim *simtest.Sim, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for simGauge(t, sim, name) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed %v, want %v", name, simGauge(t, sim, name), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestServerLoadFromSimulator: with two long requests running, a probe
// admitted as the third of three slots, and two more requests queued
// behind it, the probe's answer reports the two waiting, and exactly the
// load the simulator's ground truth says it sent (text and json forms).
// A streamed answer carries no report, as on vLLM.
func TestServerLoadFromSimulator(t *testing.T) {
	sim, cfg := fastSim(t, func(c *simulator.Config) {
		c.Scheduler.MaxRunning = 3
		c.Latency.DecodeBase, c.Latency.DecodePerRunning = 10*time.Millisecond, 0
	})
	model := cfg.ServedModelNames[0]
	newDriver := func(headers map[string]string) probe.Driver {
		d, err := probe.NewDriver(probe.ProtocolOpenAIChat, probe.TargetOptions{Name: "sim", URL: sim.URL, Model: model,
			ServerLoadReport: true, Headers: headers}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		return d
	}
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			// The previous run's requests are gone first.
			waitGauge(t, sim, "vllm:num_requests_running", 0)
			waitGauge(t, sim, "vllm:num_requests_waiting", 0)
			bg, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer func() { stop(); wg.Wait() }()
			long := func() {
				d := newDriver(nil)
				wg.Go(func() {
					d.Probe(bg, &probe.Request{Prompt: "long", MaxTokens: 2000, IgnoreEOS: true, Stream: true})
				})
			}
			long()
			long()
			waitGauge(t, sim, "vllm:num_requests_running", 2)

			d := newDriver(map[string]string{probe.HeaderLoadMetricsFormat: format})
			done := make(chan *probe.Result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				done <- d.Probe(ctx, &probe.Request{Prompt: "probe", MaxTokens: 100, IgnoreEOS: true})
			}()
			waitGauge(t, sim, "vllm:num_requests_running", 3)
			long()
			long()
			waitGauge(t, sim, "vllm:num_requests_waiting", 2)
			r := <-done
			if r.Outcome != probe.OutcomeSuccess {
				t.Fatalf("probe %s: %v", r.Outcome, r.Err)
			}
			gt := simtest.GroundTruth(t, sim.URL, r.RequestID).LoadReport
			if gt == nil {
				t.Fatal("the simulator sent no load report")
			}
			if gt.Waiting != 2 || gt.Running != 3 || gt.Format != format {
				t.Errorf("ground truth %+v, want 2 waiting behind 3 running, format %s", gt, format)
			}
			l := r.ServerLoad
			if l == nil || l.Err != nil || !l.HasWaiting || !l.HasKVCache || l.HasRunning {
				t.Fatalf("probe's report %+v (header %q): want waiting and KV usage, no running (vLLM sends none)", l, gt.Header)
			}
			if l.Waiting != float64(gt.Waiting) || l.KVCacheUsage != gt.KVCacheUsage || l.KVCacheUsage <= 0 {
				t.Errorf("probe read waiting %v, KV %v; the simulator sent %d, %v (%q)", l.Waiting, l.KVCacheUsage, gt.Waiting, gt.KVCacheUsage, gt.Header)
			}
		})
	}
	t.Run("streamed", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r := newDriver(nil).Probe(ctx, &probe.Request{Prompt: "probe", MaxTokens: 4, Stream: true})
		if r.Outcome != probe.OutcomeSuccess || r.ServerLoad != nil {
			t.Errorf("streamed probe %s, report %+v: want success without one", r.Outcome, r.ServerLoad)
		}
		if gt := simtest.GroundTruth(t, sim.URL, r.RequestID); gt.LoadReport != nil {
			t.Errorf("the simulator sent a report with a stream: %+v", gt.LoadReport)
		}
	})
}
