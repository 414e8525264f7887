package collector

import (
	"testing"
	"time"
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
