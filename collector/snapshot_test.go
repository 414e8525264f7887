package collector

import (
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/nvml/nvmltest"
)

func TestServerSnapshot(t *testing.T) {
	c, _, _ := newTestServerMetrics(t)
	ts := textServer(t, "text/plain", func() string {
		return vllmText + "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25\n"
	})
	c.SetTargets([]ServerTarget{{Name: "a", URL: ts.URL + "/metrics?token=x", Kind: "auto", Timeout: time.Second}, {Name: "b", URL: "http://127.0.0.1:1/metrics", Kind: KindVLLM, Timeout: time.Second}})
	snap := c.Snapshot()
	if len(snap) != 2 || !snap[0].CollectedAt.IsZero() || snap[0].URL != ts.URL+"/metrics?…" {
		t.Fatalf("before any scrape: %+v", snap)
	}
	c.Refresh()
	snap = c.Snapshot()
	a, b := snap[0], snap[1]
	if !a.Up || a.Kind != KindVLLM || a.CollectedAt.IsZero() || len(a.Models) != 1 {
		t.Fatalf("a: %+v", a)
	}
	if m := a.Models[0]; m.Model != "m" || !m.HasRunning || m.Running != 1 || !m.HasWaiting || m.Waiting != 0 || !m.HasKVCache || m.KVCacheUsage != 0.25 || m.HasBatch {
		t.Errorf("a's model: %+v", m)
	}
	if b.Up || b.Err == "" || b.CollectedAt.IsZero() {
		t.Errorf("b: %+v", b)
	}
	// A target dropped by a reload drops its snapshot.
	c.SetTargets([]ServerTarget{{Name: "a", URL: ts.URL + "/metrics?token=x", Kind: "auto", Timeout: 2 * time.Second}})
	snap = c.Snapshot()
	if len(snap) != 1 || !snap[0].Up {
		t.Errorf("after reload: %+v", snap)
	}
}

func TestGPUSnapshot(t *testing.T) {
	f := newGPUFixture(t, nvmltest.Devices(2, nil))
	if s := f.c.Snapshot(); !s.Loaded || s.Enabled != "true" || !s.CollectedAt.IsZero() {
		t.Fatalf("before a collection: %+v", s)
	}
	f.c.Refresh()
	s := f.c.Snapshot()
	if !s.OK || len(s.Devices) != 2 || s.CollectedAt.IsZero() {
		t.Fatalf("snapshot %+v", s)
	}
	d := s.Devices[1]
	if d.Index != 1 || d.Name != h100 || d.UUID != uuid1 || d.Utilization != 0.87 || d.MemoryUsed != 60000000000 ||
		d.MemoryTotal != 85520809984 || d.Temperature != 64 || d.Power != 312.5 || d.PowerLimit != 700 ||
		!d.HasUtilization || !d.HasMemory || !d.HasTemperature || !d.HasPower || !d.HasPowerLim {
		t.Errorf("device 1: %+v", d)
	}
	if err := f.c.Apply(GPUSettings{Mode: GPUOff}); err != nil {
		t.Fatal(err)
	}
	if s := f.c.Snapshot(); s.Loaded || s.Enabled != "false" || len(s.Devices) != 0 {
		t.Errorf("after disabling: %+v", s)
	}
}
